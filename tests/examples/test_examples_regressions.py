"""Compiler bugs found while writing the examples, each pinned by a small kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import torch

import compiler.language as tl
from compiler import jit


# 1. A kernel calling a @jit function defined *below* it in the module (Triton's matmul tutorial
#    does this with leaky_relu): the kernel must see the module's live globals, not a copy
#    taken when @jit ran.
@jit
def _calls_later_helper(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, _helper_defined_later(tl.load(x_ptr + offs, mask=m)), mask=m)


@jit
def _helper_defined_later(x):
    return x * 2 + 1


def test_jit_function_defined_after_its_caller():
    x = torch.randn(100)
    y = torch.full_like(x, float("nan"))
    _calls_later_helper[(1,)](x, y, 100, BLOCK=128)
    torch.testing.assert_close(y, x * 2 + 1)


# 2. tl.max(x, axis, return_indices=True) on a 1-D tile: the standard library expanded the index
#    with a runtime `range` loop whose body changes the tile's shape (rejected as a loop-carried
#    type change even when the loop runs zero times); it must be a static_range.
@jit
def _max_with_indices(x_ptr, val_ptr, idx_ptr, val2_ptr, idx2_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    v, i = tl.max(x, axis=0, return_indices=True)
    tl.store(val_ptr, v)
    tl.store(idx_ptr, i)
    rows = tl.arange(0, 4)
    x2 = tl.load(x_ptr + rows[:, None] * 8 + tl.arange(0, 8)[None, :])
    v2, i2 = tl.min(x2, axis=1, return_indices=True)
    tl.store(val2_ptr + rows, v2)
    tl.store(idx2_ptr + rows, i2)


def test_max_min_return_indices_1d_and_2d():
    x = torch.randn(100)
    val, idx = torch.full((1,), float("nan")), torch.full((1,), -1, dtype=torch.int32)
    val2, idx2 = torch.full((4,), float("nan")), torch.full((4,), -1, dtype=torch.int32)
    _max_with_indices[(1,)](x, val, idx, val2, idx2, 100, BLOCK=128)
    assert val.item() == x.max().item() and idx.item() == x.argmax().item()
    ref_v, ref_i = x[:32].view(4, 8).min(1)
    assert torch.equal(val2, ref_v) and torch.equal(idx2.long(), ref_i)


# 3. LLVM 22's loop vectorizer aborts the process ("VPlan cost model and legacy cost model
#    disagreed", an assertion in llvmlite's LLVM) on some maxnum reductions over masked rows
#    with short trip counts, e.g. the row max of a causal attention block of 32 columns. The CPU
#    backend now fixes the vectorization factor of float max/min reduction loops. Run in a
#    subprocess: a regression kills the interpreter, not just the test.
_CAUSAL_ROW_MAX = '''
import torch
import compiler.language as tl
from compiler import jit

@jit
def k(q_ptr, k_ptr, out_ptr, scale, n, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < n, other=0.0)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    for start_n in range(0, tl.minimum((start_m + 1) * BLOCK_M, n), BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + cols[None, :] * D + offs_d[:, None], mask=cols[None, :] < n, other=0.0)
        qk = tl.dot(q, kt)
        valid = (cols[None, :] < n) & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(valid, qk * scale, -float("inf"))
        m_i = tl.maximum(m_i, tl.max(qk, 1))
    tl.store(out_ptr + offs_m, m_i, mask=offs_m < n)

n, d = 40, 16
q, kk = torch.randn(n, d), torch.randn(n, d)
out = torch.full((n,), float("nan"))
k[(2,)](q, kk, out, 0.5, n, D=d, BLOCK_M=32, BLOCK_N=32)
s = (q.double() @ kk.double().t() * 0.5).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
torch.testing.assert_close(out.double(), s.max(1).values, rtol=1e-5, atol=1e-5)
print("ok")
'''


def test_masked_row_max_does_not_abort_llvm(tmp_path):
    script = tmp_path / "causal_row_max.py"
    script.write_text(textwrap.dedent(_CAUSAL_ROW_MAX))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "ANVIL_CACHE": "0"})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


# 3b. The fixed vectorization factor keeps maxnum's NaN rule on row reductions: a NaN anywhere
#     in a row (including inside a vector block and in the scalar remainder) is ignored.
@jit
def _row_max(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


def test_row_max_ignores_nan_at_every_position():
    for n in (7, 31, 33, 127, 1000):
        x = torch.randn(n, n)
        x[torch.arange(n), torch.arange(n)] = float("nan")
        out = torch.full((n,), float("nan"))
        _row_max[(n,)](x, out, n, BLOCK=1 << (n - 1).bit_length())
        ref = torch.where(torch.isnan(x), float("-inf"), x).max(1).values
        assert torch.equal(out, ref), n
