"""Kernels for tests/compiler/test_ptx_atomic_order.py (kept in a file of their own: @jit reads
the source)."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit


@jit
def rmw_k(p, out, SEM: tl.constexpr, SCOPE: tl.constexpr, TILE: tl.constexpr):
    if TILE:
        offs = tl.arange(0, 128)
        tl.store(out + offs, tl.atomic_add(p + offs, 1, sem=SEM, scope=SCOPE))
    else:
        tl.store(out, tl.atomic_xchg(p, 1, sem=SEM, scope=SCOPE))
