"""Vectorizable math functions in LLVM IR for the CPU backend.

libm calls stop LLVM from vectorizing a loop (each element becomes a scalar call); these are
straight-line arithmetic and selects instead. float32 functions only: float64 keeps libm's (and
float16/bfloat16 are computed in float32). The accuracy of each, in ulps of the float32 result,
is stated in tests/compiler/test_cpu_mathlib.py, which measures it. Over every float32 input:
exp 1.01, exp2 1.02, log 0.83, log2 1.06, erf 1.28, tanh 1.51, sigmoid 2.40 (libdevice's);
sin, cos, erfc, log1p 0.5 plus < 1e-4 (the nearest float32 but where the exact value is all but
halfway), expm1 exactly the nearest. The other functions evaluated in float64 measure the same
on dense samples, except near the zeros of lgamma (below -2) and of the Bessel functions (below
8), where their error is absolute.

    core.py     building blocks (polynomials, selects, bits, always-inline library functions)
    explog.py   exp, exp2, exp10, expm1, log, log2, log10, log1p, pow; the float64 exp/log cores
    trig.py     sin, cos, tan (exact reduction for every float32), asin, acos, atan, atan2
    hyper.py    sinh, cosh, tanh, asinh, acosh, atanh
    special.py  erf, erfc, erfinv
    gamma.py    lgamma, tgamma
    bessel.py   j0, j1, y0, y1
    misc.py     cbrt, hypot, fmod, remainder, nextafter, fdim, ilogb, ldexp
"""

from __future__ import annotations

from collections.abc import Callable

from .bessel import j0_f32, j1_f32, y0_f32, y1_f32
from .core import B, V
from .explog import exp2_f32, exp10_f32, exp_f32, expm1_f32, log1p_f32, log2_f32, log10_f32, log_f32, pow_f32
from .gamma import lgamma_f32, tgamma_f32
from .hyper import acosh_f32, asinh_f32, atanh_f32, cosh_f32, sinh_f32, tanh_f32
from .misc import cbrt_f32, fdim, fmod_f32, hypot_f32, ilogb, ldexp_f32, nextafter, remainder_f32
from .special import erf_f32, erfc_f32, erfinv
from .trig import acos_f32, asin_f32, atan2_f32, atan_f32, cos_f32, sin_f32, tan_f32

__all__ = ["F32_UNARY", "F32_BINARY", "ANY_BINARY", "exp_f32", "exp2_f32", "log_f32", "log2_f32", "erfinv", "ilogb",
           "fmod_f32", "ldexp_f32"]

F32_UNARY: dict[str, Callable[[B, V], V]] = {
    "exp": exp_f32, "exp2": exp2_f32, "exp10": exp10_f32, "expm1": expm1_f32,
    "log": log_f32, "log2": log2_f32, "log10": log10_f32, "log1p": log1p_f32,
    "sin": sin_f32, "cos": cos_f32, "tan": tan_f32, "asin": asin_f32, "acos": acos_f32, "atan": atan_f32,
    "sinh": sinh_f32, "cosh": cosh_f32, "tanh": tanh_f32, "asinh": asinh_f32, "acosh": acosh_f32,
    "atanh": atanh_f32, "erf": erf_f32, "erfc": erfc_f32, "erfinv": erfinv, "cbrt": cbrt_f32,
    "lgamma": lgamma_f32, "tgamma": tgamma_f32, "j0": j0_f32, "j1": j1_f32, "y0": y0_f32, "y1": y1_f32,
}
F32_BINARY: dict[str, Callable[[B, V, V], V]] = {
    "pow": pow_f32, "atan2": atan2_f32, "hypot": hypot_f32, "fmod": fmod_f32, "remainder": remainder_f32,
}
# exact bit-level functions, for float32 and float64 alike
ANY_BINARY: dict[str, Callable[[B, V, V], V]] = {"nextafter": nextafter, "fdim": fdim}
