"""Memory and data movement: masked loads with `other`, masked stores, strided and 2-D
broadcast addressing, where, shape ops (trans, reshape, join/split, expand_dims, broadcast_to),
bool tensors, and atomics (final memory where it is deterministic, returned old values where
every address has one writer, multisets where only the set is deterministic).
"""

from __future__ import annotations

import pytest
import torch
from diff_harness import HEADER, Case, case_ids, check_case, gen, poison, rand_tensor, register

K = HEADER + """@triton.jit
def masked_other(x_ptr, i_ptr, o1, o2, o3, o4, o5, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o1 + offs, tl.load(x_ptr + offs, mask=m, other=-1.5))
    tl.store(o2 + offs, tl.load(i_ptr + offs, mask=m, other=7))
    tl.store(o3 + offs, tl.load(x_ptr + offs, mask=m, other=float("-inf")))
    fallback = offs.to(tl.float32) * 0.5
    tl.store(o4 + offs, tl.load(x_ptr + offs, mask=(offs % 3 == 0) & m, other=fallback))
    tl.store(o5 + offs, tl.load(i_ptr + offs, mask=offs % 2 == 1, other=0), mask=(offs % 4 != 0) & m)


@triton.jit
def strided_2d(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask, other=0.0)
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, x * 2.0 + 1.0, mask=mask)


@triton.jit
def broadcast_2d(a_ptr, b_ptr, c_ptr, o_add, o_mul, o_min, o_cmp, o_row, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    a = tl.load(a_ptr + rm, mask=rm < M, other=0)
    b = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    c = tl.load(c_ptr)
    out = rm[:, None] * N + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(o_add + out, a[:, None] + b[None, :], mask=mask)
    tl.store(o_mul + out, a[:, None] * b[None, :] - c, mask=mask)
    tl.store(o_min + out, tl.minimum(a[:, None], b[None, :] * 3), mask=mask)
    tl.store(o_cmp + out, a[:, None] > b[None, :], mask=mask)
    row = tl.expand_dims(b, 0) + tl.zeros((BM, BN), dtype=tl.float32)
    tl.store(o_row + out, tl.broadcast_to(row, (BM, BN)) + c, mask=mask)


@triton.jit
def where_ops(x_ptr, y_ptr, i_ptr, o1, o2, o3, o4, o5, flag, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    i = tl.load(i_ptr + offs, mask=m)
    tl.store(o1 + offs, tl.where(x > y, x, y), mask=m)
    tl.store(o2 + offs, tl.where(i % 2 == 0, x, i), mask=m)
    tl.store(o3 + offs, tl.where(x < 0, 0.5, x), mask=m)
    tl.store(o4 + offs, tl.where(flag > 0, i, -i), mask=m)
    tl.store(o5 + offs, tl.where(i, 1, 2), mask=m)


@triton.jit
def shapes(x_ptr, t_ptr, r_ptr, j_ptr, s_ptr, il_ptr, p_ptr, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
    tl.store(t_ptr + rn[:, None] * BM + rm[None, :], tl.trans(x))
    r = tl.reshape(x, (BN, BM))
    tl.store(r_ptr + rn[:, None] * BM + rm[None, :], r)
    j = tl.join(x, x * 2)
    tl.store(j_ptr + (rm[:, None] * BN + rn[None, :])[:, :, None] * 2 + tl.arange(0, 2)[None, None, :], j)
    a, b = tl.split(j)
    tl.store(s_ptr + rm[:, None] * BN + rn[None, :], a - b)
    il = tl.interleave(x, -x)
    tl.store(il_ptr + rm[:, None] * (2 * BN) + tl.arange(0, 2 * BN)[None, :], il)
    p = tl.permute(tl.reshape(x, (2, BM // 2, BN)), (2, 0, 1))
    flat = tl.reshape(p, (BM * BN,))
    tl.store(p_ptr + tl.arange(0, BM * BN), flat)


@triton.jit
def bools(x_ptr, b_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    b = tl.load(b_ptr + offs, mask=m, other=False)
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(b_ptr + offs, (x > 0) ^ b, mask=m)
    tl.store(o_ptr + offs, tl.where(b, x, 0) + b.to(tl.int32) + (b & (x < 5)).to(tl.int32), mask=m)


@triton.jit
def scalar_ptrs(x_ptr, y_ptr, k):
    v = tl.load(x_ptr + k)
    tl.store(y_ptr, v * 2)
    tl.store(y_ptr + 1, tl.load(x_ptr + 2 * k + 1) - v)
    p = x_ptr + k + 4
    tl.store(y_ptr + 2, tl.load(p - 1))
    tl.store(y_ptr + 3, tl.load(x_ptr + k * 3))
"""


