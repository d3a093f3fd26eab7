"""tl.dot on the CPU backend: the register-blocked fp32 micro-kernel (row blocks of 6 or 8 and
the rows after the last full block), the plain loops for other shapes and types, `x + tl.dot(a,
b)` folded into the dot's accumulator, and a loop's accumulator summed in place only when
nothing else reads it. Against float64, outputs poisoned."""

from __future__ import annotations

import pytest
import torch

import compiler
import compiler.language as tl
from compiler import jit
from compiler.runtime.launch import compile_for_signature


@jit
def dot_acc(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, c))


@jit
def dot_then_add(a_ptr, b_ptr, c_ptr, out_ptr, out2_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                 TWICE: tl.constexpr):
    """x + tl.dot(a, b) with x loaded after the dot; TWICE: the dot's result is read again."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    d = tl.dot(a, b)
    x = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], x + d)
    if TWICE:
        tl.store(out2_ptr + rm[:, None] * N + rn[None, :], d * 2.0)


@jit
def loop_acc(a_ptr, b_ptr, out_ptr, tot_ptr, STEPS, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
             READ_OLD: tl.constexpr):
    """acc += a_s @ b_s over STEPS slices; READ_OLD: the old acc is read after the dot too."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    acc = tl.zeros((M, N), dtype=tl.float32) + 1.0
    tot = 0.0
    for s in range(0, STEPS):
        a = tl.load(a_ptr + s * M * K + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + s * K * N + rk[:, None] * N + rn[None, :])
        if READ_OLD:
            new = tl.dot(a, b, acc)
            tot += tl.sum(tl.sum(acc, axis=1), axis=0)
            acc = new
        else:
            acc += tl.dot(a, b)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc)
    tl.store(tot_ptr, tot)


def _poisoned(*shape: int) -> torch.Tensor:
    return torch.full(shape, float("nan"))


@pytest.mark.parametrize("M", [1, 2, 4, 8, 16, 32, 64])  # 6-row blocks and 2 or 4 rows after them
@pytest.mark.parametrize("N", [8, 16, 32, 64])  # one vector per block (8-row blocks) or two
@pytest.mark.parametrize("K", [1, 16])
def test_fp32_blocks_and_their_edges(M: int, N: int, K: int) -> None:
    a, b, c = torch.randn(M, K), torch.randn(K, N), torch.randn(M, N)
    out = _poisoned(M, N)
    dot_acc[(1,)](a, b, c, out, M=M, N=N, K=K)
    torch.testing.assert_close(out.double(), c.double() + a.double() @ b.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("dtype", "M", "N", "K"), [(torch.float16, 16, 32, 16), (torch.bfloat16, 8, 16, 32),
                                                    (torch.float32, 4, 4, 8), (torch.float32, 16, 2, 16)])
def test_other_types_and_narrow_tiles(dtype: torch.dtype, M: int, N: int, K: int) -> None:
    a, b = torch.randn(M, K).to(dtype), torch.randn(K, N).to(dtype)
    c = torch.randn(M, N)
    out = _poisoned(M, N)
    dot_acc[(1,)](a, b, c, out, M=M, N=N, K=K)
    torch.testing.assert_close(out.double(), c.double() + a.double() @ b.double(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("twice", [False, True])
def test_add_after_the_dot(twice: bool) -> None:
    a, b, c = torch.randn(16, 16), torch.randn(16, 32), torch.randn(16, 32)
    out, out2 = _poisoned(16, 32), _poisoned(16, 32)
    dot_then_add[(1,)](a, b, c, out, out2, M=16, N=32, K=16, TWICE=twice)
    ref = a.double() @ b.double()
    torch.testing.assert_close(out.double(), c.double() + ref, rtol=1e-5, atol=1e-5)
    if twice:
        torch.testing.assert_close(out2.double(), 2 * ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("read_old", [False, True])
def test_loop_accumulator(read_old: bool) -> None:
    steps, M, N, K = 5, 16, 16, 8
    a, b = torch.randn(steps, M, K), torch.randn(steps, K, N)
    out, tot = _poisoned(M, N), _poisoned(1)
    loop_acc[(1,)](a, b, out, tot, steps, M=M, N=N, K=K, READ_OLD=read_old)
    acc = torch.ones(M, N, dtype=torch.float64)
    total = 0.0
    for s in range(steps):
        total += float(acc.sum())
        acc = acc + a[s].double() @ b[s].double()
    torch.testing.assert_close(out.double(), acc, rtol=1e-5, atol=1e-4)
    if read_old:  # the sums of the accumulator before each step, not after
        assert abs(float(tot) - total) <= 1e-4 * abs(total) + 1e-3


@jit
def _dot8(a_ptr, b_ptr, c_ptr):
    r = tl.arange(0, 8)
    idx = r[:, None] * 8 + r[None, :]
    tl.store(c_ptr + idx, tl.dot(tl.load(a_ptr + idx), tl.load(b_ptr + idx)))


def test_a_dot_below_k16_runs_and_notes_that_gpus_refuse_it() -> None:
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    c = torch.full((8, 8), float("nan"))
    _dot8[(1,)](a, b, c)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    ck = compile_for_signature(_dot8, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}, {}, "cpu", 4, 3, False)
    notes = [n for n in ck.metadata["notes"] if str(n["message"]).startswith("portability:")]
    assert len(notes) == 1 and "needs K >= 16" in str(notes[0]["message"]) and notes[0]["line"] > 0
    with pytest.raises(compiler.CompilationError, match="inner dimension \\(K\\) of at least 16"):
        compile_for_signature(_dot8, {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32"}, {}, "cuda:sm_90a", 4, 3,
                              False)
