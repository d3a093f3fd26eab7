"""The error a caller can fix.

Every tool function raises :class:`ToolInputError` for a mistake in what the caller sent
(a bad spec, a limit exceeded, an unknown kernel, a reference that fails to evaluate). Its
message is written for the agent: what is wrong, where, and what to change. The server turns
it into an MCP tool error verbatim; anything else is an internal error.
"""

from __future__ import annotations


class ToolInputError(Exception):
    """A caller-fixable error; ``str(err)`` says what is wrong and what to change."""

    def __init__(self, message: str, *, data: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        # Structured details (e.g. compiler diagnostics) the server may return beside the text.
        self.data = data or {}


class KernelFault(ToolInputError):
    """The kernel (or the compiler on it) crashed, hung or ran out of memory in a worker process.

    The worker was replaced; ``data`` holds ``error`` ("crash", "timeout", "oom"), the job, the
    kernel and a suggestion.
    """


MAX_PROBLEMS = 8  # problems listed in one error; the rest are counted
MAX_NAME_CHARS = 64  # characters of a caller's name quoted in an error


def quoted(name: str) -> str:
    """`repr(name)`, shortened for an error message when the caller sent a long one."""
    if len(name) <= MAX_NAME_CHARS:
        return repr(name)
    return f"{name[:MAX_NAME_CHARS]!r}... ({len(name):,} characters)"


def listed(problems: list[str]) -> str:
    """The problems joined for one message: the first MAX_PROBLEMS, then how many more there are."""
    shown = "; ".join(problems[:MAX_PROBLEMS])
    more = len(problems) - MAX_PROBLEMS
    return shown + (f"; and {more} more like these" if more > 0 else "")
