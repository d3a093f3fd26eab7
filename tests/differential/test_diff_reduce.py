"""Reductions (sum, max, min, argmax, argmin, xor_sum, keep_dims, return_indices, custom combines)
and scans (cumsum, cumprod, reverse, associative_scan) along each axis of 2-D tiles.

Float inputs are multiples of 1/4, so sums are exact in fp32/fp64 whatever the order and ties
exercise argmax's first-index rule; fp16 sums round at every step and are compared with a
tolerance (the interpreter sums with numpy's pairwise np.sum, Anvil in a loop).
"""

from __future__ import annotations

import pytest
import torch
from diff_harness import DTYPES, HEADER, Case, case_ids, check_case, gen, poison, rand_tensor, register

RED_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "float16", "bfloat16", "float32", "float64"]


def is_int(t: str) -> bool:
    return t.startswith(("int", "uint"))


def bits(t: str) -> int:
    return torch.iinfo(DTYPES[t]).bits if is_int(t) else torch.finfo(DTYPES[t]).bits


def sum_type(t: str) -> str:
    if is_int(t) and bits(t) < 32:
        return "uint32" if t.startswith("uint") else "int32"
    return t


def minmax_type(t: str) -> str:
    if t == "bfloat16" or (not is_int(t) and bits(t) < 32):
        return "float32"
    return "int32" if bits(t) < 32 else t


