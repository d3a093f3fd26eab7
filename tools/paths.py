"""File names from clients: checked as text, confined to the operator's directories, read with bounds.

A tool that reads or writes a file named by a client (``source_file``, ``quantize_weights``'
paths) works only inside the directories the operator named with ``anvil serve --allow-path DIR``
or ``ANVIL_ALLOWED_PATHS``; with neither it refuses, naming both. A name is checked as text first
(no NUL byte, valid UTF-8, at most 4096 bytes and 255 per component), then resolved (``~``,
``..`` and every symbolic link) and checked against the roots, and never points into ``/proc``,
``/sys`` or ``/dev``. Reading opens the file once, checks the opened descriptor (a regular file,
not over the size limit), and reads at most the limit plus one byte, so nothing can be swapped
in between the check and the read. Every failure of the operating system becomes a sentence
saying what is wrong with the name.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from tools.errors import ToolInputError

ALLOW_FLAG = "--allow-path"
ALLOW_ENV = "ANVIL_ALLOWED_PATHS"
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
_SYSTEM_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))

_OS_ERRORS: dict[int, str] = {
    errno.ENOENT: "does not exist",
    errno.EACCES: "cannot be opened: permission denied",
    errno.EPERM: "cannot be opened: operation not permitted",
    errno.ELOOP: "goes through a loop of symbolic links",
    errno.ENAMETOOLONG: "is too long a name for the file system",
    errno.EISDIR: "is a directory; give a file",
    errno.ENOTDIR: "has a component that is not a directory",
    errno.ENXIO: "is a device or socket, not a file",
    errno.EROFS: "is on a read-only file system",
    errno.ENOSPC: "cannot be written: the disk is full",
}


def no_roots_error(what: str) -> ToolInputError:
    """The refusal of a file-reading or -writing tool on a server started without allowed directories."""
    return ToolInputError(
        f"{what}: this server reads and writes no files because it was started without allowed "
        f"directories. Pass the content itself where the tool takes it (e.g. source instead of source_file), "
        f"or restart the server with `anvil serve {ALLOW_FLAG} DIR` (repeatable) or with {ALLOW_ENV}=DIR "
        f"(os.pathsep-separated) in its environment."
    )


def os_error(exc: OSError, what: str, name: str) -> ToolInputError:
    """An OSError about ``name`` as a sentence (no raw error text)."""
    reason = _OS_ERRORS.get(exc.errno or 0)
    if reason is None:
        code = errno.errorcode.get(exc.errno or 0, "unknown error")
        reason = f"cannot be used ({code}: {os.strerror(exc.errno) if exc.errno else 'unknown'})"
    return ToolInputError(f"{what} {_show(name)} {reason}.")


def _show(name: str) -> str:
    shown = name if len(name) <= 200 else name[:200] + "..."
    return repr(shown)


def check_name(path: object, what: str) -> str:
    """``path`` as a plain file name, or a ToolInputError saying what is wrong with it as text."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise ToolInputError(f"{what} must be a string path, not {type(path).__name__}.")
    if not path.strip():
        raise ToolInputError(f"{what} is empty; give a file path.")
    if "\x00" in path:
        raise ToolInputError(f"{what} {_show(path)} contains a NUL byte; give a plain file path.")
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolInputError(f"{what} {_show(path)} is not valid UTF-8 text (it contains a lone surrogate).") from None
    if len(raw) > MAX_PATH_BYTES:
        raise ToolInputError(f"{what} is {len(raw)} bytes long; a path is at most {MAX_PATH_BYTES} bytes.")
    longest = max(len(part.encode("utf-8")) for part in path.split("/"))
    if longest > MAX_NAME_BYTES:
        raise ToolInputError(
            f"{what} {_show(path)} has a component of {longest} bytes; a file name is at most {MAX_NAME_BYTES} bytes."
        )
    return path


def resolve_inside(path: object, roots: Sequence[Path], what: str) -> Path:
    """``path`` with ``~``, ``..`` and links resolved, if it lies inside one of ``roots`` (relative: in the first)."""
    if not roots:
        raise no_roots_error(what)
    name = check_name(path, what)
    try:
        p = Path(name).expanduser()
    except RuntimeError:
        raise ToolInputError(f"{what} {_show(name)}: its '~' names no known home directory.") from None
    if not p.is_absolute():
        p = roots[0] / p
    try:
        resolved = Path(os.path.realpath(p))
    except OSError as exc:
        raise os_error(exc, what, name) from None
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        shown = ", ".join(str(r) for r in roots)
        raise ToolInputError(
            f"{what} {_show(name)} resolves to {str(resolved)!r}, outside the allowed directories ({shown}). "
            f"Use a path inside them (links and '..' are followed before checking), or allow its directory "
            f"(anvil serve {ALLOW_FLAG} DIR)."
        )
    if any(resolved == r or resolved.is_relative_to(r) for r in _SYSTEM_ROOTS):
        raise ToolInputError(f"{what} {_show(name)} is a system file ({resolved}); give a regular file.")
    return resolved


def stat_regular(path: Path, what: str, name: str) -> os.stat_result:
    """The status of an existing regular file, or a ToolInputError (missing, directory, FIFO, device...)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise os_error(exc, what, name) from None
    if not stat.S_ISREG(st.st_mode):
        raise ToolInputError(f"{what} {_show(name)} {_kind(st.st_mode)}; give a regular file.")
    return st


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device"
    return "is not a regular file"


def read_regular_file(path: Path, what: str, name: str, max_bytes: int, limit_name: str) -> bytes:
    """At most ``max_bytes`` of a regular file, checked on the opened descriptor (no check-then-open race)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO does not wait for a writer
    except OSError as exc:
        raise os_error(exc, what, name) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolInputError(f"{what} {_show(name)} {_kind(st.st_mode)}; give a regular file.")

        def too_big(size: str) -> ToolInputError:
            return ToolInputError(f"{what} {_show(name)} is {size} bytes; the limit ({limit_name}) is {max_bytes}.")

        if st.st_size > max_bytes:
            raise too_big(str(st.st_size))
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:  # it grew after the fstat
            raise too_big(f"more than {max_bytes}")
        return b"".join(chunks)
    except OSError as exc:
        raise os_error(exc, what, name) from None
    finally:
        os.close(fd)
