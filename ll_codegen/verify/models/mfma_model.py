"""An independent model of AMD CDNA matrix instructions (``v_mfma_*``), written from AMD's ISA.

A *referee* for ``plan/mfma.py`` (which derives the registers from linear layouts) and for the
host runtime's ``simt/hip/mfma.h``: numpy only, nothing from ``ll_codegen``.

Sources: "AMD Instinct MI300 (CDNA3) Instruction Set Architecture", chapter "Matrix Arithmetic
Instructions" (dense MFMA: operand and result layouts in VGPRs, wave64), the MI200 (CDNA2) ISA's
chapter of the same name, and AMD's Matrix Instruction Calculator (ROCm/
amd_matrix_instruction_calculator), which states those layouts for the gfx9 (CDNA) instructions as
formulas.  For the single-block instructions modelled here (one M x K by K x N product per wave,
M = N), with P = K M / 64 the items of A (and of B) each lane holds:

* A (M x K, SRC0): A[i][k] is in lane (k // P) M + i, item k % P;
* B (K x N, SRC1): B[k][j] is in lane (k // P) N + j, item k % P;
* items are packed into consecutive VGPRs from bit 0: item s of e-byte elements is bits
  8 e (s % (4 / e)) .. of VGPR s e / 4 (two f16 or bf16, four i8 per VGPR);
* C and D (M x N, 32-bit): D[i][j] is in VGPR 4 (i // (4 G)) + i % 4 of lane ((i // 4) % G) N + j,
  G = 64 / N (32x32: 16 VGPRs, rows in groups of 4 per half-wave; 16x16: 4 VGPRs);
* D = A B + C: f32 accumulation of f16/bf16 products, i32 (wrapping) of signed i8 products.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Instruction:
    """One dense MFMA: D (m x n, ``out_type``) = A (m x k) B (k x n) + C, sources of ``in_type``."""
    m: int
    n: int
    k: int
    in_type: str       # f16 | bf16 | i8
    out_type: str      # f32 | i32
    arch: str          # cdna2 | cdna3

    @property
    def items(self) -> int:
        """P: the A (and B) elements one lane holds."""
        return self.k * self.m // 64

    @property
    def acc_regs(self) -> int:
        """The C/D VGPRs of a lane."""
        return self.m * self.n // 64


def _instr(m: int, k: int, t: str, arch: str) -> Instruction:
    return Instruction(m, m, k, t, "i32" if t == "i8" else "f32", arch)


#: mnemonic -> instruction (CDNA2 ISA for gfx90a, CDNA3 ISA for gfx940/gfx942)
INSTRUCTIONS = {
    "v_mfma_f32_32x32x8f16": _instr(32, 8, "f16", "cdna2"),
    "v_mfma_f32_16x16x16f16": _instr(16, 16, "f16", "cdna2"),
    "v_mfma_f32_32x32x8bf16_1k": _instr(32, 8, "bf16", "cdna2"),
    "v_mfma_f32_16x16x16bf16_1k": _instr(16, 16, "bf16", "cdna2"),
    "v_mfma_i32_32x32x8i8": _instr(32, 8, "i8", "cdna2"),
    "v_mfma_i32_16x16x16i8": _instr(16, 16, "i8", "cdna2"),
    "v_mfma_f32_32x32x8_f16": _instr(32, 8, "f16", "cdna3"),
    "v_mfma_f32_16x16x16_f16": _instr(16, 16, "f16", "cdna3"),
    "v_mfma_f32_32x32x8_bf16": _instr(32, 8, "bf16", "cdna3"),
    "v_mfma_f32_16x16x16_bf16": _instr(16, 16, "bf16", "cdna3"),
    "v_mfma_i32_32x32x16_i8": _instr(32, 16, "i8", "cdna3"),
    "v_mfma_i32_16x16x32_i8": _instr(16, 32, "i8", "cdna3"),
}

_BYTES = {"f16": 2, "bf16": 2, "i8": 1}


def _get(name: str) -> Instruction:
    if name not in INSTRUCTIONS:
        raise ValueError(f"{name!r} is not a modelled MFMA instruction")
    return INSTRUCTIONS[name]


def source_items(name: str, which: str) -> np.ndarray:
    """(64, P, 2): the element item s of lane l holds -- (i, k) of A for ``which`` "a", (k, j) of B
    for "b" -- inverting lane = (k // P) M + i (A) or (k // P) N + j (B), item = k % P."""
    ins = _get(name)
    lane = np.arange(64)[:, None]
    s = np.arange(ins.items)[None, :]
    outer = ins.m if which == "a" else ins.n
    if which not in ("a", "b"):
        raise ValueError(f"which={which!r} is not 'a' or 'b'")
    mn, k = lane % outer, (lane // outer) * ins.items + s
    pair = (mn, k) if which == "a" else (k, mn)
    return np.stack(np.broadcast_arrays(*pair), axis=-1)


def item_bits(name: str, s: int) -> tuple[int, int]:
    """(VGPR, lowest bit) of item ``s`` of a source: items packed from bit 0 of consecutive VGPRs."""
    e = _BYTES[_get(name).in_type]
    return s * e // 4, 8 * e * (s % (4 // e))


def accumulator_items(name: str) -> np.ndarray:
    """(64, R, 2): the (i, j) of D that VGPR r of lane l holds, inverting VGPR = 4 (i // (4 G)) +
    i % 4, lane = ((i // 4) % G) N + j with G = 64 / N."""
    ins = _get(name)
    g = 64 // ins.n
    lane = np.arange(64)[:, None]
    r = np.arange(ins.acc_regs)[None, :]
    i = (r // 4) * 4 * g + ((lane // ins.n) % g) * 4 + r % 4
    j = lane % ins.n
    return np.stack(np.broadcast_arrays(i, j), axis=-1)


def mfma(name: str, a_items: np.ndarray, b_items: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One instruction on a wave's registers: ``a_items``/``b_items`` (64, P) the source values
    each lane holds (SRC0, SRC1), ``c`` (64, R) the accumulators; returns D (64, R) -- float64
    values (f32 accumulation is exact for the small integers the checks use) or int64 wrapped to
    32 bits."""
    ins = _get(name)
    A = np.zeros((ins.m, ins.k), np.float64 if ins.out_type == "f32" else np.int64)
    B = np.zeros((ins.k, ins.n), A.dtype)
    C = np.zeros((ins.m, ins.n), A.dtype)
    for M, items, vals in ((A, source_items(name, "a"), a_items), (B, source_items(name, "b"), b_items)):
        if np.shape(vals) != items.shape[:2]:
            raise ValueError(f"{name}: source of shape {np.shape(vals)}, expected {items.shape[:2]}")
        M[items[..., 0], items[..., 1]] = vals
    acc = accumulator_items(name)
    if np.shape(c) != acc.shape[:2]:
        raise ValueError(f"{name}: accumulators of shape {np.shape(c)}, expected {acc.shape[:2]}")
    C[acc[..., 0], acc[..., 1]] = c
    D = A @ B + C
    if ins.out_type == "i32":
        D = (D + 2 ** 31) % 2 ** 32 - 2 ** 31
    return D[acc[..., 0], acc[..., 1]]
