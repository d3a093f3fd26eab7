"""`tl.math`: elementwise math functions (precise versions from libm/libdevice)."""

from __future__ import annotations

from typing import Any

from ..errors import ArgumentError, DtypeError
from ..ir import types as T
from ..ir.ops import MATH_FNS, MATH_RESULTS
from .builtins import (  # noqa: F401
    abs,
    ceil,
    cos,
    div_rn,
    erf,
    exp,
    exp2,
    fdiv,
    floor,
    fma,
    log,
    log2,
    rsqrt,
    sin,
    sqrt,
    sqrt_rn,
    umulhi,
)
from .core import Tensor, builtin

__all__ = ["exp", "exp2", "log", "log2", "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "abs", "fdiv",
           "div_rn", "erf", "floor", "ceil", "fma", "umulhi", "math_fn"]

_INT_FNS = {"popc", "clz", "ffs", "brev"}  # integer operands only


def math_fn(name: str) -> Any:
    """The builtin for elementwise math function `name` (one of MATH_FNS)."""
    arity = MATH_FNS[name]

    def impl(*args: Any, _sem: Any = None) -> Tensor:
        if len(args) != arity:
            raise ArgumentError(f"{name} takes {arity} argument(s), got {len(args)}")
        xs = [_sem.to_tensor(a) for a in args]
        if name == "ldexp":  # ldexp(x, n): the exponent stays an integer (i32), like C's and libdevice's
            x, n = xs
            if not x.dtype.is_floating():
                x = _sem.cast(x, T.fp32)
            if not n.dtype.is_int():
                raise DtypeError(f"ldexp needs an integer exponent, got {n.ir_elem}")
            x, n = _sem.broadcast_pair(x, _sem.cast(n, T.i32))
            return _sem.math(name, x, n)
        if arity > 1:
            a = xs[0]
            rest = []
            for x in xs[1:]:
                a, x = _sem.binary_operands(a, x)
                rest.append(x)
            xs = [a] + [_sem.broadcast_to(x, a.shape) for x in rest]
        t = xs[0]
        if name in _INT_FNS:
            if not t.dtype.is_int():
                raise DtypeError(f"{name} needs an integer tensor, got {t.ir_elem}")
            return _sem.math(name, *xs, result=MATH_RESULTS.get(name))
        if not t.dtype.is_floating():
            t = _sem.cast(t, T.fp32)
            xs = [_sem.cast(x, T.fp32) for x in xs]
        return _sem.math(name, *xs, result=MATH_RESULTS.get(name))  # a fixed result type (isnan: i1), or x's

    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"Elementwise {name}."
    return builtin(impl)


def __getattr__(name: str) -> Any:
    if name in MATH_FNS:
        fn = math_fn(name)
        globals()[name] = fn
        return fn
    raise AttributeError(f"tl.math has no function {name!r}")
