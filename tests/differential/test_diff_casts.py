"""Casts between every pair of dtypes, bitcasts, and downcasts with explicit rounding.

Float -> integer conversions are compared on values the destination can hold: outside that
range the conversion is undefined in Triton (LLVM fptosi/fptoui give poison; the interpreter's
numpy astype wraps). Anvil saturates there (PTX cvt.rzi.sat semantics, NaN -> 0); that choice
is checked against torch in `saturation_cases`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from diff_harness import DTYPES, HEADER, Case, case_ids, check_case, gen, poison, rand_tensor, register

NAMES = list(DTYPES)
BLOCK = 128
N = 300  # three programs, the last one partial
PAD = 3


def is_int(t: str) -> bool:
    return t.startswith(("int", "uint"))


def float_input(t: str, g: torch.Generator, n: int) -> torch.Tensor:
    """Normal values at several scales plus the special values every cast must carry."""
    dt = DTYPES[t]
    x = rand_tensor(n, torch.float64, g) * torch.pow(10.0, torch.randint(-6, 7, (n,), generator=g).double())
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -1.5, 2.5, 65504.0, 65520.0, 1e-7, 3e-8,
                1e-40, -1e-42, 3.0e38, 1.0 + 2**-8, 1.0 + 3 * 2**-9, 2.0**-126]
    x[: len(specials)] = torch.tensor(specials, dtype=torch.float64)
    x = x.to(dt)
    if t == "bfloat16":
        # The interpreter's bf16 -> fp32 (interpreter.py _convert_float) turns bf16 subnormals
        # into 0 (it clamps their exponent); they are checked against torch in
        # `bf16_subnormal_cases`.
        x = torch.where(x.abs() < 2.0**-126, torch.zeros((), dtype=dt), x)
    return x


def cast_source(name: str, src: str, dsts: list[str]) -> str:
    outs = ", ".join(f"o_{d}" for d in dsts)
    lines = []
    for d in dsts:
        if not is_int(src) and is_int(d) and d != "int1":
            v = "xu" if d.startswith("uint") else "xs"  # values the destination can hold
        else:
            v = "x"
        lines.append(f"    y_{d} = {v}.to(tl.{d})")
        lines.append(f"    tl.static_assert(y_{d}.dtype == tl.{d})")
        lines.append(f"    tl.store(o_{d} + offs, y_{d}, mask=m)")
    return (
        HEADER
        + f"""@triton.jit
