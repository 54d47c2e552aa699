"""Writing output files: every target checked first, then all files or none.

``check_targets`` validates the paths a command is about to write (before any
is written); ``write_all`` writes a set of already-rendered files all or none:
each goes to a temp file next to its target first, and only when every temp
file is complete are they renamed over the targets (``os.replace``); on any
error the temp files (and folders this call created) are removed and no
target is touched.  The commit itself is all or none too: a replaced file is
hard-linked to a backup first, so a failing rename puts every old file back;
SIGINT/SIGTERM are held while files are written (``_HeldSignals``): before
the commit they undo the temp files, during it they wait for its end.  A
command's listing of the files (``announce``) is printed before the commit,
so output that cannot be printed (stdout on a full disk) leaves nothing
written.  Errors are ``OSError``s whose ``filename`` is the user's
path -- never a temp file -- and ``quote_path`` makes a path with control
characters (a newline) safe for the one ``llgen: error:`` line.

Policy for what a target may be:

* missing, or an existing regular file (replaced); a missing folder is
  created only where the command says so (``convert -o``, ``regenerate``);
* a symbolic link is **followed**: the file it points to is replaced (the
  temp file is made in that file's folder) and the link stays; a link to
  something that is not a regular file (``/dev/null``) is refused like the
  thing itself, and a dangling link is refused;
* anything else -- a folder, a device node, a FIFO, a socket -- is refused;
* a file name longer than the file system allows (``NAME_MAX``, usually 255
  bytes) or an empty path is refused.
"""
from __future__ import annotations

import errno
import fcntl
import functools
import os
import secrets
import shutil
import signal
import stat
import tempfile
import threading
import time
from typing import Any, Callable, Mapping, Sequence

__all__ = ["quote_path", "check_output_dir", "check_targets", "write_all", "write_atomic", "made_once",
           "WriteInterrupted", "PAUSE_ENV"]


def quote_path(path: str | os.PathLike) -> str:
    """``path`` as it reads in one error line: as it is, or ``repr``-quoted
    (``'a\\nb'``) when it is empty or holds a character that is not printable
    (a control character, a line separator, an undecodable byte)."""
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p or not p.isprintable():      # control and line-separator characters: one line still
        return repr(p)
    return p


def _err(code: int, message: str, path: str) -> OSError:
    e = OSError(code, message)
    e.filename = quote_path(path)          # error_line prints "<filename>: <message>"
    return e


