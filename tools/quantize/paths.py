"""Files the quantizer may read and write: only inside the allowed directories.

A path is checked after resolving every symbolic link and ``..``, so neither can lead out of
the allowed directories. Relative paths are taken relative to the first allowed directory.
Names are checked as text first (:mod:`tools.paths`). The Python API's default directory is the
working directory; the server passes its own list and refuses when it has none.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tools.errors import ToolInputError
from tools.paths import check_name, os_error, resolve_inside, stat_regular

__all__ = ["allowed_roots", "resolve_input", "resolve_output"]


def allowed_roots(allowed_dirs: Sequence[str | os.PathLike[str]] | None) -> list[Path]:
    """The allowed directories, resolved; default: the working directory."""
    dirs = [Path.cwd()] if not allowed_dirs else [Path(d).expanduser() for d in allowed_dirs]
    return [Path(os.path.realpath(d)) for d in dirs]


def resolve_input(path: str | os.PathLike[str], roots: list[Path], what: str = "source_path") -> Path:
    """An existing regular file inside the allowed directories."""
    resolved = resolve_inside(path, roots, what)
    stat_regular(resolved, what, os.fspath(path))
    return resolved


def resolve_output(path: str | os.PathLike[str], roots: list[Path], overwrite: bool,
                   what: str = "output_path") -> Path:
    """A writable destination inside the allowed directories, refusing to replace a file unless asked."""
    name = check_name(path, what)
    try:
        p = Path(name).expanduser()
        if roots and not p.is_absolute():
            p = roots[0] / p
        if p.is_symlink():
            raise ToolInputError(f"{what} {name!r} is a symbolic link; give the real path.")
        resolved = resolve_inside(name, roots, what)
        if not resolved.parent.is_dir():
            raise ToolInputError(f"{what}: the directory {str(resolved.parent)!r} does not exist.")
        if resolved.exists():
            if resolved.is_dir():
                raise ToolInputError(f"{what} {name!r} is a directory; give a file name.")
            if not overwrite:
                raise ToolInputError(f"{what} {name!r} exists; pass overwrite=True to replace it.")
    except (OSError, RuntimeError) as exc:
        if isinstance(exc, OSError):
            raise os_error(exc, what, name) from None
        raise ToolInputError(f"{what} {name!r}: its '~' names no known home directory.") from None
    return resolved
