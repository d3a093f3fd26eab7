"""Compiled kernels for NVIDIA GPUs: PTX and cubin, loaded lazily, launched on torch's stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir import types as T
from .compiled import KernelMetadata
from .specialize import LaunchOptions, check_cluster_grid

__all__ = ["CudaCompiledKernel", "compile_cuda", "current_stream", "stream_source"]


def _stream_reader() -> tuple[Callable[[Any], int], Any]:
    """(read, arg): `read(arg)` is torch's current CUDA stream on the current device, as a raw handle.
    Read on every launch (never cached): CUDA graph capture and `torch.cuda.stream(...)` work by
    changing it. torch's `_cuda_getCurrentRawStream(-1)` asks for the current device's stream in one
    call (c10::cuda::getCurrentCUDAStream treats -1 as the current device); it is used once checked
    against the two-call form on a side stream, which it must see."""
    import torch

    c = torch._C
    raw, device = c._cuda_getCurrentRawStream, c._cuda_getDevice
    try:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            if raw(-1) == raw(device()) == side.cuda_stream:
                return raw, -1
    except Exception:  # noqa: BLE001 - an older torch that refuses -1: the two-call form
        pass
    return (lambda _: raw(device())), None


_stream: tuple[Callable[[Any], int], Any] | None = None


def stream_source() -> tuple[Callable[[Any], int], Any]:
    global _stream
    if _stream is None:
        _stream = _stream_reader()
    return _stream


def current_stream() -> int:
    read, arg = _stream or stream_source()
    return read(arg)


class CudaCompiledKernel:
    """One specialization compiled for a CUDA architecture (compiling needs no GPU).

    Triton's attributes: `name`, `asm`, `metadata`, and from what ptxas reported, `n_regs`
    (registers per thread), `n_spills` (spill stores and loads, bytes) and `shared` (bytes per
    program). Without a report, `n_regs` loads the cubin and asks the driver.
    """

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
        self.metadata = KernelMetadata(
            name=name, target=target, arch=binary.arch, compile_ms=timings,
            num_warps=binary.num_warps, num_stages=options.num_stages, debug=options.debug,
            # the compiler's dynamic shared memory and what ptxas counts as static (inline asm's
            # .shared declarations)
            shared=binary.shared_bytes + (rep.shared_bytes if rep else 0), n_regs=rep.registers if rep else None,
            n_spills=(rep.spill_stores + rep.spill_loads) if rep else None,
            ptxas_notes=list(rep.notes) if rep else [],
        )
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

    @property
    def n_regs(self) -> int:
        if self.metadata["n_regs"] is None:
            self.function  # noqa: B018 - loading the cubin records the driver's count
        return int(self.metadata["n_regs"])

    @property
    def n_spills(self) -> int:
        return int(self.metadata["n_spills"] or 0)

    @property
    def shared(self) -> int:
        return int(self.metadata["shared"])

    def launch(self, grid: tuple[int, int, int], params: list[Any]) -> None:
        """The general path: `params` holds a value for every kernel parameter (constants ignored)."""
        if grid[0] * grid[1] * grid[2] == 0:
            return
        if self.options.cluster_dims is not None:
            check_cluster_grid(grid, self.options.cluster_dims, self.name)
        fn = self._fn or self.function
        vals = tuple(params[i].data_ptr() if p else params[i]
                     for i, p in zip(self.arg_index, self._is_ptr, strict=True))
        if self.options.checked:  # the tensors' bounds for the kernel's checks (debug_host.py)
            from ..backends.nvidia.debug_host import check_debug_record, write_debug_bounds

            write_debug_bounds(self, params)
        fn.launch(grid[0], grid[1], grid[2], current_stream(), vals)
        if self.options.checked:  # debug-mode hook: a failed tl.device_assert or bounds check raises here
            check_debug_record(self)

    def fast_entry(self, raw_positions: list[int], n_raw: int, n_params: int,
                   install: Callable[[Callable[..., Any]], None] | None = None) -> Callable[..., Any] | None:
        """The warm launch of this specialization (fastpath.py's entry protocol): `entry(gx, gy, gz,
        r0, ..., r{n_raw-1}, v0, ..., v{n_params-1}) -> self`, where the r are the values of the
        launch's non-constexpr parameters, tensors already read with data_ptr (`raw_positions[i]` is
        where kernel argument i sits among them), and the v (every parameter's value) are unused.
        None in debug mode: every debug launch goes through `launch` (bounds before, record after).
        `install`: called later with the native entry that replaces the one returned (driver.entry)."""
        if self.options.checked:
            return None
        fn = self._fn or self.function
        read, arg = stream_source()
        cd = self.options.cluster_dims
        if cd is None:
            return fn.entry(raw_positions, n_raw, n_params, read, arg, self,  # type: ignore[no-any-return]
                            install=install)
        # clusters: the grid is checked before each warm launch (the driver's error names no cause)
        wrapped = None if install is None else (lambda f: install(_cluster_checked(f, cd, self)))
        return _cluster_checked(fn.entry(raw_positions, n_raw, n_params, read, arg, self, install=wrapped), cd, self)

    def __repr__(self) -> str:
        return f"CudaCompiledKernel({self.name}, {self.target})"


def _cluster_checked(entry: Callable[..., Any], dims: tuple[int, int, int], ck: Any) -> Callable[..., Any]:
    def checked(gx: int, gy: int, gz: int, *rest: Any) -> Any:
        if gx % dims[0] or gy % dims[1] or gz % dims[2]:
            check_cluster_grid((gx, gy, gz), dims, ck.name)
        return entry(gx, gy, gz, *rest)

    checked.__anvil_result__ = ck  # type: ignore[attr-defined]
    return checked


def compile_cuda(ir_fn: Any, symbol: str, opts: LaunchOptions, target: str) -> Any:
    from ..backends.nvidia import compile_function

    arch = target.split(":", 1)[1] if ":" in target else "sm_90a"
    return compile_function(ir_fn, symbol, opts.num_warps, arch, debug=opts.checked, num_stages=opts.num_stages,
                            maxnreg=opts.maxnreg, cluster_dims=opts.cluster_dims)
