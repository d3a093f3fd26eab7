"""Anvil's CPU math library vs torch on the CPU: one elementwise kernel per function over
16M float32 elements (out-of-place), median of several runs each, timed alternately.

    python benchmarks/cpu_math.py                 # every function
    python benchmarks/cpu_math.py erf tanh sin    # some
    python benchmarks/cpu_math.py --n 1000000     # another size

The `copy` row (y = x * 2) is the memory-bound floor of an out-of-place float32 kernel.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

import compiler

BLOCK = 4096

# name -> (kernel expression, torch function, input range)
FUNCTIONS: dict[str, tuple[str, Callable[..., Any], tuple[float, float]]] = {
    "copy": ("x * 2.0", lambda x, y, out: torch.mul(x, 2.0, out=out), (-10, 10)),
    "exp": ("tl.exp(x)", lambda x, y, out: torch.exp(x, out=out), (-80, 80)),
    "log": ("tl.log(x)", lambda x, y, out: torch.log(x, out=out), (1e-3, 1e3)),
    "erf": ("tl.erf(x)", lambda x, y, out: torch.erf(x, out=out), (-5, 5)),
    "gelu": ("0.5 * x * (1 + tl.erf(x * 0.7071067811865476))",
             lambda x, y, out: torch.nn.functional.gelu(x), (-5, 5)),
    "tanh": ("libdevice.tanh(x)", lambda x, y, out: torch.tanh(x, out=out), (-10, 10)),
    "erfc": ("libdevice.erfc(x)", lambda x, y, out: torch.erfc(x, out=out), (-5, 10)),
    "log1p": ("libdevice.log1p(x)", lambda x, y, out: torch.log1p(x, out=out), (-0.9, 10)),
    "expm1": ("libdevice.expm1(x)", lambda x, y, out: torch.expm1(x, out=out), (-10, 10)),
    "pow": ("libdevice.pow(x, y)", lambda x, y, out: torch.pow(x, y, out=out), (0.01, 10)),
    "sin": ("tl.sin(x)", lambda x, y, out: torch.sin(x, out=out), (-100, 100)),
    "cos": ("tl.cos(x)", lambda x, y, out: torch.cos(x, out=out), (-100, 100)),
    "tan": ("libdevice.tan(x)", lambda x, y, out: torch.tan(x, out=out), (-1.5, 1.5)),
    "asin": ("libdevice.asin(x)", lambda x, y, out: torch.asin(x, out=out), (-1, 1)),
    "acos": ("libdevice.acos(x)", lambda x, y, out: torch.acos(x, out=out), (-1, 1)),
    "atan": ("libdevice.atan(x)", lambda x, y, out: torch.atan(x, out=out), (-10, 10)),
    "atan2": ("libdevice.atan2(x, y)", lambda x, y, out: torch.atan2(x, y, out=out), (-10, 10)),
    "sinh": ("libdevice.sinh(x)", lambda x, y, out: torch.sinh(x, out=out), (-10, 10)),
    "cosh": ("libdevice.cosh(x)", lambda x, y, out: torch.cosh(x, out=out), (-10, 10)),
    "asinh": ("libdevice.asinh(x)", lambda x, y, out: torch.asinh(x, out=out), (-10, 10)),
    "acosh": ("libdevice.acosh(x)", lambda x, y, out: torch.acosh(x, out=out), (1, 10)),
    "atanh": ("libdevice.atanh(x)", lambda x, y, out: torch.atanh(x, out=out), (-1, 1)),
    "cbrt": ("libdevice.cbrt(x)", lambda x, y, out: torch.pow(x.abs(), 1 / 3, out=out), (-10, 10)),
    "hypot": ("libdevice.hypot(x, y)", lambda x, y, out: torch.hypot(x, y, out=out), (-10, 10)),
    "fmod": ("libdevice.fmod(x, y)", lambda x, y, out: torch.fmod(x, y, out=out), (-100, 100)),
    "exp10": ("libdevice.exp10(x)", lambda x, y, out: torch.pow(10.0, x, out=out), (-30, 30)),
    "log10": ("libdevice.log10(x)", lambda x, y, out: torch.log10(x, out=out), (1e-3, 1e3)),
    "sigmoid": ("tl.sigmoid(x)", lambda x, y, out: torch.sigmoid(x, out=out), (-10, 10)),
    "lgamma": ("libdevice.lgamma(x)", lambda x, y, out: torch.lgamma(x, out=out), (0.1, 30)),
    "j0": ("libdevice.j0(x)", lambda x, y, out: torch.special.bessel_j0(x, out=out), (-30, 30)),
}


def kernel(expr: str) -> compiler.JITFunction:
    src = f"""
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(o_ptr + offs, {expr}, mask=m)
"""
    return compiler.compile_source(src, kernel="k")


def paired_medians(f: Callable[[], Any], g: Callable[[], Any], reps: int) -> tuple[float, float]:
    """Medians of f and g, timed alternately so both see the same background load."""
    f(), g()
    tf, tg = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t1 = time.perf_counter()
        g()
        t2 = time.perf_counter()
        tf.append(t1 - t0)
        tg.append(t2 - t1)
    return statistics.median(tf), statistics.median(tg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="functions (default: all)")
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    n = args.n
    g = torch.Generator().manual_seed(0)
    print(f"{n} float32 elements, {torch.get_num_threads()} torch threads; median of {args.reps} runs")
    print(f"{'function':10s} {'anvil ms':>9s} {'torch ms':>9s} {'anvil/torch':>12s}")
    for name in args.names or list(FUNCTIONS):
        expr, ref, (lo, hi) = FUNCTIONS[name]
        x = torch.rand(n, generator=g) * (hi - lo) + lo
        y = torch.rand(n, generator=g) * (hi - lo) + lo
        if name in ("pow",):
            y = torch.rand(n, generator=g) * 6 - 3
        out = torch.empty(n)
        k = kernel(expr)
        ta, tt = paired_medians(lambda k=k, x=x, y=y, out=out: k[(-(-n // BLOCK),)](x, y, out, n, BLOCK=BLOCK),
                                lambda ref=ref, x=x, y=y, out=out: ref(x, y, out), args.reps)
        print(f"{name:10s} {ta * 1e3:9.2f} {tt * 1e3:9.2f} {ta / tt:12.2f}")


if __name__ == "__main__":
    main()
