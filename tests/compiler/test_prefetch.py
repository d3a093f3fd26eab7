"""The prefetch pass (loads feeding tl.dot issued one iteration ahead): IR shape, and unchanged
results when the rewritten kernel runs on the CPU backend (odd sizes, empty loops, masks)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import compiler
import compiler.language as tl
from compiler import cdiv, jit
from compiler.passes import PIPELINE
from compiler.passes.prefetch import prefetch_dot_operands


@jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
       TRANS_B: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    if TRANS_B:
        b_ptrs = b_ptr + rn[:, None] * sbn + rk[None, :] * sbk
    else:
        b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k), other=0.0)
        if TRANS_B:
            b = tl.load(b_ptrs, mask=(rn[:, None] < N) & (rk[None, :] < K - k), other=0.0)
            acc = tl.dot(a, tl.trans(b), acc)
        else:
            b = tl.load(b_ptrs, mask=(rk[:, None] < K - k) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@jit
def with_store(x_ptr, y_ptr, K, BK: tl.constexpr):
    r = tl.arange(0, 16)
    acc = tl.zeros((16, 16), dtype=tl.float32)
    for _k in range(0, K, BK):
        x = tl.load(x_ptr + r[:, None] * 16 + r[None, :])
        acc = tl.dot(x, x, acc)
        tl.store(x_ptr + r[:, None] * 16 + r[None, :], x + 1)
    tl.store(y_ptr + r[:, None] * 16 + r[None, :], acc)


SIG = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "sam": "i32",
       "sak": "i32", "sbk": "i32", "sbn": "i32", "scm": "i32"}


def _ir(kernel: Any, sig: dict[str, str], consts: dict[str, Any]) -> Any:
    """The optimised Tile IR the CPU backend receives for this specialization."""
    import compiler.passes as passes
    from compiler.runtime import compiled

    seen: list[Any] = []

    def spy(fn: Any) -> None:  # a last target-independent pass: sees what the CPU backend's stages get
        seen.append(fn)

    mp = pytest.MonkeyPatch()
    with mp.context() as m:
        m.setattr(passes, "PIPELINE", (*passes.PIPELINE, spy))
        m.setattr(compiled, "_MEMORY", {})
        m.setattr(compiled, "_disk_load", lambda key: None)
        kernel.compile(sig, consts, target="cpu")
    return seen[0]


def test_loads_move_to_the_prologue_and_the_top_of_the_body() -> None:
    fn = _ir(mm, SIG, {"BM": 16, "BN": 16, "BK": 16, "TRANS_B": False})
    assert prefetch_dot_operands(fn) == 2
    loop = next(op for op in fn.body.ops if op.opcode == "for")
    before = fn.body.ops[:fn.body.ops.index(loop)]
    assert sum(op.opcode == "load" for op in before) == 2
    body = loop.regions[0]
    assert len(body.args) == 1 + 3 + 2  # iv, acc and two pointers, two prefetched tiles
    loads = [i for i, op in enumerate(body.ops) if op.opcode == "load"]
    dot = next(i for i, op in enumerate(body.ops) if op.opcode == "dot")
    assert len(loads) == 2 and max(loads) < dot
    assert all(o is body.args[-2 + j] for j, o in enumerate(body.ops[dot].operands[:2]))


def test_loops_with_side_effects_are_left_alone() -> None:
    fn = _ir(with_store, {"x_ptr": "*fp32", "y_ptr": "*fp32", "K": "i32"}, {"BK": 16})
    assert prefetch_dot_operands(fn) == 0


@pytest.fixture
def cpu_prefetch(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run the pass in the CPU pipeline too, so the rewritten IR executes here; yields the
    number of loads prefetched per compile."""
    counts: list[int] = []

    def pipeline_with_prefetch(fn: Any) -> None:
        counts.append(prefetch_dot_operands(fn))

    import compiler.passes as passes
    from compiler.runtime import compiled

    monkeypatch.setattr(passes, "PIPELINE", (*PIPELINE, pipeline_with_prefetch))
    monkeypatch.setattr(compiled, "_MEMORY", {})
    monkeypatch.setattr(compiled, "_disk_load", lambda key: None)
    monkeypatch.setattr(compiled, "_disk_store", lambda *a: None)
    monkeypatch.setattr(mm, "_launcher", None)  # no specialization compiled by an earlier test
    return counts


@pytest.mark.parametrize("mnk", [(16, 16, 16), (37, 50, 70), (64, 33, 0), (20, 20, 5)])
@pytest.mark.parametrize("trans_b", [False, True])
def test_results_unchanged_on_cpu(cpu_prefetch: list[int], mnk: tuple[int, int, int], trans_b: bool) -> None:
    m, n, k = mnk
    a = torch.randn(m, k)
    b = torch.randn(n, k) if trans_b else torch.randn(k, n)
    c = torch.full((m, n), float("nan"))
    sbk, sbn = (b.stride(1), b.stride(0)) if trans_b else (b.stride(0), b.stride(1))
    mm[(cdiv(m, 16), cdiv(n, 16))](a, b, c, m, n, k, a.stride(0), a.stride(1), sbk, sbn, c.stride(0), BM=16, BN=16,
                                   BK=16, TRANS_B=trans_b)
    ref = a.double() @ (b.double().t() if trans_b else b.double())
    torch.testing.assert_close(c.double(), ref, rtol=1e-5, atol=1e-5)
    assert cpu_prefetch == [2]  # the rewritten kernel is what ran


_ = compiler
