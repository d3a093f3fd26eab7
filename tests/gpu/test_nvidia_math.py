"""Precise math functions on the GPU (libdevice) against torch in float64 and the CPU backend."""

from __future__ import annotations

import pytest
import torch

import compiler.language as tl
from compiler import cdiv, jit

pytestmark = pytest.mark.gpu


@jit
def unary(x_ptr, y_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m)
    if FN == "tanh":
        y = tl.extra.libdevice.tanh(x)
    elif FN == "erf":
        y = tl.math.erf(x)
    elif FN == "log1p":
        y = tl.math.log1p(x)
    elif FN == "lgamma":
        y = tl.extra.libdevice.lgamma(x)
    elif FN == "asinh":
        y = tl.extra.libdevice.asinh(x)
    elif FN == "cbrt":
        y = tl.extra.libdevice.cbrt(x)
    elif FN == "pow":
        y = tl.extra.libdevice.pow(x, 1.7)
    else:
        y = tl.extra.libdevice.atan2(x, 0.5)
    tl.store(y_ptr + o, y, mask=m)


REF = {"tanh": torch.tanh, "erf": torch.erf, "log1p": torch.log1p, "lgamma": torch.lgamma,
       "asinh": torch.asinh, "cbrt": lambda x: torch.sign(x) * x.abs() ** (1 / 3),
       "pow": lambda x: x ** 1.7, "atan2": lambda x: torch.atan2(x, torch.full_like(x, 0.5))}


@pytest.mark.parametrize("fn", sorted(REF))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1000, 4097])
def test_libdevice_math(fn: str, dtype: torch.dtype, n: int) -> None:
    x = torch.rand(n, dtype=dtype) * 3 + 0.05  # positive: pow, log1p, lgamma stay real
    ref = REF[fn](x.double())
    got = torch.full_like(x, float("nan"), device="cuda")
    unary[(cdiv(n, 256),)](x.cuda(), got, n, FN=fn, BLOCK=256)
    cpu = torch.full_like(x, float("nan"))
    unary[(cdiv(n, 256),)](x, cpu, n, FN=fn, BLOCK=256)
    tol = 2e-6 if dtype == torch.float32 else 1e-13
    torch.testing.assert_close(got.cpu().double(), ref, rtol=tol, atol=tol)
    torch.testing.assert_close(got.cpu(), cpu, rtol=tol, atol=tol)
