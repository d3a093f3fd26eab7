"""The compatibility suite's harness: public Triton kernel libraries, unchanged, run through Anvil.

Each library is a pinned PyPI distribution (the `compat` extra in pyproject.toml). A `Case` names
a module of it, the kernels in that module one call must launch, an input builder, the call (most
often the library's own Python wrapper, which launches its kernels), a torch reference and a
tolerance. `run_case` imports the module while the `triton` stand-in is installed, checks that
the kernels are Anvil's objects, runs the call with every tensor the library allocates with
`torch.empty*` poisoned, checks on the CPU that the named kernels really launched, and compares
the outputs with the reference on fresh random inputs of each shape.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch

Inputs = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One row of the table: a library's kernels, how to launch them and what they must compute."""

    name: str  # the test id, unique in the table
    library: str  # the PyPI distribution, pinned in pyproject.toml's `compat` extra
    module: str  # the module defining the kernels (imported under the stand-in)
    kernels: tuple[str, ...]  # attributes of `module` ("other.module:attr" for another one): what `call` launches
    build: Callable[[tuple[int, ...], str], Inputs]  # (shape, device) -> fresh random inputs
    call: Callable[[types.ModuleType, Inputs], Any]  # runs the library's code: outputs (tensors, nested)
    ref: Callable[[Inputs], Any]  # torch's outputs for the same inputs (given a copy)
    shapes: tuple[tuple[int, ...], ...]
    atol: float = 1e-5
    rtol: float = 1e-5
    bare_package: bool = False  # import `module` without running its top package's __init__
    xfail: str | None = None  # an Anvil gap: the strict xfail's reason (it flips when fixed)
    triton_fails: str | None = None  # fails in Triton 3.6 too: why (a strict xfail as well)
    tf32: bool = False  # float32 tl.dot at Triton's default precision: looser on the GPU (run_case)

    def param(self, device: str) -> Any:
        marks: list[Any] = [pytest.mark.gpu] if device == "cuda" else []
        reason = self.xfail or (f"fails in Triton 3.6 too: {self.triton_fails}" if self.triton_fails else None)
        if reason is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        return pytest.param(self, device, marks=marks, id=f"{self.library}-{self.name}-{device}")


# ---------------------------------------------------------------- importing a library under the stand-in
def load(case: Case) -> types.ModuleType:
    """The case's module, imported while `triton` is Anvil's stand-in (checked)."""
    from compiler import triton_compat

    assert triton_compat.installed() and sys.modules["triton"] is triton_compat
    top = case.module.partition(".")[0]
    if top not in sys.modules and importlib.util.find_spec(top) is None:
        pytest.fail(f"{case.library} is not installed: install the test dependencies with pip install -e "
                    f"'.[dev,compat]'", pytrace=False)
    if case.bare_package:
        _bare_parents(case.module)
    mod = importlib.import_module(case.module)
    bound = getattr(mod, "triton", None)
    assert bound is None or bound is triton_compat, (
        f"{case.module} imported the real triton (it was imported before the stand-in was installed)")
    return mod


def _bare_parents(module: str) -> None:
    """Put the packages above `module` into sys.modules as bare packages (their __init__ not run),
    for libraries whose top-level __init__ needs a GPU or heavy optional dependencies."""
    parts = module.split(".")
    for i in range(1, len(parts)):
        name = ".".join(parts[:i])
        if name in sys.modules:
            continue
        parent = sys.modules.get(".".join(parts[:i - 1])) if i > 1 else None
        path = None if parent is None else parent.__path__
        spec = importlib.machinery.PathFinder.find_spec(parts[i - 1], path)
        assert spec is not None and spec.submodule_search_locations, f"no package {name}"
        pkg = types.ModuleType(name)
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__package__ = name
        pkg.__file__ = spec.origin
        sys.modules[name] = pkg


def anvil_kernel(obj: Any, where: str) -> Any:
    """The Anvil JITFunction behind `obj` (a JITFunction, or autotuners and heuristics around one)."""
    from compiler.runtime.autotune import Autotuner, Heuristics
    from compiler.triton_compat.runtime.jit import JITFunction

    seen = obj
    while isinstance(seen, (Autotuner, Heuristics)):
        seen = seen.fn
    assert isinstance(seen, JITFunction), f"{where} is {type(obj).__module__}.{type(obj).__name__}, not Anvil's"
    return seen


def kernel(mod: types.ModuleType, spec: str) -> Any:
    """The Anvil kernel `spec` names: an attribute of `mod`, or "module:attr"."""
    where, _, attr = spec.rpartition(":")
    owner = importlib.import_module(where) if where else mod
    return anvil_kernel(getattr(owner, attr), f"{owner.__name__}.{attr}")


def ran_on_cuda(fn: Any) -> bool:
    """Whether Anvil compiled `fn` for a GPU (GPU launches take native entries that skip the
    counted `launch`, so on CUDA the check is that a CUDA binary of the kernel exists)."""

    launcher = fn._launcher
    return launcher is not None and any(ck.backend.device == "cuda" for ck, _ in launcher.cache.values())


# ---------------------------------------------------------------- what ran
_launched: list[list[str]] = []  # the names launched, per recording in progress


