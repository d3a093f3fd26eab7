"""Triton's exception names, mapped onto Anvil's error hierarchy.

`except triton.TritonError` catches every error Anvil raises on purpose, and
`except triton.CompilationError` every located compile error, as with the real triton.
"""

from __future__ import annotations

from ..errors import AnvilError, CompilationError, ResourceError

__all__ = ["TritonError", "CompilationError", "CompileTimeAssertionFailure", "OutOfResources",
           "InterpreterError", "PTXASError", "UnsupportedLanguageConstruct"]

TritonError = AnvilError
OutOfResources = ResourceError
CompileTimeAssertionFailure = CompilationError
UnsupportedLanguageConstruct = CompilationError


class InterpreterError(AnvilError):
    """Raised by Triton's interpreter; Anvil compiles instead of interpreting, so never raised."""


class PTXASError(AnvilError):
    """Raised when ptxas rejects PTX (GPU backends only)."""