MISC = HEADER + """@triton.jit
def misc_ops(x_ptr, i_ptr, h_ptr, g_ptr, f_ptr, s_ptr, a_ptr, z_ptr, c_ptr, BLOCK: tl.constexpr, NB: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    i = tl.load(i_ptr + offs)
    tl.store(h_ptr + tl.arange(0, NB), tl.histogram(i, NB))
    tl.store(g_ptr + offs, tl.gather(x, (i * 7) % BLOCK, 0))
    tl.store(f_ptr + offs, tl.flip(x, 0))
    tl.store(s_ptr + offs, tl.sort(i))
    tl.store(a_ptr + offs, tl.arange(BLOCK, 2 * BLOCK) + tl.full((BLOCK,), -3, tl.int32))
    tl.store(z_ptr + offs, tl.zeros_like(x) + tl.full((BLOCK,), 2.5, tl.float16))
    tl.store(c_ptr + tl.arange(0, 2 * BLOCK), tl.cat(x, x * 2, can_reorder=True))


@triton.jit
def big_tile(x_ptr, y_ptr, s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * 2 + 1, mask=offs < n)
    tl.store(s_ptr, tl.sum(x, axis=0))
    tl.store(s_ptr + 1, tl.max(x, axis=0))
"""


def misc_cases() -> list[Case]:
    name = "misc_ops"
    g = gen(name)
    b, nb = 64, 16
    args = [rand_tensor(b, torch.float32, g), rand_tensor(b, torch.int32, g, lo=0, hi=nb - 1), poison(nb, torch.int32),
            poison(b, torch.float32), poison(b, torch.float32), poison(b, torch.int32), poison(b, torch.int32),
            poison(b, torch.float32), poison(2 * b, torch.float32)]
    # cat(can_reorder=True) may order the elements as it likes: compared as a multiset.
    out = [Case(name, MISC, "misc_ops", args, (1,), outputs=range(2, 9), meta=dict(BLOCK=b, NB=nb), unordered=[6])]
    # 2**16 fp32 elements: beyond the stack budget, so the tile lives in the heap arena.
    name = "big_tile"
    g = gen(name)
    n = 2**16 - 5
    x = (torch.round(torch.randn(2**16, generator=g) * 16) / 4).float()  # quarters: the sum is exact
    out.append(Case(name, MISC, "big_tile", [x, poison(2**16, torch.float32), poison(2, torch.float32), n], (1,),
                    outputs=[1, 2], meta=dict(BLOCK=2**16)))
    return out


