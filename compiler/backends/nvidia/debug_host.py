"""Host side of the GPU debug record (debug.py): read `__anvil_debug_err` after a launch and raise
the CPU backend's errors (DeviceAssertError, OutOfBoundsError) with the kernel's source location.

`check_debug_record(kernel)` takes a CudaCompiledKernel that has been launched; it synchronises
the current stream, reads the record, clears it for the next launch, and raises if a failure was
recorded. The runtime calls it after each debug-mode launch.
"""

from __future__ import annotations

import ctypes
import linecache
from typing import Any

from ... import errors as E
from .debug import DEBUG_LOCS, ERR_GLOBAL, ERR_WORDS

__all__ = ["read_debug_record", "check_debug_record"]


def _global(module: Any) -> tuple[int, int] | None:
    """(device address, size) of the record in a loaded module; None when the kernel has none."""
    from cuda.bindings import driver as cu

    err, ptr, size = cu.cuModuleGetGlobal(module, ERR_GLOBAL.encode())
    if err != cu.CUresult.CUDA_SUCCESS:
        return None
    return int(ptr), int(size)


def read_debug_record(kernel: Any, clear: bool = True) -> list[int] | None:
    """The record's words (zeros: nothing recorded), or None if the kernel has no record."""
    import torch
    from cuda.bindings import driver as cu

    g = _global(kernel.function.module)
    if g is None:
        return None
    ptr, size = g
    torch.cuda.synchronize()
    buf = (ctypes.c_int64 * ERR_WORDS)()
    res = cu.cuMemcpyDtoH(ctypes.addressof(buf), ptr, min(size, ctypes.sizeof(buf)))
    if res[0] != cu.CUresult.CUDA_SUCCESS:
        raise E.LaunchError(f"reading the debug record of kernel {kernel.name} failed: {res[0]}")
    words = list(buf)
    if clear and words[0]:
        cu.cuMemsetD8(ptr, 0, size)
    return words


def check_debug_record(kernel: Any) -> None:
    """Raise the recorded failure of the last launch(es) of `kernel`, if any."""
    words = read_debug_record(kernel)
    if not words or not words[0]:
        return
    kind, loc_id = words[0] >> 32, words[0] & 0xFFFFFFFF
    locs = DEBUG_LOCS.get(kernel.binary.symbol, [])
    loc = locs[loc_id - 1] if 0 < loc_id <= len(locs) else None
    where = f"{loc.file}:{loc.line}:{loc.col}" if loc else "<unknown location>"
    line = linecache.getline(loc.file, loc.line).strip() if loc else ""
    pid = tuple(words[1:4])
    if kind == 2:
        raise E.DeviceAssertError(f"device_assert failed in kernel {kernel.name} at {where}, program id {pid}\n"
                                  f"    {line}")
    raise E.OutOfBoundsError(f"out-of-bounds access in kernel {kernel.name} at {where}, program id {pid}, "
                             f"address 0x{words[4] & (2**64 - 1):x}\n    {line}\n"
                             "hint: mask the load/store (mask=offs < n) or fix the offsets")