def {name}(x_ptr, xs_ptr, xu_ptr, {outs}, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    xs = tl.load(xs_ptr + offs, mask=m)
    xu = tl.load(xu_ptr + offs, mask=m)
"""
        + "\n".join(lines)
        + "\n"
    )


# (mantissa bits, smallest normal exponent, exponent at which values overflow)
FORMATS = {"bfloat16": (7, -126, 128), "float16": (10, -14, 16), "float32": (23, -126, 128)}


def exact_round(v: float | int, fmt: str = "bfloat16", rtz: bool = False) -> float:
    """`v` rounded exactly (rational arithmetic) to nearest even, or toward zero, in `fmt`."""
    if isinstance(v, float) and (v != v or v in (math.inf, -math.inf) or v == 0.0):
        return v
    if v == 0:
        return 0.0
    man, emin, eover = FORMATS[fmt]
    sign = -1.0 if v < 0 else 1.0
    a = abs(Fraction(v))
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - man)
    n = a / q
    f = math.floor(n)
    r = n - f
    if not rtz and (r > Fraction(1, 2) or (r == Fraction(1, 2) and f % 2 == 1)):
        f += 1
    res = f * q
    if res >= 2**eover:
        return sign * (float((2 - Fraction(2) ** -man) * Fraction(2) ** (eover - 1)) if rtz else math.inf)
    return sign * float(res)


def bf16_round(v: float | int) -> float:
    return exact_round(v, "bfloat16")


def to_bf16_reference(src: str, n: int):
    def ref(a: list) -> list[torch.Tensor]:
        x, out = a[0], a[3]
        vals = [int(v) for v in x[:n].tolist()] if is_int(src) else x[:n].double().tolist()
        out[:n] = torch.tensor([bf16_round(v) for v in vals], dtype=torch.float64).to(torch.bfloat16)
        return [out]

    return ref


def src_inputs(src: str, g: torch.Generator, n: int) -> list[torch.Tensor]:
    dt = DTYPES[src]
    if is_int(src):
        x = rand_tensor(n, dt, g)
        return [x, x.clone(), x.clone()]
    x = float_input(src, g, n)
    xs = rand_tensor(n, torch.float64, g, lo=-127.9, hi=127.9).to(dt)
    xu = rand_tensor(n, torch.float64, g, lo=0.0, hi=255.9).to(dt)
    if src == "float16":  # keep 255.9 -> 256 from rounding out of uint8's range
        xu = xu.clamp(max=255.0)
    if src == "bfloat16":
        xs, xu = xs.clamp(-127.0, 127.0), xu.clamp(max=255.0)
    return [x, xs, xu]


def cast_cases() -> list[Case]:
    out = []
    for src in NAMES:
        dsts = [d for d in NAMES if d != "bfloat16"] + ["int1"]
        name = f"cast_{src}"
        g = gen(name)
        args = src_inputs(src, g, N + PAD)
        tdt = {**DTYPES, "int1": torch.bool}
        args += [poison(N + PAD, tdt[d]) for d in dsts] + [N]
        out.append(
            Case(name, cast_source(name, src, dsts), name, args, (3,), outputs=range(3, 3 + len(dsts)),
                 meta=dict(BLOCK=BLOCK))
        )
        if src == "bfloat16":
            continue
        # Triton's interpreter gets every cast to bf16 wrong: fp32 -> bf16 truncates instead of
        # rounding to nearest even (interpreter.py cast_impl calls _convert_float without a
        # rounding mode), and int -> bf16, fp64 -> bf16 use numpy astype(uint16) on the value.
        name = f"cast_{src}_to_bfloat16"
        g = gen(name)
        args = src_inputs(src, g, N + PAD) + [poison(N + PAD, torch.bfloat16), N]
        out.append(
            Case(name, cast_source(name, src, ["bfloat16"]), name, args, (3,), outputs=[3],
                 meta=dict(BLOCK=BLOCK), reference=to_bf16_reference(src, N),
                 reason="interpreter truncates fp32 -> bf16 and casts int/fp64 -> bf16 as raw uint16")
        )
    return out


BITCASTS = [("int32", "float32"), ("int16", "float16"), ("int16", "bfloat16"), ("int64", "float64"),
            ("uint8", "int8"), ("uint32", "float32"), ("float16", "bfloat16")]


def bitcast_cases() -> list[Case]:
    out = []
    for a, b in BITCASTS:
        name = f"bitcast_{a}_{b}"
        src = (
            HEADER
            + f"""@triton.jit
def {name}(x_ptr, y_ptr, ox_ptr, oy_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(ox_ptr + offs, x.to(tl.{b}, bitcast=True), mask=m)
    tl.store(oy_ptr + offs, tl.cast(y, tl.{a}, bitcast=True), mask=m)
"""
        )
        g = gen(name)
        x = rand_tensor(N, DTYPES[a], g) if is_int(a) else float_input(a, g, N)
        y = rand_tensor(N, DTYPES[b], g) if is_int(b) else float_input(b, g, N)
        args = [x, y, poison(N, DTYPES[b]), poison(N, DTYPES[a]), N - 1]
        out.append(Case(name, src, name, args, (3,), outputs=[2, 3], meta=dict(BLOCK=BLOCK)))
    return out


ROUNDINGS = [("float32", "float16"), ("float64", "float32"), ("float64", "float16"), ("float32", "bfloat16")]


def rounding_cases() -> list[Case]:
    """fp_downcast_rounding: "rtne" (the default) and "rtz" on finite, in-range values."""
    out = []
    for a, b in ROUNDINGS:
        name = f"round_{a}_{b}"
        src = (
            HEADER
            + f"""@triton.jit
def {name}(x_ptr, ne_ptr, z_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(ne_ptr + offs, x.to(tl.{b}, fp_downcast_rounding="rtne"), mask=m)
    tl.store(z_ptr + offs, x.to(tl.{b}, fp_downcast_rounding="rtz"), mask=m)
"""
        )
        g = gen(name)
        x = (rand_tensor(N, torch.float64, g, scale=100.0)).to(DTYPES[a])
        args = [x, poison(N, DTYPES[b]), poison(N, DTYPES[b]), N]
        ref, reason = None, ""
        if b == "bfloat16" or a == "float64":
            def ref(a_: list, b: str = b) -> list[torch.Tensor]:
                v = a_[0].double().tolist()
                a_[1][:] = torch.tensor([exact_round(t, b) for t in v], dtype=torch.float64).to(DTYPES[b])
                a_[2][:] = torch.tensor([exact_round(t, b, rtz=True) for t in v], dtype=torch.float64).to(DTYPES[b])
                return [a_[1], a_[2]]

            # The default rounding to bf16 has the defect above (rtz is right there); casts from
            # fp64 with a rounding mode crash in the interpreter's _convert_float (numpy cannot
            # left_shift its uint64 bit patterns).
            reason = ("interpreter truncates fp32 -> bf16" if b == "bfloat16" else
                      "interpreter's _convert_float fails on fp64 sources (uint64 left_shift TypeError)")
        out.append(Case(name, src, name, args, (3,), outputs=[1, 2], meta=dict(BLOCK=BLOCK), reference=ref,
                        reason=reason))
    # A rounding mode on a conversion that is not a float downcast is an error in both.
    name = "reject_rounding_on_upcast"
    src = (
        HEADER
        + f"""@triton.jit
def {name}(x_ptr, y_ptr):
    offs = tl.arange(0, 16)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float64, fp_downcast_rounding="rtz"))
"""
    )
    out.append(Case(name, src, name, [torch.ones(16), poison(16, torch.float64)], (1,), outputs=[1],
                    expect_error=True))
    return out


def saturation_cases() -> list[Case]:
    """Out-of-range float -> int: undefined in Triton, saturating in Anvil (NaN -> 0)."""
    out = []
    for src, dst in (("float32", "int8"), ("float32", "uint8"), ("float64", "int32"), ("float32", "int64"),
                     ("float16", "uint32")):
        name = f"saturate_{src}_{dst}"
        kernel = (
            HEADER
            + f"""@triton.jit
def {name}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x.to(tl.{dst}), mask=offs < n)
"""
        )
        g = gen(name)
        x = (rand_tensor(64, torch.float64, g) * 1e12).to(DTYPES[src])
        x[:4] = torch.tensor([math.nan, math.inf, -math.inf, -0.5], dtype=torch.float64).to(DTYPES[src])

        def ref(a: list, dst: str = dst) -> list[torch.Tensor]:
            info = torch.iinfo(DTYPES[dst])
            v = a[0].double().nan_to_num(nan=0.0, posinf=float(info.max), neginf=float(info.min))
            v = v.trunc().clamp(info.min, info.max)
            ints = [min(max(int(t), info.min), info.max) for t in v.tolist()]
            a[1][:] = torch.tensor(ints, dtype=torch.int64).to(DTYPES[dst])
            return [a[1]]

        out.append(Case(name, kernel, name, [x, poison(64, DTYPES[dst]), 64], (1,), outputs=[1],
                        meta=dict(BLOCK=64), reference=ref,
                        reason="out-of-range float -> int is undefined in Triton; Anvil saturates"))
    return out


def bf16_subnormal_cases() -> list[Case]:
    name = "cast_bfloat16_subnormal"
    src = (
        HEADER
        + f"""@triton.jit