def memory_cases() -> list[Case]:
    out = []
    for n in (1000, 37, 256):
        name = f"masked_other_{n}"
        g = gen(name)
        args = [rand_tensor(n + 3, torch.float32, g), rand_tensor(n + 3, torch.int32, g)]
        # The kernel reads past n where the mask allows it: the buffers are BLOCK-padded.
        total = ((n + 127) // 128) * 128
        x = torch.cat([args[0], rand_tensor(total, torch.float32, g)])[:total]
        i = torch.cat([args[1], rand_tensor(total, torch.int32, g)])[:total]
        args = [x, i, poison(total, torch.float32), poison(total, torch.int32), poison(total, torch.float32),
                poison(total, torch.float32), poison(total, torch.int32), n]
        out.append(Case(name, K, "masked_other", args, (total // 128,), outputs=[2, 3, 4, 5, 6], meta=dict(BLOCK=128)))
    for (m, n), transposed in (((33, 70), False), ((64, 17), True), ((5, 5), False)):
        name = f"strided_2d_{m}x{n}{'_t' if transposed else ''}"
        g = gen(name)
        base = rand_tensor((n, m) if transposed else (m, n + 4), torch.float32, g)
        x = base.t() if transposed else base[:, :n]
        y = poison((m, n + 1), torch.float32)
        args = [base, y, m, n, x.stride(0), x.stride(1), y.stride(0), y.stride(1)]
        grid = ((m + 15) // 16, (n + 31) // 32)
        out.append(Case(name, K, "strided_2d", args, grid, outputs=[1], meta=dict(BM=16, BN=32)))
    for m, n in ((7, 13), (16, 32)):
        name = f"broadcast_2d_{m}x{n}"
        g = gen(name)
        args = [rand_tensor(m, torch.int32, g, lo=-50, hi=50), rand_tensor(n, torch.float32, g),
                rand_tensor(1, torch.float32, g)]
        args += [poison((m, n), t) for t in (torch.float32,) * 3 + (torch.bool, torch.float32)] + [m, n]
        out.append(Case(name, K, "broadcast_2d", args, (1,), outputs=[3, 4, 5, 6, 7], meta=dict(BM=16, BN=32)))
    for flag in (1, 0):
        name = f"where_flag{flag}"
        g = gen(name)
        args = [rand_tensor(100, torch.float32, g), rand_tensor(100, torch.float32, g),
                rand_tensor(100, torch.int32, g, lo=-3, hi=3)]
        args += [poison(100, t) for t in (torch.float32, torch.float32, torch.float32, torch.int32, torch.int32)]
        args += [flag, 100]
        out.append(Case(name, K, "where_ops", args, (1,), outputs=[3, 4, 5, 6, 7], meta=dict(BLOCK=128)))
    for t in (torch.float32, torch.int16):
        name = f"shapes_{str(t)[6:]}"
        g = gen(name)
        bm, bn = 8, 16
        args = [rand_tensor((bm, bn), t, g), poison((bn, bm), t), poison((bn, bm), t), poison((bm, bn, 2), t),
                poison((bm, bn), t), poison((bm, 2 * bn), t), poison(bm * bn, t)]
        out.append(Case(name, K, "shapes", args, (1,), outputs=[1, 2, 3, 4, 5, 6], meta=dict(BM=bm, BN=bn)))
    name = "bools"
    g = gen(name)
    args = [rand_tensor(50, torch.int32, g, lo=-9, hi=9), rand_tensor(50, torch.bool, g), poison(50, torch.int32), 45]
    out.append(Case(name, K, "bools", args, (1,), outputs=[1, 2], meta=dict(BLOCK=64)))
    for k in (3, 1, 16):  # 1 and multiples of 16 are specialized differently
        name = f"scalar_ptrs_k{k}"
        g = gen(name)
        args = [rand_tensor(64, torch.float64, g), poison(4, torch.float64), k]
        out.append(Case(name, K, "scalar_ptrs", args, (1,), outputs=[1]))
    return out


ATOMICS = HEADER + """@triton.jit
def atomic_bins(x_ptr, add_ptr, fadd_ptr, max_ptr, min_ptr, fmax_ptr, fmin_ptr, and_ptr, or_ptr, xor_ptr,
                umax_ptr, n, NBINS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    bins = (x & 0x7FFFFFFF) % NBINS
    tl.atomic_add(add_ptr + bins, 1, mask=m)
    tl.atomic_add(fadd_ptr + bins, (x % 7).to(tl.float32) * 0.5, mask=m)
    tl.atomic_max(max_ptr + bins, x, mask=m)
    tl.atomic_min(min_ptr + bins, x, mask=m)
    f = x.to(tl.float32) * 0.25
    tl.atomic_max(fmax_ptr + bins, f, mask=m)
    tl.atomic_min(fmin_ptr + bins, f, mask=m)
    tl.atomic_and(and_ptr + bins, x | 0x0F0F0F0F, mask=m)
    tl.atomic_or(or_ptr + bins, x & 0x00FF00FF, mask=m)
    tl.atomic_xor(xor_ptr + bins, x, mask=m)
    tl.atomic_max(umax_ptr + bins, x.to(tl.uint32, bitcast=True), mask=m)


@triton.jit
def atomic_disjoint(p_ptr, q_ptr, c_ptr, v_ptr, old_add, old_xchg, old_cas, old_max, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(v_ptr + offs)
    tl.store(old_add + offs, tl.atomic_add(p_ptr + offs, v, mask=m), mask=m)
    tl.store(old_xchg + offs, tl.atomic_xchg(q_ptr + offs, v * 3, mask=m), mask=m)
    cmp = tl.where(offs % 2 == 0, tl.load(c_ptr + offs), -1)
    tl.store(old_cas + offs, tl.atomic_cas(c_ptr + offs, cmp, v), mask=m)
    tl.store(old_max + offs, tl.atomic_max(p_ptr + offs, v * 2, mask=m, sem="relaxed"), mask=m)


@triton.jit
def atomic_counter(cnt_ptr, tickets_ptr, f64_ptr, i64_ptr):
    pid = tl.program_id(0)
    t = tl.atomic_add(cnt_ptr, 1)
    tl.store(tickets_ptr + pid, t)
    tl.atomic_add(f64_ptr, pid.to(tl.float64) * 0.5)
    tl.atomic_add(i64_ptr + (pid % 3), pid.to(tl.int64) << 33)
"""


def atomic_cases() -> list[Case]:
    out = []
    for n, nbins in ((1000, 16), (77, 5)):
        name = f"atomic_bins_{n}"
        g = gen(name)
        x = rand_tensor(n, torch.int32, g)
        init = [torch.zeros(nbins, dtype=torch.int32), torch.zeros(nbins, dtype=torch.float32),
                torch.full((nbins,), -(2**31), dtype=torch.int32), torch.full((nbins,), 2**31 - 1, dtype=torch.int32),
                torch.full((nbins,), -1e30), torch.full((nbins,), 1e30), torch.full((nbins,), -1, dtype=torch.int32),
                torch.zeros(nbins, dtype=torch.int32), rand_tensor(nbins, torch.int32, g),
                torch.zeros(nbins, dtype=torch.uint32)]
        out.append(Case(name, ATOMICS, "atomic_bins", [x, *init, n], ((n + 127) // 128,), outputs=range(1, 11),
                        meta=dict(NBINS=nbins, BLOCK=128)))
    for t in (torch.int32, torch.float32):
        name = f"atomic_disjoint_{str(t)[6:]}"
        g = gen(name)
        n = 384  # atomic_cas takes no mask: every lane of the 3 x 128 grid is in bounds
        # integers, or integer-valued floats: every sum is exact
        ins = [rand_tensor(n, t, g, lo=-1000, hi=1000).round() for _ in range(4)]
        args = [*ins, poison(n, t), poison(n, t), poison(n, t), poison(n, t), n - 84]
        ref, reason = None, ""
        if t == torch.float32:
            # Triton's interpreter raises "Unsupported data type" for atomic_xchg / atomic_cas
            # on fp32 (its numpy atomics cover integers only for those two).
            ref, reason = _disjoint_reference, "interpreter: atomic_xchg/atomic_cas on fp32 are unsupported"
        out.append(Case(name, ATOMICS, "atomic_disjoint", args, (3,), outputs=[0, 1, 2, 4, 5, 6, 7],
                        meta=dict(BLOCK=128), reference=ref, reason=reason))
    name = "atomic_counter"
    args = [torch.zeros(1, dtype=torch.int32), poison(40, torch.int32), torch.zeros(1, dtype=torch.float64),
            torch.zeros(3, dtype=torch.int64)]
    # Which program draws which ticket depends on the schedule; the set of tickets does not.
    out.append(Case(name, ATOMICS, "atomic_counter", args, (40,), outputs=[0, 1, 2, 3], unordered=[1]))
    return out


def _disjoint_reference(a: list) -> list[torch.Tensor]:
    p, q, c, v, o_add, o_xchg, o_cas, o_max, nv = a
    idx = torch.arange(p.numel())
    m = idx < nv
    o_add[m] = p[m]
    p[m] += v[m]
    o_xchg[m] = q[m]
    q[m] = v[m] * 3
    cmp = torch.where(idx % 2 == 0, c, torch.tensor(-1.0))
    o_cas[m] = c[m]
    c[:] = torch.where(cmp == c, v, c)
    o_max[m] = p[m]
    p[m] = torch.maximum(p[m], v[m] * 2)
    return [p, q, c, o_add, o_xchg, o_cas, o_max]


CASES = register(memory_cases() + misc_cases() + atomic_cases())


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_memory(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)
