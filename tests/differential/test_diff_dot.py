"""tl.dot: a masked, K-looped matmul (fp32 ieee and tf32, fp16 and int8 inputs, fp64), dot with
an accumulator and out_dtype, 3-D batched dot, and dot feeding elementwise epilogues.

Products are accumulated in a different order (numpy's matmul vs Anvil's loop nest), so float
results are compared with a tolerance; int8 -> int32 is exact.
"""

from __future__ import annotations

import pytest
import torch
from diff_harness import DTYPES, HEADER, Case, case_ids, check_case, gen, poison, rand_tensor, register

K = HEADER + """@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=c_ptr.dtype.element_ty)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk[None, :]) * sak,
                    mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0)
        b = tl.load(b_ptr + (k + rk[:, None]) * sbk + rn[None, :] * sbn,
                    mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0)
        acc += tl.dot(a, b, input_precision=PREC)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def dot_acc(a_ptr, b_ptr, c_ptr, o_ptr, o16_ptr, oep_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.load(c_ptr + rm[:, None] * BN + rn[None, :])
    r = tl.dot(a, b, acc=c)
    tl.store(o_ptr + rm[:, None] * BN + rn[None, :], r)
    r16 = tl.dot(a, b, out_dtype=tl.float16)
    tl.static_assert((r16.dtype == tl.float16) == (a.dtype == tl.float16))  # fp32/bf16 inputs: fp32
    tl.store(o16_ptr + rm[:, None] * BN + rn[None, :], r16)
    ep = tl.maximum(tl.dot(a, tl.trans(tl.trans(b))), 0.0) * 0.5 + tl.sum(c, axis=1)[:, None]
    tl.store(oep_ptr + rm[:, None] * BN + rn[None, :], ep)


@triton.jit
def dot_batched(a_ptr, b_ptr, o_ptr, B: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rb = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rb * BM * BK + rm[None, :, None] * BK + rk[None, None, :])
    b = tl.load(b_ptr + rb * BK * BN + rk[None, :, None] * BN + rn[None, None, :])
    tl.store(o_ptr + rb * BM * BN + rm[None, :, None] * BN + rn[None, None, :], tl.dot(a, b))
"""

TOL = {"float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3), "float64": (1e-10, 1e-10), "int8": None}


def matmul_cases() -> list[Case]:
    out = []
    shapes = [((37, 50, 70), "float32", "ieee"), ((64, 64, 32), "float32", "tf32"), ((19, 33, 17), "float16", "ieee"),
              ((40, 24, 100), "int8", "ieee"), ((20, 20, 20), "float64", "ieee")]
    for (m, n, k), t, prec in shapes:
        name = f"matmul_{t}_{prec}_{m}x{n}x{k}"
        g = gen(name)
        dt = DTYPES[t]
        a = rand_tensor((m, k), dt, g, lo=-8, hi=8) if t == "int8" else rand_tensor((m, k), dt, g)
        b = rand_tensor((n, k), dt, g, lo=-8, hi=8).t() if t == "int8" else rand_tensor((n, k), dt, g).t()
        ct = torch.int32 if t == "int8" else (torch.float64 if t == "float64" else torch.float32)
        c = poison((m, n), ct)
        args = [a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)]
        grid = ((m + 31) // 32, (n + 31) // 32)
        # input_precision="tf32" keeps 10 mantissa bits of each input on GPUs; the interpreter
        # and Anvil's CPU backend both multiply in full fp32, so the tolerance is fp32's.
        out.append(Case(name, K, "matmul", args, grid, outputs=[2],
                        meta=dict(BM=32, BN=32, BK=16, PREC=prec), tol=TOL[t]))
    return out


def acc_cases() -> list[Case]:
    out = []
    for t in ("float16", "float32"):
        name = f"dot_acc_{t}"
        g = gen(name)
        bm, bn, bk = 16, 32, 64
        dt = DTYPES[t]
        args = [rand_tensor((bm, bk), dt, g), rand_tensor((bk, bn), dt, g), rand_tensor((bm, bn), torch.float32, g),
                poison((bm, bn), torch.float32), poison((bm, bn), torch.float16), poison((bm, bn), torch.float32)]
        tol = [(1e-4, 1e-4) if t == "float32" else (2e-3, 2e-3), (2e-3, 5e-3), (1e-4, 1e-4) if t == "float32" else
               (2e-3, 2e-3)]
        out.append(Case(name, K, "dot_acc", args, (1,), outputs=[3, 4, 5], meta=dict(BM=bm, BN=bn, BK=bk), tol=tol))
    name = "dot_acc_bfloat16"
    g = gen(name)
    bm, bn, bk = 16, 32, 64
    args = [rand_tensor((bm, bk), torch.bfloat16, g), rand_tensor((bk, bn), torch.bfloat16, g),
            rand_tensor((bm, bn), torch.float32, g), poison((bm, bn), torch.float32), poison((bm, bn), torch.float16),
            poison((bm, bn), torch.float32)]

    def ref(a_: list) -> list[torch.Tensor]:
        a, b, c = a_[0].double(), a_[1].double(), a_[2].double()
        a_[3][:] = (a @ b + c).float()
        a_[4][:] = (a @ b).half()
        a_[5][:] = (torch.clamp(a @ b, min=0) * 0.5 + c.sum(1, keepdim=True)).float()
        return a_[3:6]

    # The interpreter multiplies the raw uint16 bits of bf16 operands (np.matmul on its storage).
    out.append(Case(name, K, "dot_acc", args, (1,), outputs=[3, 4, 5], meta=dict(BM=bm, BN=bn, BK=bk),
                    tol=[(1e-4, 1e-4), (2e-3, 5e-3), (1e-4, 1e-4)], reference=ref,
                    reason="interpreter multiplies bf16 dot operands as raw uint16 bits"))
    for t in ("float32", "int8"):
        name = f"dot_batched_{t}"
        g = gen(name)
        dt = DTYPES[t]
        lim = dict(lo=-5, hi=5) if t == "int8" else {}
        ot = torch.int32 if t == "int8" else torch.float32
        args = [rand_tensor((2, 16, 32), dt, g, **lim), rand_tensor((2, 32, 16), dt, g, **lim), poison((2, 16, 16), ot)]
        out.append(Case(name, K, "dot_batched", args, (1,), outputs=[2], meta=dict(B=2, BM=16, BN=16, BK=32),
                        tol=None if t == "int8" else (1e-4, 1e-4)))
    return out


def reject_cases() -> list[Case]:
    src = HEADER + """@triton.jit
def reject_dot_out_bf16(a_ptr, o_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    tl.store(o_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a, out_dtype=tl.bfloat16))
"""
    args = [torch.ones(16, 16, dtype=torch.float16), poison((16, 16), torch.float32)]
    return [Case("reject_dot_out_bf16", src, "reject_dot_out_bf16", args, (1,), outputs=[1], expect_error=True)]


CASES = register(matmul_cases() + acc_cases() + reject_cases())


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_dot(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)
