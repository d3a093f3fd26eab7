"""`triton.backends` / `triton.backends.compiler`: the target description classes."""

from __future__ import annotations

from .runtime.driver import GPUTarget

__all__ = ["GPUTarget", "backends"]

backends: dict[str, object] = {}
