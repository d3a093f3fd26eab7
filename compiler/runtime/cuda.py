"""Compiled kernels for NVIDIA GPUs: PTX and cubin, loaded lazily, launched on torch's stream."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from ..ir import types as T
from .specialize import LaunchOptions

__all__ = ["CudaCompiledKernel", "compile_cuda", "current_stream"]


def _stream_reader() -> Callable[[], int]:
    """torch's current CUDA stream on the current device, as a raw handle. Read on every launch (not
    cached): CUDA graph capture and `torch.cuda.stream(...)` work by changing it."""
    import torch

    c = torch._C
    raw, device = c._cuda_getCurrentRawStream, c._cuda_getDevice
    return lambda: raw(device())


_stream: Callable[[], int] | None = None


def current_stream() -> int:
    global _stream
    if _stream is None:
        _stream = _stream_reader()
    return _stream()


class CudaCompiledKernel:
    """One specialization compiled for a CUDA architecture (compiling needs no GPU)."""

    def __init__(self, name: str, target: str, tir: str, binary: Any, options: LaunchOptions,
                 timings: dict[str, float], cache_key: str) -> None:
        self.name = name
        self.target = target
        self.binary = binary
        self.options = options
        self.cache_key = cache_key
        self.arg_index: list[int] = []
        self.arg_types: list[T.Type] = binary.arg_types
        self._is_ptr = [isinstance(t, T.PointerType) for t in self.arg_types]
        self._fn: Any = None
        rep = binary.report
        self.metadata: dict[str, Any] = {
            "name": name, "target": target, "arch": binary.arch, "compile_ms": timings,
            "num_warps": binary.num_warps, "num_stages": options.num_stages, "debug": options.debug,
            "shared": binary.shared_bytes, "n_regs": rep.registers if rep else None,
            "n_spills": (rep.spill_stores + rep.spill_loads) if rep else None,
        }
        self.asm: dict[str, Any] = {"tir": tir, "llir": binary.llir, "ptx": binary.ptx}
        if binary.cubin is not None:
            self.asm["cubin"] = binary.cubin

    @property
    def function(self) -> Any:
        if self._fn is None:
            from ..backends.nvidia.driver import load_cubin

            b = self.binary
            self._fn = load_cubin(b.cubin, b.symbol, b.arg_types, b.num_warps, b.shared_bytes, self.name)
            self.metadata["n_regs"] = self._fn.registers
        return self._fn

    def launch(self, grid: tuple[int, int, int], params: list[Any]) -> None:
        """The general path: `params` holds a value for every kernel parameter (constants ignored)."""
        if grid[0] * grid[1] * grid[2] == 0:
            return
        fn = self._fn or self.function
        vals = tuple(params[i].data_ptr() if p else params[i]
                     for i, p in zip(self.arg_index, self._is_ptr, strict=True))
        if self.options.debug:  # the tensors' bounds for the kernel's checks (debug_host.py)
            from ..backends.nvidia.debug_host import check_debug_record, write_debug_bounds

            write_debug_bounds(self, params)
        fn.launch(grid[0], grid[1], grid[2], current_stream(), vals)
        if self.options.debug:
            check_debug_record(self)

    def fast_entry(self, raw_positions: list[int], n_raw: int) -> Callable[..., Any]:
        """The warm launch of this specialization, `entry(gx, gy, gz, raw, params) -> self`: `raw` holds
        the values of the launch's non-constexpr parameters in order, tensors already read with
        data_ptr (`raw_positions[i]` is where kernel argument i sits in it; `n_raw` its length);
        `params` (every parameter's value) is unused here. Grid dimensions are in [0, 2**31)."""
        global _stream
        if self.options.debug:  # every debug launch goes through `launch` (bounds before, record after)
            def debug_entry(gx: int, gy: int, gz: int, raw: tuple[Any, ...], params: tuple[Any, ...]) -> Any:
                self.launch((gx, gy, gz), list(params))
                return self

            return debug_entry
        fn = self._fn or self.function
        if _stream is None:
            _stream = _stream_reader()
        pick = None if raw_positions == list(range(n_raw)) else _picker(raw_positions)
        entry: Callable[..., Any] = fn.entry(pick, _stream, self)
        return entry

    def __repr__(self) -> str:
        return f"CudaCompiledKernel({self.name}, {self.target})"


def _picker(positions: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A C-speed selection of `positions` out of a tuple (the values the binary takes)."""
    if not positions:
        return lambda raw: ()
    if len(positions) == 1:
        p = positions[0]
        return lambda raw: (raw[p],)
    return operator.itemgetter(*positions)


def compile_cuda(ir_fn: Any, symbol: str, opts: LaunchOptions, target: str) -> Any:
    from ..backends.nvidia import compile_function

    arch = target.split(":", 1)[1] if ":" in target else "sm_90a"
    return compile_function(ir_fn, symbol, opts.num_warps, arch, debug=opts.debug)