def {name}(x_ptr, f32_ptr, f64_ptr, f16_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(f32_ptr + offs, x.to(tl.float32))
    tl.store(f64_ptr + offs, x.to(tl.float64))
    tl.store(f16_ptr + offs, x.to(tl.float16))
    tl.store(x_ptr + offs, x * 2)
"""
    )
    bits = torch.arange(1, 129, dtype=torch.int64).to(torch.int16) * 257 % 128 + 1  # subnormal bit patterns
    bits[::2] |= -0x8000  # half of them negative
    x = bits.view(torch.bfloat16)

    def ref(a: list) -> list[torch.Tensor]:
        xv = a[0].clone()
        a[1][:], a[2][:], a[3][:] = xv.float(), xv.double(), xv.float().half()
        a[0][:] = (xv.float() * 2).to(torch.bfloat16)
        return [a[1], a[2], a[3], a[0]]

    return [Case(name, src, name, [x, poison(128, torch.float32), poison(128, torch.float64),
                                   poison(128, torch.float16)], (1,), outputs=[1, 2, 3, 0], meta=dict(BLOCK=128),
                 reference=ref, reason="interpreter flushes bf16 subnormals to zero when widening")]


FP8 = HEADER + """@triton.jit
def fp8_decode(c_ptr, f32_ptr, f16_ptr, n, FMT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    if FMT == "e4nv":
        x = tl.load(c_ptr + offs, mask=m).to(tl.float8e4nv, bitcast=True)
    else:
        x = tl.load(c_ptr + offs, mask=m).to(tl.float8e5, bitcast=True)
    tl.store(f32_ptr + offs, x.to(tl.float32), mask=m)
    tl.store(f16_ptr + offs, x.to(tl.float16), mask=m)


@triton.jit
def fp8_encode(x_ptr, c_ptr, n, FMT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if FMT == "e4nv":
        y = x.to(tl.float8e4nv)
    else:
        y = x.to(tl.float8e5)
    tl.store(c_ptr + offs, y.to(tl.uint8, bitcast=True), mask=m)
"""
FP8_TORCH = {"e4nv": torch.float8_e4m3fn, "e5": torch.float8_e5m2}


def fp8_cases() -> list[Case]:
    out = []
    for fmt, tdt in FP8_TORCH.items():
        codes = torch.arange(256, dtype=torch.int64).to(torch.uint8)
        value = codes.view(tdt).float()
        odd = value.isnan() | value.isinf() | ((value != 0) & ((codes & (0x78 if fmt == "e4nv" else 0x7C)) == 0))
        for sel, tag in ((~odd, "normal"), (odd, "special")):
            c = codes[sel]
            n = c.numel()
            ref, reason = None, ""
            if tag == "special":
                # The interpreter decodes NaN / inf codes as finite numbers (its _convert_float
                # only rebiases the exponent) and flushes fp8e5 subnormals to 0 in fp16.
                ref, reason = _fp8_decode_reference(tdt), "interpreter mis-decodes fp8 NaN/inf and subnormal codes"
            out.append(Case(f"fp8_decode_{fmt}_{tag}", FP8, "fp8_decode",
                            [c, poison(n, torch.float32), poison(n, torch.float16), n], (1,), outputs=[1, 2],
                            meta=dict(FMT=fmt, BLOCK=256), reference=ref, reason=reason))
        for src in ("float32", "float16", "bfloat16"):
            name = f"fp8_encode_{fmt}_{src}"
            g = gen(name)
            big = 400.0 if fmt == "e4nv" else 50000.0  # in range: Triton saturates, torch gives NaN/inf
            x = (torch.rand(300, generator=g, dtype=torch.float64) * 2 - 1) * big
            x = x * torch.pow(2.0, -torch.randint(0, 12, (300,), generator=g).double())
            x = x.to(DTYPES[src])
            # The interpreter rounds by adding the first dropped bit to the mantissa without carrying
            # into the exponent (1.9375 * 2**-4 -> 2**-4 instead of 2**-3 in e4m3).
            out.append(Case(name, FP8, "fp8_encode", [x, poison(300, torch.uint8), 300], (1,), outputs=[1],
                            meta=dict(FMT=fmt, BLOCK=512), reference=_fp8_encode_reference(tdt),
                            reason="interpreter's fp32 -> fp8 rounding drops the carry into the exponent"))
    return out


def _fp8_decode_reference(tdt: torch.dtype):
    def ref(a: list) -> list[torch.Tensor]:
        v = a[0].view(tdt).float()
        a[1][:], a[2][:] = v, v.half()
        return [a[1], a[2]]

    return ref


def _fp8_encode_reference(tdt: torch.dtype):
    def ref(a: list) -> list[torch.Tensor]:
        a[1][:] = a[0].float().to(tdt).view(torch.uint8)  # exact: bf16 and fp16 widen exactly to fp32
        return [a[1]]

    return ref


CASES = register(fp8_cases() + bf16_subnormal_cases() + cast_cases() + bitcast_cases() + rounding_cases()
                 + saturation_cases())


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_casts(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)
