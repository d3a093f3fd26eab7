"""Files the quantizer may read and write: only inside the allowed directories.

A path is checked after resolving every symbolic link and ``..``, so neither can lead out of
the allowed directories. Relative paths are taken relative to the first allowed directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tools.errors import ToolInputError

__all__ = ["allowed_roots", "resolve_input", "resolve_output"]


def allowed_roots(allowed_dirs: Sequence[str | os.PathLike[str]] | None) -> list[Path]:
    """The allowed directories, resolved; default: the working directory."""
    dirs = [Path.cwd()] if not allowed_dirs else [Path(d).expanduser() for d in allowed_dirs]
    return [Path(os.path.realpath(d)) for d in dirs]


def _resolve(path: str | os.PathLike[str], roots: list[Path], what: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = roots[0] / p
    resolved = Path(os.path.realpath(p))
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        shown = ", ".join(str(r) for r in roots)
        raise ToolInputError(
            f"{what} {str(path)!r} resolves to {str(resolved)!r}, outside the allowed directories ({shown}). "
            "Use a path inside them (links and '..' are followed before checking), or allow its directory "
            "(anvil serve --allow-path DIR)."
        )
    return resolved


def resolve_input(path: str | os.PathLike[str], roots: list[Path], what: str = "source_path") -> Path:
    """An existing regular file inside the allowed directories."""
    resolved = _resolve(path, roots, what)
    if not resolved.is_file():
        raise ToolInputError(f"{what} {str(path)!r} does not exist or is not a file.")
    return resolved


def resolve_output(path: str | os.PathLike[str], roots: list[Path], overwrite: bool,
                   what: str = "output_path") -> Path:
    """A writable destination inside the allowed directories, refusing to replace a file unless asked."""
    p = Path(path).expanduser()
    if p.is_symlink():
        raise ToolInputError(f"{what} {str(path)!r} is a symbolic link; give the real path.")
    resolved = _resolve(path, roots, what)
    if not resolved.parent.is_dir():
        raise ToolInputError(f"{what}: the directory {str(resolved.parent)!r} does not exist.")
    if resolved.exists():
        if resolved.is_dir():
            raise ToolInputError(f"{what} {str(path)!r} is a directory; give a file name.")
        if not overwrite:
            raise ToolInputError(f"{what} {str(path)!r} exists; pass overwrite=True to replace it.")
    return resolved