def _count_launches() -> None:
    """Wrap the CPU backend's launch once per process so that a recording sees every launch."""
    from compiler.runtime.compiled import CompiledKernel

    if getattr(CompiledKernel.launch, "_compat_counted", False):
        return
    launch = CompiledKernel.launch

    @functools.wraps(launch)
    def counted(self: Any, grid: Any, params: Any) -> None:
        for names in _launched:
            names.append(self.name)
        launch(self, grid, params)

    counted._compat_counted = True  # type: ignore[attr-defined]
    CompiledKernel.launch = counted  # type: ignore[method-assign]


_count_launches()  # before any launch entry is made (entries keep the bound method)


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    names: list[str] = []
    _launched.append(names)
    try:
        yield names
    finally:
        _launched.remove(names)


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point() or t.is_complex():
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(torch.iinfo(t.dtype).min + 7)


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Tensors the library allocates with torch.empty, empty_like, empty_strided or new_empty start
    as NaN (integers as a large negative number), so that an element a kernel forgets shows."""
    saved = {n: getattr(torch, n) for n in ("empty", "empty_like", "empty_strided")}
    new_empty = torch.Tensor.new_empty

    def wrap(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        return functools.wraps(fn)(lambda *a, **k: _poison(fn(*a, **k)))

    try:
        for n, fn in saved.items():
            setattr(torch, n, wrap(fn))
        torch.Tensor.new_empty = wrap(new_empty)  # type: ignore[method-assign]
        yield
    finally:
        for n, fn in saved.items():
            setattr(torch, n, fn)
        torch.Tensor.new_empty = new_empty  # type: ignore[method-assign]


# ---------------------------------------------------------------- running a case
def _copy(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_copy(v) for v in x)
    return x


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flat(x[k])]
    return [x]


def compare(got: Any, want: Any, atol: float, rtol: float, what: str) -> None:
    g, w = _flat(got), _flat(want)
    assert len(g) == len(w), f"{what}: {len(g)} outputs, the reference has {len(w)}"
    for i, (a, b) in enumerate(zip(g, w, strict=True)):
        if isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{what}: output {i} is {type(a).__name__}, not a tensor"
            assert a.shape == b.shape, f"{what}: output {i} has shape {tuple(a.shape)}, want {tuple(b.shape)}"
            a, b = a.detach(), b.detach()
            if b.dtype == torch.bool or not (b.is_floating_point() or b.is_complex()):
                assert torch.equal(a.cpu().to(b.dtype), b.cpu()), f"{what}: output {i} differs"
                continue
            torch.testing.assert_close(a.cpu().double(), b.cpu().double(), atol=atol, rtol=rtol,
                                       msg=lambda m, i=i: f"{what}: output {i}: {m}")
        else:
            torch.testing.assert_close(float(a), float(b), atol=atol, rtol=rtol)


# A float32 tl.dot that names no input_precision runs on the GPU's tensor cores with its operands
# rounded to tf32 (10 mantissa bits: 2^-11 relative each), as in Triton: products carry ~1e-3
# relative error, and sums of K of them more. Such rows are compared at this tolerance on the GPU,
# then run again with full float32 products (TRITON_F32_DEFAULT=ieee) at the row's own tolerance,
# so that a difference beyond tf32's rounding still fails.
TF32_TOL = 1e-2


def run_case(case: Case, device: str) -> None:
    mod = load(case)
    fns = [kernel(mod, k) for k in case.kernels]
    if not (case.tf32 and device == "cuda"):
        _run_shapes(case, mod, fns, device, case.atol, case.rtol)
        return
    _run_shapes(case, mod, fns, device, max(case.atol, TF32_TOL), max(case.rtol, TF32_TOL))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_F32_DEFAULT", "ieee")
        _reset_launchers(case.module.split(".")[0])
        _run_shapes(case, mod, fns, device, case.atol, case.rtol)
    _reset_launchers(case.module.split(".")[0])


def _reset_launchers(package: str) -> None:
    """Every kernel of `package` forgets its compiled kernels (launchers keep them by arguments, not by
    environment), so the next launches compile under the environment then in force."""
    from compiler.runtime.autotune import Autotuner, Heuristics
    from compiler.triton_compat.runtime.jit import JITFunction

    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        for obj in list(vars(module).values()):
            while isinstance(obj, (Autotuner, Heuristics)):
                obj = obj.fn
            if isinstance(obj, JITFunction):
                obj._launcher = None


def _run_shapes(case: Case, mod: types.ModuleType, fns: list[Any], device: str, atol: float, rtol: float) -> None:
    names = {fn.__name__ for fn in fns}
    for shape in case.shapes:
        inputs = case.build(shape, device)
        want = case.ref(_copy(inputs))
        with recording() as launched, poisoned_allocations():
            got = case.call(mod, inputs)
        if device == "cpu":
            assert names <= set(launched), (
                f"{sorted(names - set(launched))} did not launch (launched: {dict(collections.Counter(launched))})")
        else:
            assert all(ran_on_cuda(fn) for fn in fns), f"not all of {sorted(names)} were compiled for the GPU"
        compare(got, want, atol, rtol, f"{case.name} at shape {shape}")


# ---------------------------------------------------------------- the table
LIBRARIES = ("compat_liger", "compat_bnb", "compat_cce", "compat_fla", "compat_torchao",
             "compat_gemlite")  # the modules of this folder holding each library's rows


def all_cases() -> list[Case]:
    return [c for m in LIBRARIES for c in importlib.import_module(m).CASES]


def rand(*shape: int, device: str, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(shape, device=device, dtype=torch.float32).mul_(scale).to(dtype)


def params(cases: Sequence[Case]) -> list[Any]:
    return [c.param(d) for c in cases for d in ("cpu", "cuda")]
