"""The CUDA driver side: load cubins (cuda-bindings) and launch on torch's current stream.

The hot path is one ctypes call of cuLaunchKernel with argument storage prepared once per
compiled kernel: a warm launch sets the argument values and calls.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

from ...errors import LaunchError, ResourceError
from ...ir import types as T

__all__ = ["CudaFunction", "device_arch", "load_cubin"]


@cache
def _libcuda() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                                   ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
                                   ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    lib.cuLaunchKernel.restype = ctypes.c_int
    return lib


def _check(res: Any, what: str) -> Any:
    from cuda.bindings import driver as cu

    err = res[0] if isinstance(res, tuple) else res
    if err != cu.CUresult.CUDA_SUCCESS:
        name = cu.cuGetErrorName(err)[1]
        raise LaunchError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    return res[1] if isinstance(res, tuple) and len(res) == 2 else res


def _ensure_context() -> None:
    import torch
    from cuda.bindings import driver as cu

    torch.cuda.init()
    torch.cuda.current_device()
    ctx = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx) == 0:
        dev = _check(cu.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        pctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(pctx), "cuCtxSetCurrent")


def device_arch() -> str:
    """The PTX target for the current device: sm_90a on Hopper, sm_XY elsewhere."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    return arch + "a" if major in (9, 10, 12) else arch


_CTYPES = {
    "i1": ctypes.c_int32, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
    "i64": ctypes.c_int64, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32,
    "u64": ctypes.c_uint64, "fp32": ctypes.c_float, "fp64": ctypes.c_double,
}


class CudaFunction:
    """A loaded kernel with its argument storage; `launch` is the warm path."""

    def __init__(self, cubin: bytes, symbol: str, arg_types: list[T.Type], num_warps: int, shared: int,
                 name: str) -> None:
        from cuda.bindings import driver as cu

        _ensure_context()
        self.name = name
        self.module = _check(cu.cuModuleLoadData(cubin), f"loading kernel {name}")
        self.function = _check(cu.cuModuleGetFunction(self.module, symbol.encode()), f"finding kernel {name}")
        self.handle = ctypes.c_void_p(int(self.function))
        self.threads = 32 * num_warps
        self.shared = shared
        if shared > 48 * 1024:
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(cu.cuFuncSetAttribute(self.function, attr, shared), f"shared memory for {name}")
        self.storage: list[Any] = [(ctypes.c_uint64 if isinstance(t, T.PointerType) else _CTYPES[str(t)])()
                                   for t in arg_types]
        self.argv = (ctypes.c_void_p * max(1, len(self.storage)))(
            *[ctypes.addressof(s) for s in self.storage])
        self._launch = _libcuda().cuLaunchKernel
        self.registers = _check(cu.cuFuncGetAttribute(
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, self.function), "attributes")
        self.max_threads = _check(cu.cuFuncGetAttribute(
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self.function), "attributes")
        if self.threads > self.max_threads:
            raise ResourceError(f"kernel {name} needs {self.threads} threads per program (num_warps="
                                f"{num_warps}) but its {self.registers} registers per thread allow only "
                                f"{self.max_threads}; use fewer warps or smaller blocks")

    def launch(self, grid: tuple[int, int, int], values: list[Any], stream: int) -> None:
        for s, v in zip(self.storage, values, strict=True):
            s.value = v
        err = self._launch(self.handle, grid[0], grid[1], grid[2], self.threads, 1, 1, self.shared,
                           ctypes.c_void_p(stream), self.argv, None)
        if err:
            from cuda.bindings import driver as cu

            name = cu.cuGetErrorName(cu.CUresult(err))[1]
            text = name.decode() if isinstance(name, bytes) else str(name)
            raise LaunchError(f"launching kernel {self.name} failed: {text} (grid {grid}, {self.threads} threads, "
                              f"{self.shared} bytes of shared memory)")


def load_cubin(cubin: bytes, symbol: str, arg_types: list[T.Type], num_warps: int, shared: int,
               name: str) -> CudaFunction:
    return CudaFunction(cubin, symbol, arg_types, num_warps, shared, name)
