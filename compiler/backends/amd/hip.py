"""Loading and launching AMD code objects through the HIP runtime (libamdhip64), by ctypes.

The host side of a launch: find the runtime (torch's ROCm build carries it; else ROCm's own),
load the linked code object (`hipModuleLoadData`), find the kernel (`hipModuleGetFunction`),
convert each argument to the C type the kernel's metadata says it takes, and call
`hipModuleLaunchKernel` on torch's current stream with one pointer per explicit argument (the
runtime lays them out by the code object's metadata and fills the hidden arguments, among them the
grid size `tl.num_programs` reads). Everything up to the driver call is checked here: the device's
architecture against the code object's, argument count and sizes against the metadata, the grid
against the hardware's limits, so that a mistake is a LaunchError naming the kernel and the
argument rather than a fault on the device.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...errors import ArgumentOverflowError, LaunchError
from ...ir import types as T
from . import AmdBinary

__all__ = ["HipApi", "HipFunction", "hip_api", "find_hip_runtime", "ctype_of", "INSTALL_HIP"]

INSTALL_HIP = ("launching on AMD GPUs needs the HIP runtime (libamdhip64.so): install a ROCm build of torch "
               "(it carries the runtime) or ROCm, or set ROCM_PATH")
_GRID_LIMIT = (1 << 31) - 1  # workgroups per grid dimension (the dispatch packet holds 32-bit sizes)
_SIMPLE = {"i1": ctypes.c_bool, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
           "i64": ctypes.c_int64, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32,
           "u64": ctypes.c_uint64, "fp32": ctypes.c_float, "fp64": ctypes.c_double}


def _range(c: Any, signed: bool) -> tuple[int, int]:
    bits = 8 * ctypes.sizeof(c)
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


_RANGES = {c: _range(c, signed) for c, signed in (
    (ctypes.c_int8, True), (ctypes.c_int16, True), (ctypes.c_int32, True), (ctypes.c_int64, True),
    (ctypes.c_uint8, False), (ctypes.c_uint16, False), (ctypes.c_uint32, False), (ctypes.c_uint64, False),
    (ctypes.c_void_p, False))}


def ctype_of(t: T.Type) -> Any:
    """The C type a kernel parameter of Tile IR type `t` is passed as (pointers: 64-bit addresses)."""
    if isinstance(t, T.PointerType):
        return ctypes.c_void_p
    c = _SIMPLE.get(str(t))
    if c is None:
        raise LaunchError(f"kernel parameters of type {t} cannot be passed from the host")
    return c


def find_hip_runtime() -> str | None:
    """libamdhip64.so: torch's copy (ROCm builds), then $ROCM_PATH/lib, /opt/rocm/lib, the loader's path."""
    candidates: list[Path] = []
    candidates.append(Path(torch.__file__).parent / "lib" / "libamdhip64.so")
    for root in (os.environ.get("ROCM_PATH"), os.environ.get("HIP_PATH"), "/opt/rocm"):
        if root:
            candidates.append(Path(root) / "lib" / "libamdhip64.so")
    for c in candidates:
        if c.is_file():
            return str(c)
    return ctypes.util.find_library("amdhip64")


class HipApi:
    """The HIP runtime functions a launch needs. `lib` is the loaded library, or any object with
    the same functions (the tests pass one that records the calls)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        if isinstance(lib, ctypes.CDLL):
            vp, i32, u32, pp = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p)
            lib.hipModuleLoadData.argtypes = [pp, vp]
            lib.hipModuleGetFunction.argtypes = [pp, vp, ctypes.c_char_p]
            lib.hipModuleLaunchKernel.argtypes = [vp, u32, u32, u32, u32, u32, u32, u32, vp, pp, pp]
            lib.hipGetErrorString.argtypes = [i32]
            lib.hipGetErrorString.restype = ctypes.c_char_p
            for f in (lib.hipModuleLoadData, lib.hipModuleGetFunction, lib.hipModuleLaunchKernel):
                f.restype = i32

    def check(self, err: int, what: str) -> None:
        if err != 0:
            text = self.lib.hipGetErrorString(err)
            text = text.decode() if isinstance(text, bytes) else str(text)
            raise LaunchError(f"{what} failed: {text} (hipError {err})")

    def load(self, image: bytes) -> ctypes.c_void_p:
        module = ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image, len(image))
        self.check(self.lib.hipModuleLoadData(ctypes.pointer(module), buf), "hipModuleLoadData")
        return module

    def function(self, module: ctypes.c_void_p, symbol: str) -> ctypes.c_void_p:
        fn = ctypes.c_void_p()
        self.check(self.lib.hipModuleGetFunction(ctypes.pointer(fn), module, symbol.encode()),
                   f"hipModuleGetFunction({symbol})")
        return fn

    def launch(self, fn: ctypes.c_void_p, grid: tuple[int, int, int], block: int, stream: int,
               args: Sequence[Any], what: str) -> None:
        ptrs = (ctypes.c_void_p * max(1, len(args)))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
        err = self.lib.hipModuleLaunchKernel(fn, grid[0], grid[1], grid[2], block, 1, 1, 0,
                                             ctypes.c_void_p(stream or None), ptrs, None)
        self.check(err, what)