def _name_max(folder: str) -> int:
    """The longest file name (bytes) in ``folder``'s file system."""
    while folder and not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    try:
        return os.pathconf(folder or ".", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def check_output_dir(directory: str | os.PathLike, option: str = "-o") -> None:
    """An output folder: not empty, and no existing part of it a non-folder."""
    d = os.fspath(directory)
    if d == "":
        raise ValueError(f"{option} '': an empty path (use . for the current folder)")
    q = quote_path(d)
    if os.path.exists(d) and not os.path.isdir(d):
        raise _err(errno.ENOTDIR, f"not a folder ({option} names the folder to write into)", d)
    probe = d
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if probe and os.path.exists(probe) and not os.path.isdir(probe):
        raise _err(errno.ENOTDIR, f"{quote_path(probe)} is not a folder, so {q} cannot be created", d)
    for part in _parts(d):
        if len(os.fsencode(part)) > _name_max(probe or "."):
            raise _err(errno.ENAMETOOLONG, f"folder name too long ({len(os.fsencode(part))} bytes; "
                                           f"at most {_name_max(probe or '.')})", d)


def _parts(path: str) -> list[str]:
    return [p for p in path.replace(os.sep, "/").split("/") if p not in ("", ".", "..")]


def _resolve(path: str) -> str:
    """The file a target path writes: a symbolic link is followed."""
    if os.path.islink(path):
        real = os.path.realpath(path)
        if not os.path.lexists(real):
            raise _err(errno.ENOENT, "a dangling symbolic link (llgen follows links; its target does not exist)",
                       path)
        return real
    return path


def check_targets(paths: Sequence[str | os.PathLike], option: str | None = None, make_dirs: bool = False) -> None:
    """Check every file path a command will write, before any is written.

    Raises ``ValueError`` for an empty path (naming ``option``) and
    ``OSError`` (``filename`` = the user's path) for a name too long, a
    folder, device node, FIFO or socket in the way, a dangling link, or
    (unless ``make_dirs``) a folder that does not exist."""
    seen: set[str] = set()
    for path in paths:
        p = os.fspath(path)
        if p == "":
            raise ValueError(f"{option + ' ' if option else ''}'': an empty path")
        base = os.path.basename(p)
        if base in ("", ".", ".."):
            raise _err(errno.EISDIR, "names a folder, not a file", p)
        limit = _name_max(os.path.dirname(p) or ".")
        for part in _parts(p):
            n = len(os.fsencode(part))
            if n > limit:
                raise _err(errno.ENAMETOOLONG, f"file name too long ({n} bytes; the file system allows {limit})", p)
        parent = os.path.dirname(p)
        if parent and os.path.lexists(parent) and not os.path.isdir(parent):
            raise _err(errno.ENOTDIR, f"{quote_path(parent)} is not a folder", p)
        if parent and not make_dirs and not os.path.isdir(parent):
            raise _err(errno.ENOENT, f"the folder {quote_path(parent)} does not exist", p)
        real = _resolve(p)
        if os.path.lexists(real):
            mode = os.stat(real).st_mode
            if stat.S_ISDIR(mode):
                raise _err(errno.EISDIR, "a folder is in the way of the output file", p)
            if not stat.S_ISREG(mode):
                raise _err(errno.EINVAL, "not a regular file (a device, FIFO or socket); refusing to replace it", p)
        key = os.path.normcase(os.path.abspath(real))
        if key in seen:
            raise _err(errno.EINVAL, "written twice by this command", p)
        seen.add(key)


def write_all(files: Mapping[str | os.PathLike, str | bytes], option: str | None = None,
              make_dirs: bool = False, announce: Callable[[list[str]], None] | None = None,
              remove: Sequence[str | os.PathLike] = ()) -> list[str]:
    """Write ``files`` (path -> text or bytes) all or none; returns the paths.

    Checks every target (``check_targets``), creates missing folders (only
    with ``make_dirs``; otherwise a missing folder is an error), writes
    each file's data to a temp file next to its target (text as UTF-8 with
    ``\\n`` line ends), calls ``announce(paths)`` (the command's listing:
    printed *before* the commit, so that a listing that cannot be printed --
    stdout on a full disk -- leaves nothing written), and only then renames
    every temp file over its target and removes the files of ``remove``.

    All or none, also on a failing rename and on SIGINT/SIGTERM: every
    target that existed is hard-linked to a backup before it is replaced, and
    a failure during the commit puts every backup back.  An interrupt before
    the commit removes the temp files (and the folders this call created)
    and is then delivered as usual (SIGINT: ``KeyboardInterrupt``); one that
    arrives during the commit is held until the commit is done, because the
    listing has been printed by then.  Errors name the user's path, never a
    temp file, and no temp or backup file is left in any case."""
    paths = [os.fspath(p) for p in files]
    check_targets(paths, option, make_dirs)
    created: list[str] = []
    temps: list[tuple[str, str, str]] = []          # (temp, real target, user path)
    umask = os.umask(0)
    os.umask(umask)
    with _HeldSignals() as held:
        try:
            for k, (p, data) in enumerate(zip(paths, files.values()), 1):
                real = _resolve(p)
                folder = os.path.dirname(os.path.abspath(real))
                try:
                    _makedirs(folder, created)
                    # a short temp name: the target's own name may already be at the length limit
                    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".llgen-", suffix=".tmp")
                except OSError as e:
                    raise _err(e.errno or errno.EIO, e.strerror or str(e), p) from None
                temps.append((tmp, real, p))
                binary = isinstance(data, bytes)
                try:
                    with os.fdopen(fd, "wb" if binary else "w",
                                   **({} if binary else {"encoding": "utf-8", "newline": "\n"})) as fh:
                        fh.write(data)
                    os.chmod(tmp, 0o666 & ~umask)
                except OSError as e:
                    raise _err(e.errno or errno.EIO, e.strerror or str(e), p) from None
                _test_pause("temp", k, held)
                held.check()
            if announce is not None:
                announce(paths)
            held.check()                # interrupted while printing: still nothing written
            _commit(temps, [os.fspath(r) for r in remove], held)
            temps = []
        except BaseException:
            for tmp, _, _ in temps:
                _unlink_quietly(tmp)
            for d in reversed(created):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
            raise
    return paths


def _commit(temps: list[tuple[str, str, str]], remove: list[str], held: "_HeldSignals") -> None:
    """Rename every temp file over its target, then remove ``remove``; on a
    failure undo every step done, newest first (the old file back from its
    backup, a new file unlinked, a removed file renamed back).  Signals are
    only recorded meanwhile (``held.hold``), so the commit and its undo run to
    their end.  Backups are deleted once the commit stands; an undo step that
    fails keeps its backup rather than lose the user's file."""
    held.hold = True
    undo: list[Callable[[], None]] = []
    backups: list[str] = []
    try:
        for k, (tmp, real, p) in enumerate(temps, 1):
            backup = _backup(real, p) if os.path.lexists(real) else None
            try:
                os.replace(tmp, real)
            except OSError as e:
                if backup is not None:
                    _unlink_quietly(backup)     # the target is untouched: its backup is not needed
                raise _err(e.errno or errno.EIO, e.strerror or str(e), p) from None
            if backup is None:
                undo.append(functools.partial(os.unlink, real))
            else:
                backups.append(backup)
                undo.append(functools.partial(os.replace, backup, real))
            _test_pause("rename", k, held)
        for path in remove:
            backup = _free_name(os.path.dirname(os.path.abspath(path)), ".bak")
            try:
                os.rename(path, backup)
            except OSError as e:
                raise _err(e.errno or errno.EIO, e.strerror or str(e), path) from None
            backups.append(backup)
            undo.append(functools.partial(os.rename, backup, path))
    except BaseException:
        for step in reversed(undo):
            try:
                step()
            except OSError:
                pass
        raise
    for b in backups:
        _unlink_quietly(b)