def quarter_values(t: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    if is_int(t):
        lo = 0 if t.startswith("uint") else -20
        return rand_tensor(shape, DTYPES[t], g, lo=lo, hi=20)
    return (torch.round(torch.randn(shape, generator=g, dtype=torch.float64) * 16) / 4).to(DTYPES[t])


def reduce_source(name: str, t: str) -> tuple[str, list[tuple[str, str, str]]]:
    """(source, [(output, shape kind, dtype)]); shape kinds: "n" [BN], "m" [BM], "1" scalar."""
    st, mt = sum_type(t), minmax_type(t)
    vt = "float32" if t == "bfloat16" else t  # max/min with indices promote bf16 only
    outs = [
        ("s0", "n", st, "tl.sum(x, axis=0)"),
        ("s1", "m", st, "tl.sum(x, axis=1)"),
        ("sall", "1", st, "tl.sum(x)"),
        ("mx0", "n", mt, "tl.max(x, axis=0)"),
        ("mx1", "m", mt, "tl.max(x, 1)"),
        ("mxall", "1", mt, "tl.max(x)"),
        ("mn0", "n", mt, "tl.min(x, axis=0)"),
        ("mn1", "m", mt, "x.min(axis=1)"),
        ("am0", "n", "int32", "tl.argmax(x, axis=0)"),
        ("am1", "m", "int32", "tl.argmax(x, axis=1)"),
        ("an0", "n", "int32", "tl.argmin(x, axis=0)"),
        ("an1", "m", "int32", "x.argmin(1)"),
        ("mxv", "m", vt, "tl.max(x, axis=1, return_indices=True)[0]"),
        ("mxi", "m", "int32", "tl.max(x, axis=1, return_indices=True)[1]"),
        ("mni", "n", "int32", "tl.min(x, axis=0, return_indices=True)[1]"),
        ("sk1", "m1", st, "tl.sum(x, axis=1, keep_dims=True)"),
        ("mxk0", "1n", mt, "tl.max(x, axis=0, keep_dims=True)"),
    ]
    if is_int(t):
        outs += [("xs0", "n", t, "tl.xor_sum(x, axis=0)"), ("xs1", "m", t, "tl.xor_sum(x, axis=1)")]
    lines = []
    for o, kind, ty, expr in outs:
        lines.append(f"    r_{o} = {expr}")
        lines.append(f"    tl.static_assert(r_{o}.dtype == tl.{ty}, '{o}: ' + str(r_{o}.dtype))")
        ptr = {"n": f"{o} + rn", "m": f"{o} + rm", "1": o, "m1": f"{o} + rm[:, None]", "1n": f"{o} + rn[None, :]"}[kind]
        lines.append(f"    tl.store({ptr}, r_{o})")
    src = (
        HEADER
        + f"""@triton.jit
def {name}(x_ptr, {", ".join(o for o, *_ in outs)}, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    x = tl.load(x_ptr + rm[:, None] * BN + rn[None, :])
"""
        + "\n".join(lines)
        + "\n"
    )
    return src, [(o, kind, ty) for o, kind, ty, _ in outs]


def _tol(t: str, ty: str, o: str):
    if o.startswith("s") and not o.startswith("xs") and t in ("float16", "bfloat16"):
        return (2e-2, 2e-2)  # fp16/bf16 sums round at every step, in a different order
    return None


def _bf16_reduce_reference(outs: list[tuple[str, str, str]]):
    def ref(a: list) -> list[torch.Tensor]:
        x = a[0].float()
        bf = a[0]
        vals = {
            "s0": bf.float().sum(0), "s1": bf.float().sum(1), "sall": bf.float().sum(),
            "mx0": x.amax(0), "mx1": x.amax(1), "mxall": x.max(), "mn0": x.amin(0), "mn1": x.amin(1),
            "am0": _first_arg(x, 0, True), "am1": _first_arg(x, 1, True), "an0": _first_arg(x, 0, False),
            "an1": _first_arg(x, 1, False), "mxv": x.amax(1), "mxi": _first_arg(x, 1, True),
            "mni": _first_arg(x, 0, False), "sk1": bf.float().sum(1, keepdim=True), "mxk0": x.amax(0, keepdim=True),
        }
        res = []
        for i, (o, _, _) in enumerate(outs):
            buf = a[1 + i]
            buf.view(-1)[:] = vals[o].reshape(-1).to(buf.dtype)
            res.append(buf)
        return res

    return ref


def _first_arg(x: torch.Tensor, axis: int, largest: bool) -> torch.Tensor:
    best = x.amax(axis, keepdim=True) if largest else x.amin(axis, keepdim=True)
    n = x.shape[axis]
    idx = torch.arange(n).reshape([-1 if d == axis else 1 for d in range(x.dim())])
    return torch.where(x == best, idx, n).amin(axis).to(torch.int32)


def reduce_cases() -> list[Case]:
    out = []
    for t in RED_TYPES:
        # (1, 16) and (16, 1): reductions over an axis of one element
        for bm, bn in ((8, 16), (2, 64), (1, 16), (16, 1)) if t in ("float32", "int32") else ((8, 16),):
            name = f"reduce_{t}_{bm}x{bn}"
            src, outs = reduce_source(name, t)
            g = gen(name)
            x = quarter_values(t, (bm, bn), g)
            shapes = {"n": (bn,), "m": (bm,), "1": (1,), "m1": (bm, 1), "1n": (1, bn)}
            args = [x] + [poison(shapes[k], DTYPES[ty]) for _, k, ty in outs]
            tol = [_tol(t, ty, o) for o, _, ty in outs]
            ref, reason = None, ""
            if t == "bfloat16":
                # tl.sum keeps bf16, and the interpreter sums the raw uint16 bits with np.sum;
                # max/min/arg* promote to fp32 first and would be fine, but share this kernel.
                ref, reason = _bf16_reduce_reference(outs), "interpreter sums bf16 as raw uint16 bits"
                tol = [(2e-2, 5e-2) if o in ("s0", "s1", "sall", "sk1") else None for o, _, _ in outs]
            out.append(Case(name, src, name, args, (1,), outputs=range(1, 1 + len(outs)),
                            meta=dict(BM=bm, BN=bn), tol=tol, reference=ref, reason=reason))
    return out


SCAN_TYPES = ["int8", "int32", "uint32", "int64", "float16", "bfloat16", "float32", "float64"]


def scan_type(t: str, op: str) -> str:
    if t == "bfloat16":
        return "float32"  # Triton promotes bf16 scans to fp32
    return sum_type(t) if op == "cumsum" else t


def scan_cases() -> list[Case]:
    out = []
    for t in SCAN_TYPES:
        name = f"scan_{t}"
        ops = [
            ("cs0", "cumsum", "tl.cumsum(x, axis=0)"),
            ("cs1", "cumsum", "tl.cumsum(x, axis=1)"),
            ("csr1", "cumsum", "tl.cumsum(x, 1, reverse=True)"),
            ("csr0", "cumsum", "x.cumsum(0, reverse=True)"),
            ("cp1", "cumprod", "tl.cumprod(p, axis=1)"),
            ("cpr0", "cumprod", "tl.cumprod(p, axis=0, reverse=True)"),
        ]
        lines = []
        for o, op, expr in ops:
            ty = scan_type(t, op)
            lines.append(f"    r_{o} = {expr}")
            lines.append(f"    tl.static_assert(r_{o}.dtype == tl.{ty}, '{o}: ' + str(r_{o}.dtype))")
            lines.append(f"    tl.store({o} + offs, r_{o})")
        src = (
            HEADER
            + f"""@triton.jit
def {name}(x_ptr, p_ptr, {", ".join(o for o, *_ in ops)}, BM: tl.constexpr, BN: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    p = tl.load(p_ptr + offs)
"""
            + "\n".join(lines)
            + "\n"
        )
        g = gen(name)
        bm, bn = 8, 16
        x = quarter_values(t, (bm, bn), g)
        if is_int(t):
            p = rand_tensor((bm, bn), DTYPES[t], g, lo=0 if t.startswith("uint") else -3, hi=3)
        else:  # products of these stay exact in every float type
            choices = torch.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], dtype=torch.float64)
            p = choices[torch.randint(0, 6, (bm, bn), generator=g)].to(DTYPES[t])
        args = [x, p] + [poison((bm, bn), DTYPES[scan_type(t, op)]) for _, op, _ in ops]
        tol = (2e-2, 2e-2) if t == "float16" else None
        # bf16 scans run in fp32 (Triton promotes them), where the interpreter is right.
        out.append(Case(name, src, name, args, (1,), outputs=range(2, 2 + len(ops)), meta=dict(BM=bm, BN=bn),
                        tol=tol))
    return out


