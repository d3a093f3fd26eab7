"""Anvil's kernel compiler: Triton-style kernels from Python to native code.

    from compiler import jit, cdiv
    import compiler.language as tl
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import language  # noqa: E402
from .errors import (  # noqa: E402
    AnvilError,
    ArgumentError,
    CompilationError,
    ConstexprError,
    DeviceAssertError,
    DtypeError,
    LaunchError,
    OutOfBoundsError,
    ShapeError,
    UndefinedNameError,
    UnsupportedError,
)
from .runtime.autotune import Config, autotune, heuristics  # noqa: E402
from .runtime.compiled import CompiledKernel  # noqa: E402
from .runtime.jit import (  # noqa: E402
    ConstexprFunction,
    JITFunction,
    compile_source,
    constexpr_function,
    jit,
)


def cdiv(x: int, y: int) -> int:
    """Ceiling division: cdiv(10, 4) == 3."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


__all__ = [
    "jit", "JITFunction", "compile_source", "constexpr_function", "ConstexprFunction", "autotune", "Config",
    "heuristics", "cdiv", "next_power_of_2",
    "CompiledKernel", "language", "AnvilError", "CompilationError", "UnsupportedError", "UndefinedNameError",
    "ArgumentError", "ShapeError", "DtypeError", "ConstexprError", "LaunchError", "OutOfBoundsError",
    "DeviceAssertError", "__version__",
]
