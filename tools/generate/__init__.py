"""generate_kernel: a fused kernel from a torch expression in the reference language (tool.py).

The request and result models load with the package; the tool itself (torch, the compiler's
fusion library) on first use of ``generate_kernel``, so that the server process starts without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tools.generate.models import GeneratedLaunch, GenerateRequest, GenerateResult

if TYPE_CHECKING:
    from tools.generate.tool import generate_kernel

__all__ = ["generate_kernel", "GenerateRequest", "GenerateResult", "GeneratedLaunch"]


def __getattr__(name: str) -> Any:
    if name == "generate_kernel":
        # deferred: start-up cost: torch and the compiler's fusion library (about 3 s), loaded when the tool is used
        from tools.generate.tool import generate_kernel

        return generate_kernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
