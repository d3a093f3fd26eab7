"""Elementwise math: exp, exp2, log, log2, sqrt, rsqrt, sin, cos, erf, sigmoid (compared within a
few ulps: numpy and Anvil's math library round differently), and the exact ones (abs, floor,
ceil, sqrt, maximum, minimum, clamp, fdiv, div_rn, cdiv, umulhi) bit for bit.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from diff_harness import DTYPES, HEADER, Case, case_ids, check_case, gen, poison, rand_tensor, register

UNARY = [
    # name, expression, uses the positive input, approximate
    ("exp", "tl.exp(x)", False, True),
    ("exp2", "tl.exp2(x)", False, True),
    ("log", "tl.log(p)", True, True),
    ("log2", "tl.log2(p)", True, True),
    ("sqrt", "tl.sqrt(p)", True, False),
    ("sqrt_rn", "tl.sqrt_rn(p)", True, False),
    ("rsqrt", "tl.rsqrt(p)", True, True),
    ("sin", "tl.sin(x)", False, True),
    ("cos", "tl.cos(x)", False, True),
    ("erf", "tl.erf(x)", False, True),
    ("sigmoid", "tl.sigmoid(x)", False, True),
    ("abs", "tl.abs(x)", False, False),
    ("floor", "tl.floor(x)", False, False),
    ("ceil", "tl.ceil(x)", False, False),
    ("max", "tl.maximum(x, p)", False, False),
    ("min", "tl.minimum(x, -p)", False, False),
    ("clamp", "tl.clamp(x, -p, p)", False, False),
    ("fdiv", "tl.fdiv(x, p)", False, False),
    ("div_rn", "tl.div_rn(x, p)", False, False),
    ("softmax", "tl.softmax(x)", False, True),
]
TOL = {"float32": (3e-6, 1e-6), "float64": (1e-13, 1e-14), "float16": (2e-3, 1e-3)}
# Triton (triton/language/math.py _check_dtype) accepts these for fp32 only, and the
# transcendental ones, sqrt, floor and ceil for fp32 and fp64 only. Anvil also computes them for
# fp16 (in fp32), an extension checked against torch in `fp16_extension_cases`.
FP32_ONLY = {"sqrt_rn", "div_rn"}
FP32_FP64 = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "erf", "floor", "ceil", "sigmoid"}


def _triton_accepts(op: str, t: str) -> bool:
    return not ((op in FP32_ONLY and t != "float32") or (op in FP32_FP64 and t == "float16"))


def unary_cases() -> list[Case]:
    out = []
    for t, n in (("float32", 1000), ("float64", 300), ("float16", 500)):
        ops = [u for u in UNARY if _triton_accepts(u[0], t)]
        name = f"math_{t}"
        lines = "\n".join(f"    tl.store({o}_ptr + offs, {e}, mask=m)" for o, e, _, _ in ops if o != "softmax")
        src = (
            HEADER
            + f"""@triton.jit
