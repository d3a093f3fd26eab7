"""torch.compile(backend="anvil"): outputs and gradients match eager torch on the fused patterns.

Every output the fused kernels allocate starts as NaN (the `anvil_poisoned` fixture), so an element a
kernel fails to write shows up as a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from compiler.torch.backend import anvil

SHAPES = [(4, 8, 64), (5, 37), (3, 1000)]


pytestmark = pytest.mark.usefixtures("anvil_poisoned")


def _check(fn: Callable[..., torch.Tensor], *inputs: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-5,
           grad: bool = True) -> None:
    """fn compiled with the anvil backend against fn in eager torch: outputs, then input gradients."""
    want_in = [t.detach().clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
    got_in = [t.detach().clone().requires_grad_(grad and t.is_floating_point()) for t in inputs]
    want = fn(*want_in)
    got = torch.compile(fn, backend=anvil)(*got_in)
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol)
    if grad:
        g = torch.randn_like(want)
        want.backward(g)
        got.backward(g)
        for a, b in zip(got_in, want_in, strict=True):
            if b.grad is not None:
                torch.testing.assert_close(a.grad, b.grad, atol=atol * 10, rtol=rtol * 10)


@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_gelu(shape: tuple[int, ...]) -> None:
    C = shape[-1]
    w, b = torch.randn(C), torch.randn(C)
    _check(lambda x, w, b: F.gelu(F.layer_norm(x, (C,), w, b, 1e-5)), torch.randn(shape), w, b)


@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_swiglu(shape: tuple[int, ...]) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
        return F.silu(h) * up

    _check(fn, torch.randn(shape), torch.randn(shape[-1]), torch.randn(shape))


@pytest.mark.parametrize("shape", SHAPES)
def test_scaled_masked_softmax_and_log_softmax(shape: tuple[int, ...]) -> None:
    mask = torch.randn(shape[-2:]) if len(shape) > 2 else torch.randn(shape[-1])
    _check(lambda x, m: torch.softmax(x * 0.125 + m, -1), torch.randn(shape), mask)
    _check(lambda x: torch.log_softmax(x, dim=-1), torch.randn(shape))


def test_bias_gelu_tanh_and_pointwise_broadcasts() -> None:
    x, b = torch.randn(6, 33, 17), torch.randn(17)
    _check(lambda x, b: F.gelu(x + b, approximate="tanh"), x, b)
    _check(lambda x, y: torch.where(x > 0, torch.exp(-x.abs()) * y, torch.tanh(y) / (1 + x * x)),
           torch.randn(7, 1, 5), torch.randn(1, 9, 5))


def test_linear_bias_gelu_and_cross_entropy() -> None:
    lin = torch.nn.Linear(48, 40)
    x, target = torch.randn(13, 48), torch.randint(0, 40, (13,))
    _check(lambda x: F.gelu(lin(x)), x)
    _check(lambda x: F.cross_entropy(lin(x), target), x, atol=1e-5)


def test_transformer_encoder_layer_forward_and_backward() -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True, activation="gelu")
    x = torch.randn(3, 11, 64)
    _check(lambda x: layer(x), x, atol=1e-4, rtol=1e-4)


def test_bfloat16_rounds_where_torch_does() -> None:
    x, w = torch.randn(9, 130, dtype=torch.bfloat16), torch.randn(130, dtype=torch.bfloat16)
    _check(lambda x, w: F.silu(F.rms_norm(x, (130,), w, 1e-6)) if hasattr(F, "rms_norm") else F.silu(x * w),
           x, w, atol=2e-2, rtol=2e-2, grad=False)


def test_strided_inputs() -> None:
    x = torch.randn(40, 24).t()  # rows of stride 1, columns of stride 24
    _check(lambda x: torch.softmax(x, -1) * 2 + 1, x)
    _check(lambda x: torch.sigmoid(x) * x, torch.randn(8, 6, 10).permute(2, 0, 1))


def test_rows_wider_than_a_kernel_holds_fall_back_to_torch() -> None:
    _check(lambda x: torch.softmax(x, -1), torch.randn(2, 20000), grad=False)


def test_dynamic_sizes_reuse_one_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 3, -1) + 1

    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    compiled = torch.compile(fn, backend=anvil, dynamic=True)
    for rows, cols in [(3, 17), (9, 40), (2, 300)]:
        x = torch.randn(rows, cols)
        torch.testing.assert_close(compiled(x), fn(x))
    kernels = list(tmp_path.glob("*.py"))
    assert len(kernels) == 1, kernels  # one pattern: contiguous rows of any size
    text = kernels[0].read_text()
    assert "tl.max(" in text and "tl.exp(" in text and "@triton.jit" in text


def test_mark_dynamic() -> None:
    x = torch.randn(6, 50)
    torch._dynamo.mark_dynamic(x, 0)
    compiled = torch.compile(lambda x: F.gelu(x) * x.sum(-1, keepdim=True), backend=anvil)
    for n in (6, 11):
        y = torch.randn(n, 50)
        torch.testing.assert_close(compiled(y if n != 6 else x), F.gelu(y if n != 6 else x)
                                   * (y if n != 6 else x).sum(-1, keepdim=True))


def test_entry_point_registers_the_backend() -> None:
    from importlib.metadata import entry_points

    names = [e.name for e in entry_points(group="torch_dynamo_backends")]
    assert "anvil" in names
    f = torch.compile(lambda x: torch.relu(x) * 2, backend="anvil")
    x = torch.randn(100)
    torch.testing.assert_close(f(x), torch.relu(x) * 2)


def test_each_kernel_text_is_compiled_once_and_dumped_under_its_own_name(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    f = torch.compile(lambda x, b: torch.relu(x + b), backend=anvil)
    f(torch.randn(8, 3), torch.randn(3))
    f(torch.randn(8, 3), torch.randn(8, 3))  # a second graph (b's shape changed): another kernel text
    assert len(list(tmp_path.glob("*.py"))) == 2

    def two_layers(x: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.layer_norm(F.gelu(F.layer_norm(x, (16,))), (16,)))

    for p in tmp_path.glob("*.py"):
        p.unlink()
    torch._dynamo.reset()
    torch.compile(two_layers, backend=anvil)(torch.randn(4, 16))
    assert len(list(tmp_path.glob("*.py"))) == 1  # both layers run the same kernel


@pytest.mark.parametrize("shape", [(4, 8, 64), (5, 37), (3, 7, 1000)])
def test_column_sums_of_bias_and_weight_gradients(shape: tuple[int, ...], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    C = shape[-1]
    _check(lambda x, w, b: F.layer_norm(x, (C,), w, b) * 2, torch.randn(shape), torch.randn(C), torch.randn(C))
    _check(lambda x, b: (x + b).sum(dim=list(range(len(shape) - 1))) * x.amax(), torch.randn(shape), torch.randn(C))
    assert any("for r0 in range(0, R, BLOCK_R)" in p.read_text() for p in tmp_path.glob("*.py"))


def test_reductions_of_broadcast_inputs_count_every_element() -> None:
    rows = torch.randn(5, 1).expand(5, 64)  # constant along each row: stride 0
    cols = torch.randn(1, 48).expand(33, 48)  # constant down each column
    _check(lambda t: t.sum(-1) + t.amax(-1), rows, grad=False)
    _check(lambda t: t.sum(0) * 2, cols, grad=False)


def test_mixed_dtypes_comparisons_and_integer_inputs() -> None:
    x, i = torch.randn(7, 19), torch.randint(-5, 5, (7, 19))
    _check(lambda x, i: torch.where(i > 0, x * i, x / (i.abs() + 1)) + (i == 2).float(), x, i, grad=False)
    _check(lambda i: (i * 3 + 1).sum(-1), i, grad=False)


@pytest.mark.parametrize("shape", [(4, 8, 64), (3, 7, 100)])
def test_upcasts_with_a_memory_format_are_fused(shape: tuple[int, ...], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A bf16 layer norm's backward graph upcasts its inputs with `_to_copy(dtype=float32,
    memory_format=contiguous_format)`: those conversions belong to the fused kernels that read them,
    not to torch copies of whole tensors beside them."""
    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    torch._dynamo.reset()
    C = shape[-1]
    x, w, b = torch.randn(shape).bfloat16(), torch.randn(C).bfloat16(), torch.randn(C).bfloat16()
    _check(lambda x, w, b: F.gelu(F.layer_norm(x, (C,), w, b)), x, w, b, atol=2e-2, rtol=2e-2)
    graphs = sorted((tmp_path / "graphs").glob("*.py"))
    assert len(graphs) == 2  # forward and backward
    assert all("memory_format=" not in g.read_text() for g in graphs)
    _check(lambda x: x.to(torch.float32, memory_format=torch.contiguous_format) * 2, x, grad=False)
    _check(lambda x: x.t().to(torch.float32, memory_format=torch.preserve_format).t() + 1, x[0], grad=False)


