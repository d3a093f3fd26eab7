"""Kernels using join/split/cat/gather, histogram, sort, device_print/device_assert and inline asm
compile with the NVIDIA backend and assemble with ptxas (no GPU needed)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import compiler
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.runtime.launch import compile_for_signature

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ptx_ops_kernels as K  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")


def _compile(name: str, arch: str, num_warps: int = 4) -> compiler.CompiledKernel:
    fn, sig, cx, debug = K.CASES[name]
    return compile_for_signature(fn, sig, cx, f"cuda:{arch}", num_warps, 3, debug)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(K.CASES))
def test_op_kernel_assembles(name: str, arch: str) -> None:
    ck = _compile(name, arch)
    assert f".target {arch}" in ck.asm["ptx"]
    assert ck.asm["cubin"][:4] == b"\x7fELF"
    assert ck.metadata["n_regs"] and ck.metadata["n_spills"] == 0


@pytest.mark.parametrize("arch", ["sm_100a", "sm_120a"])
@pytest.mark.parametrize("name", ["sort1d", "histogram", "gather0", "print", "asm_packed", "join_split"])
def test_newer_architectures_assemble(name: str, arch: str) -> None:
    ck = _compile(name, arch)
    assert f".target {arch}" in ck.asm["ptx"]
    assert ck.asm["cubin"][:4] == b"\x7fELF"


@pytest.mark.parametrize("num_warps", [1, 2, 8])
@pytest.mark.parametrize("name", ["sort2d", "sort1d", "histogram", "gather1", "cat", "split_loaded"])
def test_other_warp_counts_assemble(name: str, num_warps: int) -> None:
    ck = _compile(name, "sm_90a", num_warps)
    assert ck.asm["cubin"][:4] == b"\x7fELF" and ck.metadata["n_spills"] == 0


def test_join_then_split_moves_no_data() -> None:
    ck = _compile("split_join", "sm_90a")
    assert ck.metadata["shared"] == 0
    assert "bar.sync" not in ck.asm["ptx"]


def test_histogram_counts_with_shared_atomics() -> None:
    ptx = _compile("histogram", "sm_90a").asm["ptx"]
    assert re.search(r"(atom|red)\.shared(::cta)?\.add", ptx)
    assert "atom.global" not in ptx


def test_sort_within_a_warp_uses_shuffles() -> None:
    ptx = _compile("sort1d", "sm_90a").asm["ptx"]
    assert "shfl.sync.bfly.b32" in ptx


def test_print_calls_vprintf_with_the_cpu_format() -> None:
    ck = _compile("print", "sm_90a")
    ptx = ck.asm["ptx"]
    assert "call.uni (retval0), vprintf" in ptx
    llir = ck.asm["llir"]
    assert "pid (%d, %d, %d) idx (%d) x=%f" in llir
    assert "pid (%d, %d, %d) idx () n %lld" in llir
    assert "pid (%d, %d, %d) pid only" in llir


def test_assert_records_the_failure_in_the_error_global() -> None:
    ck = _compile("assert", "sm_90a")
    ptx = ck.asm["ptx"]
    assert ".visible .global .align 8 .b8 __anvil_debug_err[64]" in ptx
    assert "atom.relaxed.sys.global.cas.b64" in ptx or "atom.global.cas.b64" in ptx
    assert "x must be non-negative" in ck.asm["llir"]


def test_packed_inline_asm_runs_once_per_four_bytes() -> None:
    ptx = _compile("asm_packed", "sm_90a").asm["ptx"]
    n_regs = 1024 // 128  # elements per thread: BLOCK over 4 warps
    assert ptx.count("and.b32") >= n_regs // 4
    assert ptx.count("0x1F1F1F1F") == n_regs // 4


def test_inline_asm_with_side_effects_is_kept() -> None:
    """is_pure=False: kept though its result is unused, and two identical ones stay two (no DCE,
    no CSE); a pure asm with an unused result is dropped."""
    ptx = _compile("asm_effect", "sm_90a").asm["ptx"]
    assert ptx.count("membar.gl") == 2 * (256 // 128)  # two asms x the thread's elements
    assert "membar.cta" not in ptx


def test_warp_index_arithmetic_is_recomputed_not_converted() -> None:
    """Integer division and remainder by a constant of a per-warp index are cheap to recompute in
    the consumer's layout: no conversion through shared memory (no barrier)."""
    ck = _compile("warp_rows", "sm_90a", num_warps=8)
    assert "bar.sync" not in ck.asm["ptx"] and ck.metadata["shared"] == 0


def test_a_pointer_cast_keeps_the_alignment() -> None:
    """x (bf16, 16-byte aligned) read as int32 words through a pointer cast: 16-byte vectors."""
    ptx = _compile("ptr_cast", "sm_90a").asm["ptx"]
    assert "ld.global.v4.b32" in ptx and "ld.global.b32" not in ptx


def test_inline_asm_on_the_cpu_is_a_clear_error() -> None:
    with pytest.raises(compiler.CompilationError, match="cannot run on the CPU backend"):
        compile_for_signature(K.asm_k, {"x_ptr": "*i32", "y_ptr": "*i32", "n": "i32"}, {"BLOCK": 64}, "cpu", 4, 3,
                              False)
