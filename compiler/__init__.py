"""Anvil's kernel compiler: Triton-style kernels from Python to native code.

    from compiler import jit, cdiv
    import compiler.language as tl
"""

from __future__ import annotations

from . import language
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
from .frontend.textmodule import compile_source
from .helpers import cdiv, next_power_of_2
from .runtime.autotune import Config, autotune, heuristics  # noqa: E402
from .runtime.compiled import CompiledKernel  # noqa: E402
from .runtime.jit import (  # noqa: E402
    ConstexprFunction,
    JITFunction,
    constexpr_function,
    jit,
)
from .version import __version__

__all__ = [
    "jit", "JITFunction", "compile_source", "constexpr_function", "ConstexprFunction", "autotune", "Config",
    "heuristics", "cdiv", "next_power_of_2",
    "CompiledKernel", "language", "AnvilError", "CompilationError", "UnsupportedError", "UndefinedNameError",
    "ArgumentError", "ShapeError", "DtypeError", "ConstexprError", "LaunchError", "OutOfBoundsError",
    "DeviceAssertError", "__version__",
]
