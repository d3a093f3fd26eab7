"""Batched (3-D) tl.dot on the NVIDIA backend: one 2-D tensor-core dot per batch, with every
operand's batch dim held in registers (the layout algebra checked exactly, the PTX assembled)."""

from __future__ import annotations

import itertools

import pytest

import compiler
from compiler.backends.nvidia.dot import with_batch
from compiler.backends.nvidia.tiles import num_regs
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.layouts import LANE, REGISTER, WARP, blocked_layout
from compiler.layouts.distributed import mma_v2_accumulator

SRC = '''
import triton
import triton.language as tl

@triton.jit
def bmm(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rb, rm, rn, rk = tl.arange(0, B), tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rb[:, None, None] * M * K + rm[None, :, None] * K + rk[None, None, :])
    b = tl.load(b_ptr + rb[:, None, None] * K * N + rk[None, :, None] * N + rn[None, None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rb[:, None, None] * M * N + rm[None, :, None] * N + rn[None, None, :], c)
'''


@pytest.mark.parametrize("layout", [mma_v2_accumulator((64, 32), (2, 2)),
                                    blocked_layout((16, 32), [1, 4], [4, 8], [4, 1], [1, 0])])
@pytest.mark.parametrize("nb", [1, 2, 8])
def test_with_batch_puts_batch_b_in_registers_b_times_n(layout, nb) -> None:  # type: ignore[no-untyped-def]
    wide = with_batch(layout, nb)
    n = num_regs(layout)
    assert wide.out_shape == (nb, *layout.out_shape) and num_regs(wide) == n * nb
    lanes, warps = layout.in_dim_size(LANE), layout.in_dim_size(WARP)
    for i, r, lane, warp in itertools.product(range(nb), range(n), range(lanes), range(warps)):
        got = wide.apply({REGISTER: i * n + r, LANE: lane, WARP: warp})
        assert got == (i, *layout.apply({REGISTER: r, LANE: lane, WARP: warp}))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
@pytest.mark.parametrize("arch,warps,instr,per_batch", [
    # 4 warps of 16x32: 4 instructions per k16 step, 2 steps
    ("sm_80", 4, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 4 * 2),
    # one warpgroup, one 64-row slab: 1 wgmma per k16 step
    ("sm_90a", 4, "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", 2),
    # 2 warps (no warpgroup): mma.sync, 2 warps of 32x32: 2 x 4 instructions per k16 step
    ("sm_90a", 2, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 8 * 2),
])
def test_batched_dot_assembles(arch: str, warps: int, instr: str, per_batch: int) -> None:
    k = compiler.compile_source(SRC, kernel="bmm", filename="bmm.py")
    ck = k.compile({"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}, {"B": 4, "M": 64, "N": 32, "K": 32},
                   target=f"cuda:{arch}", num_warps=warps)
    ptx = ck.asm["ptx"]
    assert ptx.count(instr) == 4 * per_batch
    assert ck.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_small_batched_dot_uses_cuda_cores() -> None:
    k = compiler.compile_source(SRC, kernel="bmm", filename="bmm.py")
    ck = k.compile({"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}, {"B": 2, "M": 8, "N": 8, "K": 16},
                   target="cuda:sm_90a", num_warps=1)
    assert "fma.rn.f32" in ck.asm["ptx"] and "mma" not in ck.asm["ptx"]
