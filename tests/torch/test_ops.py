"""compiler.torch.op on the CPU backend: Anvil kernels as torch custom ops, called eagerly, under
torch.compile(fullgraph=True) with no graph break, under FakeTensorMode and on meta tensors (the body
is its own fake: launches run nothing), with autograd and with in-place writes."""

from __future__ import annotations

import itertools
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode, is_fake

import compiler.language as tl
from compiler import Config, autotune, cdiv, jit
from compiler.runtime import launch as launch_module
from compiler.runtime.compiled import CompiledKernel
from compiler.torch import op
from compiler.torch.ops import DataDependentOpError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_op_kernels import (  # noqa: E402
    BLOCK,
    add_into,
    gelu_mul,
    gelu_mul_reference,
    rms_norm,
    rms_norm_reference,
)

SHAPES = [(1,), (BLOCK,), (1000,), (3, 333), (4, 37, 5)]  # 1000, 999, 740: not multiples of BLOCK
ROWS = [(1, 1), (3, 37), (2, 4, 100), (5, 1024), (3, 2500)]  # 2500 > 1024: the two-pass branch
_names = itertools.count()


def _has_cxx() -> bool:
    return shutil.which("g++") is not None or shutil.which("c++") is not None


BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.skipif(
    not _has_cxx(), reason="inductor on CPU compiles C++: no g++ or c++ on this machine"))]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Each test compiles from scratch: another test's compiled graphs and guards do not carry over."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def compile_count(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many kernels the launch path compiles (every compile of a launch goes through this name)."""
    count = [0]
    real = launch_module.compile_kernel

    def counting(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(launch_module, "compile_kernel", counting)
    return count


def _unique(name: str) -> str:
    """An op name not registered before in this process (torch keeps every registration)."""
    return f"anvil_test::{name}_{next(_names)}"


def _model(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = gelu_mul(torch.sin(x), y) * 2.0
    return rms_norm(h, w, 1e-6) + x


def _model_reference(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = gelu_mul_reference(torch.sin(x), y) * 2.0
    return rms_norm_reference(h, w, 1e-6) + x


# ---------------------------------------------------------------------------------------------- eager


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_eager_gelu_mul_matches_torch(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    x, y = torch.randn(shape, dtype=dtype), torch.randn(shape, dtype=dtype)
    out = gelu_mul(x, y)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out, gelu_mul_reference(x, y))
    torch.testing.assert_close(torch.ops.anvil_test.gelu_mul(x, y), out, rtol=0, atol=0)


@pytest.mark.parametrize("shape", ROWS)
def test_eager_rms_norm_matches_torch(shape: tuple[int, ...]) -> None:
    x, w = torch.randn(shape), torch.randn(shape[-1])
    torch.testing.assert_close(rms_norm(x, w, 1e-5), rms_norm_reference(x, w, 1e-5), rtol=1e-5, atol=1e-5)


def test_eager_non_contiguous_input() -> None:
    x, y = torch.randn(37, 50).t(), torch.randn(50, 37)
    torch.testing.assert_close(gelu_mul(x, y), gelu_mul_reference(x, y))


@pytest.mark.parametrize("shape", SHAPES)
def test_eager_in_place_add(shape: tuple[int, ...]) -> None:
    x, y = torch.randn(shape), torch.randn(shape)
    expected = x + y
    assert add_into(x, y) is None
    torch.testing.assert_close(x, expected, rtol=0, atol=0)


def test_opcheck_passes() -> None:
    """torch's own consistency checks: schema, fake vs real outputs, autograd registration, AOT dispatch."""
    for fn, args in ((gelu_mul, (torch.randn(300), torch.randn(300))),
                     (rms_norm, (torch.randn(3, 37), torch.randn(37), 1e-6)),
                     (add_into, (torch.randn(300), torch.randn(300)))):
        result = torch.library.opcheck(fn, args)
        assert all(v == "SUCCESS" for v in result.values()), result


# ---------------------------------------------------------------------------------------- torch.compile


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_fullgraph_matches_torch(backend: str) -> None:
    compiled = torch.compile(_model, backend=backend, fullgraph=True)
    for shape in ((1000,), (3, 37), (2, 5, 2500)):
        x, y, w = torch.randn(shape), torch.randn(shape), torch.randn(shape[-1])
        torch.testing.assert_close(compiled(x, y, w), _model_reference(x, y, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_dynamic_shapes(backend: str) -> None:
    """With symbolic sizes the body runs on fake tensors whose sizes are SymInts: the launch's integer
    arguments and grid are symbolic too, and the launch still runs nothing."""
    compiled = torch.compile(_model, backend=backend, fullgraph=True, dynamic=True)
    for rows in (3, 7, 11):
        x, y, w = torch.randn(rows, 37), torch.randn(rows, 37), torch.randn(37)
        torch.testing.assert_close(compiled(x, y, w), _model_reference(x, y, w), rtol=1e-5, atol=1e-5)


def test_compile_has_no_graph_break() -> None:
    x, y, w = torch.randn(3, 37), torch.randn(3, 37), torch.randn(37)
    explanation = torch._dynamo.explain(_model)(x, y, w)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_in_place_add(backend: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        t = x * 2.0
        add_into(t, y)  # a graph intermediate written in place
        add_into(x, t)  # a graph input written in place: the caller sees it
        return t + 1.0

    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    for shape in ((1000,), (3, 333)):
        x, y = torch.randn(shape), torch.randn(shape)
        x_ref = x.clone()
        t_ref = x_ref * 2.0 + y
        x_ref += t_ref
        out = compiled(x, y)
        torch.testing.assert_close(out, t_ref + 1.0)
        torch.testing.assert_close(x, x_ref)
    assert torch._dynamo.explain(fn)(torch.randn(10), torch.randn(10)).graph_break_count == 0


# ---------------------------------------------------------------------------------------- fake tensors


def _fresh_copy_op(name: str) -> tuple[Any, Any]:
    """A new kernel (no compiled code anywhere yet) and an op that launches it."""

    @jit
    def copy_kernel(X, Out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(Out + offs, tl.load(X + offs, mask=offs < n) * 3.0, mask=offs < n)

    @op(_unique(name))
    def triple(x: torch.Tensor) -> torch.Tensor:
        out = torch.full_like(x, float("nan"))
        copy_kernel[(cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
        return out

    return copy_kernel, triple


def test_fake_mode_infers_outputs_without_compiling(compile_count: list[int]) -> None:
    kernel, triple = _fresh_copy_op("triple")
    with FakeTensorMode():
        for shape, dtype in (((1000,), torch.float32), ((3, 37), torch.float64), ((0,), torch.float32)):
            out = triple(torch.empty(shape, dtype=dtype))
            assert is_fake(out)
            assert out.shape == shape and out.dtype == dtype
        x = torch.randn(3, 37)
        h = gelu_mul(x, x)
        r = rms_norm(h, torch.ones(37), 1e-6)
        assert is_fake(r) and r.shape == (3, 37) and r.dtype == torch.float32
    assert compile_count[0] == 0
    assert not kernel.launcher.cache and not kernel.launcher.fast  # nothing compiled or remembered for it
    x = torch.randn(1000)
    torch.testing.assert_close(triple(x), x * 3.0)  # real tensors afterwards: compiled and run
    assert compile_count[0] == 1


def test_meta_tensors_run_nothing(compile_count: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    launches = [0]
    real_launch = CompiledKernel.launch

    def counting(self: CompiledKernel, grid: tuple[int, int, int], params: list[Any]) -> None:
        launches[0] += 1
        real_launch(self, grid, params)

    monkeypatch.setattr(CompiledKernel, "launch", counting)
    kernel, triple = _fresh_copy_op("triple_meta")
    out = triple(torch.empty(3, 37, device="meta"))
    assert out.is_meta and out.shape == (3, 37)
    assert compile_count[0] == 0 and launches[0] == 0
    x = torch.randn(3, 37)
    torch.testing.assert_close(triple(x), x * 3.0)
    assert compile_count[0] == 1 and launches[0] == 1
    # the warm path's entry for CPU tensors also matches meta tensors (both have get_device() == -1)
    out = triple(torch.empty(3, 37, device="meta"))
    assert out.is_meta and launches[0] == 1
    triple(x)
    assert launches[0] == 2 and compile_count[0] == 1


def test_fake_tensor_launch_on_a_warm_kernel_runs_nothing(compile_count: list[int]) -> None:
    x, y = torch.randn(1000), torch.randn(1000)
    gelu_mul(x, y)  # warm: the kernel's entry for these arguments exists
    compiled_before = compile_count[0]
    with FakeTensorMode() as mode:
        fx, fy = mode.from_tensor(x), mode.from_tensor(y)
        out = gelu_mul(fx, fy)
        assert is_fake(out) and out.shape == (1000,)
    assert compile_count[0] == compiled_before


def test_fake_mode_skips_autotuning(compile_count: list[int]) -> None:
    @autotune(configs=[Config({"BLOCK": 64}), Config({"BLOCK": 128})], key=["n"])
    @jit
    def tuned_kernel(X, Out, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(Out + offs, tl.load(X + offs, mask=offs < n) + 1.0, mask=offs < n)

    @op(_unique("tuned"))
    def plus_one(x: torch.Tensor) -> torch.Tensor:
        out = torch.full_like(x, float("nan"))
        tuned_kernel[lambda meta: (cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
        return out

    with FakeTensorMode():
        assert plus_one(torch.empty(500)).shape == (500,)
    assert tuned_kernel.cache == {} and not tuned_kernel.timings  # no timing of launches that ran nothing
    assert compile_count[0] == 0
    x = torch.randn(500)
    torch.testing.assert_close(plus_one(x), x + 1.0)
    assert len(tuned_kernel.cache) == 1


def _item_op() -> Any:
    @op(_unique("scale_by_max"))
    def scale_by_max(x: torch.Tensor) -> torch.Tensor:
        m = x.abs().max().item()  # a value on the host: cannot run on fake tensors
        return x / m

    return scale_by_max


def test_body_reading_values_says_to_register_a_fake() -> None:
    scale_by_max = _item_op()
    x = torch.randn(100)
    torch.testing.assert_close(scale_by_max(x), x / x.abs().max())  # eager is fine
    with FakeTensorMode(), pytest.raises(DataDependentOpError) as info:
        scale_by_max(torch.empty(100))
    message = str(info.value)
    assert "register_fake" in message and "scale_by_max" in message
    assert ".item()" in message  # the line of the body that read a value
    with pytest.raises(DataDependentOpError, match="register_fake"):
        scale_by_max(torch.empty(100, device="meta"))


def test_body_reading_values_under_compile_then_registered_fake() -> None:
    scale_by_max = _item_op()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return scale_by_max(x + 1.0) * 2.0

    x = torch.randn(100)
    with pytest.raises(Exception, match="register_fake"):  # torch.compile wraps the error in its own
        torch.compile(fn, backend="eager", fullgraph=True)(x)

    @scale_by_max.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(fn, backend="aot_eager", fullgraph=True)(x),
                               (x + 1.0) / (x + 1.0).abs().max() * 2.0)


def test_registered_fake_replaces_the_body() -> None:
    calls: list[str] = []

    @op(_unique("negate"))
    def negate(x: torch.Tensor) -> torch.Tensor:
        calls.append("body")
        return -x

    @negate.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        calls.append("fake")
        return torch.empty_like(x)

    with FakeTensorMode():
        negate(torch.empty(4))
    assert calls == ["fake"]


def test_op_name_needs_a_namespace() -> None:
    with pytest.raises(ValueError, match="namespace::name"):
        op("gelu_mul")


# -------------------------------------------------------------------------------------------- autograd


@pytest.mark.parametrize("shape", [(7,), (3, 5), (BLOCK + 3,)])
def test_gradcheck_float64(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    y = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(gelu_mul, (x, y))


def _grads(fn: Callable[..., torch.Tensor], x: torch.Tensor, y: torch.Tensor,
           g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
    out = fn(xr, yr)
    out.backward(g)
    assert xr.grad is not None and yr.grad is not None
    return out.detach(), xr.grad, yr.grad


@pytest.mark.parametrize("shape", SHAPES)
def test_gradients_match_torch(shape: tuple[int, ...]) -> None:
    x, y, g = torch.randn(shape), torch.randn(shape), torch.randn(shape)
    for got, want in zip(_grads(gelu_mul, x, y, g), _grads(gelu_mul_reference, x, y, g), strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_gradients_match_torch(backend: str) -> None:
    if backend == "inductor" and not _has_cxx():
        pytest.skip("inductor on CPU compiles C++: no g++ or c++ on this machine")

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return gelu_mul(x.sin(), y) * x

    def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return gelu_mul_reference(x.sin(), y) * x

    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    for shape in ((1000,), (3, 333)):
        x, y, g = torch.randn(shape), torch.randn(shape), torch.randn(shape)
        for got, want in zip(_grads(compiled, x, y, g), _grads(reference, x, y, g), strict=True):
            torch.testing.assert_close(got, want)
