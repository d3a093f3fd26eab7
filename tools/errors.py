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
