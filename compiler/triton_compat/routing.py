"""Which `triton` an import statement sees while the stand-in is installed.

The stand-in is for kernel code: the modules a user imports after `install()` bind Anvil's
`triton`. torch is not such code. Its compiler stack (dynamo, inductor, the code inductor
generates) imports `triton` inside functions, long after install(), and drives Triton's internal
compiler API (`ASTSource`, `triton.compile`, launcher metadata) that the stand-in does not
implement. So torch keeps seeing what it would see without the stand-in: the real `triton`
package where one is installed, and no `triton` at all where none is (an ImportError, exactly as
torch expects then). On the CPU that means inductor's C++ code; on CUDA, Triton compiling
inductor's kernels as usual.

The import statement tells who imports: `builtins.__import__` receives the importer's globals.
Imports made by modules of the `torch` package (inductor's generated modules are named under it)
or by the real triton's own modules resolve against the real triton's modules, swapped into
`sys.modules` for the duration of that import under a lock; every other importer gets the
stand-in. `importlib.import_module` does not pass through `__import__`; torch and Triton use it
for their own plugins, not for `triton` itself.
"""

from __future__ import annotations

import builtins
import sys
import threading
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["Router"]

# Packages whose imports of `triton` resolve to the real package.
REAL_OWNERS = ("torch", "triton")

# Modules of those packages that import `triton` only to recognise a user's kernel, never to compile
# one: `torch.library.wrap_triton` / `triton_op` check that the kernel they are handed is a
# `triton.runtime.jit.JITFunction` or an `Autotuner`. After install(), a library's kernels are the
# stand-in's, so that check must see the stand-in's classes; in eager mode torch then launches the
# kernel itself (`kernel[grid](...)`), which is Anvil's launch.
STANDIN_IMPORTERS = ("torch._library.triton", "torch._higher_order_ops.triton_kernel_wrap")


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _is_triton(name: str) -> bool:
    return _within(name, "triton")


def _take(keys: Sequence[str]) -> dict[str, ModuleType]:
    """Remove the named modules from sys.modules and return them."""
    out = {}
    for k in keys:
        m = sys.modules.pop(k, None)
        if m is not None:
            out[k] = m
    return out


class Router:
    """An `__import__` that hands the real triton to torch and to the real triton itself."""

    def __init__(self, real: dict[str, ModuleType]) -> None:
        self.real = dict(real)  # the real triton's modules, as imported so far
        self.missing = False  # no real triton is installed (found once, remembered)
        self.lock = threading.RLock()
        self.depth = 0  # routed imports in progress (under the lock): the real modules are in place
        self.previous = builtins.__import__
        self.previous_only = False  # set by uninstall() when it could not take this hook out

    def wants_real(self, name: str, globals_: Mapping[str, Any] | None, level: int) -> bool:
        if not globals_:
            return False
        if level == 0:
            importer = str(globals_.get("__name__") or "")
            return (_is_triton(name) and any(_within(importer, p) for p in REAL_OWNERS)
                    and importer not in STANDIN_IMPORTERS)
        # a relative import inside the real package (the stand-in's modules live under `compiler.`)
        return _is_triton(str(globals_.get("__package__") or ""))

    def __call__(self, name: str, globals: Mapping[str, Any] | None = None, locals: Any = None,
                 fromlist: Sequence[str] | None = (), level: int = 0) -> ModuleType:
        if self.previous_only or not self.wants_real(name, globals, level):
            return self.previous(name, globals, locals, fromlist, level)
        if self.missing:
            raise ModuleNotFoundError("No module named 'triton'", name="triton")
        with self.lock:
            if self.depth:  # nested inside a routed import (the real package importing itself)
                return self.previous(name, globals, locals, fromlist, level)
            standin_keys = [k for k in sys.modules if _is_triton(k)]
            standin = _take(standin_keys)
            sys.modules.update(self.real)
            self.depth += 1
            try:
                return self.previous(name, globals, locals, fromlist, level)
            except ModuleNotFoundError as e:
                if e.name == "triton":
                    self.missing = True
                raise
            finally:
                self.depth -= 1
                self.real = _take([k for k in sys.modules if _is_triton(k)])
                sys.modules.update(standin)

    def real_modules(self) -> dict[str, ModuleType]:
        return dict(self.real)
