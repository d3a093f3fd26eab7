"""Kernels whose loops carry a wgmma result into the next iteration in ways other than attention's:
read before the next dot, read inside a branch, two chains, a loop-invariant A operand. Shared by
tests/compiler/test_ptx_carry.py (sm_90a PTX) and tests/gpu/test_carry.py (results on the GPU)."""

from __future__ import annotations

import compiler.language as tl
from compiler import jit


@jit
def chained(a_ptr, b_ptr, c_ptr, out_ptr, M, N, K, FORM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
            BK: tl.constexpr):
    """out = sum over K blocks k of f(acc) where each block does s = a_k @ b_k (a [BM, BK] row
    block of a, b_k [BK, BN]) and acc = g(s) @ c_k + h(acc) with c_k [BN, BN] rows of c:
    FORM 0: acc scaled before the first dot of the next iteration (attention's order);
    FORM 1: acc read before the first dot (its update comes first);
    FORM 2: acc updated inside a branch taken on odd blocks only;
    FORM 3: acc not read in the body at all besides the dot's accumulator."""
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rk = tl.arange(0, BK)
    rn = tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        i = k0 // BK
        if FORM == 1:
            acc = acc * 0.75
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        s = tl.dot(a, b)
        if FORM == 0:
            acc = acc * 0.75
        if FORM == 2:  # noqa: SIM102 - a compile-time choice around a runtime branch
            if i % 2 == 1:
                acc = acc * 0.5 + 1.0
        c = tl.load(c_ptr + (i * BN + rn)[:, None] * BN + rn[None, :])
        acc = tl.dot(s.to(tl.float16), c, acc)
    tl.store(out_ptr + rm[:, None] * BN + rn[None, :], acc, mask=rm[:, None] < M)


def reference(a, b, c, form: int, bm: int, bn: int, bk: int):  # type: ignore[no-untyped-def]
    """float64 reference of `chained` (s rounded to fp16 as the kernel does); a [M, K], b [K, N],
    c [K / BK * BN, BN]."""
    import torch

    m, k = a.shape
    acc = torch.zeros(m, bn, dtype=torch.float64)
    for i, k0 in enumerate(range(0, k, bk)):
        if form == 1:
            acc = acc * 0.75
        s = (a[:, k0:k0 + bk].double() @ b[k0:k0 + bk].double())
        s = torch.nn.functional.pad(s, (0, bn - s.shape[1]))
        if form == 0:
            acc = acc * 0.75
        if form == 2 and i % 2 == 1:
            acc = acc * 0.5 + 1.0
        acc = s.half().double() @ c[i * bn:(i + 1) * bn].double() + acc
    return acc
