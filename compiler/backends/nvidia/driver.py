"""The CUDA driver side: load cubins (cuda-bindings) and launch on torch's current stream.

The warm path's entry (CudaFunction.entry) is native code when it can be (native_launch.py: the
values converted with the C API onto its own stack, cuLaunchKernelEx called directly). The ctypes
entry below is its fallback and the general path: one `struct.pack_into` of the launch
configuration and the argument values into a buffer prepared once per loaded kernel, and one
ctypes call of cuLaunchKernelEx whose four arguments are prepared objects (no per-call
conversion). The buffer is laid out as

    [CUlaunchConfig (56 bytes): grid xyz, block xyz, shared bytes, stream, attrs=NULL, numAttrs=0]
    [argument values, each at its natural alignment]   <- the kernelParams array points here

A lock serialises pack+call per kernel: ctypes releases the GIL during the call (the driver may
block there while the launch queue is full; holding the GIL would stall every Python thread), the
driver reads the values during the call, and even with the GIL held a thread switch can happen
between pack_into returning and the call starting; without the lock another thread could repack the
buffer in either window and one launch would run with the other's values. An uncontended
acquire/release pair costs about 0.07 us.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from collections.abc import Callable
from functools import cache
from typing import Any, NoReturn

import torch

from ... import knobs
from ...errors import LaunchError, ResourceError
from ...ir import types as T
from . import native_launch

__all__ = ["CudaFunction", "device_arch", "load_cubin", "pack_codes", "CONFIG_FORMAT"]

# CUlaunchConfig: 7 x unsigned (grid, block, shared), 4 bytes padding, CUstream, then attrs (NULL)
# and numAttrs (0) written as zero bytes. Checked against cuda.bindings' CUlaunchConfig layout.
CONFIG_FORMAT = "@IIIIIIIQ16x"
CONFIG_BYTES = struct.calcsize(CONFIG_FORMAT)  # 56

_CODES = {"i1": "i", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "u8": "B", "u16": "H", "u32": "I",
          "u64": "Q", "fp32": "f", "fp64": "d"}


def pack_codes(arg_types: list[T.Type]) -> str:
    """struct codes of the kernel's parameters as the driver reads them (pointers are 64-bit)."""
    out = []
    for t in arg_types:
        code = "Q" if isinstance(t, T.PointerType) else _CODES.get(str(t))
        if code is None:
            raise LaunchError(f"kernel parameters of type {t} cannot be passed from the host")
        out.append(code)
    return "".join(out)


@cache
def _libcuda() -> ctypes.CDLL:
    return ctypes.CDLL("libcuda.so.1")


def _check(res: Any, what: str) -> Any:
    # deferred: cuda-bindings, an optional dependency used only with an NVIDIA GPU
    from cuda.bindings import driver as cu

    err = res[0] if isinstance(res, tuple) else res
    if err != cu.CUresult.CUDA_SUCCESS:
        name = cu.cuGetErrorName(err)[1]
        raise LaunchError(f"{what} failed: {name.decode() if isinstance(name, bytes) else name}")
    return res[1] if isinstance(res, tuple) and len(res) == 2 else res


def _ensure_context() -> None:
    # deferred: cuda-bindings, an optional dependency used only with an NVIDIA GPU
    from cuda.bindings import driver as cu

    torch.cuda.init()
    torch.cuda.current_device()
    ctx = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx) == 0:
        dev = _check(cu.cuDeviceGet(torch.cuda.current_device()), "cuDeviceGet")
        pctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(pctx), "cuCtxSetCurrent")


def device_arch() -> str:
    """The PTX target for the current device: the arch-specific one on Hopper and Blackwell (sm_90a,
    sm_100a, sm_103a, sm_120a), sm_XY elsewhere; nvidia_targets.py says which it compiles for."""
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    return arch + "a" if major in (9, 10, 12) else arch


