"""The fusion library's matmul template alone: (M..., K) @ (K, N) with an epilogue of ops.py's ops,
the operands and epilogue inputs read through their layouts, run by Anvil against torch."""

from __future__ import annotations

import pytest
import torch

from compiler import compile_source
from compiler.fusion.emit import Names
from compiler.fusion.graph import FULL, Group, Layout, Op, Ref
from compiler.fusion.matmul import emit_matmul, matmul_config
from compiler.torch.runner import layout_of, layout_values


def _run(group: Group, operands: list[torch.Tensor], domains: list[tuple[int, ...]], out: torch.Tensor,
         blocks: tuple[int, int, int], names: Names | None = None) -> str:
    lays = [layout_of(t, (len(d) - t.dim(), False), d, rows=True) for t, d in zip(operands, domains, strict=True)]
    k = emit_matmul(group, lays, "mm_epilogue", names=names)
    fn = compile_source(k.source, "mm_epilogue")
    M, N = out[..., 0].numel(), out.shape[-1]
    values = {"M": M, "N": N, "K": operands[0].shape[-1]}
    prefixes = names.prefixes if names else [f"in{i}" for i in range(len(lays))]
    for i, lay in enumerate(lays):
        values.update(layout_values(i, lay, prefixes[i]))
    bm, bn, bk = blocks
    fn[((M + bm - 1) // bm, (N + bn - 1) // bn)](*operands, out, *[values[p] for p in k.params],
                                                  BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return k.source


@pytest.mark.parametrize(("M", "N", "K"), [(1, 1, 1), (17, 33, 5), (64, 64, 64), (70, 129, 100)])
def test_bias_gelu_epilogue(M: int, N: int, K: int) -> None:
    x, w, b = torch.randn(M, K), torch.randn(N, K), torch.randn(N)
    g = Group("matmul", inputs=[("float32", FULL)] * 3)
    g.ops = [Op("dot", (Ref(0, True), Ref(1, True)), "float32"), Op("add", (Ref(0), Ref(2, True)), "float32"),
             Op("gelu", (Ref(1),), "float32")]
    g.outputs = [2]
    out = torch.full((M, N), float("nan"))
    source = _run(g, [x, w.t(), b], [(M, K), (K, N), (M, N)], out, (32, 32, 16),
                  Names(("x_ptr", "w_ptr", "b_ptr"), ("out_ptr",), ("x", "w", "b"), ("x", "w", "b")))
    assert "def mm_epilogue(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K" in source
    assert ("w_cstride" in source) == (N > 1 and K > 1)  # the transposed weight: a stride along N
    want = torch.nn.functional.gelu(x.double() @ w.double().t() + b.double())
    torch.testing.assert_close(out.double(), want, atol=1e-4, rtol=1e-4)


def test_batched_left_operand_bf16_and_a_residual() -> None:
    """A (B, T, K) left operand, bf16 operands (float32 accumulation), a residual added, stored in bf16."""
    B, T, K, N = 3, 7, 40, 24
    x = torch.randn(B, T, K).bfloat16()
    w = torch.randn(K, N).bfloat16()
    r = torch.randn(B, T, N)
    g = Group("matmul", inputs=[("bfloat16", FULL), ("bfloat16", FULL), ("float32", FULL)])
    g.ops = [Op("dot", (Ref(0, True), Ref(1, True)), "float32"), Op("add", (Ref(0), Ref(2, True)), "float32"),
             Op("convert", (Ref(1),), "bfloat16")]
    g.outputs = [2]
    out = torch.full((B, T, N), float("nan")).bfloat16()
    _run(g, [x, w, r], [(B, T, K), (K, N), (B, T, N)], out, (16, 16, 16))
    want = (x.double() @ w.double() + r.double()).bfloat16()
    torch.testing.assert_close(out, want, atol=2e-2, rtol=2e-2)


def test_a_group_without_one_dot_is_refused() -> None:
    g = Group("matmul", inputs=[("float32", FULL)])
    g.ops = [Op("exp", (Ref(0, True),), "float32")]
    g.outputs = [0]
    with pytest.raises(ValueError, match="one dot op"):
        emit_matmul(g, [Layout(False)], "k")
    with pytest.raises(ValueError, match="takes a matmul group"):
        emit_matmul(Group("rows"), [], "k")


def test_config_fits_the_problem() -> None:
    assert matmul_config(8, 8, 8, "cpu")[:3] == (16, 16, 16)
    assert matmul_config(4096, 4096, 4096, "cpu")[:3] == (64, 64, 32)
    bm, bn, bk, warps, stages = matmul_config(4096, 4096, 4096, "cuda")
    assert (bm, bn, bk, warps) == (128, 128, 64, 8) and stages > 1
    assert matmul_config(4096, 4096, 4096, "cuda", itemsize=4)[2] == 32
