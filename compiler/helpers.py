"""Host-side integer helpers that kernels may also call at compile time (the frontend evaluates them
as pure functions, frontend/closed.py): `compiler.cdiv`, `compiler.next_power_of_2`, and `triton.cdiv`
of the Triton stand-in."""

from __future__ import annotations

from typing import Any

__all__ = ["cdiv", "next_power_of_2"]


def cdiv(x: Any, y: Any) -> Any:
    """Ceiling division: cdiv(10, 4) == 3 (also works on torch tensors, as Triton's does)."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()
