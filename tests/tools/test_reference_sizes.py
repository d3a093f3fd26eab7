"""The sizing pass of reference expressions: every size is known on the meta device before anything runs."""

from __future__ import annotations

import resource
from typing import Any

import anyio
import pytest
import torch

from server.demo import VECTOR_ADD
from tools.bench import benchmark
from tools.errors import ToolInputError
from tools.launch import launch_kernel
from tools.limits import Limits
from tools.models import BenchmarkRequest, LaunchRequest
from tools.reference import check_sizes, evaluate, evaluate_expression, parse_reference
from tools.runtime import Runtime


@pytest.fixture
def env() -> dict[str, Any]:
    return {
        "x": torch.randn(64, 32),
        "v": torch.randn(1000),
        "i": torch.randint(0, 4, (64,)),
        "n": 64,
    }


def _refused(expression: str, env: dict[str, Any], **limits: int) -> str:
    """The error of the sizing pass alone: it never computes anything real."""
    ref = parse_reference(expression, names=list(env))
    with pytest.raises(ToolInputError) as info:
        check_sizes(ref, env, **limits)
    text = str(info.value)
    assert expression in text and "^" in text and "(column " in text  # located, with a caret
    return text


GROWING = [
    "torch.eye(n=40000, m=40000)",
    "torch.eye(40000)",
    "torch.arange(end=2**29)",
    "torch.arange(0, 2**29)",
    "torch.arange(start=0, end=2**30, step=1)",
    "torch.full(size=(2**15, 2**15), fill_value=1.0)",
    "torch.zeros((2**15, 2**15))",
    "torch.ones(2**14, 2**14)",
    "torch.linspace(0, 1, steps=2**30)",
    "torch.zeros_like(x).repeat(2**12, 2**12)",
    "x.tile((2**12, 2**12))",
    "torch.tile(x, (2**12, 2**12))",
    "x.repeat_interleave(2**20)",
    "torch.repeat_interleave(v, 2**20)",
    "x.expand(2**20, 64, 32)",
    "torch.kron(v, v.repeat(200))",
    "torch.outer(v.repeat(100), v.repeat(100))",
    "torch.einsum('i,j->ij', v.repeat(100), v.repeat(100))",
    "F.pad(x, (0, 2**30))",
    "torch.diag(v.repeat(100))",
    "torch.broadcast_to(v, (2**20, 1000))",
    "v[:, None, None] * v[None, :, None] * v[None, None, :]",
]


@pytest.mark.parametrize("expression", GROWING)
def test_growing_calls_are_refused_before_they_run(env: dict[str, Any], expression: str) -> None:
    text = _refused(expression, env)
    assert "the limit (max_reference_elements) is" in text


