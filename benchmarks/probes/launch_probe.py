"""Warm launch overhead of a 1k-element add: Anvil, Triton (the same source) and torch, in us/call,
where Anvil's time goes (front: binding, key and lookup; entry: stream read, packing, driver call),
and alternatives for the driver call.

    python benchmarks/probes/launch_probe.py            # on a GPU
    python benchmarks/probes/launch_probe.py --stub     # no GPU: CPU tensors, the driver call replaced by a
                                                 # no-op C function with the same arity (libm's
                                                 # feclearexcept), the stream read by int(0)

Two columns on the GPU:
  sustained  median of 7 batches of N calls in a Python loop (as a user calls it; what gpu.py
             measures): once the launch queue is full, a launch waits for the GPU
  cpu        median of 60 batches of 200 calls, each batch followed by an untimed synchronize, so
             the queue never fills: the CPU cost of a launch alone
A row that fails prints its error and the table goes on. After the table: CUDA graph capture of
the warm path (the stream is read per launch: capture must record every launch) and the GPU time
per kernel of a replay, the floor of any launch loop.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: gpu_kernels
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

import compiler  # noqa: E402

SRC = (Path(__file__).resolve().parents[1] / "gpu_kernels.py").read_text()
N = 20000


def sustained_us(f: Callable[[], Any], sync: Callable[[], None], n: int = N) -> float:
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


def cpu_us(f: Callable[[], Any], sync: Callable[[], None], n: int = 200, batches: int = 60) -> float:
    for _ in range(n):
        f()
    sync()
    samples = []
    for _ in range(batches):
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
    cuda._stream_reader = lambda: (int, 0)  # type: ignore[assignment]
    cuda._stream = None
    launch._target_for = lambda vals, name: "cuda:sm_90a"  # type: ignore[assignment]


class Table:
    def __init__(self, stub: bool) -> None:
        self.stub = stub
        self.sync: Callable[[], None] = (lambda: None) if stub else torch.cuda.synchronize
        self.rows: list[tuple[str, str]] = []
        self.values: dict[str, tuple[float, ...]] = {}

    def row(self, name: str, make: Callable[[], Callable[[], Any]], after: Callable[[], None] | None = None) -> None:
        """Time `make()`'s callable, then run `after`; a failure (in making or calling it) is printed,
        not raised."""
        try:
            f = make()
            f()
            vals = (cpu_us(f, self.sync),) if self.stub else (sustained_us(f, self.sync), cpu_us(f, self.sync))
            self.values[name] = vals
            cols = " ".join(f"{v:8.2f}" for v in vals)
        except Exception as e:  # noqa: BLE001 - one failing variant must not stop the table
            cols = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:90] if str(e) else ''}"
            if os.environ.get("PROBE_TRACEBACK"):
                traceback.print_exc()
        finally:
            if after is not None:
                after()
        self.rows.append((name, cols))
        print(f"{name:62} {cols}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stub", action="store_true", help="no GPU: CPU tensors and a stand-in driver call")
    stub = ap.parse_args().stub
    if stub:
        install_stubs()
    dev = "cpu" if stub else "cuda"
    t = Table(stub)
    where = "(stub driver: the Python side only)" if stub else torch.cuda.get_device_name()
    print(f"{where}  torch {torch.__version__}  python {sys.version.split()[0]}")
    print(f"{'us per call':62} {'cpu' if stub else 'sustained      cpu'}")
    add = compiler.compile_source(SRC, kernel="add_kernel", filename="gpu_kernels.py")
    x, y = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    out = torch.full_like(x, float("nan"))
    ck = add[(1,)](x, y, out, 1024, BLOCK=1024)
    if not stub:
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y)
    add[(1,)](x, y, out, 1024, BLOCK=1024)  # the second launch has the native entry built (in the background)
    from compiler.backends.nvidia import native_launch

    native_launch.drain()
    if native_launch.failures:
        print("native entry build failed:", native_launch.failures)
    launcher = add.launcher
    key = next(iter(launcher.fast))
    entry = launcher.fast[key]
    fn = ck.function
    raw = (x.data_ptr(), y.data_ptr(), out.data_ptr(), 1024)
    params = (x, y, out, 1024, 1024)
    native = type(entry).__name__ == "builtin_function_or_method"
    if not native and not stub:
        _why_not_native(ck, fn)
    t.row(f"anvil kernel[grid](x, y, out, n, BLOCK=1024)  [{'native' if native else 'ctypes'} entry]",
          lambda: lambda: add[(1,)](x, y, out, 1024, BLOCK=1024))
    bound = add[(1,)]
    t.row("  bound = kernel[grid] once; bound(x, y, out, n, BLOCK=1024)", lambda: lambda: bound(x, y, out, 1024,
                                                                                                   BLOCK=1024))

    def other_entry(native_on: bool) -> Callable[[], Any]:
        os.environ["ANVIL_NATIVE_LAUNCH"] = "1" if native_on else "0"
        try:
            k2 = compiler.compile_source(SRC, kernel="add_kernel", filename="gpu_kernels.py")
            k2[(1,)](x, y, out, 1024, BLOCK=1024)
        finally:
            os.environ.pop("ANVIL_NATIVE_LAUNCH", None)
        return lambda: k2[(1,)](x, y, out, 1024, BLOCK=1024)

    t.row(f"anvil kernel[grid](...)  [{'ctypes' if native else 'native'} entry]", lambda: other_entry(not native))

    def front_only() -> Callable[[], Any]:
        launcher.fast[key] = lambda *a: ck
        return lambda: bound(x, y, out, 1024, BLOCK=1024)

    t.row("  front only: binding, key, lookup (entry a Python no-op)", front_only,
          after=lambda: launcher.fast.__setitem__(key, entry))
    t.row("  entry only: entry(1, 1, 1, *raw, *params)", lambda: lambda: entry(1, 1, 1, *raw, *params))
    from compiler.runtime import cuda

    read, arg = cuda.stream_source()
    t.row("  stream read (torch raw stream, current device)", lambda: lambda: read(arg))
    pack, buf = fn._pack, fn.buffer
    t.row("  pack_into of config + arguments (ctypes entry)",
          lambda: lambda: pack(buf, 0, 1, 1, 1, fn.threads, 1, 1, fn.shared, 0, *raw))
    call, cfg, h, argv = fn._launch_ex, fn._config, fn._handle, fn.argv
    t.row("  driver call: cuLaunchKernelEx via ctypes (prepared args)", lambda: lambda: call(cfg, h, argv, None))
    t.row("  CudaFunction.launch (general path: lock + pack + call)", lambda: lambda: fn.launch(1, 1, 1, 0, raw))
    if not stub:
        _alternatives(t, x, y, out, fn, raw)
        _others(t, x, y, out)
        out.fill_(float("nan"))
        add[(1,)](x, y, out, 1024, BLOCK=1024)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + y)  # still right after every variant above
        _graph_check(add, x, y)
        a = next((v for k, v in t.values.items() if k.startswith("anvil kernel[grid](x")), None)
        tr = next((v for k, v in t.values.items() if k.startswith("triton")), None)
        if a and tr:
            print(f"anvil / triton: sustained {a[0] / tr[0]:.2f}, cpu {a[1] / tr[1]:.2f}  (goal <= 0.5)")
    print("set PROBE_TRACEBACK=1 to see a failing row's traceback" if any("failed" in c for _, c in t.rows) else "")


def _alternatives(t: Table, x: Any, y: Any, out: Any, fn: Any, raw: tuple[int, ...]) -> None:
    """Other ways to make the driver call, each with the prepared buffer (values packed once)."""
    fn._pack(fn.buffer, 0, 1, 1, 1, fn.threads, 1, 1, fn.shared, 0, *raw)
    h = int(fn._handle.value)

    def pydll() -> Callable[[], Any]:
        f = ctypes.PyDLL("libcuda.so.1").cuLaunchKernelEx
        f.restype, f.argtypes = ctypes.c_int, None
        return _checked(lambda: f(fn._config, fn._handle, fn.argv, None))

    t.row("  alt: cuLaunchKernelEx via ctypes.PyDLL (GIL held)", pydll)

    def classic_prepared() -> Callable[[], Any]:
        f = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        f.restype, f.argtypes = ctypes.c_int, None
        stream = ctypes.c_void_p(0)
        return _checked(lambda: f(fn._handle, 1, 1, 1, fn.threads, 1, 1, fn.shared, stream, fn.argv, None))

    t.row("  alt: cuLaunchKernel via ctypes, no argtypes, prepared handles", classic_prepared)

    def classic_argtypes() -> Callable[[], Any]:
        f = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
        f.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                      ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                      ctypes.c_void_p]
        f.restype = ctypes.c_int
        argv = ctypes.cast(fn.argv, ctypes.POINTER(ctypes.c_void_p))
        return _checked(lambda: f(h, 1, 1, 1, fn.threads, 1, 1, fn.shared, None, argv, None))

    t.row("  alt: cuLaunchKernel via ctypes with argtypes (11 args)", classic_argtypes)

    def bindings() -> Callable[[], Any]:
        from cuda.bindings import driver as cu

        f, s, addr = cu.CUfunction(h), cu.CUstream(0), ctypes.addressof(fn.argv)
        return _checked(lambda: cu.cuLaunchKernel(f, 1, 1, 1, fn.threads, 1, 1, fn.shared, s, addr, 0)[0])

    t.row("  alt: cuda.bindings cuLaunchKernel (params as an address)", bindings)

    def no_lock() -> Callable[[], Any]:
        pack, buf, call, cfg, hd, argv = fn._pack, fn.buffer, fn._launch_ex, fn._config, fn._handle, fn.argv
        from compiler.runtime import cuda

        read, arg = cuda.stream_source()

        def launch() -> None:
            pack(buf, 0, 1, 1, 1, fn.threads, 1, 1, fn.shared, read(arg), *raw)
            call(cfg, hd, argv, None)

        return launch

    t.row("  alt: ctypes entry body without the lock (not thread-safe)", no_lock)
    torch.cuda.synchronize()


def _checked(f: Callable[[], Any]) -> Callable[[], Any]:
    """`f` after checking that one call succeeds (returns CUDA_SUCCESS): a failing call is not timed."""
    err = f()
    if int(err) != 0:
        raise RuntimeError(f"the driver returned {err}")
    return f


def _why_not_native(ck: Any, fn: Any) -> None:
    """The warm path is not using the native entry: say why (ANVIL_NATIVE_LAUNCH, or the error)."""
    from compiler import knobs
    from compiler.backends.nvidia import native_launch
    from compiler.runtime import cuda

    if not knobs.native_launch():
        print("native entry off (ANVIL_NATIVE_LAUNCH=0)")
        return
    if not native_launch.supported(fn.codes):
        print(f"native entry: parameter codes {fn.codes!r} not supported")
        return
    try:
        read, arg = cuda.stream_source()
        native_launch.native_entry(fn.codes, list(range(len(fn.codes))), len(fn.codes), 0, fn._launch_ex,
                                   fn._handle_int, fn.threads, fn.shared, read, arg, ck, print, print)
        print("native entry: builds here, yet the warm path did not use it")
    except Exception as e:  # noqa: BLE001 - reported
        print(f"native entry failed to build: {type(e).__name__}: {e}")


def _others(t: Table, x: Any, y: Any, out: Any) -> None:
    def triton_add() -> Callable[[], Any]:
        import gpu_kernels as tk

        return lambda: tk.add_kernel[(1,)](x, y, out, 1024, BLOCK=1024)

    t.row("triton add_kernel[grid](x, y, out, n, BLOCK=1024)", triton_add)
    t.row("torch.add(x, y, out=out)", lambda: lambda: torch.add(x, y, out=out))
    torch.cuda.synchronize()


def _graph_check(add: Any, x: Any, y: Any) -> None:
    """Capture 64 warm launches into a CUDA graph (torch captures on a side stream), replay, check."""
    try:
        outs = [torch.full_like(x, float("nan")) for _ in range(64)]
        ys = [y * (i + 1) for i in range(64)]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm on the side stream, as torch's docs ask before capture
            for o, yi in zip(outs, ys, strict=True):
                add[(1,)](x, yi, o, 1024, BLOCK=1024)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        for o in outs:
            o.fill_(float("nan"))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for o, yi in zip(outs, ys, strict=True):
                add[(1,)](x, yi, o, 1024, BLOCK=1024)
        torch.cuda.synchronize()
        assert all(o.isnan().all() for o in outs), "a launch during capture ran outside the graph"
        g.replay()
        torch.cuda.synchronize()
        for o, yi in zip(outs, ys, strict=True):
            torch.testing.assert_close(o, x + yi)
        t0 = time.perf_counter()
        for _ in range(50):
            g.replay()
        torch.cuda.synchronize()
        per = (time.perf_counter() - t0) / 50 / 64 * 1e6
        print(f"graph capture of the warm path: ok; GPU time per kernel in a replay {per:.2f} us")
    except Exception as e:  # noqa: BLE001 - reported, not raised
        print(f"graph capture of the warm path: FAILED: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
