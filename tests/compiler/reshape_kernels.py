"""Kernels with tl.reshape shared by the reshape tests (PTX checks and GPU runs)."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit


@jit
def round_trip(x_ptr, y_ptr, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr):
    """1-D -> 3-D -> 2-D -> 1-D with elementwise work at every step: no data movement at all."""
    r = tl.arange(0, A * B * C)
    v = tl.load(x_ptr + r)
    v3 = tl.reshape(v, (A, B, C)) * 2.0
    v2 = tl.reshape(v3, (A * B, C)) + 1.0
    tl.store(y_ptr + r, tl.reshape(v2, (A * B * C,)) - 0.5)


@jit
def reshape_reduce(x_ptr, rows_ptr, grp_ptr, R: tl.constexpr, C: tl.constexpr, S: tl.constexpr):
    """A [R, C] tile regrouped as [R, C // S, S]: sums per row and per group of S columns."""
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + offs)
    g = tl.sum(tl.reshape(x, (R, C // S, S)), axis=2)  # [R, C // S]
    tl.store(rows_ptr + tl.arange(0, R), tl.sum(g, axis=1))
    go = tl.arange(0, R)[:, None] * (C // S) + tl.arange(0, C // S)[None, :]
    tl.store(grp_ptr + go, g)


@jit
def unpack_nibbles(p_ptr, out_ptr, R: tl.constexpr, W: tl.constexpr):
    """int32 [R, W] -> 8 nibbles each, [R, 8 W] in order (a broadcast, then a reshape)."""
    offs = tl.arange(0, R)[:, None] * W + tl.arange(0, W)[None, :]
    p = tl.load(p_ptr + offs)
    codes = (p[:, :, None] >> (tl.arange(0, 8) * 4)[None, None, :]) & 0xF
    c = tl.reshape(codes, (R, 8 * W))
    oo = tl.arange(0, R)[:, None] * (8 * W) + tl.arange(0, 8 * W)[None, :]
    tl.store(out_ptr + oo, c)
