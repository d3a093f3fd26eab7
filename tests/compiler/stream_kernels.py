"""Streaming loops for the private staging of passes/pipeline.py (`tl.range(..., num_stages=S)`
loops whose loads feed no tensor-core dot): used by tests/compiler/test_pipeline_private.py and
tests/gpu/test_gpu_pipeline_private.py."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit


@jit
def row_sums(x_ptr, y_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr,
             MASKED: tl.constexpr, EVICT: tl.constexpr = ""):
    """y[m] = sum over n of x[m, n] in fp32, BN columns per iteration (masked: any M, N; EVICT: the
    loads' eviction_policy)."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, N, BN, num_stages=STAGES):
        cols = k + tl.arange(0, BN)
        p = x_ptr + rows[:, None] * stride + cols[None, :]
        if MASKED:
            x = tl.load(p, mask=(rows[:, None] < M) & (cols[None, :] < N), other=0, eviction_policy=EVICT)
        else:
            x = tl.load(p, eviction_policy=EVICT)
        acc += x.to(tl.float32)
    tl.store(y_ptr + rows, tl.sum(acc, axis=1), mask=rows < M)


@jit
def weighted_planes(x_ptr, w_ptr, y_ptr, P, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                    STAGES: tl.constexpr):
    """y[a, b, c] = sum over planes p of x[p, a, b, c] * w[p] (3-D tiles, a scalar load per plane,
    the pointer carried by the loop)."""
    offs = (tl.arange(0, A)[:, None, None] * (B * C) + tl.arange(0, B)[None, :, None] * C
            + tl.arange(0, C)[None, None, :])
    acc = tl.zeros((A, B, C), dtype=tl.float32)
    px = x_ptr + offs
    for p in tl.range(0, P, num_stages=STAGES):
        acc += tl.load(px).to(tl.float32) * tl.load(w_ptr + p)
        px += A * B * C
    tl.store(y_ptr + offs, acc)


@jit
def two_streams(x_ptr, z_ptr, y_ptr, N, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """y = sum over chunks of x * z (two loads per iteration), and a load with a nonzero `other`
    (which cp.async cannot zero-fill: it stays a load in the loop)."""
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in tl.range(0, N, BLOCK, num_stages=STAGES):
        ok = k + offs < N
        x = tl.load(x_ptr + k + offs, mask=ok, other=0.0)
        z = tl.load(z_ptr + k + offs, mask=ok, other=1.0)
        acc += x * z - tl.where(ok, 0.0, 1.0)
    tl.store(y_ptr + offs, acc)
