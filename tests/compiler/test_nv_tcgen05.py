"""`tl.dot` on Blackwell's tcgen05 tensor cores (sm_100a, sm_103a), compiled and assembled by
ptxas without a GPU: the example GEMM at a 128 x 128 x 64 tile on 4 warps takes `tcgen05.mma`
(no `mma.sync`), allocates and frees its tensor memory once, reads the accumulator back with
`tcgen05.ld`, and does not spill; configurations the planner refuses, ANVIL_TCGEN05=0 and the other
architectures keep their instructions. Nothing here runs: no Blackwell GPU has checked results."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from compiler.backends.nvidia.tcgen05 import Tcgen05Plan, instr_desc
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.ir import types as T

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nv_target_cases  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

# the example's 128 x 128 x 64 configuration: one 128-row tile, 4 k16 steps per dot
BIG = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64}


def _matmul(arch: str, dtype: str = "fp16", warps: int = 4, **consts: int) -> Any:
    fn, sig, base, _, stages, _ = nv_target_cases.example_cases()["matmul"]
    sig = {**sig, **{p: f"*{dtype}" for p in ("a_ptr", "b_ptr", "c_ptr")}}
    return fn.compile(sig, {**base, **consts}, target=f"cuda:{arch}", num_warps=warps, num_stages=stages)


def _field(value: int, lo: int, bits: int) -> int:
    return value >> lo & ((1 << bits) - 1)


@pytest.mark.parametrize(("dtype", "ab"), [("f16", 0), ("bf16", 1)])
def test_instruction_descriptor_fields(dtype: str, ab: int) -> None:
    """The 32-bit descriptor of an M128 N128 dot: f32 D, A/B type codes, B N-major, N >> 3, M >> 4."""
    plan = Tcgen05Plan(dtype, 16, None, T.fp32, "nmajor", 128)  # type: ignore[arg-type]
    d = instr_desc(plan, 128, 128)
    assert _field(d, 0, 4) == 0 and _field(d, 4, 2) == 1  # dense; D is f32
    assert _field(d, 7, 3) == ab and _field(d, 10, 3) == ab
    assert _field(d, 13, 4) == 0b1000  # no negation, A K-major, B transposed (N-major)
    assert _field(d, 17, 6) == 128 >> 3 and _field(d, 23, 1) == 0 and _field(d, 24, 5) == 128 >> 4
    kmajor = Tcgen05Plan(dtype, 16, None, T.fp32, "kmajor", 32)  # type: ignore[arg-type]
    assert _field(instr_desc(kmajor, 128, 16), 15, 8) == (16 >> 3) << 2  # no transpose, N = 16


@pytest.mark.parametrize(("arch", "dtype"), [("sm_100a", "fp16"), ("sm_100a", "bf16"), ("sm_103a", "fp16")])
def test_example_gemm_uses_tcgen05(arch: str, dtype: str) -> None:
    ck = _matmul(arch, dtype, **BIG)
    ptx: str = ck.asm["ptx"]
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx and "wgmma" not in ptx
    # one dot per iteration: 4 k16 MMAs issued by one thread, one commit to the mbarrier
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16", ptx)) == 4
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one") == 1
    assert ptx.count("mbarrier.try_wait.parity.shared::cta.b64") == 1
    # the tensor memory: allocated once (128 columns), the permit given up, freed once at exit
    assert ptx.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1
    assert ptx.count("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned") == 1
    assert ptx.count("tcgen05.dealloc.cta_group::1.sync.aligned.b32") == 1
    # 128 accumulator columns per thread, read 32 at a time, then waited for
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 4 and "tcgen05.wait::ld.sync.aligned" in ptx
    ab = 1 if dtype == "bf16" else 0
    idesc = 1 << 4 | ab << 7 | ab << 10 | 1 << 16 | (128 >> 3) << 17 | (128 >> 4) << 24
    assert re.search(rf"mov\.b32\s+%r\d+, {idesc};", ptx), "instruction descriptor"
    assert ck.metadata["n_spills"] == 0, f"spills {ck.metadata['n_spills']} bytes"


@pytest.mark.parametrize(("dtype", "kind", "steps", "ab"), [
    ("fp32", "tf32", 4, (2, 2)), ("fp8e4nv", "f8f6f4", 2, (0, 0)), ("fp8e5", "f8f6f4", 2, (1, 1))])
def test_tf32_and_fp8_kinds(dtype: str, kind: str, steps: int, ab: tuple[int, int]) -> None:
    """The benchmark GEMM (128 x 128 on 8 warps): fp32 inputs (rounded to tf32 when staged, K = 32
    in 4 k8 steps) and fp8 (K = 64 in 2 k32 steps) on their kinds; B staged K-major (no transpose)."""
    fn, sig, consts, warps, stages, _ = nv_target_cases.benchmark_cases()[f"gemm_{dtype}"]
    ck = fn.compile(sig, consts, target="cuda:sm_100a", num_warps=warps, num_stages=stages)
    ptx: str = ck.asm["ptx"]
    assert ptx.count(f"tcgen05.mma.cta_group::1.kind::{kind}") == steps and "mma.sync" not in ptx
    idesc = 1 << 4 | ab[0] << 7 | ab[1] << 10 | (128 >> 3) << 17 | (128 >> 4) << 24
    assert re.search(rf"mov\.b32\s+%r\d+, {idesc};", ptx), "instruction descriptor"
    if dtype == "fp32":
        assert "cvt.rna.tf32.f32" in ptx
    assert ck.metadata["n_spills"] == 0


def _loop_span(ptx: str) -> tuple[int, int]:
    """(start, end) offsets of the K loop: from the label the loop's back edge branches to, which
    precedes the first tcgen05.mma, to that branch."""
    first = ptx.index("tcgen05.mma")
    labels = [(m.start(), m.group(1)) for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, re.M) if m.start() < first]
    for start, name in reversed(labels):
        back = [m.start() for m in re.finditer(rf"bra(?:\.uni)?\s+{re.escape(name)};", ptx) if m.start() > first]
        if back:
            return start, back[-1]
    raise AssertionError("no loop around the MMAs")


def test_k_loop_keeps_the_accumulator_in_tensor_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default the K loop's accumulator stays in tensor memory: the loop issues the MMAs (the
    first of the first iteration overwrites D, predicated on the induction variable) and reads
    nothing back; tcgen05.ld runs once after the loop, and the 128 accumulator registers are not
    live in it. ANVIL_TCGEN05=readback reads back and adds after every dot, inside the loop."""
    resident = _matmul("sm_100a", **BIG)
    ptx: str = resident.asm["ptx"]
    start, end = _loop_span(ptx)
    assert "tcgen05.mma" in ptx[start:end] and "tcgen05.ld" not in ptx[start:end]
    assert ptx.index("tcgen05.ld") > end and ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 4
    # the first MMA's enable-input-d is a predicate computed in the loop, the others a constant true
    preds = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16\.collector::a::discard \[%r\d+\], %rd\d+, %rd\d+, "
                       r"%r\d+, (%p\d+);", ptx)
    assert len(preds) == 4 and preds[0] != preds[1] and len(set(preds[1:])) == 1
    monkeypatch.setenv("ANVIL_TCGEN05", "readback")
    readback = _matmul("sm_100a", **BIG)
    rptx: str = readback.asm["ptx"]
    start, end = _loop_span(rptx)
    assert "tcgen05.ld" in rptx[start:end]
    assert resident.metadata["n_regs"] + 64 <= readback.metadata["n_regs"], \
        (resident.metadata["n_regs"], readback.metadata["n_regs"])


def test_eight_warps_split_the_columns() -> None:
    """8 warps: the two warpgroups read 64 columns each (2 loads of 32), the same 4 MMAs."""
    ptx = _matmul("sm_100a", warps=8, **BIG).asm["ptx"]
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == 4 and "mma.sync" not in ptx
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 2


def test_refused_configurations_keep_mma_sync() -> None:
    """A 64-row tile (tcgen05 takes 128 rows per block) stays on mma.sync."""
    ptx = _matmul("sm_100a", BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32).asm["ptx"]
    assert "tcgen05" not in ptx and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx


def test_knob_turns_tcgen05_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_TCGEN05", "0")
    ptx = _matmul("sm_100a", **BIG).asm["ptx"]
    assert "tcgen05" not in ptx and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx


@pytest.mark.parametrize(("arch", "instr"), [("sm_90a", "wgmma.mma_async"), ("sm_120a", "mma.sync.aligned")])
def test_other_architectures_keep_their_instruction(arch: str, instr: str) -> None:
    ptx = _matmul(arch, **BIG).asm["ptx"]
    assert "tcgen05" not in ptx and instr in ptx