def test_nothing_is_allocated_for_refused_expressions(env: dict[str, Any]) -> None:
    """Through evaluate (sizing pass, then the real one): peak RSS grows by far less than one refused tensor."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    for expression in GROWING:
        with pytest.raises(ToolInputError):
            evaluate_expression(expression, env)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 256, f"peak RSS grew by {grown_mib:.0f} MiB"


@pytest.mark.parametrize(
    "expression",
    [
        "torch.zeros(x.sum().int())",
        "torch.zeros((n, x.sum().int()))",
        "torch.repeat_interleave(x, i, dim=0)",
        "x.repeat_interleave(i, dim=0)",
        "torch.arange(int(x.max()))",
        "x / float(x.sum())",
        "x[x > 0]",
        "x[: x.sum().int()]",
        "torch.where(x > 0)[0]",
        "torch.full((4,), x.max())",
        "x.repeat(x.sum().int(), 1)",
    ],
)
def test_sizes_computed_from_tensor_values_are_refused(env: dict[str, Any], expression: str) -> None:
    text = _refused(expression, env)
    assert "depends on tensor values" in text or "not an allowed function" in text
    if "depends" in text:
        assert "plain numbers" in text


@pytest.mark.parametrize(
    "expression",
    ["[x] * 10**9", "(1,) * 10**9", "'ab' * 10**9", "x.shape * 10**9", "(x, x) + (x,) * 10**9", "[1] * n"],
)
def test_python_sequences_never_grow(env: dict[str, Any], expression: str) -> None:
    text = _refused(expression, env)
    assert "operator needs tensors or numbers" in text


def test_all_intermediates_together_are_bounded(env: dict[str, Any]) -> None:
    x_bytes = 64 * 32 * 4
    text = _refused("torch.cat([x, x, x, x, x, x, x, x])", env, max_bytes=4 * x_bytes)
    assert "max_reference_bytes" in text and "together" in text
    text = _refused("((x + 1) * 2 - 3) / 4", env, max_bytes=3 * x_bytes)
    assert "(column 1)" in text  # the fourth intermediate is the division, the outermost node
    _refused("x.expand(8, 64, 32).contiguous()", env, max_bytes=4 * x_bytes)
    # Views and no-op conversions of an argument allocate nothing.
    check_sizes(parse_reference("x.T[1:, ::2].float().expand(8, 31, 32)", names=list(env)), env, max_bytes=1)


@pytest.mark.parametrize(
    ("shapes", "expression"),
    [
        ({"a": (1, 1024, 1024), "b": (1024, 1024, 1)}, "a @ b"),
        ({"a": (1, 1024, 1024), "b": (1024, 1024, 1)}, "torch.matmul(a, b)"),
        ({"a": (1, 16384, 8), "b": (1, 16384, 8)}, "F.scaled_dot_product_attention(a, b, b)"),
        ({"a": (1, 1, 512, 512), "b": (1, 1, 256, 256)}, "F.conv2d(a, b)"),
        ({"a": (1, 4, 65536), "b": (4, 4, 4096)}, "F.conv1d(a, b)"),
    ],
)
def test_work_space_beyond_the_result_is_bounded(shapes: dict[str, tuple[int, ...]], expression: str) -> None:
    env = {name: torch.empty(shape) for name, shape in shapes.items()}
    assert "work space" in _refused(expression, env)


def test_meta_pass_allocates_no_real_tensor(env: dict[str, Any]) -> None:
    for expression in ("torch.zeros_like(x, device='cpu') + x", "torch.ones(3, device='cpu')", "x.sum(dim=0)"):
        out = check_sizes(parse_reference(expression, names=list(env)), env)
        assert out.device.type == "meta"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("torch.arange(end=n) * 2", lambda e: torch.arange(64) * 2),
        ("torch.eye(n=4, m=3)", lambda e: torch.eye(4, 3)),
        ("torch.full(size=(2, n), fill_value=3.0)", lambda e: torch.full((2, 64), 3.0)),
        ("x.repeat_interleave(2, dim=0)", lambda e: e["x"].repeat_interleave(2, dim=0)),
        ("torch.einsum('ij,kj->ik', x, x)", lambda e: e["x"] @ e["x"].T),
        ("x[i]", lambda e: e["x"][e["i"]]),
        ("x / x.sum()", lambda e: e["x"] / e["x"].sum()),
        ("torch.sort(v).values[: x.shape[0]]", lambda e: torch.sort(e["v"]).values[:64]),
        ("torch.max(x, dim=1).values", lambda e: e["x"].max(dim=1).values),
        ("x.expand(2, 64, 32).contiguous().sum(0)", lambda e: e["x"] * 2),
    ],
)
def test_plain_sizes_still_evaluate(env: dict[str, Any], expression: str, expected: Any) -> None:
    torch.testing.assert_close(evaluate_expression(expression, env), expected(env))


def test_a_sized_reference_skips_the_meta_pass(env: dict[str, Any]) -> None:
    ref = parse_reference("x.sum(dim=1)", names=list(env))
    with pytest.raises(ToolInputError, match="max_reference_bytes"):
        evaluate(ref, env, max_bytes=4)
    torch.testing.assert_close(evaluate(ref, env, max_bytes=1 << 20, sized=True), env["x"].sum(dim=1))


N = 1000
ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [N]},
    "y_ptr": {"shape": [N]},
    "out_ptr": {"shape": [N], "init": "empty"},
    "n": N,
}


def _launch(rt: Runtime, reference: str) -> str:
    req = LaunchRequest.model_validate(
        {
            "source": VECTOR_ADD,
            "constexprs": {"BLOCK": 256},
            "grid": ["cdiv(n, BLOCK)"],
            "args": ARGS,
            "reference": {"out_ptr": reference},
        }
    )
    with pytest.raises(ToolInputError) as info:
        anyio.run(launch_kernel, rt, req)
    return str(info.value)


def test_launch_refuses_oversized_references() -> None:
    rt = Runtime(limits=Limits(max_reference_bytes=1 << 20))
    assert "max_reference_elements" in _launch(rt, "x_ptr + torch.eye(n=40000, m=40000).sum()")
    assert "max_reference_bytes" in _launch(rt, "x_ptr + torch.zeros(1000, 1000).sum()")
    assert "depends on tensor values" in _launch(rt, "x_ptr + torch.zeros(x_ptr.sum().int()).sum()")


def test_benchmark_refuses_an_oversized_baseline() -> None:
    rt = Runtime(limits=Limits(max_reference_bytes=1 << 20))
    req = BenchmarkRequest.model_validate(
        {
            "source": VECTOR_ADD,
            "constexprs": {"BLOCK": 256},
            "grid": ["cdiv(n, BLOCK)"],
            "args": ARGS,
            "baseline": "x_ptr + torch.arange(end=2**29).sum()",
            "warmup_ms": 1,
            "rep_ms": 2,
        }
    )
    with pytest.raises(ToolInputError) as info:
        anyio.run(benchmark, rt, req)
    assert "max_reference_elements" in str(info.value) and "baseline" in str(info.value)
