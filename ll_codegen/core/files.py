"""Writing output files: every target checked first, then all files or none.

``check_targets`` validates the paths a command is about to write (before any
is written); ``write_all`` writes a set of already-rendered files all or none:
each goes to a temp file next to its target first, and only when every temp
file is complete are they renamed over the targets (``os.replace``); on any
error the temp files (and folders this call created) are removed and no
target is touched.  Errors are ``OSError``s whose ``filename`` is the user's
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
import os
import stat
import tempfile
from typing import Mapping, Sequence

__all__ = ["quote_path", "check_output_dir", "check_targets", "write_all", "write_atomic"]

_CONTROL = {chr(c) for c in range(32)} | {"\x7f"}


def quote_path(path: str | os.PathLike) -> str:
    """``path`` as it reads in one error line: as it is, or ``repr``-quoted
    (``'a\\nb'``) when it is empty or holds a control character."""
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p or any(ch in _CONTROL for ch in p):
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
              make_dirs: bool = False) -> list[str]:
    """Write ``files`` (path -> text or bytes) all or none; returns the paths.

    Checks every target (``check_targets``), creates missing folders (only
    with ``make_dirs``; otherwise a missing folder is an error), writes
    each file's data to a temp file next to its target (text as UTF-8 with
    ``\\n`` line ends), and only then renames every temp file over its target.
    On any error before the renames, every temp file and every folder this
    call created are removed and the error names the user's path."""
    paths = [os.fspath(p) for p in files]
    check_targets(paths, option, make_dirs)
    created: list[str] = []
    temps: list[tuple[str, str, str]] = []          # (temp, real target, user path)
    umask = os.umask(0)
    os.umask(umask)
    try:
        for p, data in zip(paths, files.values()):
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
        for tmp, real, p in temps:
            try:
                os.replace(tmp, real)
            except OSError as e:
                raise _err(e.errno or errno.EIO, e.strerror or str(e), p) from None
        temps = []
    except BaseException:
        for tmp, _, _ in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        for d in reversed(created):
            try:
                os.rmdir(d)
            except OSError:
                pass
        raise
    return paths


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
        os.mkdir(d)
        created.append(d)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write one file atomically (``write_all`` of one file): readers see the
    old file or the whole new one; on any error ``path`` is untouched."""
    write_all({os.fspath(path): data})
