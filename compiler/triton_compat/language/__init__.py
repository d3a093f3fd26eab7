"""`triton.language` under the stand-in: Anvil's language (`compiler.language`) with Triton's names.

Every name of `compiler.language` is here (looked up on it, so the two never disagree). The
few names Triton code uses that are spelled differently or are pure host-side helpers
(`str_to_ty`, `TRITON_MAX_TENSOR_NUMEL`, `pi32_t`, `const`, ...) are added here.
"""

from __future__ import annotations

from typing import Any

from ... import language as _tl
from ...language import math, random, standard  # noqa: F401
from ...language.core import dtype, pointer_type
from . import core, extra  # noqa: F401

__all__ = [*_tl.__all__, "TRITON_MAX_TENSOR_NUMEL", "pi32_t", "const", "constexpr_type", "str_to_ty", "core",
           "standard", "random"]

TRITON_MAX_TENSOR_NUMEL = 1 << 20

# `pi32_t`: Triton's name for the type of a pointer to int32.
pi32_t = pointer_type(dtype("int32"))


class const:  # noqa: N801 - Triton's name
    """Annotation marking a pointer parameter as read-only: `def k(x_ptr: tl.const, ...)`."""


constexpr_type = core.constexpr_type


def str_to_ty(name: str, c: Any = None) -> Any:
    """The dtype for a Triton signature string: 'fp32', 'i32', 'u1', '*fp16', '*kfp32', 'constexpr'."""
    if name.startswith("*"):
        return pointer_type(str_to_ty(name[1:].removeprefix("k")))
    if name == "constexpr":
        return constexpr_type(c)
    return dtype({"u1": "i1"}.get(name, name))


def __getattr__(name: str) -> Any:
    return getattr(_tl, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(dir(_tl)))
