"""compiler.torch.op on CUDA tensors (the ops of tests/torch/torch_op_kernels.py): under
torch.compile(fullgraph=True), captured into a CUDA graph and replayed on new input values, with
autograd, and traced with fake CUDA tensors without compiling."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode, is_fake

from compiler.runtime import launch as launch_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "torch"))
from torch_op_kernels import (  # noqa: E402
    add_into,
    gelu_mul,
    gelu_mul_reference,
    rms_norm,
    rms_norm_reference,
)

pytestmark = pytest.mark.gpu

SHAPES = [(1000,), (3, 37), (2, 5, 2500)]  # 2500 > 1024: the RMSNorm's two-pass branch


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _model(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = gelu_mul(torch.sin(x), y) * 2.0
    return rms_norm(h, w, 1e-6) + x


def _model_reference(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = gelu_mul_reference(torch.sin(x), y) * 2.0
    return rms_norm_reference(h, w, 1e-6) + x


def _inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (torch.randn(shape, device="cuda"), torch.randn(shape, device="cuda"),
            torch.randn(shape[-1], device="cuda"))


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_eager_cuda_matches_torch() -> None:
    for shape in SHAPES:
        x, y, w = _inputs(shape)
        out = _model(x, y, w)
        assert out.is_cuda
        _close(out, _model_reference(x, y, w))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compile_fullgraph_cuda(backend: str) -> None:
    compiled = torch.compile(_model, backend=backend, fullgraph=True)
    for shape in SHAPES:
        x, y, w = _inputs(shape)
        _close(compiled(x, y, w), _model_reference(x, y, w))
    assert torch._dynamo.explain(_model)(*_inputs((3, 37))).graph_break_count == 0


def test_compile_reduce_overhead_cuda() -> None:
    """inductor's CUDA graphs (cudagraph trees): the ops are recorded once, then replayed."""
    compiled = torch.compile(_model, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):
        x, y, w = _inputs((3, 37))
        _close(compiled(x, y, w).clone(), _model_reference(x, y, w))


@pytest.mark.parametrize("shape", SHAPES)
def test_cuda_graph_capture_and_replay(shape: tuple[int, ...]) -> None:
    static = _inputs(shape)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (compile, load the module) off the capture
        for _ in range(2):
            _model(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _model(*static)
    for _ in range(3):
        fresh = _inputs(shape)
        for s, f in zip(static, fresh, strict=True):
            s.copy_(f)
        graph.replay()
        torch.cuda.synchronize()
        _close(out, _model_reference(*fresh))


def test_cuda_graph_in_place_add() -> None:
    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    add_into(x.clone(), y)  # warm up
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        add_into(x, y)
    for _ in range(2):
        start, fresh_y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        x.copy_(start)
        y.copy_(fresh_y)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(x, start + fresh_y, rtol=0, atol=0)


def test_compiled_gradients_cuda() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return gelu_mul(x.sin(), y) * x

    def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return gelu_mul_reference(x.sin(), y) * x

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    for shape in ((1000,), (3, 333)):
        x, y, g = (torch.randn(shape, device="cuda") for _ in range(3))
        results = []
        for f in (compiled, reference):
            xr, yr = x.clone().requires_grad_(), y.clone().requires_grad_()
            out = f(xr, yr)
            out.backward(g)
            results.append((out.detach(), xr.grad, yr.grad))
        for got, want in zip(*results, strict=True):
            _close(got, want)


def test_fake_cuda_tensors_compile_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = [0]
    real = launch_module.compile_kernel

    def counting(*args: Any, **kwargs: Any) -> Any:
        compiles[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(launch_module, "compile_kernel", counting)
    x, y, w = _inputs((7, 2500))
    with FakeTensorMode() as mode:
        out = _model(mode.from_tensor(x), mode.from_tensor(y), mode.from_tensor(w))
        assert is_fake(out) and out.shape == (7, 2500) and out.device == x.device
    assert compiles[0] == 0
