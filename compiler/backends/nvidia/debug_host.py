"""Host side of GPU debug mode (debug.py, bounds.py): write each launch's tensor bounds into
`__anvil_debug_bounds` before it, read `__anvil_debug_err` after it and raise the CPU backend's
errors (DeviceAssertError, OutOfBoundsError) with the kernel's source location.

`write_debug_bounds(kernel, params)` takes a CompiledKernel of the NVIDIA backend and the launch's
parameter values (every parameter, as its launch gets them); it copies [lo, hi) of each tensor
argument (the CPU backend's extent: the bytes its shape and strides reach) on the current stream,
and remembers each tensor's name, start, element size and length for the error message.
`check_debug_record(kernel)` takes such a kernel that has been launched; it synchronises the
device, reads the record, clears it for the next launch, and raises if a failure was recorded. The
runtime calls the first before and the second after each debug-mode launch.
"""

from __future__ import annotations

import ctypes
import linecache
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from ... import errors as E
from ...ir import types as T
from ...runtime import cuda
from .bounds import BOUNDS_GLOBAL
from .debug_record import DEBUG_LOCS, ERR_GLOBAL, ERR_WORDS

__all__ = ["read_debug_record", "check_debug_record", "write_debug_bounds", "tensor_extent"]

_UNCHECKED = (0, 2**64 - 1)  # a pointer argument that is no tensor: every address passes


@dataclass(frozen=True)
class _Tensor:
    """What the error message says about a tensor argument of the last debug launch."""

    name: str
    start: int
    element_size: int
    numel: int


@dataclass
class _Launch:
    table: Any  # the host copy of the bounds, alive until the launch is checked
    tensors: list[_Tensor | None]  # by kernel argument position


_LAUNCHES: weakref.WeakKeyDictionary[Any, _Launch] = weakref.WeakKeyDictionary()


def _global(module: Any, name: str = ERR_GLOBAL) -> tuple[int, int] | None:
    """(device address, size) of a module global; None when the kernel has none."""
    # deferred: cuda-bindings, an optional dependency used only with an NVIDIA GPU
    from cuda.bindings import driver as cu

    err, ptr, size = cu.cuModuleGetGlobal(module, name.encode())
    if err != cu.CUresult.CUDA_SUCCESS:
        return None
    return int(ptr), int(size)


def tensor_extent(a: Any) -> tuple[int, int] | None:
    """[lo, hi) in bytes of what tensor `a`'s shape and strides reach (empty for no elements, so
    every access is outside); None when `a` is not a tensor."""
    try:
        shape, strides, start, esz = tuple(a.shape), tuple(a.stride()), int(a.data_ptr()), int(a.element_size())
    except (AttributeError, TypeError):
        return None
    if a.numel() == 0:
        return start, start
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True)) + 1
    return start + lo * esz, start + hi * esz


def write_debug_bounds(kernel: Any, params: Any) -> None:
    """Before a debug launch of `kernel` with `params` (a value for every parameter): give the
    kernel its tensor arguments' bounds (a no-op for a kernel without bounds checks)."""
    # deferred: cuda-bindings, an optional dependency used only with an NVIDIA GPU
    from cuda.bindings import driver as cu

    args = [params[i] for i in kernel.arg_index]
    names = list(kernel.binary.arg_names) or [f"argument {i}" for i in range(len(args))]
    table = (ctypes.c_uint64 * max(4, 4 * len(args)))()  # per argument: its range, a descriptor's tensor's
    tensors: list[_Tensor | None] = []
    for i, (a, t) in enumerate(zip(args, kernel.arg_types, strict=True)):
        ext = tensor_extent(a) if isinstance(t, T.PointerType) else None
        table[4 * i], table[4 * i + 1] = ext if ext is not None else _UNCHECKED
        described = getattr(a, "_anvil_described", None)  # the packed words of a host tensor descriptor
        table[4 * i + 2], table[4 * i + 3] = (tensor_extent(described) or (0, 0)) if described is not None else (0, 0)
        tensors.append(_Tensor(names[i], int(a.data_ptr()), int(a.element_size()), int(a.numel()))
                       if ext is not None else None)
    _LAUNCHES[kernel] = _Launch(table, tensors)
    g = _global(kernel.function.module, BOUNDS_GLOBAL)
    if g is None:
        return
    ptr, size = g
    # on the launch's stream, so the kernel reads this launch's bounds; the previous debug launch
    # was synchronised by its check, so no kernel still reads the table
    res = cu.cuMemcpyHtoDAsync(ptr, ctypes.addressof(table), min(size, ctypes.sizeof(table)), cuda.current_stream())
    err = res[0] if isinstance(res, tuple) else res
    if err != cu.CUresult.CUDA_SUCCESS:
        raise E.LaunchError(f"writing the debug bounds of kernel {kernel.name} failed: {err}")


def read_debug_record(kernel: Any, clear: bool = True) -> list[int] | None:
    """The record's words (zeros: nothing recorded), or None if the kernel has no record."""
    # deferred: cuda-bindings, an optional dependency used only with an NVIDIA GPU
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
        torch.cuda.synchronize()  # the memset is asynchronous: done before the next launch, on any stream
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
    info: dict[str, Any] = {"kernel": kernel.name, "program_id": list(pid)}
    if loc is not None:
        info.update(file=loc.file, line=loc.line, column=loc.col)
    if kind == 2:
        raise E.DeviceAssertError(f"device_assert failed in kernel {kernel.name} at {where}, program id {pid}\n"
                                  f"    {line}", **info)
    addr = words[4] & (2**64 - 1)
    launch = _LAUNCHES.get(kernel)
    arg = words[5] - 1
    t = launch.tensors[arg] if launch is not None and 0 <= arg < len(launch.tensors) else None
    nearest = ""
    if t is None and launch is not None and arg == -1:  # a pointer of no single tensor: the nearest one
        known = [x for x in launch.tensors if x is not None]
        if known:
            def distance(x: _Tensor) -> int:
                hi = x.start + x.numel * x.element_size
                return 0 if x.start <= addr < hi else min(abs(addr - x.start), abs(addr - hi))

            t = min(known, key=distance)
            nearest = "the pointer comes from no single tensor; "
            info["single_tensor"] = False
    detail = ""
    info["address"] = addr
    if t is not None:
        off = (addr - t.start) // max(1, t.element_size)
        detail = f"; {nearest}{off} elements from the start of {t.name!r} (which holds {t.numel} elements)"
        info.update(tensor=t.name, offset=off, numel=t.numel)
    raise E.OutOfBoundsError(f"out-of-bounds access in kernel {kernel.name} at {where}, program id {pid}, "
                             f"address 0x{addr:x}{detail}\n    {line}\n"
                             "hint: mask the load/store (mask=offs < n) or fix the offsets", **info)
