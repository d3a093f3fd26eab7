"""Private staging (passes/pipeline.py): a `tl.range(..., num_stages=S)` loop whose loads feed no
tensor-core dot streams them through shared memory, each thread copying (cp.async) and reading
back its own part, S-1 iterations ahead, with no barrier in the loop. Here: which loads the pass
takes, the IR it builds, the frontend's checks, and the sm_90a code (ptxas accepts it). Results on
the GPU: tests/gpu/test_gpu_pipeline_private.py."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from compiler import errors as E
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.ir.verifier import verify
from compiler.passes.pipeline import pipeline_dot_loads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stream_kernels import row_sums, two_streams, weighted_planes  # noqa: E402
from test_errors import expect  # noqa: E402
from test_prefetch import SIG, _ir, mm  # noqa: E402

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

ROWS_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "stride": "i32:16"}


def _never(dot: Any, operand: int) -> bool:
    return False


def _loop(fn: Any) -> Any:
    return next(op for op in fn.walk() if op.opcode == "for")


def _private(fn: Any, slot: int = 512, budget: int = 1 << 20) -> int:
    return pipeline_dot_loads(fn, 3, _never, private=lambda op: slot, budget=budget)


# ------------------------------------------------------------------ the pass on Tile IR
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_loads_of_a_staged_loop_become_private_copies(stages: int) -> None:
    fn = _ir(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": stages, "MASKED": True})
    assert _loop(fn).attrs["num_stages"] == stages
    assert _private(fn) == 1
    verify(fn)
    loop = _loop(fn)
    before = fn.body.ops[:fn.body.ops.index(loop)]
    pro = [op for op in before if op.opcode == "async_copy"]
    assert len(pro) == stages - 1 and all(op.attrs["private"] for op in pro)
    body = loop.regions[0]
    waits = [op for op in body.ops if op.opcode == "async_wait"]
    assert len(waits) == 1 and waits[0].attrs["private"] and waits[0].attrs["pending"] == stages - 2
    assert not any(op.opcode == "load" for op in body.walk())
    assert any(op.opcode == "async_drain" for op in fn.body.ops[fn.body.ops.index(loop):])


def test_a_loop_without_num_stages_is_left_alone() -> None:
    fn = _ir(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": None, "MASKED": True})
    assert "num_stages" not in _loop(fn).attrs
    assert _private(fn) == 0
    fn = _ir(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": 1, "MASKED": True})
    assert _private(fn) == 0  # one stage: nothing to overlap


def test_a_nonzero_other_stays_a_load() -> None:
    fn = _ir(two_streams, {"x_ptr": "*fp32", "z_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32"},
             {"BLOCK": 128, "STAGES": 3})
    assert _private(fn) == 1
    verify(fn)
    body = _loop(fn).regions[0]
    assert [op.opcode for op in body.ops].count("load") == 1  # z (other=1.0)


def test_scalar_and_carried_pointer_loads() -> None:
    """A 3-D tile through a loop-carried pointer is staged; the scalar weight load is not (a
    scalar is not a tile)."""
    fn = _ir(weighted_planes, {"x_ptr": "*fp32", "w_ptr": "*fp32", "y_ptr": "*fp32", "P": "i32"},
             {"A": 2, "B": 4, "C": 32, "STAGES": 3})
    assert _private(fn) == 1
    verify(fn)
    body = _loop(fn).regions[0]
    assert [op.opcode for op in body.ops].count("load") == 1


@pytest.mark.parametrize(("slot", "budget", "copies"), [(512, 1536, 2), (512, 1024, 1), (512, 1023, 0)])
def test_stages_shrink_to_the_budget(slot: int, budget: int, copies: int) -> None:
    """Four stages asked: as many as fit (one less copy in the prologue per stage dropped)."""
    fn = _ir(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": 4, "MASKED": False})
    assert _private(fn, slot, budget) == (1 if copies else 0)
    loop = _loop(fn)
    assert sum(op.opcode == "async_copy" for op in fn.body.ops[:fn.body.ops.index(loop)]) == copies


def test_dot_loops_keep_their_shared_operands() -> None:
    """A dot loop is pipelined as before (operands in the wgmma layout, not private)."""
    fn = _ir(mm, SIG, {"BM": 16, "BN": 16, "BK": 16, "TRANS_B": False})
    assert pipeline_dot_loads(fn, 3, lambda d, k: True, private=lambda op: 512, budget=1 << 20) == 2
    assert not any(op.attrs.get("private") for op in fn.walk() if op.opcode == "async_copy")


def test_num_stages_must_be_a_compile_time_integer() -> None:
    expect(E.ConstexprError, """
        @triton.jit
        def k(x_ptr, n):
            for i in tl.range(0, n, num_stages=n):
                tl.store(x_ptr + i, 1.0)
        """, 7, "num_stages must be a compile-time integer", caret_at="n)")


def test_the_cpu_backend_runs_staged_loops_unchanged() -> None:
    x = torch.randn(37, 300)
    y = torch.full((37,), float("nan"))
    row_sums[(3,)](x, y, 37, 300, x.stride(0), BM=16, BN=64, STAGES=3, MASKED=True)
    torch.testing.assert_close(y, x.double().sum(1).float(), rtol=1e-5, atol=1e-4)


# ------------------------------------------------------------------ sm_90a
def _ptx(kernel: Any, sig: dict[str, str], consts: dict[str, Any], num_warps: int = 4) -> tuple[str, dict[str, Any]]:
    ck = kernel.compile(sig, consts, target="cuda:sm_90a", num_warps=num_warps)
    assert "cubin" in ck.asm  # ptxas accepted it
    return str(ck.asm["ptx"]), ck.metadata


def _loop_text(ptx: str) -> str:
    """The instructions between the first cp.async.wait_group and the loop's back branch."""
    start = ptx.index("cp.async.wait_group")
    return ptx[start:ptx.index("cp.async.wait_all")]


