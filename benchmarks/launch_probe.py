"""Warm launch overhead of a 1k-element add: Anvil, Triton (the same source) and torch, in us/call,
and where Anvil's time goes (binder + key lookup, argument packing, stream read, driver call).

    python benchmarks/launch_probe.py            # on a GPU
    python benchmarks/launch_probe.py --stub     # no GPU: CPU tensors, the driver call replaced by a
                                                 # no-op C function with the same arity (libm's
                                                 # feclearexcept), the stream read by a constant

Each number is the median of 7 batches of N calls timed with time.perf_counter_ns (a Python loop,
as a user would call it), after a warm-up; the GPU is synchronized between batches only.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import compiler  # noqa: E402

SRC = (Path(__file__).resolve().parent / "gpu_kernels.py").read_text()
N = 20000


def per_call_us(f: Callable[[], Any], n: int = N, sync: Callable[[], None] = lambda: None) -> float:
    for _ in range(500):
        f()
    sync()
    samples = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            f()
        samples.append((time.perf_counter_ns() - t0) / n / 1e3)
        sync()
    return statistics.median(samples)


def install_stubs() -> None:
    """Run the CUDA launch path without a GPU: compile for sm_90a, 'load' with a stand-in driver."""
    from compiler.backends.nvidia import driver
    from compiler.runtime import cuda, launch

    libm = ctypes.CDLL("libm.so.6")

    def fake_load(cubin: bytes, symbol: str, arg_types: list[Any], num_warps: int, shared: int,
                  name: str) -> Any:
        fn = driver.CudaFunction.__new__(driver.CudaFunction)
        fn.registers = 0
        fn.prepare(0x1000, libm.feclearexcept, arg_types, num_warps, shared, name)
        return fn

    driver.load_cubin = fake_load  # type: ignore[assignment]
    cuda._stream_reader = lambda: (lambda: 0)  # type: ignore[assignment]
    launch._target_for = lambda vals, name: "cuda:sm_90a"  # type: ignore[assignment]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stub", action="store_true", help="no GPU: CPU tensors and a stand-in driver call")
    args = ap.parse_args()
    stub = args.stub
    if stub:
        install_stubs()
    dev = "cpu" if stub else "cuda"
    sync = (lambda: None) if stub else torch.cuda.synchronize
    add = compiler.compile_source(SRC, kernel="add_kernel", filename="gpu_kernels.py")
    x, y = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    out = torch.full_like(x, float("nan"))
    ck = add[(1,)](x, y, out, 1024, BLOCK=1024)
    if not stub:
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y)
    rows: dict[str, float] = {}
    rows["anvil kernel[grid](x, y, out, n, BLOCK=1024)"] = per_call_us(
        lambda: add[(1,)](x, y, out, 1024, BLOCK=1024), sync=sync)
    launcher = add.launcher
    bind = launcher.binders[(4, "BLOCK")]
    fn = ck.function
    rows["  binder call (key, lookup, entry) from a bound grid"] = per_call_us(
        lambda: bind((1,), (x, y, out, 1024), {"BLOCK": 1024}), sync=sync)
    saved = dict(launcher.fast)
    key = next(iter(saved))
    launcher.fast[key] = lambda gx, gy, gz, raw, params: ck
    rows["  binder + key + lookup only (entry a no-op)"] = per_call_us(
        lambda: bind((1,), (x, y, out, 1024), {"BLOCK": 1024}))
    launcher.fast.update(saved)
    raw = (x.data_ptr(), y.data_ptr(), out.data_ptr(), 1024)
    pack, buf = fn._pack, fn.buffer
    rows["  pack_into of config + arguments"] = per_call_us(
        lambda: pack(buf, 0, 1, 1, 1, fn.threads, 1, 1, fn.shared, 0, *raw))
    from compiler.runtime import cuda

    rows["  stream read (torch raw stream)"] = per_call_us(cuda.current_stream)
    call, cfg, h, argv = fn._launch_ex, fn._config, fn._handle, fn.argv
    rows["  driver call (cuLaunchKernelEx via ctypes)"] = per_call_us(lambda: call(cfg, h, argv, None), sync=sync)
    rows["  CudaFunction.launch (lock + pack + call)"] = per_call_us(
        lambda: fn.launch(1, 1, 1, 0, raw), sync=sync)
    if not stub:
        _gpu_rows(rows, x, y, out, fn, sync)
    print(f"{'' if stub else torch.cuda.get_device_name()} torch {torch.__version__} "
          f"{'(stub driver: the Python side only)' if stub else ''}")
    for k, v in rows.items():
        print(f"{k:60} {v:8.2f} us/call")


def _gpu_rows(rows: dict[str, float], x: Any, y: Any, out: Any, fn: Any, sync: Callable[[], None]) -> None:
    import gpu_kernels as tk
    import triton

    rows["triton add_kernel[grid](x, y, out, n, BLOCK=1024)"] = per_call_us(
        lambda: tk.add_kernel[(1,)](x, y, out, 1024, BLOCK=1024), sync=sync)
    rows["torch.add(x, y, out=out)"] = per_call_us(lambda: torch.add(x, y, out=out), sync=sync)
    raw = (x.data_ptr(), y.data_ptr(), out.data_ptr(), 1024)
    # alternatives for the driver call, for comparison
    lib = ctypes.CDLL("libcuda.so.1")
    classic = lib.cuLaunchKernel
    classic.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                        ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p,
                        ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    classic.restype = ctypes.c_int
    fn._pack(fn.buffer, 0, 1, 1, 1, fn.threads, 1, 1, fn.shared, 0, *raw)
    argv = ctypes.cast(fn.argv, ctypes.POINTER(ctypes.c_void_p))
    h = int(fn._handle.value)
    rows["  alt: cuLaunchKernel via ctypes with argtypes (11 args)"] = per_call_us(
        lambda: classic(h, 1, 1, 1, fn.threads, 1, 1, fn.shared, None, argv, None), sync=sync)
    try:
        from cuda.bindings import driver as cu

        f = cu.CUfunction(h)
        addr = ctypes.addressof(fn.argv)
        s = cu.CUstream(0)
        rows["  alt: cuda.bindings cuLaunchKernel (params as an address)"] = per_call_us(
            lambda: cu.cuLaunchKernel(f, 1, 1, 1, fn.threads, 1, 1, fn.shared, s, addr, 0), sync=sync)
    except Exception as e:  # noqa: BLE001 - an optional comparison
        print(f"cuda.bindings comparison skipped: {type(e).__name__}: {e}")
    sync()
    torch.testing.assert_close(out, x + y)
    _ = triton


if __name__ == "__main__":
    main()
