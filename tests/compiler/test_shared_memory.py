"""tl.extra.cuda.shared_memory: shared memory a program holds for inline assembly (compiled here;
tests/gpu/test_gpu_shared_memory.py runs it)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import compiler
from compiler.backends.nvidia.toolchain import find_ptxas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_memory_kernels import bad_size, held_regions, held_with_pipeline  # noqa: E402

SIG = {"x_ptr": "*i32", "y_ptr": "*i32", "sum_ptr": "*i32", "addr_ptr": "*i32"}


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
def test_regions_lie_below_the_scratch_in_dynamic_shared_memory() -> None:
    """Two regions (3000 and 100 bytes: 1024-byte aligned, at offsets 0 and 3072 of the dynamic
    shared memory), and the cross-warp sum's scratch above them: the launch asks for all of it."""
    ck = held_regions.compile(SIG, {"A": 3000, "B": 100, "NW": 4}, target="cuda:sm_90a", num_warps=4)
    ptx = ck.asm["ptx"]
    assert ".extern .shared .align 1024 .b8 __anvil_smem[]" in ptx
    assert re.search(r"add\.s32\s+%r\d+, %r\d+, 3072;", ptx)
    assert ck.metadata["shared"] >= 4096 + 4 * 32 * 4  # the regions, then 4 warps' partial sums


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
def test_pipeline_slots_lie_above_the_regions() -> None:
    """A loop staged through shared memory (cp.async, 3 slots) in a kernel with a held region of
    5000 bytes: its slots start at 5120, above the region."""
    ck = held_with_pipeline.compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "back_ptr": "*i32", "n": "i32"},
                                    {"A": 5000, "BLOCK": 128}, target="cuda:sm_90a", num_warps=4)
    ptx = ck.asm["ptx"]
    assert "cp.async" in ptx and re.search(r"add\.s32\s+%r\d+, %r\d+, 5120;", ptx)
    assert ck.metadata["shared"] >= 5120 + 3 * 128 * 4


def test_shared_memory_errors() -> None:
    with pytest.raises(compiler.CompilationError, match="has no CPU backend"):
        held_regions.compile(SIG, {"A": 64, "B": 64, "NW": 1}, target="cpu", num_warps=1)
    for n in (0, 300 * 1024):
        with pytest.raises(compiler.CompilationError, match="compile-time byte count from 1 to"):
            bad_size.compile({"y_ptr": "*i32"}, {"A": n}, target="cuda:sm_90a", num_warps=1)
