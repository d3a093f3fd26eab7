"""Kernels whose loads and stores carry cache hints (cache_modifier, eviction_policy). Shared by
test_cache_hints.py (sm_90a PTX, CPU results) and tests/gpu/test_gpu_cache_hints.py."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit


@jit
def copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr, MASKED: tl.constexpr, LOAD_CM: tl.constexpr,
         LOAD_EV: tl.constexpr, STORE_CM: tl.constexpr, STORE_EV: tl.constexpr, VOLATILE: tl.constexpr):
    """y = x, with masks on both accesses (MASKED) or none (n a multiple of BLOCK)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASKED:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0, cache_modifier=LOAD_CM, eviction_policy=LOAD_EV,
                    volatile=VOLATILE)
        tl.store(y_ptr + offs, x, mask=offs < n, cache_modifier=STORE_CM, eviction_policy=STORE_EV)
    else:
        x = tl.load(x_ptr + offs, cache_modifier=LOAD_CM, eviction_policy=LOAD_EV, volatile=VOLATILE)
        tl.store(y_ptr + offs, x, cache_modifier=STORE_CM, eviction_policy=STORE_EV)


@jit
def scale(x_ptr, y_ptr, n_in, n_out, BLOCK: tl.constexpr, LOAD_CM: tl.constexpr, LOAD_EV: tl.constexpr,
          STORE_CM: tl.constexpr, STORE_EV: tl.constexpr):
    """y[i] = 2 * x[i] + 1 for i < n_in and 2 * (-4) + 1 = -7 (from `other`) for n_in <= i < n_out
    (n_in <= n_out): the blocks inside n_in without masks, the others masked; each program also
    copies x[min(pid * BLOCK, n_in - 1)] to y[n_out + pid] with scalar accesses."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if (pid + 1) * BLOCK <= n_in:
        x = tl.load(x_ptr + offs, cache_modifier=LOAD_CM, eviction_policy=LOAD_EV)
        tl.store(y_ptr + offs, x * 2 + 1, cache_modifier=STORE_CM, eviction_policy=STORE_EV)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n_in, other=-4, cache_modifier=LOAD_CM, eviction_policy=LOAD_EV)
        tl.store(y_ptr + offs, x * 2 + 1, mask=offs < n_out, cache_modifier=STORE_CM, eviction_policy=STORE_EV)
    first = tl.load(x_ptr + tl.minimum(pid * BLOCK, n_in - 1), cache_modifier=LOAD_CM, eviction_policy=LOAD_EV)
    tl.store(y_ptr + n_out + pid, first, cache_modifier=STORE_CM, eviction_policy=STORE_EV)


@jit
def block_copy(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BM: tl.constexpr, BN: tl.constexpr,
               LOAD_CM: tl.constexpr, LOAD_EV: tl.constexpr, STORE_CM: tl.constexpr, STORE_EV: tl.constexpr):
    """y = x + 1 (M x N) through block pointers with boundary checks."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x_ptr, (M, N), (stride_xm, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(y_ptr, (M, N), (stride_ym, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    x = tl.load(src, boundary_check=(0, 1), cache_modifier=LOAD_CM, eviction_policy=LOAD_EV)
    tl.store(dst, x + 1, boundary_check=(0, 1), cache_modifier=STORE_CM, eviction_policy=STORE_EV)