CUSTOM = HEADER + """@triton.jit
def _maxabs(a, b):
    return tl.maximum(tl.abs(a), tl.abs(b))


@triton.jit
def _argmax_last(v1, i1, v2, i2):
    take2 = (v2 > v1) | ((v2 == v1) & (i2 > i1))
    return tl.where(take2, v2, v1), tl.where(take2, i2, i1)


@triton.jit
def _first_positive(a, b):
    return tl.where(a > 0, a, b)


@triton.jit
def custom_combine(x_ptr, r1, r2v, r2i, s1, s2, BM: tl.constexpr, BN: tl.constexpr):
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(r1 + tl.arange(0, BM), tl.reduce(x, 1, _maxabs))
    idx = tl.broadcast_to(tl.arange(0, BN)[None, :], (BM, BN))
    v, i = tl.reduce((x, idx), 1, _argmax_last)
    tl.store(r2v + tl.arange(0, BM), v)
    tl.store(r2i + tl.arange(0, BM), i)
    tl.store(s1 + offs, tl.associative_scan(x, 1, _maxabs))
    tl.store(s2 + offs, tl.associative_scan(x, 0, _first_positive, reverse=True))
"""


def custom_cases() -> list[Case]:
    out = []
    for t in ("int32", "float32"):
        name = f"custom_combine_{t}"
        g = gen(name)
        bm, bn = 4, 16
        x = quarter_values(t, (bm, bn), g)
        dt = DTYPES[t]
        args = [x, poison(bm, dt), poison(bm, dt), poison(bm, torch.int32), poison((bm, bn), dt), poison((bm, bn), dt)]
        out.append(Case(name, CUSTOM, "custom_combine", args, (1,), outputs=[1, 2, 3, 4, 5], meta=dict(BM=bm, BN=bn)))
    return out


MASKED = HEADER + """@triton.jit
def masked_reduce(x_ptr, s_ptr, m_ptr, a_ptr, c_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=0.0)
    xm = tl.load(x_ptr + rm[:, None] * stride + rn[None, :], mask=mask, other=float("-inf"))
    tl.store(s_ptr + rm, tl.sum(x, axis=1), mask=rm < M)
    tl.store(m_ptr + rm, tl.max(xm, axis=1), mask=rm < M)
    tl.store(a_ptr + rm, tl.argmax(xm, axis=1), mask=rm < M)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.cumsum(x, axis=1), mask=mask)
"""


def masked_cases() -> list[Case]:
    out = []
    for m, n in ((13, 37), (5, 64), (1, 1)):
        name = f"masked_reduce_{m}x{n}"
        g = gen(name)
        x = quarter_values("float32", (m, n + 3), g)  # rows padded: a stride larger than N
        args = [x, poison(m, torch.float32), poison(m, torch.float32), poison(m, torch.int32),
                poison((m, n), torch.float32), m, n, n + 3]
        out.append(Case(name, MASKED, "masked_reduce", args, ((m + 3) // 4,), outputs=[1, 2, 3, 4],
                        meta=dict(BM=4, BN=64)))
    return out


CASES = register(reduce_cases() + scan_cases() + custom_cases() + masked_cases())


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_reduce(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)
