"""The W4A16 GEMV kernel's inner loop on the NVIDIA backend (device-free: PTX only): 128-bit
weight loads, no shared memory, no barriers, no int->float conversions."""

from __future__ import annotations

import re

import pytest

from compiler.backends.nvidia.toolchain import find_ptxas
from tools.kernels.int4 import awq_gemv_kernel

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

SIG = {"x_ptr": "*bf16", "qweight_ptr": "*i32", "qzeros_ptr": "*i32", "scales_ptr": "*fp16", "y_ptr": "*fp32",
       "M": "i32", "N": "i32:16", "K": "i32:16", "stride_xm": "i32:16", "stride_ym": "i32:16", "N8": "i32:16",
       "NG": "i32", "GROUPS_PER_SPLIT": "i32", "stride_ys": "i32:16", "MAGIC": "i32:16"}


def _inner_loop(ptx: str) -> str:
    """The PTX between the first loop label that a later branch jumps back to and that branch,
    innermost first (the shortest such span)."""
    spans = []
    for m in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx):
        start = ptx.find(m.group(1) + ":")
        if 0 <= start < m.start():
            spans.append(ptx[start:m.end()])
    assert spans, "no loop found"
    return min(spans, key=len)


@pytest.mark.parametrize(("block_n", "block_k", "unroll", "num_warps"), [(512, 8, 4, 4), (256, 8, 2, 2)])
def test_inner_loop_is_loads_and_arithmetic(block_n: int, block_k: int, unroll: int, num_warps: int) -> None:
    ck = awq_gemv_kernel.compile(SIG, {"G": 128, "BLOCK_K": block_k, "BLOCK_N": block_n, "UNROLL": unroll,
                                       "EXACT": False, "EVEN_N": True}, target="cuda:sm_90a", num_warps=num_warps)
    loop = _inner_loop(ck.asm["ptx"])
    assert len(re.findall(r"ld\.global\.v4\.b32", loop)) == unroll  # 16 bytes of weights per thread per row
    for bad in ("bar.sync", "st.shared", "ld.shared", "shfl", "cvt.rn.f32"):
        assert bad not in loop, bad
    assert ck.metadata["n_spills"] == 0
