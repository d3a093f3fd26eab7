"""An opt-in stand-in for the `triton` package: existing Triton code runs on Anvil unchanged.

    import compiler.triton_compat
    compiler.triton_compat.install()     # before anything imports triton
    import triton, triton.language as tl  # Anvil's compiler behind Triton's names

`install()` puts this package into `sys.modules` as `triton` (with `triton.language`,
`triton.testing`, `triton.runtime`, ... as submodules); `uninstall()` puts back whatever was
there before (e.g. the real triton). Without install(), this module is still what the text
of a kernel given to `compile_source` means by `import triton`: `triton.jit`,
`triton.language` and friends resolve as attributes.
"""

from __future__ import annotations

import builtins
import importlib
import sys
from typing import Any

from ..helpers import cdiv as cdiv
from ..helpers import next_power_of_2 as next_power_of_2
from ..runtime.autotune import Config, autotune, heuristics
from ..runtime.jit import constexpr_function as constexpr_function
from .errors import CompilationError, InterpreterError, OutOfResources, TritonError
from .routing import Router
from .runtime import _allocation
from .runtime.jit import JITFunction, KernelInterface, MockTensor, TensorWrapper, jit, reinterpret

__version__ = "3.6.0+anvil"

__all__ = [
    "install", "uninstall", "installed", "jit", "JITFunction", "KernelInterface", "autotune", "Config",
    "constexpr_function",
    "heuristics", "cdiv", "next_power_of_2", "TritonError", "CompilationError", "OutOfResources",
    "InterpreterError", "TensorWrapper", "reinterpret", "MockTensor", "set_allocator", "must_use_result",
    "__version__", "language", "testing", "runtime", "compiler", "tools", "knobs", "errors",
]


def set_allocator(allocator: Any) -> None:
    """Triton's hook for device scratch memory; recorded, never called (the CPU backend needs none)."""
    _allocation.set_allocator(allocator)


def must_use_result(x: Any, s: bool = True) -> Any:
    """Triton's decorator marking a function whose result must be used (a no-op marker here)."""
    if isinstance(x, str):
        return lambda fn: fn
    return x


# Submodules load on first use, so that `compile_source`'s `import triton` stays cheap.
_SUBMODULES = {"language", "testing", "runtime", "compiler", "tools", "knobs", "errors", "_internal_testing",
               "backends"}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        mod = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'triton' (Anvil's stand-in) has no attribute {name!r}")


# ---------------------------------------------------------------------- install / uninstall
# The `triton.*` modules this package provides, and the module behind each. Names not listed
# here (e.g. `triton.language.math`) are our own language modules under Triton's names.
MODULES: dict[str, str] = {
    "triton": __name__,
    "triton.errors": f"{__name__}.errors",
    "triton.language": f"{__name__}.language",
    "triton.language.core": f"{__name__}.language.core",
    "triton.language.standard": "compiler.language.standard",
    "triton.language.math": "compiler.language.math",
    "triton.language.random": "compiler.language.random",
    "triton.language.extra": f"{__name__}.language.extra",
    "triton.language.extra.libdevice": "compiler.language.extra.libdevice",
    "triton.language.extra.cuda": f"{__name__}.language.extra",
    "triton.language.extra.cuda.libdevice": "compiler.language.extra.libdevice",
    "triton.language.extra.hip": f"{__name__}.language.extra",
    "triton.language.extra.hip.libdevice": "compiler.language.extra.libdevice",
    "triton.testing": f"{__name__}.testing",
    "triton.runtime": f"{__name__}.runtime",
    "triton.runtime.jit": f"{__name__}.runtime.jit",
    "triton.runtime.driver": f"{__name__}.runtime.driver",
    "triton.runtime.errors": f"{__name__}.errors",
    "triton.runtime.autotuner": f"{__name__}.runtime.autotuner",
    "triton.runtime._allocation": f"{__name__}.runtime._allocation",
    "triton.runtime.interpreter": f"{__name__}.runtime.interpreter",
    "triton.compiler": f"{__name__}.compiler",
    "triton.compiler.errors": f"{__name__}.errors",
    "triton.compiler.compiler": f"{__name__}.compiler",
    "triton.tools": f"{__name__}.tools",
    "triton.tools.tensor_descriptor": f"{__name__}.tools.tensor_descriptor",
    "triton.knobs": f"{__name__}.knobs",
    "triton.backends": f"{__name__}.backends",
    "triton.backends.compiler": f"{__name__}.backends",
    "triton._internal_testing": f"{__name__}._internal_testing",
}

_saved: dict[str, Any] | None = None
_router: Any = None  # the routing.Router in builtins.__import__ while installed


def installed() -> bool:
    """True while install() is in effect."""
    return _saved is not None


def install() -> None:
    """Make `import triton` (and its submodules) resolve to Anvil. Idempotent.

    Call it before the code that imports triton; modules that imported the real triton
    earlier keep their reference to it. torch's own imports of triton keep resolving to the real
    package (or to none, where it is not installed): see `routing`.
    """
    global _saved, _router
    if _saved is not None:
        return

    mods = {name: importlib.import_module(target) for name, target in MODULES.items()}
    saved = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    for k in saved:
        del sys.modules[k]
    sys.modules.update(mods)
    _saved = saved
    _router = Router(saved)
    builtins.__import__ = _router


def uninstall() -> None:
    """Undo install(): remove the stand-in modules and restore what `triton` was before."""
    global _saved, _router
    if _saved is None:
        return

    previous, real = _router.previous, _router.real_modules()
    if builtins.__import__ is _router:  # else another hook was installed over it: leave that in place
        builtins.__import__ = previous
    else:
        _router.previous_only = True
    for k in [k for k in sys.modules if k == "triton" or k.startswith("triton.")]:
        del sys.modules[k]
    sys.modules.update(real)  # what `triton` was, and what torch imported of it since
    _saved = _router = None