def _backup(path: str, user_path: str) -> str:
    """A hard link to ``path`` under a fresh hidden name in its folder (a
    copy where the file system has no hard links): the old file, kept until
    the commit stands."""
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        name = _free_name(folder, ".bak")
        try:
            os.link(path, name)
            return name
        except FileExistsError:
            continue
        except OSError:
            try:
                shutil.copy2(path, name)
                return name
            except OSError as e:
                _unlink_quietly(name)
                raise _err(e.errno or errno.EIO, e.strerror or str(e), user_path) from None


def _free_name(folder: str, suffix: str) -> str:
    return os.path.join(folder, f".llgen-{os.getpid()}-{secrets.token_hex(6)}{suffix}")


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


class _HeldSignals:
    """SIGINT and SIGTERM while files are written: recorded, not acted on,
    so that the writer decides where it stops (``check``: before the commit,
    undoing its temp files; never inside the commit, ``hold``).  On exit the
    previous handlers are back and a recorded signal is delivered to them
    (SIGINT: ``KeyboardInterrupt``; SIGTERM: the default, termination with
    status 143).  Only the main thread can set handlers; elsewhere, and for
    a signal the process ignores, nothing changes."""

    SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM") if hasattr(signal, n))

    def __init__(self) -> None:
        self.pending: int | None = None
        self.hold = False
        self._old: dict[int, Any] = {}

    def _record(self, signum: int, frame: Any) -> None:
        if self.pending is None:
            self.pending = signum

    def __enter__(self) -> "_HeldSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                old = signal.getsignal(sig)
                if old not in (signal.SIG_IGN, None):
                    self._old[sig] = signal.signal(sig, self._record)
        return self

    def check(self) -> None:
        """Stop here (``WriteInterrupted``) when a signal came and the commit has not begun."""
        if self.pending is not None and not self.hold:
            raise WriteInterrupted(self.pending)

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        if self.pending is not None:
            # the old handler acts now: KeyboardInterrupt, termination; one that returns lets a
            # finished commit stand (an unfinished write still raises WriteInterrupted)
            signal.raise_signal(self.pending)


class WriteInterrupted(KeyboardInterrupt):
    """Writing stopped by a signal (SIGINT or SIGTERM) whose handler did not raise."""


#: ``LLGEN_TEST_WRITE_PAUSE="<temp|rename>:<n>:<marker file>"``: after the n-th temp file is written
#: (or renamed over its target), create the marker file and wait up to 30 s for a signal -- the hook
#: the signal tests use to interrupt the write phase at a known point.  Unset in normal use.
PAUSE_ENV = "LLGEN_TEST_WRITE_PAUSE"


def _test_pause(phase: str, k: int, held: _HeldSignals) -> None:
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    want, _, rest = spec.partition(":")
    n, _, marker = rest.partition(":")
    if want != phase or n != str(k):
        return
    with open(marker, "w"):
        pass
    end = time.monotonic() + 30
    while held.pending is None and time.monotonic() < end:
        time.sleep(0.01)


def _makedirs(folder: str, created: list[str]) -> None:
    """``os.makedirs`` that records the folders it made (innermost last)."""
    if os.path.isdir(folder):
        return
    missing = []
    f = folder
    while not os.path.isdir(f):
        missing.append(f)
        parent = os.path.dirname(f)
        if parent == f:
            break
        f = parent
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            if not os.path.isdir(d):
                raise
            continue            # another process made it meanwhile (parallel builds: cmake -j): not ours to undo
        created.append(d)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write one file atomically (``write_all`` of one file): readers see the
    old file or the whole new one; on any error ``path`` is untouched."""
    write_all({os.fspath(path): data})


def made_once(path: str | os.PathLike, make: Callable[[], bytes]) -> bytes:
    """The contents of ``path``, made once for every process that asks: the first holds
    ``<path>.lock`` while ``make()`` runs and writes its bytes atomically; the others wait for the lock
    and read the file (a build shared by parallel test workers and the processes they start)."""
    path = os.fspath(path)
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            write_atomic(path, make())
    with open(path, "rb") as f:
        return f.read()