def {name}(x_ptr, p_ptr, {", ".join(f"{o}_ptr" for o, *_ in ops)}, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    p = tl.load(p_ptr + offs, mask=m, other=1.0)
"""
            + lines
            + "\n    sm = tl.softmax(tl.where(m, x, float('-inf')).to(tl.float32))\n"
            + "    tl.store(softmax_ptr + offs, sm.to(x.dtype), mask=m)\n"
        )
        g = gen(name)
        dt = DTYPES[t]
        x = rand_tensor(n, dt, g, scale=3.0)
        x[:6] = torch.tensor([0.0, -0.0, 0.5, -0.5, 2.5, -1.5], dtype=dt)
        p = rand_tensor(n, dt, g, lo=1e-3, hi=50.0)
        args = [x, p] + [poison(n, dt) for _ in ops] + [n]
        # softmax runs in fp32 for every input type
        tol = [(TOL["float32"] if o == "softmax" and t == "float64" else TOL[t]) if approx else None
               for o, _, _, approx in ops]
        # one program: softmax normalizes over the whole block
        out.append(Case(name, src, name, args, (1,), outputs=range(2, 2 + len(ops)), meta=dict(BLOCK=1024),
                        tol=tol))
    return out


INT_MATH = HEADER + """@triton.jit
def int_math(a_ptr, b_ptr, u_ptr, v_ptr, cdiv_ptr, hi_ptr, uhi_ptr, mx_ptr, mn_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m, other=1)
    u = tl.load(u_ptr + offs, mask=m)
    v = tl.load(v_ptr + offs, mask=m)
    tl.store(cdiv_ptr + offs, tl.cdiv(a, b), mask=m)
    tl.store(hi_ptr + offs, tl.umulhi(a, b), mask=m)
    tl.store(uhi_ptr + offs, tl.umulhi(u, v), mask=m)
    tl.store(mx_ptr + offs, tl.maximum(u, v), mask=m)
    tl.store(mn_ptr + offs, tl.minimum(a, b), mask=m)
"""


def int_cases() -> list[Case]:
    name = "int_math"
    g = gen(name)
    n = 200
    a = rand_tensor(n, torch.int32, g, lo=0)
    b = rand_tensor(n, torch.int32, g, lo=1, hi=5000)
    u, v = rand_tensor(n, torch.uint32, g), rand_tensor(n, torch.uint32, g)
    args = [a, b, u, v, poison(n, torch.int32), poison(n, torch.int32), poison(n, torch.uint32),
            poison(n, torch.uint32), poison(n, torch.int32), n]
    return [Case(name, INT_MATH, "int_math", args, (1,), outputs=range(4, 9), meta=dict(BLOCK=256))]


def fp16_extension_cases() -> list[Case]:
    ops = [u for u in UNARY if u[0] in FP32_FP64]
    name = "math_float16_extension"
    lines = "\n".join(f"    tl.store({o}_ptr + offs, {e}, mask=m)" for o, e, _, _ in ops)
    src = (
        HEADER
        + f"""@triton.jit
def {name}(x_ptr, p_ptr, {", ".join(f"{o}_ptr" for o, *_ in ops)}, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    p = tl.load(p_ptr + offs, mask=m, other=1.0)
"""
        + lines
        + "\n"
    )
    g = gen(name)
    n = 200
    x = rand_tensor(n, torch.float16, g, scale=3.0)
    p = rand_tensor(n, torch.float16, g, lo=1e-3, hi=50.0)
    fns = {"exp": lambda x, p: torch.exp(x), "exp2": lambda x, p: torch.exp2(x), "log": lambda x, p: torch.log(p),
           "log2": lambda x, p: torch.log2(p), "sqrt": lambda x, p: torch.sqrt(p),
           "rsqrt": lambda x, p: torch.rsqrt(p), "sin": lambda x, p: torch.sin(x), "cos": lambda x, p: torch.cos(x),
           "erf": lambda x, p: torch.erf(x), "floor": lambda x, p: torch.floor(x), "ceil": lambda x, p: torch.ceil(x),
           "sigmoid": lambda x, p: torch.sigmoid(x)}

    def ref(a: list) -> list[torch.Tensor]:
        xf, pf = a[0].double(), a[1].double()
        for i, (o, *_) in enumerate(ops):
            a[2 + i][:] = fns[o](xf, pf).half()
        return a[2:2 + len(ops)]

    args = [x, p] + [poison(n, torch.float16) for _ in ops] + [n]
    return [Case(name, src, name, args, (1,), outputs=range(2, 2 + len(ops)), meta=dict(BLOCK=256),
                 tol=(1e-3, 1e-3), reference=ref,
                 reason="Triton accepts these only for fp32/fp64; Anvil's fp16 extension is checked against torch")]


FMA = HEADER + """@triton.jit
def fma_kernel(x_ptr, y_ptr, z_ptr, o_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.fma(tl.load(x_ptr + offs), tl.load(y_ptr + offs), tl.load(z_ptr + offs)))
"""

NAN = HEADER + """@triton.jit
def nan_minmax(x_ptr, y_ptr, mx_ptr, mn_ptr, mxa_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    tl.store(mx_ptr + offs, tl.maximum(x, y))
    tl.store(mn_ptr + offs, tl.minimum(x, y))
    tl.store(mxa_ptr + offs, tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL))
"""

LIBDEVICE = """import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def libdevice_ops(x_ptr, p_ptr, tanh_ptr, pow_ptr, atan2_ptr, expm1_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    p = tl.load(p_ptr + offs)
    tl.store(tanh_ptr + offs, libdevice.tanh(x))
    tl.store(pow_ptr + offs, libdevice.pow(p, x))
    tl.store(atan2_ptr + offs, libdevice.atan2(x, p))
    tl.store(expm1_ptr + offs, libdevice.expm1(x))
"""


def reference_cases() -> list[Case]:
    out = []
    for t in ("float32", "float64"):
        name = f"fma_{t}"
        g = gen(name)
        dt = DTYPES[t]
        x, y, z = (rand_tensor(128, dt, g, scale=100.0) for _ in range(3))

        def ref(a: list, dt: torch.dtype = dt) -> list[torch.Tensor]:
            exact = [Fraction(p) * Fraction(q) + Fraction(r) for p, q, r in
                     zip(a[0].tolist(), a[1].tolist(), a[2].tolist(), strict=True)]
            # Fraction -> float rounds once to fp64; for fp32 go through the exact value again.
            if dt == torch.float64:
                a[3][:] = torch.tensor([float(e) for e in exact], dtype=dt)
            else:
                a[3][:] = torch.tensor([_round_f32(e) for e in exact], dtype=dt)
            return [a[3]]

        # The interpreter computes tl.fma as x * y + z in numpy: two roundings. Triton's GPU
        # backends (fma.rn) and Anvil (llvm.fma) round once.
        out.append(Case(name, FMA, "fma_kernel", [x, y, z, poison(128, dt)], (1,), outputs=[3],
                        meta=dict(BLOCK=128), reference=ref, reason="interpreter rounds x * y before adding z"))
    name = "nan_minmax"
    g = gen(name)
    x, y = rand_tensor(64, torch.float32, g), rand_tensor(64, torch.float32, g)
    x[::3] = float("nan")
    y[::5] = float("nan")

    def nan_ref(a: list) -> list[torch.Tensor]:
        a[2][:] = torch.fmax(a[0], a[1])
        a[3][:] = torch.fmin(a[0], a[1])
        a[4][:] = torch.maximum(a[0], a[1])
        return [a[2], a[3], a[4]]

    # tl.maximum / tl.minimum without propagate_nan return the other operand where one is NaN
    # (maxnum: PTX max.f32, Anvil llvm.maxnum); the interpreter's np.maximum returns NaN.
    out.append(Case(name, NAN, "nan_minmax", [x, y] + [poison(64, torch.float32) for _ in range(3)], (1,),
                    outputs=[2, 3, 4], meta=dict(BLOCK=64), reference=nan_ref,
                    reason="interpreter's maximum/minimum propagate NaN even without PropagateNan.ALL"))
    name = "libdevice"
    g = gen(name)
    x = rand_tensor(64, torch.float32, g, scale=2.0)
    p = rand_tensor(64, torch.float32, g, lo=0.1, hi=4.0)

    def lib_ref(a: list) -> list[torch.Tensor]:
        xd, pd = a[0].double(), a[1].double()
        vals = [torch.tanh(xd), torch.pow(pd, xd), torch.atan2(xd, pd), torch.expm1(xd)]
        for buf, v in zip(a[2:6], vals, strict=True):
            buf[:] = v.float()
        return a[2:6]

    out.append(Case(name, LIBDEVICE, "libdevice_ops", [x, p] + [poison(64, torch.float32) for _ in range(4)], (1,),
                    outputs=[2, 3, 4, 5], meta=dict(BLOCK=64), tol=(3e-6, 1e-6), reference=lib_ref,
                    reason="the interpreter has no libdevice (extern_elementwise is not supported)"))
    return out


def _round_f32(e: Fraction) -> float:
    """Round an exact rational to the nearest fp32 (ties to even), through fp64 candidates."""
    d = float(e)  # nearest fp64
    f = torch.tensor(d, dtype=torch.float64).float()
    lo = torch.nextafter(f, torch.tensor(float("-inf")))
    hi = torch.nextafter(f, torch.tensor(float("inf")))
    best = min((f, lo, hi), key=lambda c: (abs(Fraction(c.item()) - e),
                                           int(c.view(torch.int32).item()) & 1))
    return best.item()


CASES = register(unary_cases() + int_cases() + fp16_extension_cases() + reference_cases())


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_math(case: Case, diff_selected: list[str]) -> None:
    check_case(case, diff_selected)
