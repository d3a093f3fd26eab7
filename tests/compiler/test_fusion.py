"""The fusion library alone: a plain graph and input layouts in, kernel source out, run by Anvil."""

from __future__ import annotations

import pytest
import torch

from compiler import compile_source
from compiler.fusion.emit import emit
from compiler.fusion.graph import FULL, ROW, Group, Layout, Op, Ref
from compiler.torch.runner import layout_of, layout_values


def _softmax_group() -> Group:
    x = Ref(0, input=True)
    g = Group("rows", inputs=[("float32", FULL)])
    g.ops = [Op("amax", (x,), "float32", ROW), Op("sub", (x, Ref(0)), "float32", FULL),
             Op("exp", (Ref(1),), "float32", FULL), Op("sum", (Ref(2),), "float32", ROW),
             Op("div", (Ref(2), Ref(3)), "float32", FULL)]
    g.outputs = [4, 3]
    return g


@pytest.mark.parametrize("rows,cols", [(1, 1), (7, 33), (64, 128), (3, 1000)])
def test_softmax_rows_kernel(rows: int, cols: int) -> None:
    x = torch.randn(rows, cols) * 4
    lay = layout_of(x, (0, False), (rows, cols), rows=True)
    k = emit(_softmax_group(), [lay], "softmax_rows")
    assert k.params[:2] == ("R", "C")
    fn = compile_source(k.source, "softmax_rows")
    out, den = torch.full_like(x, float("nan")), torch.full((rows, 1), float("nan"))
    block_c = 1 << max(0, (cols - 1).bit_length())
    values = {"R": rows, "C": cols, **layout_values(0, lay)}
    fn[((rows + 1) // 2,)](x, out, den, *[values[p] for p in k.params], ROWS=2, BLOCK_C=block_c)
    torch.testing.assert_close(out, torch.softmax(x, -1))
    torch.testing.assert_close(den, torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True))


def test_pointwise_kernel_with_broadcast_and_strided_inputs() -> None:
    a = torch.randn(5, 1, 7)  # broadcast along dim 1
    b = torch.randn(6, 5).t()  # (5, 6) transposed: strided
    domain = (5, 6, 7)
    g = Group("pointwise", inputs=[("float32", FULL), ("float32", FULL)])
    g.ops = [Op("mul", (Ref(0, True), Ref(1, True)), "float32"), Op("gelu", (Ref(0),), "float32"),
             Op("convert", (Ref(1),), "bfloat16")]
    g.outputs = [1, 2]
    lays = [layout_of(a, (0, False), domain, rows=False), layout_of(b[..., None], (0, False), domain, rows=False)]
    assert not lays[0].linear and not lays[1].linear
    k = emit(g, lays, "pw")
    fn = compile_source(k.source, "pw")
    out = torch.full(domain, float("nan"))
    out16 = torch.full(domain, float("nan"), dtype=torch.bfloat16)
    values = {"n": 210, **layout_values(0, lays[0]), **layout_values(1, lays[1])}
    fn[(1,)](a, b[..., None], out, out16, *[values[p] for p in k.params], BLOCK=256)
    want = torch.nn.functional.gelu(a * b[..., None])
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(out16, want.to(torch.bfloat16))


def test_layouts_merge_contiguous_dims() -> None:
    x = torch.randn(4, 5, 6)
    assert layout_of(x, (0, False), (4, 5, 6), rows=False) == Layout(True, ((120, 1),))
    bias = torch.randn(6)
    assert layout_of(bias, (2, False), (4, 5, 6), rows=True) == Layout(False, (), 1, outer=False)
    rstd = torch.randn(4, 5, 1)
    assert layout_of(rstd, (0, False), (4, 5, 6), rows=True) == Layout(False, ((20, 1),), 0)
    mask = torch.randn(5, 6)  # broadcast over the outer dim: nothing to decompose there
    assert layout_of(mask, (1, False), (4, 5, 6), rows=False) == Layout(False, ((30, 1),), outer=False)
    col = torch.randn(4, 1, 6)
    assert layout_of(col, (0, False), (4, 5, 6), rows=False) == Layout(False, ((4, 6), (5, 0), (6, 1)))
