"""tl.reshape on the NVIDIA backend relabels the operand's layout: no shared memory, no barriers
(device-free: layouts and PTX only; the GPU runs are in tests/gpu/test_nvidia_reshape.py)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest

from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.layouts import LANE, REGISTER, WARP, blocked_layout
from compiler.layouts.shape import reshaped_layout

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reshape_kernels import reshape_reduce, round_trip  # noqa: E402

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")


@pytest.mark.parametrize(("shape", "new"), [((64, 32), (2048,)), ((8, 16, 4), (32, 16)), ((256,), (4, 8, 8)),
                                            ((32, 32), (8, 4, 2, 16))])
def test_reshaped_layout_keeps_every_element_in_place(shape: tuple[int, ...], new: tuple[int, ...]) -> None:
    rank = len(shape)
    spt = [1] * rank
    spt[-1] = min(4, shape[-1])
    tpw = [1] * rank
    lanes = 32
    for d in reversed(range(rank)):
        t = min(lanes, max(1, shape[d] // spt[d]))
        tpw[d], lanes = t, lanes // t
    tpw[0] *= lanes
    wpc = [1] * rank
    wpc[0] = 4
    lay = blocked_layout(shape, spt, tpw, wpc, list(reversed(range(rank))))
    out = reshaped_layout(lay, new)
    assert out is not None and out.out_shape == new

    def flat(p: tuple[int, ...], s: tuple[int, ...]) -> int:
        i = 0
        for c, n in zip(p, s, strict=True):
            i = i * n + c
        return i

    sizes = [lay.in_dim_size(n) for n in (REGISTER, LANE, WARP)]
    for r, ln, w in itertools.product(*(range(s) for s in sizes)):
        hw = {REGISTER: r, LANE: ln, WARP: w}
        assert flat(lay.apply(hw), shape) == flat(out.apply(hw), new)


def test_reshaped_layout_refuses_other_sizes() -> None:
    lay = blocked_layout((16, 16), [1, 4], [4, 8], [4, 1], [1, 0])
    assert reshaped_layout(lay, (128,)) is None  # element count differs
    assert reshaped_layout(lay, (3, 64)) is None  # not a power of two


@needs_ptxas
@pytest.mark.parametrize("num_warps", [1, 4])
def test_reshape_moves_no_data(num_warps: int) -> None:
    ck = round_trip.compile({"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"A": 4, "B": 8, "C": 32},
                            target="cuda:sm_90a", num_warps=num_warps)
    ptx = ck.asm["ptx"]
    assert ck.metadata["shared"] == 0
    assert "bar.sync" not in ptx and "st.shared" not in ptx and "ld.shared" not in ptx
    assert "ld.global.v4" in ptx and "st.global.v4" in ptx  # still 128-bit accesses after relabelling


@needs_ptxas
def test_reshape_of_a_reduction_operand_needs_no_conversion() -> None:
    # [R, C] -> [R, C // S, S]: each thread holds S = 4 consecutive columns in registers, so the sum
    # over the last dim is within each thread: no shuffles, and no shared memory before it.
    ck = reshape_reduce.compile({"x_ptr": "*fp32", "rows_ptr": "*fp32", "grp_ptr": "*fp32"},
                                {"R": 4, "C": 256, "S": 4}, target="cuda:sm_90a", num_warps=1)
    ptx = ck.asm["ptx"]
    body = ptx[:ptx.index("shfl")] if "shfl" in ptx else ptx
    assert "ld.global.v4.b32" in body
    first_add = body.index("add.f32")
    assert "bar.sync" not in body[:first_add] and "st.shared" not in body[:first_add]
