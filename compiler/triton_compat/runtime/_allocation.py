"""`triton.runtime._allocation`: the scratch-memory allocator hook (unused by the CPU backend)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Allocator", "NullAllocator", "set_allocator"]


class Allocator(Protocol):
    def __call__(self, size: int, alignment: int, stream: int | None) -> Any: ...


class NullAllocator:
    """The default: kernels that need global scratch memory fail on a GPU; the CPU needs none."""

    def __call__(self, size: int, alignment: int, stream: int | None) -> Any:
        raise RuntimeError("Kernel requires a runtime memory allocation, but no allocator was set. "
                           "Use triton.set_allocator to specify an allocator.")


_allocator: Any = NullAllocator()


def set_allocator(allocator: Any) -> None:
    """Record the allocator (kernels on the CPU backend never call it)."""
    global _allocator
    _allocator = allocator
