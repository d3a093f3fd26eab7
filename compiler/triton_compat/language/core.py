"""`triton.language.core`: the core classes (dtypes, tensor, constexpr) with Triton's extras."""

from __future__ import annotations

from typing import Any

from ...language.core import *  # noqa: F403
from ...language.core import builtin, constexpr, dtype, is_builtin  # noqa: F401


class constexpr_type:  # noqa: N801 - Triton's name
    """The type of a compile-time constant `value` (what Triton reports for constexpr arguments)."""

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, constexpr) else value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, constexpr_type) and self.value == other.value

    def __hash__(self) -> int:
        return hash(("constexpr_type", repr(self.value)))

    def __repr__(self) -> str:
        return f"constexpr_type[{self.value!r}]"


# Triton's shared constant for a zero default of constexpr parameters (`descending=CONSTEXPR_0`).
CONSTEXPR_0 = constexpr(0)


def _unwrap_if_constexpr(o: Any) -> Any:
    return o.value if isinstance(o, constexpr) else o


def _constexpr_to_value(v: Any) -> Any:
    return _unwrap_if_constexpr(v)
