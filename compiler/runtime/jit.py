"""`@jit` kernels: the launchable kernel (`kernel[grid](...)`), specialization, warm-up.

A JITFunction is a device function (runtime/function.py: the function, its source, flags and deep
hash, which the frontend and the language's library see) with the launch methods, which reach the
compile pipeline (launch.py, compiled.py), and through it the frontend.

A warm launch (`kernel[grid](...)`, fastpath.py) binds the arguments with Python's own binding,
builds a flat key (per-argument specialization plus constexpr values) and finds the launch entry
in a dict; everything else is precomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from .. import errors as E
from .dynamo import outside_graph
from .function import (
    ConstexprFunction,
    DeviceFunction,
    as_device_function,
    constexpr_function,
    python_helper,
    register_source_lines,
    value_token,
)
from .launch import Launcher, clean_error, compile_for_signature

__all__ = ["JITFunction", "jit", "KernelInterface", "ConstexprFunction", "constexpr_function", "as_jit", "as_kernel",
           "DeviceFunction", "python_helper", "value_token", "register_source_lines"]


class KernelInterface:
    """`kernel[grid](*args, **kwargs)` sugar shared by JIT functions, autotuners, heuristics."""

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        if torch.compiler.is_compiling():
            return outside_graph(self, grid)

        def launcher(*args: Any, **kwargs: Any) -> Any:
            return self.run(*args, grid=grid, **kwargs)  # type: ignore[attr-defined]

        return launcher


class JITFunction(DeviceFunction, KernelInterface):
    """A kernel compiled from Python source on first launch; also a device function other kernels call."""

    def __init__(self, fn: Callable[..., Any] | None = None, *, text: str | None = None,
                 name: str | None = None, filename: str = "<kernel>", first_line: int = 1,
                 globals: Mapping[str, Any] | None = None, debug: bool | None = None,
                 do_not_specialize: Iterable[int | str] = (), noinline: bool = False,
                 compile_time: bool = False) -> None:
        super().__init__(fn, text=text, name=name, filename=filename, first_line=first_line, globals=globals,
                         debug=debug, do_not_specialize=do_not_specialize, noinline=noinline,
                         compile_time=compile_time)
        self.cache: dict[Any, Any] = {}
        self._launcher: Any = None

    # ------------------------------------------------------------------ launching
    @property
    def launcher(self) -> Any:
        if self._launcher is None:
            self._launcher = Launcher(self)
        return self._launcher

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        # The warm path (fastpath.py): the kernel's generated front with this grid bound, made once
        # per grid value; calling it is a C-level call of the front.
        if torch.compiler.is_compiling():
            return outside_graph(self, grid)
        launcher = self._launcher or self.launcher
        try:
            b = launcher.grids.get(grid)
        except TypeError:  # an unhashable grid (a list): bound afresh each time
            b = None
        return b if b is not None else launcher.bound(grid)

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Launch on `grid` with `args` (torch tensors and scalars) and constexpr keywords."""
        return (self._launcher or self.launcher).call(grid, args, kwargs)

    def warmup(self, *args: Any, grid: Any = (1,), **kwargs: Any) -> Any:
        """Compile for these arguments without running; returns the compiled kernel."""
        try:
            return self.launcher.run(args, kwargs, grid, warmup=True)
        except E.AnvilError as e:
            raise clean_error(e) from None

    def compile(self, signature: Mapping[str, str], constexprs: Mapping[str, Any] | None = None,
                target: str = "cpu", num_warps: int = 4, num_stages: int = 3, debug: bool = False,
                maxnreg: int | None = None, cluster_dims: Any = None) -> Any:
        """Compile for an explicit Triton-style signature ({"x_ptr": "*fp32", "n": "i32"})."""
        try:
            return compile_for_signature(self, dict(signature), dict(constexprs or {}), target, num_warps,
                                         num_stages, debug, maxnreg, cluster_dims)
        except E.AnvilError as e:
            raise clean_error(e) from None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise E.AnvilError(f"{self.__name__} is a kernel: launch it as {self.__name__}[grid](...), "
                           "or call it from another @jit function")

    def __repr__(self) -> str:
        return f"JITFunction({self.__name__})"


def as_jit(obj: Any) -> DeviceFunction | None:
    """The device function `obj` is: one of ours (a kernel or a library function), or a real
    `triton.JITFunction`, wrapped once as our launchable JITFunction."""
    return as_device_function(obj, JITFunction)


def as_kernel(obj: Any) -> JITFunction | None:
    """Our launchable JITFunction for `obj` (as as_jit, less the language's library functions)."""
    f = as_jit(obj)
    return f if isinstance(f, JITFunction) else None


def jit(fn: Callable[..., Any] | None = None, *, debug: bool | None = None,
        do_not_specialize: Iterable[int | str] = (), noinline: bool = False,
        **_ignored: Any) -> Any:
    """Compile a Triton-style kernel: `@jit def kernel(x_ptr, n, BLOCK: tl.constexpr): ...`.

    Also accepts a `triton.JITFunction` (compiles its source with Anvil).
    """

    def wrap(f: Any) -> JITFunction:
        if isinstance(f, JITFunction):
            return f
        if isinstance(f, DeviceFunction) and f.fn is not None:  # a library function, made launchable
            f = f.fn
        existing = as_kernel(f)
        if existing is not None and existing.fn is not None:
            return existing
        return JITFunction(f, debug=debug, do_not_specialize=do_not_specialize, noinline=noinline)

    return wrap(fn) if fn is not None else wrap
