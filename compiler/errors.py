"""User-facing errors: what is wrong, where (file:line:col and the source line), what to do."""

from __future__ import annotations

from typing import Any

from .ir.core import Location

__all__ = [
    "AnvilError", "CompilationError", "UnsupportedError", "UndefinedNameError", "ArgumentError",
    "ShapeError", "DtypeError", "ConstexprError", "LaunchError", "ArgumentOverflowError", "OutOfBoundsError",
    "ResourceError", "DeviceAssertError", "DeadlockError",
]


class AnvilError(Exception):
    """Base of every error Anvil raises on purpose."""


_MAX_MESSAGE = 2000  # characters of an error's message
_LINE_WINDOW = 120  # characters shown either side of the caret in a long source line


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit:,} more characters)"


class CompilationError(AnvilError):
    """A kernel could not be compiled; carries the location and a hint."""

    kind = "error"

    def __init__(self, message: str, loc: Location | None = None, source_line: str = "",
                 hint: str = "") -> None:
        self.message = _clip(message, _MAX_MESSAGE)  # it may quote kernel text of any length
        self.loc = loc
        self.source_line = source_line
        self.hint = hint
        super().__init__(self._format())

    @property
    def filename(self) -> str:
        return self.loc.file if self.loc else ""

    @property
    def lineno(self) -> int:
        return self.loc.line if self.loc else 0

    @property
    def col(self) -> int:
        return self.loc.col if self.loc else 0

    def _format(self) -> str:
        parts = []
        where = f"{self.loc.file}:{self.loc.line}:{self.loc.col}: " if self.loc else ""
        parts.append(f"{where}{type(self).__name__}: {self.message}")
        if self.source_line:
            line = self.source_line.rstrip("\n")
            stripped = line.lstrip()
            indent = len(line) - len(stripped)
            col = max(0, (self.loc.col if self.loc else 1) - 1 - indent)
            if len(stripped) > 2 * _LINE_WINDOW:  # a window of a long line around the caret
                start = max(0, col - _LINE_WINDOW)
                end = start + 2 * _LINE_WINDOW
                lead = "..." if start else ""
                stripped = lead + stripped[start:end] + ("..." if end < len(stripped) else "")
                col += len(lead) - start
            parts.append(f"    {stripped}")
            parts.append(f"    {' ' * col}^")
        if self.loc and self.loc.inlined_at is not None:
            chain: Location | None = self.loc.inlined_at
            while chain is not None:
                parts.append(f"  called from {chain.file}:{chain.line}:{chain.col}")
                chain = chain.inlined_at
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.message, self.loc, self.source_line, self.hint))


class UnsupportedError(CompilationError):
    """A Python construct or call the kernel language does not support."""


class UndefinedNameError(CompilationError):
    """A name that is neither a local, a parameter, nor a global of the kernel."""


class ArgumentError(CompilationError):
    """Wrong number or kind of arguments to a kernel or builtin."""


class ShapeError(CompilationError):
    """Incompatible tile shapes (broadcasting, dot, reshape) or a bad arange size."""


class DtypeError(CompilationError):
    """An operation applied to dtypes it does not accept."""


class ConstexprError(CompilationError):
    """A runtime value where a compile-time constant (tl.constexpr) is required."""


class LaunchError(AnvilError):
    """A launch was given bad arguments: grid, keywords, devices, dtypes."""


class ArgumentOverflowError(LaunchError, OverflowError):
    """An integer argument does not fit in 64 bits (an OverflowError, as in Triton)."""


class ResourceError(AnvilError):
    """A compiled kernel exceeds a device limit (registers, shared memory, threads)."""


class _RuntimeReport(AnvilError):
    """A failure a running kernel recorded; ``info`` holds its fields for structured reports
    (kernel, file, line, column, program_id, and for out-of-bounds accesses address, tensor,
    offset in elements and the tensor's numel), each present when known."""

    def __init__(self, message: str, **info: Any) -> None:
        super().__init__(message)
        self.info: dict[str, Any] = info


class OutOfBoundsError(_RuntimeReport):
    """Debug mode caught a load or store outside the tensor its pointer came from."""


class DeviceAssertError(_RuntimeReport):
    """A tl.device_assert failed while the kernel ran."""


class DeadlockError(_RuntimeReport):
    """Every running program of a launch waited for another and none could go on (the launch was stopped)."""
