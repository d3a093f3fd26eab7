"""The W4A16 GEMV kernel's inner loop on the NVIDIA backend (device-free: PTX assembled by ptxas):
128-bit weight loads, no shared memory, no barriers, no int->float conversions; the packed bf16
path's instructions per weight."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from compiler.backends.nvidia.toolchain import find_ptxas
from tools.kernels.int4 import awq_gemv_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ptx_loops import inner_loop  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

SIG = {"x_ptr": "*bf16", "qweight_ptr": "*i32", "qzeros_ptr": "*i32", "scales_ptr": "*i32", "y_ptr": "*fp32",
       "M": "i32", "N": "i32:16", "K": "i32:16", "stride_xm": "i32:16", "stride_ym": "i32:16", "N8": "i32:16",
       "NG": "i32", "GROUPS_PER_SPLIT": "i32", "stride_ys": "i32:16", "MAGIC": "i32:16"}


@pytest.mark.parametrize(("block_n", "block_k", "unroll", "num_warps"), [(512, 8, 4, 4), (256, 8, 2, 2)])
def test_inner_loop_is_loads_and_arithmetic(block_n: int, block_k: int, unroll: int, num_warps: int) -> None:
    ck = awq_gemv_kernel.compile(SIG, {"G": 128, "BLOCK_K": block_k, "BLOCK_N": block_n, "UNROLL": unroll,
                                       "EXACT": False, "EVEN_N": True}, target="cuda:sm_90a", num_warps=num_warps)
    loop = inner_loop(ck.asm["ptx"])
    assert len(re.findall(r"ld\.global\.v4\.b32", loop)) == unroll  # 16 bytes of weights per thread per row
    for bad in ("bar.sync", "st.shared", "ld.shared", "shfl", "cvt.rn.f32"):
        assert bad not in loop, bad
    assert ck.metadata["n_spills"] == 0


def _instructions(loop: str) -> list[str]:
    """The PTX instructions of `loop`, one per entry (inline-asm blocks split into theirs)."""
    out = []
    for line in loop.splitlines():
        for part in line.replace("{", ";").replace("}", ";").split(";"):
            part = part.strip()
            if part and not part.startswith(("$", "//", ".")):
                out.append(part)
    return out


@pytest.mark.parametrize(("subnormal", "per_weight"), [(False, 3.5), (True, 2.8)])
def test_packed_bf16inner_loop(subnormal: bool, per_weight: float) -> None:
    """Two weights per integer op and per bf16x2 subtract and FMA: 128 weights per thread and step
    (4 rows of 4 words), 64 of each packed op."""
    ck = awq_gemv_kernel.compile(SIG, {"G": 128, "BLOCK_K": 8, "BLOCK_N": 512, "UNROLL": 4, "EXACT": False,
                                       "EVEN_N": True, "PACKED": True, "SUBNORMAL": subnormal, "ASM": True},
                                 target="cuda:sm_90a", num_warps=4)
    loop = inner_loop(ck.asm["ptx"])
    assert len(re.findall(r"ld\.global\.v4\.b32", loop)) == 4
    assert len(re.findall(r"fma\.rn\.bf16x2", loop)) == 64
    assert len(re.findall(r"sub\.rn\.bf16x2", loop)) == 64
    for bad in ("bar.sync", "st.shared", "ld.shared", "shfl", "cvt.rn.f32"):
        assert bad not in loop, bad
    assert len(_instructions(loop)) / 128 <= per_weight
    assert ck.metadata["n_spills"] == 0
