"""``LinearLayout``: a linear map over F2 between named, power-of-two-sized dims.

Specification (mirrors Triton's ``include/triton/Tools/LinearLayout.h``)
--------------------------------------------------------------------------
A layout maps *input dims* (e.g. ``register``, ``lane``, ``warp``, ``block``
or ``offset``) to *output dims* (``dim0``, ``dim1``, ... in tensor order).
Every size is a power of two.  ``bases[in_dim][i]`` is the image of the input
point with ``in_dim = 2**i`` and every other input 0, as one int per output
dim; every other image follows by XOR (linearity over F2)::

    L(register=3, lane=0) = L(register=1) ^ L(register=2)

Example -- the layout A of paper 000 §4.1 (16x16 tensor, 2x2 registers,
4x8 threads, 2x1 warps, dim1 fastest)::

    >>> A = LinearLayout({"register": [[0, 1], [1, 0]],
    ...                   "lane": [[0, 2], [0, 4], [0, 8], [2, 0], [4, 0]],
    ...                   "warp": [[8, 0]]}, ["dim0", "dim1"])
    >>> A.apply(register=1, lane=9, warp=0)
    {'dim0': 2, 'dim1': 3}

Flattening: the output dims, in order, form one bit vector with the *first*
output dim in the low bits ("minor-to-major", as Triton); input dims likewise.
That is the only place where dim order matters (``reshape_*``, ``flatten_*``).

Product ``L1 * L2`` (paper Def. 4.3, Triton's ``operator*``): input dims with
the same name concatenate their bases, ``L1``'s first (low bits); output dims
with the same name multiply their sizes, ``L2``'s images shifted above
``L1``'s.  So ``identity1D(4,"i","o") * zeros1D(2,"i","o")`` is ``x % 4`` and
``zeros1D(2,"i","o") * identity1D(4,"i","o")`` is ``x // 2`` (seed 002).

``A.compose(B)`` is ``B ∘ A``; ``A.invert_and_compose(B)`` is ``B⁻¹ ∘ A``
(the right inverse with free variables set to zero when ``B`` is not
injective), e.g. ``dst.invert_and_compose(smem)`` maps registers to offsets.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ll_codegen.core import f2


def _log2(n: int, what: str) -> int:
    if not isinstance(n, (int, np.integer)) or n < 1 or n & (n - 1):
        raise ValueError(f"{what} must be a power of two, got {n}")
    return int(n).bit_length() - 1


def _supremum(x: Sequence[str], y: Sequence[str]) -> list[str]:
    """Smallest list holding x and y as subsequences (new names of y go just
    before the next name they precede in y, else at the end)."""
    out = list(x)
    pending: list[str] = []
    for d in y:
        if d in out:
            i = out.index(d)
            out[i:i] = pending
            pending = []
        else:
            pending.append(d)
    return out + pending


class LinearLayout:
    """Immutable linear layout; see the module docstring for the semantics."""

    __slots__ = ("_bases", "_outs")

    def __init__(self, bases: Mapping[str, Sequence[Sequence[int]]],
                 out_dims: Sequence[str] | Mapping[str, int],
                 require_surjective: bool = True):
        """``out_dims`` is a list of names (sizes inferred, layout must be
        surjective) or a mapping name -> size (explicit; surjectivity is only
        checked if ``require_surjective``)."""
        explicit = isinstance(out_dims, Mapping)
        names = list(out_dims)
        if len(set(names)) != len(names):
            raise ValueError(f"repeated output dim in {names}")
        self._bases = {d: tuple(tuple(map(int, b)) for b in bs) for d, bs in bases.items()}
        for d, bs in self._bases.items():
            for b in bs:
                if len(b) != len(names):
                    raise ValueError(f"basis {list(b)} of {d} needs {len(names)} values, one per output dim")
                if b and min(b) < 0:
                    raise ValueError(f"basis {list(b)} of {d} has a negative value")
        if explicit:
            self._outs = {n: int(out_dims[n]) for n in names}
            for n, s in self._outs.items():
                _log2(s, f"size of output dim {n}")
            for d, bs in self._bases.items():
                for b in bs:
                    for n, v in zip(names, b):
                        if v >= self._outs[n]:
                            raise ValueError(f"basis {list(b)} of {d} exceeds size {self._outs[n]} of {n}")
        else:
            self._outs = {}
            for k, n in enumerate(names):
                m = 0
                for bs in self._bases.values():
                    for b in bs:
                        m |= b[k]
                self._outs[n] = 1 << m.bit_length()
        if (require_surjective or not explicit) and not self.is_surjective():
            raise ValueError(f"layout is not surjective onto {self._outs}:\n{self!r}")

    @classmethod
    def _of(cls, bases: dict[str, tuple[tuple[int, ...], ...]], outs: dict[str, int]) -> "LinearLayout":
        """A layout from parts that are valid by construction (int tuples, one value per output dim,
        each below its power-of-two size): the operations below that cannot make an invalid layout
        skip ``__init__``'s checks, which dominate the planners' time otherwise."""
        layout = object.__new__(cls)
        layout._bases, layout._outs = bases, outs
        return layout

    # ---------------------------------------------------------------- builders
    @staticmethod
    def empty() -> "LinearLayout":
        return LinearLayout({}, [])

    @staticmethod
    def identity_1d(size: int, in_dim: str, out_dim: str) -> "LinearLayout":
        """``L(x) = x`` for ``x < size``."""
        return LinearLayout._of({in_dim: tuple((1 << i,) for i in range(_log2(size, "size")))}, {out_dim: int(size)})

    @staticmethod
    def zeros_1d(size: int, in_dim: str, out_dim: str, out_dim_size: int = 1) -> "LinearLayout":
        """``L(x) = 0``: broadcast of one element over ``size`` inputs."""
        n = _log2(size, "size")
        _log2(out_dim_size, f"size of output dim {out_dim}")
        return LinearLayout._of({in_dim: ((0,),) * n}, {out_dim: int(out_dim_size)})

    @staticmethod
    def strided_1d(size: int, stride: int, in_dim: str, out_dim: str) -> "LinearLayout":
        """``L(x) = stride * x`` (not surjective unless stride is 1)."""
        n = _log2(size, "size")
        _log2(stride, "stride")
        return LinearLayout({in_dim: [[stride << i] for i in range(n)]}, {out_dim: size * stride},
                            require_surjective=False)

    @staticmethod
    def from_flat(bases: Mapping[str, Sequence[int]], out_dims: Mapping[str, int],
                  require_surjective: bool = False) -> "LinearLayout":
        """Build from flattened images (first output dim in the low bits)."""
        logs = [(n, _log2(s, n)) for n, s in out_dims.items()]

        def split(v: int) -> list[int]:
            out = []
            for _, k in logs:
                out.append(v & ((1 << k) - 1))
                v >>= k
            if v:
                raise ValueError("flat image exceeds the output dims")
            return out
        return LinearLayout({d: [split(v) for v in vs] for d, vs in bases.items()}, dict(out_dims),
                            require_surjective=require_surjective)

    # ------------------------------------------------------------ inspection
    @property
    def in_dims(self) -> list[str]:
        return list(self._bases)

    @property
    def out_dims(self) -> list[str]:
        return list(self._outs)

    @property
    def bases(self) -> dict[str, list[list[int]]]:
        return {d: [list(b) for b in bs] for d, bs in self._bases.items()}

    @property
    def out_dim_sizes(self) -> dict[str, int]:
        return dict(self._outs)

    def in_dim_size_log2(self, d: str) -> int:
        return len(self._bases.get(d, ()))

    def in_dim_size(self, d: str) -> int:
        return 1 << self.in_dim_size_log2(d)

    def out_dim_size_log2(self, d: str) -> int:
        return self._outs[d].bit_length() - 1 if d in self._outs else 0

    def out_dim_size(self, d: str) -> int:
        return self._outs.get(d, 1)

    @property
    def total_in_size_log2(self) -> int:
        return sum(len(bs) for bs in self._bases.values())

    @property
    def total_out_size_log2(self) -> int:
        return sum(s.bit_length() - 1 for s in self._outs.values())

    def _flatten(self, b: Sequence[int]) -> int:
        v, shift = 0, 0
        for x, s in zip(b, self._outs.values()):
            v |= x << shift
            shift += s.bit_length() - 1
        return v

    def flat_bases(self, in_dim: str) -> list[int]:
        """Images of ``in_dim``'s bases as flattened output bit vectors."""
        return [self._flatten(b) for b in self._bases.get(in_dim, ())]

    def flat_matrix(self) -> list[int]:
        """All bases in input order, flattened: the F2 matrix as columns."""
        return [v for d in self._bases for v in self.flat_bases(d)]

    def _split(self, v: int) -> dict[str, int]:
        out = {}
        for n, s in self._outs.items():
            out[n] = v & (s - 1)
            v >>= s.bit_length() - 1
        return out

    def is_surjective(self) -> bool:
        return f2.rank(self.flat_matrix()) == self.total_out_size_log2

    def is_injective(self) -> bool:
        return f2.rank(self.flat_matrix()) == self.total_in_size_log2

    def is_invertible(self) -> bool:
        return self.is_surjective() and self.is_injective()

    # --------------------------------------------------------------- applying
    def apply(self, **ins: int) -> dict[str, int]:
        """Image of one input point given as keyword arguments (missing dims are 0)."""
        v = 0
        for d, x in ins.items():
            if d not in self._bases:
                if x:
                    raise KeyError(f"no input dim {d}")
                continue
            if x >> len(self._bases[d]):
                raise ValueError(f"{d}={x} out of range for size {self.in_dim_size(d)}")
            v ^= f2.apply(self.flat_bases(d), x)
        return self._split(v)

    def apply_flat(self) -> np.ndarray:
        """Flattened image of every input point; index = flattened input
        (first input dim in the low bits)."""
        vals = np.zeros(1, dtype=np.int64)
        for v in self.flat_matrix():
            vals = np.concatenate([vals, vals ^ v])
        return vals

    def apply_all(self) -> np.ndarray:
        """Image of every input point as an array of shape (inputs, out dims)."""
        flat = self.apply_flat()
        cols, shift = [], 0
        for s in self._outs.values():
            cols.append((flat >> shift) & (s - 1))
            shift += s.bit_length() - 1
        return np.stack(cols, axis=1) if cols else np.zeros((flat.size, 0), dtype=np.int64)

    # ------------------------------------------------------------- operations
    def __mul__(self, outer: "LinearLayout") -> "LinearLayout":
        """Product (paper Def. 4.3): ``self`` in the low bits of shared dims."""
        ins = _supremum(self.in_dims, outer.in_dims)
        outs = _supremum(self.out_dims, outer.out_dims)
        sizes = {n: self.out_dim_size(n) * outer.out_dim_size(n) for n in outs}
        # where each factor's output dims sit among ``outs``; outer's values shift above self's sizes
        mine = [outs.index(n) for n in self._outs]
        theirs = [(outs.index(n), self.out_dim_size(n)) for n in outer._outs]
        zero = [0] * len(outs)
        bases = {}
        for d in ins:
            bs = []
            for b in self._bases.get(d, ()):
                v = zero.copy()
                for j, x in zip(mine, b):
                    v[j] = x
                bs.append(tuple(v))
            for b in outer._bases.get(d, ()):
                v = zero.copy()
                for (j, scale), x in zip(theirs, b):
                    v[j] = x * scale
                bs.append(tuple(v))
            bases[d] = tuple(bs)
        return LinearLayout._of(bases, sizes)

    def compose(self, outer: "LinearLayout") -> "LinearLayout":
        """``outer ∘ self``; self's output dims must be input dims of outer."""
        for n in self.out_dims:
            if self.out_dim_size(n) > outer.in_dim_size(n):
                raise ValueError(f"compose: output dim {n} of size {self.out_dim_size(n)} "
                                 f"exceeds input size {outer.in_dim_size(n)} of the outer layout")
        bases = {d: [[outer.apply(**dict(zip(self.out_dims, b)))[n] for n in outer.out_dims] for b in bs]
                 for d, bs in self._bases.items()}
        return LinearLayout(bases, outer.out_dim_sizes, require_surjective=False)

    def _solve_in(self, flat_value: int) -> dict[str, int] | None:
        """Minimal-weight preimage of a flattened output value, per input dim."""
        x = f2.solve(self.flat_matrix(), flat_value)
        if x is None:
            return None
        out = {}
        for d in self._bases:
            k = len(self._bases[d])
            out[d] = x & ((1 << k) - 1)
            x >>= k
        return out

    def pseudoinvert(self) -> "LinearLayout":
        """Right inverse ``P`` with ``self ∘ P = id``; free variables are zero
        (paper Def. 4.5, minimal Hamming weight).  Requires surjectivity."""
        if not self.is_surjective():
            raise ValueError("pseudoinvert: layout is not surjective")
        bases = {}
        shift = 0
        for n, s in self._outs.items():
            k = s.bit_length() - 1
            bases[n] = [[self._solve_in(1 << (shift + i))[d] for d in self._bases] for i in range(k)]
            shift += k
        sizes = {d: self.in_dim_size(d) for d in self._bases}
        return LinearLayout(bases, sizes, require_surjective=False)

    def invert(self) -> "LinearLayout":
        """Inverse of a bijective layout."""
        if not self.is_invertible():
            raise ValueError("invert: layout is not bijective")
        return self.pseudoinvert()

    def invert_and_compose(self, outer: "LinearLayout") -> "LinearLayout":
        """``C = outer⁻¹ ∘ self`` with ``outer(C(x)) == self(x)``; when outer is
        not injective the minimal-weight preimage is taken (free variables 0)."""
        for n in self.out_dims:
            if n not in outer._outs or self.out_dim_size(n) > outer.out_dim_size(n):
                raise ValueError(f"invert_and_compose: output dim {n} does not fit the outer layout")
        bases = {}
        for d, bs in self._bases.items():
            col = []
            for b in bs:
                v = outer._flatten([dict(zip(self.out_dims, b)).get(n, 0) for n in outer.out_dims])
                x = outer._solve_in(v)
                if x is None:
                    raise ValueError("invert_and_compose: image not covered by the outer layout")
                col.append([x[e] for e in outer.in_dims])
            bases[d] = col
        return LinearLayout(bases, {e: outer.in_dim_size(e) for e in outer.in_dims}, require_surjective=False)

    def free_variable_masks(self) -> dict[str, int]:
        """Per input dim, a mask of the bases that are linear combinations of
        earlier ones (input order): setting them to zero loses no output."""
        keep = set(f2.independent_subset(self.flat_matrix()))
        out, j = {}, 0
        for d, bs in self._bases.items():
            m = 0
            for i in range(len(bs)):
                if j not in keep:
                    m |= 1 << i
                j += 1
            out[d] = m
        return out

    def sublayout(self, in_dims: Iterable[str], out_dims: Iterable[str]) -> "LinearLayout":
        ins = [d for d in self._bases if d in set(in_dims)]
        outs = [n for n in self._outs if n in set(out_dims)]
        idx = [self.out_dims.index(n) for n in outs]
        return LinearLayout({d: [[b[i] for i in idx] for b in self._bases[d]] for d in ins},
                            {n: self._outs[n] for n in outs}, require_surjective=False)

    def with_in_dims(self, sizes: Mapping[str, int]) -> "LinearLayout":
        """Resize input dims: truncate bases, or pad with zero bases (broadcast)."""
        bases = {}
        for d, s in sizes.items():
            k = _log2(s, f"size of {d}")
            bs = list(self._bases.get(d, ()))[:k]
            bases[d] = bs + [[0] * len(self._outs)] * (k - len(bs))
        return LinearLayout(bases, self.out_dim_sizes, require_surjective=False)

    def reshape_ins(self, new_ins: Sequence[tuple[str, int]]) -> "LinearLayout":
        """Flatten the input dims and split them again as ``new_ins`` (minor first)."""
        flat = [b for bs in self._bases.values() for b in bs]
        if sum(_log2(s, n) for n, s in new_ins) != len(flat):
            raise ValueError("reshape_ins: total input size differs")
        bases, i = {}, 0
        for n, s in new_ins:
            k = _log2(s, n)
            bases[n] = flat[i:i + k]
            i += k
        return LinearLayout(bases, self.out_dim_sizes, require_surjective=False)

    def reshape_outs(self, new_outs: Sequence[tuple[str, int]]) -> "LinearLayout":
        """Reinterpret the flattened output as ``new_outs`` (minor first)."""
        sizes = dict(new_outs)
        if sum(_log2(s, n) for n, s in new_outs) != self.total_out_size_log2:
            raise ValueError("reshape_outs: total output size differs")
        return LinearLayout.from_flat({d: self.flat_bases(d) for d in self._bases}, sizes)

    def transpose_ins(self, order: Sequence[str]) -> "LinearLayout":
        if sorted(order) != sorted(self._bases):
            raise ValueError(f"transpose_ins: {list(order)} is not a permutation of {self.in_dims}")
        return LinearLayout({d: self._bases[d] for d in order}, self.out_dim_sizes, require_surjective=False)

    def transpose_outs(self, order: Sequence[str]) -> "LinearLayout":
        if sorted(order) != sorted(self._outs):
            raise ValueError(f"transpose_outs: {list(order)} is not a permutation of {self.out_dims}")
        idx = [self.out_dims.index(n) for n in order]
        return LinearLayout({d: [[b[i] for i in idx] for b in bs] for d, bs in self._bases.items()},
                            {n: self._outs[n] for n in order}, require_surjective=False)

    def flatten_ins(self) -> "LinearLayout":
        """One input dim, named after the first, holding all input bits."""
        if not self._bases:
            return self
        return self.reshape_ins([(self.in_dims[0], 1 << self.total_in_size_log2)])

    def flatten_outs(self) -> "LinearLayout":
        """One output dim, named after the first, of the total output size."""
        if not self._outs:
            return self
        return self.reshape_outs([(self.out_dims[0], 1 << self.total_out_size_log2)])

    def quotient(self, dims: Sequence[str]) -> "LinearLayout | None":
        """For ``self = identity(dims) * Q`` return ``Q`` (the part that is not
        the identity on ``dims``), else None.  Used to drop the identity
        register/lane/warp parts of a conversion (seed 002, minimalCvtLayout)."""
        ident = LinearLayout.empty()
        for d in dims:
            if d in self._bases:
                ident = ident * LinearLayout.identity_1d(self.in_dim_size(d), d, d)
        return divide_left(self, ident)

    def num_consecutive(self) -> int:
        """Largest 2^k such that the first k bases of the first input dim are
        1, 2, 4, ... in the flattened output (paper §5.1, contiguity)."""
        if not self._bases:
            return 1
        k = 0
        for v in self.flat_bases(self.in_dims[0]):
            if v != 1 << k:
                break
            k += 1
        return 1 << k

    # ------------------------------------------------------------ comparison
    def _key(self):
        return (tuple(self._bases.items()), tuple(self._outs.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearLayout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def equal_ignoring_trivial_dims(self, other: "LinearLayout") -> bool:
        def trim(L):
            return ({d: bs for d, bs in L._bases.items() if bs}, {n: s for n, s in L._outs.items() if s > 1})
        a, b = trim(self), trim(other)
        if a[1] != b[1] or set(a[0]) != set(b[0]):
            return False
        outs = list(a[1])
        return all(self.sublayout([d], outs)._bases[d] == other.sublayout([d], outs)._bases[d] for d in a[0])

    def __repr__(self) -> str:
        """Triton's ``toString`` format."""
        lines = []
        for d, bs in self._bases.items():
            if not bs:
                lines.append(f" - {d} is a size 1 dimension")
                continue
            for i, b in enumerate(bs):
                lines.append(f"{' - ' if i == 0 else '   '}{d}={1 << i} -> ({', '.join(map(str, b))})")
        outs = ", ".join(f"{n} (size {s})" for n, s in self._outs.items())
        lines.append(f"where out dims are: [{outs}]")
        return "\n".join(lines)


def divide_left(a: LinearLayout, b: LinearLayout) -> LinearLayout | None:
    """``C`` with ``a == b * C`` (paper Def. 4.4), or None if b is not a left factor.

    Input and output dims of ``C`` that end up of size 1 are dropped."""
    if any(n not in a.out_dims or a.out_dim_size(n) % b.out_dim_size(n) for n in b.out_dims):
        return None
    if any(d not in a.in_dims or a.in_dim_size_log2(d) < b.in_dim_size_log2(d) for d in b.in_dims):
        return None
    outs = a.out_dims
    low = {n: b.out_dim_size_log2(n) for n in outs}
    bases = {}
    for d in a.in_dims:
        nb = b.in_dim_size_log2(d)
        head = [list(x) for x in a._bases[d][:nb]]
        want = [[dict(zip(b.out_dims, x)).get(n, 0) for n in outs] for x in b._bases.get(d, ())]
        if head != want:
            return None
        rest = []
        for x in a._bases[d][nb:]:
            if any(v & ((1 << low[n]) - 1) for v, n in zip(x, outs)):
                return None
            rest.append([v >> low[n] for v, n in zip(x, outs)])
        if rest:
            bases[d] = rest
    sizes = {n: a.out_dim_size(n) >> low[n] for n in outs if a.out_dim_size(n) >> low[n] > 1}
    keep = [outs.index(n) for n in sizes]
    return LinearLayout({d: [[x[i] for i in keep] for x in bs] for d, bs in bases.items()}, sizes,
                        require_surjective=False)


def divide_right(a: LinearLayout, c: LinearLayout) -> LinearLayout | None:
    """``B`` with ``a == B * c``, or None.  Dims of ``B`` of size 1 are dropped."""
    if any(n not in a.out_dims or a.out_dim_size(n) % c.out_dim_size(n) for n in c.out_dims):
        return None
    if any(d not in a.in_dims or a.in_dim_size_log2(d) < c.in_dim_size_log2(d) for d in c.in_dims):
        return None
    outs = a.out_dims
    low = {n: a.out_dim_size_log2(n) - c.out_dim_size_log2(n) for n in outs}
    bases = {}
    for d in a.in_dims:
        nc = c.in_dim_size_log2(d)
        split = len(a._bases[d]) - nc
        tail = [list(x) for x in a._bases[d][split:]]
        want = [[dict(zip(c.out_dims, x)).get(n, 0) << low[n] for n in outs] for x in c._bases.get(d, ())]
        if tail != want:
            return None
        head = [list(x) for x in a._bases[d][:split]]
        if any(v >> low[n] for x in head for v, n in zip(x, outs)):
            return None
        if head:
            bases[d] = head
    sizes = {n: 1 << low[n] for n in outs if low[n] > 0}
    keep = [outs.index(n) for n in sizes]
    return LinearLayout({d: [[x[i] for i in keep] for x in bs] for d, bs in bases.items()}, sizes,
                        require_surjective=False)


def identity_nd(in_dim: str, shape: Sequence[int], order: Sequence[int]) -> LinearLayout:
    """Triton's ``identityStandardND``: ``in_dim`` walks the tensor of ``shape``
    with ``order[0]`` fastest; out dims ordered as listed in ``order``."""
    out = LinearLayout.empty()
    for dim in order:
        out = out * LinearLayout.identity_1d(shape[dim], in_dim, f"dim{dim}")
    return out


def layout_of(bases: Mapping[str, Any]) -> LinearLayout:
    """The layout a plan records as ``{"in_dims": bases, "out_dims": sizes}``
    (``src_bases``/``dst_bases`` of a plan); not required to be surjective."""
    return LinearLayout(bases["in_dims"], bases["out_dims"], require_surjective=False)
