"""`triton.runtime.interpreter`: Anvil compiles every kernel, so there is no interpreter to select."""

from __future__ import annotations

__all__ = ["InterpreterError"]

from ..errors import InterpreterError