@pytest.mark.parametrize("chunks", [2, 5])
@pytest.mark.parametrize("shape", [(4, 8, 64), (5, 37), (3, 70, 100)])
def test_column_sums_split_over_rows(chunks: int, shape: tuple[int, ...], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU a column reduction runs as partial results over chunks of rows, then the per-column
    work on them (fusion/split.py): forced here on the CPU backend, with chunk counts that do not
    divide the rows."""
    from compiler.torch import runner

    monkeypatch.setattr(runner, "cols_split", lambda R, C, device: chunks)
    monkeypatch.setattr(runner, "_SHARED", {})  # compiled (and dumped) afresh
    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    torch._dynamo.reset()  # graphs compiled by an earlier parametrization planned their launches then
    C = shape[-1]
    lead = list(range(len(shape) - 1))
    _check(lambda x, w, b: F.layer_norm(x, (C,), w, b) * 2, torch.randn(shape), torch.randn(C), torch.randn(C))
    _check(lambda x, b: (x + b).sum(dim=lead) * x.amax(), torch.randn(shape), torch.randn(C))
    _check(lambda x: torch.sigmoid(x.mean(dim=lead)) + x.amax(dim=lead) - x.amin(dim=lead), torch.randn(shape),
           grad=False)
    _check(lambda x: (x * 2).sum(dim=lead).to(torch.bfloat16), torch.randn(shape), grad=False, atol=1e-2, rtol=1e-2)
    i = torch.randint(-50, 50, shape)
    _check(lambda i: (i * 3 + 1).sum(dim=lead), i, grad=False)
    texts = [p.read_text() for p in tmp_path.glob("*.py")]
    assert any("chunk = tl.program_id(1)" in t for t in texts)


def test_layer_norm_backward_is_one_row_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backward's two row sums (of the gradient times the weight, and of that times the normalized
    input) start in groups of their own and end in one kernel: one read of each row."""
    from compiler.torch import runner

    monkeypatch.setattr(runner, "_SHARED", {})
    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    torch._dynamo.reset()
    x, r, w, b = (torch.randn(shape).bfloat16() for shape in [(6, 10, 96), (6, 10, 96), (96,), (96,)])
    _check(lambda x, r, w, b: F.layer_norm(x + r, (96,), w, b), x, r, w, b, atol=2e-2, rtol=2e-2)
    row_kernels = [p for p in tmp_path.glob("*.py") if "axis=1" in p.read_text()]
    assert len(row_kernels) == 2  # forward, backward
