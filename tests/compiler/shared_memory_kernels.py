# mypy: disable-error-code="operator, attr-defined, index, arg-type"
"""Kernels of tl.extra.cuda.shared_memory's tests (tests/compiler/test_shared_memory.py and
tests/gpu/test_gpu_shared_memory.py)."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit

_ST = "st.shared.b32 [$1], $2;\n\tmov.b32 $0, $2;"
_LD = "ld.shared.b32 $0, [$1];"


@jit
def held_regions(x_ptr, y_ptr, sum_ptr, addr_ptr, A: tl.constexpr, B: tl.constexpr, NW: tl.constexpr):
    """Two held regions of A and B bytes: each thread writes its x into both (one word per thread),
    the program sums x over its warps (a reduction through the compiler's scratch, which must lie
    above the regions), then each thread reads its two words back into y (y[0, t] from the first
    region, y[1, t] from the second). addr: the regions' addresses."""
    base_a = tl.extra.cuda.shared_memory(A)
    base_b = tl.extra.cuda.shared_memory(B)
    t = tl.arange(0, NW)[:, None] * 32 + tl.arange(0, 32)[None, :]
    x = tl.load(x_ptr + t)
    w = tl.inline_asm_elementwise(_ST, "=r,r,r", [base_a + 4 * t, x], dtype=tl.int32, is_pure=False, pack=1)
    w = tl.inline_asm_elementwise(_ST, "=r,r,r", [base_b + 4 * t, w + 1], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(sum_ptr + tl.arange(0, 32), tl.sum(x + w * 0, axis=0))
    tl.debug_barrier()
    ya = tl.inline_asm_elementwise(_LD, "=r,r", [base_a + 4 * t], dtype=tl.int32, is_pure=False, pack=1)
    yb = tl.inline_asm_elementwise(_LD, "=r,r", [base_b + 4 * t], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(y_ptr + t, ya)
    tl.store(y_ptr + NW * 32 + t, yb)
    tl.store(addr_ptr, base_a)
    tl.store(addr_ptr + 1, base_b)


@jit
def bad_size(y_ptr, A: tl.constexpr):
    tl.store(y_ptr, tl.extra.cuda.shared_memory(A))


@jit
def held_with_pipeline(x_ptr, y_ptr, back_ptr, n, A: tl.constexpr, BLOCK: tl.constexpr):
    """A held region of A bytes (each thread writes 3t + 1 at word t) beside a loop whose loads are
    staged through shared memory (num_stages=3): y = the column sums of x [n / BLOCK, BLOCK], back =
    the words read back after the loop."""
    base = tl.extra.cuda.shared_memory(A)
    t = tl.arange(0, BLOCK)
    w = tl.inline_asm_elementwise(_ST, "=r,r,r", [base + 4 * t, 3 * t + 1], dtype=tl.int32, is_pure=False, pack=1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in tl.range(0, n, BLOCK, num_stages=3):
        acc += tl.load(x_ptr + i + t, mask=i + t < n, other=0.0)
    tl.store(y_ptr + t, acc)
    back = tl.inline_asm_elementwise(_LD, "=r,r", [base + 4 * t + w * 0], dtype=tl.int32, is_pure=False, pack=1)
    tl.store(back_ptr + t, back)