_api: HipApi | None = None
_api_lock = threading.Lock()


def hip_api() -> HipApi:
    """The process's HIP runtime, loaded on first use."""
    global _api
    with _api_lock:
        if _api is None:
            path = find_hip_runtime()
            if path is None:
                raise LaunchError(f"no HIP runtime found: {INSTALL_HIP}")
            try:
                _api = HipApi(ctypes.CDLL(path))
            except OSError as e:
                raise LaunchError(f"the HIP runtime at {path} could not be loaded ({e}): {INSTALL_HIP}") from None
        return _api


@dataclass
class HipFunction:
    """A loaded kernel: its function handle, the C types of its parameters and what a launch needs."""

    api: HipApi
    binary: AmdBinary
    handle: ctypes.c_void_p
    ctypes_: list[Any]

    @classmethod
    def load(cls, api: HipApi, binary: AmdBinary, device_arch: str) -> HipFunction:
        """Load `binary` on the current device, whose architecture (torch's gcnArchName, e.g.
        "gfx942:sramecc+:xnack-") must be the code object's."""
        name = f"{binary.name} (amd:{binary.arch})"
        if device_arch.split(":")[0] != binary.arch:
            raise LaunchError(f"{name} was compiled for {binary.arch}, but the current device is "
                              f"{device_arch.split(':')[0]}: compile with target='amd:{device_arch.split(':')[0]}'")
        if binary.hsaco is None:
            raise LaunchError(f"{name} has no code object (no linker was found when it was compiled)")
        types_ = [ctype_of(t) for t in binary.arg_types]
        meta = binary.kernel.get("args")
        if meta is not None:  # the runtime lays the arguments out by the metadata: it must agree with ours
            if len(meta) != len(types_):
                raise LaunchError(f"{name}: the code object declares {len(meta)} arguments, the kernel has "
                                  f"{len(types_)} (a stale code object: recompile)")
            for i, (m, c) in enumerate(zip(meta, types_, strict=True)):
                if int(m.get("size", ctypes.sizeof(c))) != ctypes.sizeof(c):
                    raise LaunchError(f"{name}: argument {i} ({binary.arg_names[i]}) is {m.get('size')} bytes in "
                                      f"the code object, {ctypes.sizeof(c)} for the host")
        module = api.load(binary.hsaco)
        return cls(api, binary, api.function(module, binary.symbol), types_)

    def launch(self, grid: tuple[int, int, int], stream: int, values: Sequence[Any]) -> None:
        b = self.binary
        if any(g > _GRID_LIMIT or g < 0 for g in grid):
            raise LaunchError(f"{b.name}: grid {grid} has a dimension outside 0..{_GRID_LIMIT}")
        if len(values) != len(self.ctypes_):
            raise LaunchError(f"{b.name}: {len(values)} arguments given, the kernel takes {len(self.ctypes_)}")
        args = []
        for i, (c, v) in enumerate(zip(self.ctypes_, values, strict=True)):
            what = f"{b.name}: argument {i} ({b.arg_names[i]}) = {v!r}"
            if c in _RANGES and not isinstance(v, bool):
                lo, hi = _RANGES[c]
                if not isinstance(v, int):
                    raise LaunchError(f"{what} is not an integer")
                if not lo <= v <= hi:
                    raise ArgumentOverflowError(f"{what} does not fit the parameter's type {b.arg_types[i]} "
                                                f"({lo}..{hi})")
            try:
                args.append(c(v))
            except TypeError:
                raise LaunchError(f"{what} is not a value of the parameter's type {b.arg_types[i]}") from None
        self.api.launch(self.handle, grid, 64 * b.num_warps, stream, args, f"launching {b.name}")


def device_arch() -> str:
    """The current torch device's AMD architecture name (ROCm builds of torch report gcnArchName)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    arch = getattr(props, "gcnArchName", None)
    if not arch:
        raise LaunchError("the current device is not an AMD GPU (torch reports no gcnArchName): AMD kernels "
                          "launch with a ROCm build of torch on an AMD GPU")
    return str(arch)


def values_of(params: Sequence[Any], index: Sequence[int], is_ptr: Sequence[bool]) -> tuple[Any, ...]:
    """The host values of the kernel's arguments: tensors by their device addresses."""
    return tuple(params[i].data_ptr() if p else params[i] for i, p in zip(index, is_ptr, strict=True))