@needs_ptxas
@pytest.mark.parametrize("masked", [False, True])
def test_sm90_copies_and_no_barrier_in_the_loop(masked: bool) -> None:
    ptx, meta = _ptx(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": 3, "MASKED": masked})
    assert re.search(r"cp\.async\.(ca|cg)\.shared\.global", ptx)
    assert re.search(r"cp\.async\.wait_group\s+1;", ptx)
    body = _loop_text(ptx)
    assert "bar.sync" not in body and "ld.shared" in body
    assert not re.search(r"ld\.global", body)  # every load of the loop became a copy
    # unmasked, 16-byte runs (4 fp32 per thread along the row); masked by column, 4 bytes each
    assert (re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx) is not None) is not masked
    assert meta["shared"] >= 3 * 16 * 64 * 4 and meta["n_spills"] == 0


@needs_ptxas
def test_sm90_unstaged_loop_is_unchanged() -> None:
    ptx, meta = _ptx(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": 1, "MASKED": True})
    assert "cp.async" not in ptx and meta["shared"] < 1024


@needs_ptxas
def test_sm90_two_byte_runs_stay_loads() -> None:
    """bf16 masked by column: runs of one element, under cp.async's 4 bytes: not staged."""
    ptx, _ = _ptx(row_sums, {**ROWS_SIG, "x_ptr": "*bf16"}, {"BM": 16, "BN": 64, "STAGES": 3, "MASKED": True})
    assert "cp.async" not in ptx
    ptx, _ = _ptx(row_sums, {**ROWS_SIG, "x_ptr": "*bf16"}, {"BM": 16, "BN": 64, "STAGES": 3, "MASKED": False})
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx)


@needs_ptxas
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("evict", ["evict_first", "evict_last"])
def test_sm90_copies_of_a_load_with_an_eviction_policy_are_plain(masked: bool, evict: str) -> None:
    """A staged load's eviction_policy does not go with its cp.async (`.L2::cache_hint` there ran
    into illegal instructions on the H200: async_copy.py): the copies are those of the load
    without a policy, the source size after the size."""
    ptx, _ = _ptx(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": 3, "MASKED": masked, "EVICT": evict})
    plain, _ = _ptx(row_sums, ROWS_SIG, {"BM": 16, "BN": 64, "STAGES": 3, "MASKED": masked, "EVICT": ""})
    copies = re.findall(r"cp\.async\.c[ag]\.shared\.global [^;]*;", ptx)
    assert copies and all(re.search(r"\], \d+, %r\d+;$", c) for c in copies)
    assert "cache_hint" not in ptx and "createpolicy" not in ptx
    assert len(copies) == len(re.findall(r"cp\.async\.c[ag]\.shared\.global [^;]*;", plain))
