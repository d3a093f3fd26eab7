"""libdevice names (`tl.extra.libdevice.tanh(x)` and friends) as elementwise math builtins."""

from __future__ import annotations

from typing import Any

from ...ir import types as T
from ...ir.ops import FLOAT_BINARY, MATH_FNS
from ..core import Tensor, builtin
from ..math import math_fn

_RENAMES = {"pow": "pow", "fast_expf": "fast_expf", "fast_logf": "fast_logf", "isinfd": "isinf",
            "isnand": "isnan", "finitef": "isfinite", "llrint": "rint", "round": "round",
            "exp2": "exp2", "div_rn": "div_rn", "rsqrt": "rsqrt", "fmod": "fmod", "fdividef": "fast_dividef"}


def names() -> list[str]:
    """Every name `tl.extra.libdevice` answers (the math builtins, the binary float functions and the
    libdevice spellings mapped onto them), sorted."""
    return sorted(set(MATH_FNS) | set(FLOAT_BINARY) | set(_RENAMES))


def __getattr__(name: str) -> Any:
    target = _RENAMES.get(name, name)
    if target in MATH_FNS or target in FLOAT_BINARY:
        fn = _binary(target) if target in FLOAT_BINARY else math_fn(target)
        globals()[name] = fn
        return fn
    raise AttributeError(f"libdevice has no function {name!r} in Anvil; see the language reference")


def _binary(name: str) -> Any:
    def impl(x: Any, y: Any, _sem: Any = None) -> Tensor:
        a, b = _sem.binary_operands(x, y)
        if not a.dtype.is_floating():
            a, b = _sem.cast(a, T.fp32), _sem.cast(b, T.fp32)
        return Tensor(_sem.b.value(name, [a.handle, b.handle], a.type))

    impl.__name__ = impl.__qualname__ = name
    impl.__doc__ = f"Elementwise {name}(x, y)."
    return builtin(impl)