class CudaFunction:
    """A loaded kernel with its launch buffer; `launch` is the warm path."""

    def __init__(self, cubin: bytes, symbol: str, arg_types: list[T.Type], num_warps: int, shared: int,
                 name: str) -> None:
        # deferred: cuda-bindings, an optional dependency used only with an NVIDIA GPU
        from cuda.bindings import driver as cu

        _ensure_context()
        self.module = _check(cu.cuModuleLoadData(cubin), f"loading kernel {name}")
        self.function = _check(cu.cuModuleGetFunction(self.module, symbol.encode()), f"finding kernel {name}")
        # the dynamic shared memory above 48 KB less the static (inline asm may declare some) is opt-in
        static = _check(cu.cuFuncGetAttribute(
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, self.function), "attributes")
        if shared + static > 48 * 1024:
            attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(cu.cuFuncSetAttribute(self.function, attr, shared), f"shared memory for {name}")
        self.registers = _check(cu.cuFuncGetAttribute(
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, self.function), "attributes")
        self.max_threads = _check(cu.cuFuncGetAttribute(
            cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self.function), "attributes")
        if 32 * num_warps > self.max_threads:
            raise ResourceError(f"kernel {name} needs {32 * num_warps} threads per program (num_warps="
                                f"{num_warps}) but its {self.registers} registers per thread allow only "
                                f"{self.max_threads}; use fewer warps or smaller blocks")
        self.prepare(int(self.function), _libcuda().cuLaunchKernelEx, arg_types, num_warps, shared, name)

    def prepare(self, handle: int, launch_ex: Any, arg_types: list[T.Type], num_warps: int, shared: int,
                name: str) -> None:
        """Build the launch buffer and the prepared call (`launch_ex` has cuLaunchKernelEx's C signature;
        benchmarks/probes/launch_probe.py passes a stand-in to time the Python side without a GPU)."""
        self.name = name
        self.threads = 32 * num_warps
        self.shared = shared
        codes = self.codes = pack_codes(arg_types)
        fmt = CONFIG_FORMAT + codes
        self.packer = struct.Struct(fmt)
        self.buffer = ctypes.create_string_buffer(max(self.packer.size, CONFIG_BYTES + 8))
        base = ctypes.addressof(self.buffer)
        # each value's offset: the packed size up to and including it, minus its own size (native
        # alignment pads before a field, never after the last one)
        offsets = [struct.calcsize(CONFIG_FORMAT + codes[:i + 1]) - struct.calcsize(c) for i, c in enumerate(codes)]
        self.argv = (ctypes.c_void_p * max(1, len(codes)))(*[base + o for o in offsets])
        self._config = ctypes.c_void_p(base)
        self._handle = ctypes.c_void_p(handle)
        launch_ex.restype = ctypes.c_int
        launch_ex.argtypes = None  # every argument is a prepared ctypes object: nothing to convert per call
        self._launch_ex = launch_ex
        self._handle_int = handle
        self._pack = self.packer.pack_into
        self._lock = threading.Lock()

    def launch(self, gx: int, gy: int, gz: int, stream: int, values: tuple[Any, ...]) -> None:
        """Launch on a grid (each dimension in [1, 2**31)) with the values of the kernel's parameters
        (pointers as integers) on `stream`."""
        with self._lock:
            try:
                self._pack(self.buffer, 0, gx, gy, gz, self.threads, 1, 1, self.shared, stream, *values)
            except struct.error as e:
                self._bad_value(e)
            err = self._launch_ex(self._config, self._handle, self.argv, None)
        if err:
            self._raise(err, (gx, gy, gz))

    def entry(self, positions: list[int], n_raw: int, n_params: int, stream: Callable[[Any], int], stream_arg: Any,
              result: Any, native: bool | None = None,
              install: Callable[[Callable[..., Any]], None] | None = None) -> Callable[..., Any]:
        """`launch` as one generated function for the warm path (fastpath.py's entry protocol):
        `entry(gx, gy, gz, r0, ..., r{n_raw-1}, v0, ..., v{n_params-1})` launches with the raw values
        at `positions` (the kernel's parameters, in order; the others are constants compiled in) on
        the stream `stream(stream_arg)` and returns `result` (also its `__anvil_result__`). The grid
        dimensions are ints in [1, 2**31). The native entry (native_launch.py) is used when `native`
        (default: ANVIL_NATIVE_LAUNCH, on) and it handles the parameter types; it falls back to the
        ctypes entry built here for anything unusual. With `install`, the ctypes entry is returned, and
        its first call (the kernel's second launch: the first goes through the general path) has the
        native one built on a background thread and handed to `install` when ready
        (native_launch.build_later): no launch waits for the host JIT, and a kernel launched once
        costs none of it (nor any GIL time on the builder thread)."""
        raws = [f"_r{i}" for i in range(n_raw)]
        params = [f"_v{i}" for i in range(n_params)]
        values = "".join(f", _r{p}" for p in positions)
        src = "\n".join([
            f"def entry(_gx, _gy, _gz, {''.join(a + ', ' for a in raws + params)}):",
            "    if _tier is not None:",
            "        _tier()",
            "    _acquire()",
            "    try:",
            f"        _pack(_buf, 0, _gx, _gy, _gz, {self.threads}, 1, 1, {self.shared}, _stream(_sarg){values})",
            "        _err = _call(_cfg, _handle, _argv, None)",
            "    except BaseException as e:",
            "        _release()",
            "        _failed(e)",
            "    _release()",
            "    if _err:",
            "        _raise(_err, (_gx, _gy, _gz))",
            "    return _result",
        ]) + "\n"
        ns: dict[str, Any] = {
            "_acquire": self._lock.acquire, "_release": self._lock.release, "_pack": self._pack, "_buf": self.buffer,
            "_stream": stream, "_sarg": stream_arg, "_call": self._launch_ex, "_cfg": self._config,
            "_handle": self._handle, "_argv": self.argv, "_failed": self._failed, "_raise": self._raise,
            "_result": result, "_tier": None,
        }
        exec(compile(src, f"<anvil launch {self.name}>", "exec"), ns)  # noqa: S102 - generated above
        fn: Callable[..., Any] = ns["entry"]
        fn.__anvil_source__ = src  # type: ignore[attr-defined]
        fn.__anvil_result__ = result  # type: ignore[attr-defined]
        if native is None:
            native = knobs.native_launch()
        if not native:
            return fn

        if not native_launch.supported(self.codes):
            return fn

        def on_error(err: int, gx: int, gy: int, gz: int) -> None:
            self._raise(err, (gx, gy, gz))

        def build() -> Callable[..., Any]:
            return native_launch.native_entry(self.codes, positions, n_raw, n_params, self._launch_ex,
                                              self._handle_int, self.threads, self.shared, stream, stream_arg,
                                              result, fn, on_error)

        if install is not None:
            def tier() -> None:  # the entry's first call: the kernel is launched again, build the native one
                ns["_tier"] = None
                native_launch.build_later(lambda: install(build()))

            ns["_tier"] = tier
            return fn
        try:
            return build()
        except Exception:  # noqa: BLE001 - no JIT for the host (or llvmlite refused): the ctypes entry
            return fn

    def _failed(self, e: BaseException) -> NoReturn:
        if isinstance(e, struct.error):
            self._bad_value(e)
        raise e

    def _bad_value(self, e: Exception) -> NoReturn:
        raise LaunchError(f"kernel {self.name}: an argument does not fit its parameter type ({e}); "
                          "check the integer and float arguments")

    def _raise(self, err: int, grid: tuple[int, int, int]) -> NoReturn:
        try:
            # deferred: cuda-bindings, an optional dependency used only with an NVIDIA GPU
            from cuda.bindings import driver as cu

            name = cu.cuGetErrorName(cu.CUresult(err))[1]
            text = name.decode() if isinstance(name, bytes) else str(name)
        except Exception:  # noqa: BLE001 - the error is reported, by number if it has no name
            text = f"CUDA error {err}"
        raise LaunchError(f"launching kernel {self.name} failed: {text} (grid {grid}, {self.threads} threads, "
                          f"{self.shared} bytes of shared memory)")


def load_cubin(cubin: bytes, symbol: str, arg_types: list[T.Type], num_warps: int, shared: int,
               name: str) -> CudaFunction:
    return CudaFunction(cubin, symbol, arg_types, num_warps, shared, name)
