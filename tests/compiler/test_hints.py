"""tl.multiple_of / tl.max_contiguous: the promises reach the axis facts (and through them the
vector widths: a tutorial-style matmul whose offsets go through tl.where copies both operands with
16-byte cp.async only when it makes them); they change no result (CPU backend here, the GPU in
tests/gpu/test_gpu_hints.py); a malformed promise is an error that says what to write."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.errors import CompilationError
from compiler.passes.axis_info import analyze_axis_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hint_kernels import bad_hint, mm_where  # noqa: E402
from test_prefetch import _ir  # noqa: E402

SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32:16", "N": "i32:16", "K": "i32:16",
       "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"}


@pytest.mark.parametrize("hint", [False, True])
def test_promises_reach_the_axis_facts(hint: bool) -> None:
    fn = _ir(mm_where, SIG, {"BM": 64, "BN": 32, "BK": 32, "HINT": hint})
    info = analyze_axis_info(fn)
    sel = [info[op.result] for op in fn.walk() if op.opcode == "select"]
    assert len(sel) == 2
    want = [((64,), (64,)), ((32,), (32,))] if hint else [((1,), None), ((1,), None)]
    for facts, (cont, div) in zip(sel, want, strict=True):
        assert facts.contiguity == cont
        if div is not None:
            assert facts.divisibility == div


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
def test_promised_contiguity_gives_16_byte_copies() -> None:
    copies = {}
    for hint in (False, True):
        ck = mm_where.compile(SIG, {"BM": 128, "BN": 128, "BK": 64, "HINT": hint}, target="cuda:sm_90a", num_warps=8)
        ptx = ck.asm["ptx"]  # type: ignore[attr-defined]
        copies[hint] = len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 16", ptx))
        assert ck.metadata["ptxas_notes"] == []  # type: ignore[attr-defined]
    # 2 prologue stages + the loop, 4 copies per operand each: B only with the promise
    assert copies == {False: 12, True: 24}


def test_promises_change_no_result() -> None:
    m, n, k = 96, 64, 80
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, k, generator=g).half(), torch.randn(k, n, generator=g).half()
    ref = (a.double() @ b.double())
    for hint in (False, True):
        c = torch.full((m, n), float("nan"), dtype=torch.float16)
        mm_where[(2, 2)](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), BM=64, BN=32, BK=32, HINT=hint)
        torch.testing.assert_close(c.double(), ref, rtol=2e-2, atol=2e-2)


def test_a_promise_per_dim_or_one_for_all() -> None:
    with pytest.raises(CompilationError, match=r"one positive value per dim of a 1-D value"):
        bad_hint[(1,)](torch.zeros(16, dtype=torch.int32), BLOCK=16)
