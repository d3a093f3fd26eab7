"""`tl.extra.cuda`: the CUDA spelling of the libdevice module, and the kernel's own shared memory
for inline assembly."""

from __future__ import annotations

from typing import Any

from ....backends.registry import on_gpu
from ....errors import ArgumentError
from ....ir import types as T
from ...core import Tensor, builtin
from .. import libdevice

__all__ = ["libdevice", "shared_memory"]

SHARED_MEMORY_MAX = 227 * 1024  # bytes of shared memory a program may have on Hopper


@builtin
def shared_memory(nbytes: int, _sem: Any = None) -> Tensor:
    """The shared-memory address (an int32 scalar, 1024-byte aligned) of `nbytes` bytes that the
    program holds from its start to its end (GPU only): for inline assembly that keeps its own
    buffers, such as rings of bulk copies. Each call is its own region; the compiler's other uses of
    shared memory lie above them, and the launch asks for the total as dynamic shared memory.
    `base = tl.extra.cuda.shared_memory(4 * 4096)`."""
    n = getattr(nbytes, "value", nbytes)
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= SHARED_MEMORY_MAX:
        raise ArgumentError(f"shared_memory takes a compile-time byte count from 1 to {SHARED_MEMORY_MAX}, got {n!r}",
                            hint="pass a tl.constexpr expression")

    if not on_gpu(str(_sem.gen.options.target)):
        raise ArgumentError("shared_memory is GPU memory for inline assembly and has no CPU backend",
                            hint="keep the GPU-only code under a tl.constexpr branch that the CPU build skips")
    return Tensor(_sem.b.value("shared_alloc", [], T.i32, nbytes=n))
