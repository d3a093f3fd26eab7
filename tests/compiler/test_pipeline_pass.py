"""The software-pipelining pass (passes/pipeline.py) on Tile IR: which loads become asynchronous
copies, the prologue and loop it builds, and what it leaves alone. The code it leads to is tested
through PTX (test_ptx_mma.py) and on the GPU (tests/gpu/test_mma.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import compiler.language as tl
from compiler import jit
from compiler.ir.verifier import verify
from compiler.passes.pipeline import pipeline_dot_loads

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_prefetch import SIG, _ir, mm, with_store  # noqa: E402


@jit
def other_one(x_ptr, y_ptr, K, BK: tl.constexpr):
    r = tl.arange(0, 16)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(x_ptr + k + r[:, None] * 16 + r[None, :], mask=r[None, :] < K - k, other=1.0)
        acc = tl.dot(x, x, acc)
    tl.store(y_ptr + r[:, None] * 16 + r[None, :], acc)


def _everywhere(dot: Any, operand: int) -> bool:
    return True


@pytest.mark.parametrize("stages", [2, 3, 4])
@pytest.mark.parametrize("trans_b", [False, True])
def test_prologue_slots_and_drain(stages: int, trans_b: bool) -> None:
    fn = _ir(mm, SIG, {"BM": 16, "BN": 16, "BK": 16, "TRANS_B": trans_b})
    assert pipeline_dot_loads(fn, stages, _everywhere, in_flight=True) == 2
    verify(fn)
    ops = fn.body.ops
    loop = next(op for op in ops if op.opcode == "for")
    before, after = ops[:ops.index(loop)], ops[ops.index(loop) + 1:]
    pro = [op for op in before if op.opcode == "async_copy"]
    assert len(pro) == 2 * (stages - 1)  # A and B for each of the first S-1 iterations
    assert [op.attrs["commit"] for op in pro] == [False, True] * (stages - 1)
    assert [op.attrs["transposed"] for op in pro[:2]] == [False, trans_b]
    body = loop.regions[0]
    waits = [op for op in body.ops if op.opcode == "async_wait"]
    assert [op.attrs["sync"] for op in waits] == [True, False]
    assert all(op.attrs["pending"] == stages - 2 for op in waits)
    assert body.ops.index(waits[-1]) < next(i for i, op in enumerate(body.ops) if op.opcode == "dot")
    assert sum(op.opcode == "async_copy" for op in body.ops) == 2 and not any(op.opcode == "load" for op in body.ops)
    # carried: iv, acc, the slot and the two addresses S-1 iterations ahead; the loads' own
    # addresses are gone
    assert len(body.args) == 1 + 1 + 1 + 2
    dot = next(op for op in body.ops if op.opcode == "dot")
    assert dot.attrs.get("in_flight") is True
    drain = after[0]
    assert drain.opcode == "async_drain" and drain.operands == [loop.results[0]]
    store = next(op for op in after if op.opcode == "store")
    assert drain.results[0] in store.operands  # the result is read only after the drain


def test_nothing_in_flight_unless_asked() -> None:
    fn = _ir(mm, SIG, {"BM": 16, "BN": 16, "BK": 16, "TRANS_B": False})
    assert pipeline_dot_loads(fn, 3, _everywhere) == 2
    verify(fn)
    loop = next(op for op in fn.body.ops if op.opcode == "for")
    assert not any(op.attrs.get("in_flight") for op in loop.regions[0].ops)
    drain = fn.body.ops[fn.body.ops.index(loop) + 1]
    assert drain.opcode == "async_drain" and drain.operands == []


def test_what_is_left_alone() -> None:
    fn = _ir(mm, SIG, {"BM": 16, "BN": 16, "BK": 16, "TRANS_B": False})
    assert pipeline_dot_loads(fn, 1, _everywhere) == 0  # one stage: nothing to overlap
    assert pipeline_dot_loads(fn, 3, lambda dot, k: False) == 0  # the backend reads registers
    assert pipeline_dot_loads(fn, 3, lambda dot, k: k == 1) == 1  # B only
    fn = _ir(with_store, {"x_ptr": "*fp32", "y_ptr": "*fp32", "K": "i32"}, {"BK": 16})
    assert pipeline_dot_loads(fn, 3, _everywhere) == 0  # a store in the loop
    fn = _ir(other_one, {"x_ptr": "*fp32", "y_ptr": "*fp32", "K": "i32"}, {"BK": 16})
    assert pipeline_dot_loads(fn, 3, _everywhere) == 0  # masked lanes must read 1.0, copies write 0
