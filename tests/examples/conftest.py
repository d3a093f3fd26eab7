"""Load the example scripts as modules, and poison every buffer their wrappers allocate.

`example("name")` imports examples/name.py and swaps the module's `torch` for a proxy whose
`empty` / `empty_like` return tensors filled with NaN (floats) or a sentinel (integers), so a
kernel that leaves any output element unwritten fails the comparison instead of passing on
leftover memory (`anvil_poisoned`, in tests/conftest.py, does the same for the fused kernels of the anvil
torch.compile backend).

Where ptxas is found, every specialization a test compiles for the CPU is also compiled and
assembled for sm_90a (the H100/H200), and the test fails if that fails or spills registers: the
examples are checked for the GPU on machines without one.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import compiler.runtime.launch as _launch
from compiler.backends.nvidia.toolchain import find_ptxas

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PTX_ARCH = "sm_90a"
# per CPU specialization compiled in this process: the sm_90a outcome ("" when it assembled)
PTX_OUTCOMES: dict[str, str] = {}


def load_example(name: str) -> ModuleType:
    key = f"anvil_examples.{name}"
    mod = sys.modules.get(key)
    if mod is None:
        spec = importlib.util.spec_from_file_location(key, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return mod


def poison(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return t.fill_(float("nan"))
    if t.dtype == torch.bool:
        return t.fill_(True)
    return t.fill_(torch.iinfo(t.dtype).min + 7)


class PoisonedTorch:
    """torch, except that fresh uninitialized tensors are full of poison."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def empty(*args: Any, **kwargs: Any) -> torch.Tensor:
        return poison(torch.empty(*args, **kwargs))

    @staticmethod
    def empty_like(*args: Any, **kwargs: Any) -> torch.Tensor:
        return poison(torch.empty_like(*args, **kwargs))


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    def get(name: str) -> ModuleType:
        mod = load_example(name)
        monkeypatch.setattr(mod, "torch", PoisonedTorch())
        return mod

    return get


@pytest.fixture(autouse=True)
def _example_device() -> Any:
    """ANVIL_TEST_DEVICE=cuda runs every example test with CUDA tensors (the NVIDIA backend)."""
    import os

    dev = os.environ.get("ANVIL_TEST_DEVICE")
    if not dev:
        yield
        return
    torch.set_default_device(dev)
    try:
        yield
    finally:
        torch.set_default_device("cpu")


@pytest.fixture
def f32_dot_tol() -> Callable[[float, float], dict[str, float]]:
    """Tolerances for results of fp32 `tl.dot`: on NVIDIA GPUs it runs as tf32 (10 mantissa bits,
    Triton's default `input_precision`), so the CPU's tight tolerances widen to tf32's there."""

    def tol(rtol: float, atol: float) -> dict[str, float]:
        if torch.get_default_device().type == "cuda":
            return {"rtol": max(rtol, 1e-2), "atol": max(atol, 2e-2)}
        return {"rtol": rtol, "atol": atol}

    return tol


@pytest.fixture
def ptx_outcomes() -> dict[str, str]:
    if find_ptxas() is None:
        pytest.skip("ptxas not found")
    return PTX_OUTCOMES


def _ptx_outcome(compile_kernel: Callable[..., Any], fn: Any, specs: list[Any], opts: Any) -> str:
    try:
        g = compile_kernel(fn, specs, opts, f"cuda:{PTX_ARCH}")
    except Exception as e:  # noqa: BLE001 - reported by the test that launched the kernel
        return f"{type(e).__name__}: {e}"
    if g.asm["cubin"][:4] != b"\x7fELF":
        return "no cubin"
    if g.metadata["n_spills"]:
        return f"{g.metadata['n_spills']} bytes of register spills"
    return ""


@pytest.fixture(autouse=True)
def _compiles_for_sm90a(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Each specialization the test compiles for the CPU also compiles for sm_90a (checked after
    the test; once per process)."""
    if find_ptxas() is None:
        yield
        return
    orig = _launch.compile_kernel
    failed: list[str] = []

    def both(fn: Any, specs: list[Any], opts: Any, target: str) -> Any:
        ck = orig(fn, specs, opts, target)
        if target == "cpu":
            key = fn.__name__ + repr([(s.name, str(getattr(s, "type", "")), getattr(s, "value", "")) for s in specs])
            if key not in PTX_OUTCOMES:
                PTX_OUTCOMES[key] = _ptx_outcome(orig, fn, specs, opts)
            if PTX_OUTCOMES[key]:
                failed.append(f"{fn.__name__} for {PTX_ARCH}: {PTX_OUTCOMES[key][:300]}")
        return ck

    monkeypatch.setattr(_launch, "compile_kernel", both)
    yield
    assert not failed, "\n".join(failed)
