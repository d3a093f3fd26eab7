"""The straight-line function of a static graph (compiler/torch/wrapper.py): the same results as FX's
forward for every layout, including inputs laid out otherwise than traced."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from compiler.torch.backend import anvil
from compiler.torch.wrapper import lean_forward


def _attention(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    B, L, H = x.shape
    qkv = F.linear(x, w, b).view(B, L, 3, 4, H // 4).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    y = torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1) @ v
    return y.transpose(1, 2).reshape(B, L, H)[:, 1:] * 2


def _inputs(B: int = 2, L: int = 7, H: int = 16) -> tuple[torch.Tensor, ...]:
    return torch.randn(B, L, H), torch.randn(3 * H, H), torch.randn(3 * H)


def test_views_are_reinterpreted_and_match_the_fx_forward() -> None:
    args = _inputs()
    gm = make_fx(_attention, tracing_mode="fake")(*args)
    lean = lean_forward(gm, "attention")
    assert lean is not None
    fn, source = lean
    assert "_rt(" in source and "del " in source  # views in one step; values released after their last use
    want = gm(*args)
    got = fn(list(args))
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["padded", "offset"])
def test_an_input_laid_out_otherwise_than_traced_takes_the_ops_as_written(layout: str) -> None:
    args = _inputs()
    gm = make_fx(_attention, tracing_mode="fake")(*args)
    fn, _ = lean_forward(gm, "attention") or pytest.fail("no lean function")
    x = args[0]
    if layout == "padded":  # rows of a wider buffer: other strides (the graph's views still apply)
        other = torch.cat([x, torch.randn(*x.shape[:-1], 3)], -1)[..., :x.shape[-1]]
    else:  # a view into a larger buffer: storage offset 5
        other = torch.cat([torch.randn(5), x.flatten()])[5:].view(x.shape)
    assert other.stride() != x.stride() or other.storage_offset() != 0
    torch.testing.assert_close(fn([other, *args[1:]]), gm(other, *args[1:]), rtol=0, atol=0)


def test_training_through_the_backend_matches_eager(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    torch._dynamo.reset()
    x, w, b = (t.requires_grad_() for t in _inputs(3, 9, 32))
    out = torch.compile(_attention, backend=anvil)(x, w, b)
    out.backward(torch.ones_like(out))
    got = [out.detach(), x.grad, w.grad, b.grad]
    x2, w2, b2 = (t.detach().clone().requires_grad_() for t in (x, w, b))
    ref = _attention(x2, w2, b2)
    ref.backward(torch.ones_like(ref))
    for g, r in zip(got, [ref.detach(), x2.grad, w2.grad, b2.grad], strict=True):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-4)
    graphs = sorted(p.name for p in (tmp_path / "graphs").glob("*.py"))
    assert len(graphs) == 2, graphs  # the forward's function and the backward's


def test_graphs_with_symbolic_sizes_keep_the_fx_forward() -> None:
    gm = make_fx(lambda x: (x.view(-1) * 2).view(x.shape), tracing_mode="symbolic")(torch.randn(4, 6))
    assert lean_forward(gm) is None
