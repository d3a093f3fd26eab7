"""Anvil's CPU backend vs torch (CPU) vs Triton's interpreter, on the same kernel source.

    python benchmarks/cpu.py              # full table (the interpreter takes ~30 s in all)
    python benchmarks/cpu.py --no-interp  # skip Triton's interpreter

Prints, per kernel: median times of Anvil and torch, Triton's interpreter (TRITON_INTERPRET=1,
run in a subprocess on this very file, timed `--interp-reps` times), the ratios Anvil/torch and
interpreter/Anvil, Anvil's cold compile (first call in a fresh process with an empty
ANVIL_CACHE_DIR: compile + load + run, and the compile part alone) and Anvil's warm launch
time on a tiny (1k-element) problem. The kernels below are written once; they compile with
Anvil (`compiler.language`) or, in the interpreter worker, with `triton.language`.

Goals (issue): >= 100x faster than the interpreter on each kernel; within 2x of torch on add
and softmax; cold compile of the softmax kernel under 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

if os.environ.get("ANVIL_BENCH_BACKEND") == "triton":
    import triton.language as tl
    from triton import cdiv, jit
else:
    import compiler.language as tl
    from compiler import cdiv, jit


# ---------------------------------------------------------------------------------- kernels
@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


@jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk[None, :]) * stride_ak,
                    mask=(rm[:, None] < M) & (k + rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk[:, None]) * stride_bk + rn[None, :] * stride_bn,
                    mask=(k + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


# ---------------------------------------------------------------------------------- problems
# Each problem: make(size) -> (launch, torch_fn, check, work) where launch runs the kernel once.
ADD_N = 1 << 24
SOFTMAX_SHAPE = (4096, 1024)
MATMUL_SIZE = 512


def make_add(n: int) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], float], float]:
    x, y = torch.rand(n), torch.rand(n)
    out, ref = torch.empty(n), torch.empty(n)
    launch = lambda: add_kernel[(cdiv(n, 1024),)](x, y, out, n, BLOCK_SIZE=1024)
    torch_fn = lambda: torch.add(x, y, out=ref)
    check = lambda: (out - (x + y)).abs().max().item()
    return launch, torch_fn, check, 3 * 4 * n / 1e9  # GB moved


def make_softmax(shape: tuple[int, int]) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], float], float]:
    rows, cols = shape
    x = torch.randn(rows, cols)
    out, ref = torch.empty_like(x), torch.empty_like(x)
    block = 1 << (cols - 1).bit_length()
    launch = lambda: softmax_kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK_SIZE=block)
    torch_fn = lambda: torch.ops.aten._softmax.out(x, -1, False, out=ref)
    check = lambda: (out - torch.softmax(x, -1)).abs().max().item()
    return launch, torch_fn, check, 2 * 4 * rows * cols / 1e9


def make_matmul(size: int | tuple[int, int, int]) -> tuple[Callable[[], Any], Callable[[], Any],
                                                           Callable[[], float], float]:
    M, N, K = (size, size, size) if isinstance(size, int) else size
    a, b = torch.randn(M, K), torch.randn(K, N)
    c, ref = torch.empty(M, N), torch.empty(M, N)
    bm, bn, bk = (64, 64, 32) if M >= 64 else (32, 32, 32)
    grid = (cdiv(M, bm), cdiv(N, bn))
    launch = lambda: matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                         c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    torch_fn = lambda: torch.mm(a, b, out=ref)
    check = lambda: (c - a @ b).abs().max().item()
    return launch, torch_fn, check, 2 * M * N * K / 1e9  # GFLOP


PROBLEMS: dict[str, tuple[Callable[[Any], Any], Any, Any, str, str]] = {
    # name: (make, full size, tiny size for the warm launch, size label, unit of `work`)
    "add": (make_add, ADD_N, 1024, "2^24 fp32", "GB/s"),
    "softmax": (make_softmax, SOFTMAX_SHAPE, (1, 1024), "4096x1024 fp32", "GB/s"),
    "matmul": (make_matmul, MATMUL_SIZE, (32, 32, 32), "512^3 fp32", "GFLOP/s"),
}


# ---------------------------------------------------------------------------------- timing
def median_time(fn: Callable[[], Any], reps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def paired_medians(f: Callable[[], Any], g: Callable[[], Any], budget: float = 2.0) -> tuple[float, float]:
    """Medians of f and g timed alternately, so both see the same background load."""
    for _ in range(3):
        f()
        g()
    one = median_time(f, 1, 0) + median_time(g, 1, 0)
    tf, tg = [], []
    for _ in range(reps_for(one, budget, lo=11, hi=400)):
        t0 = time.perf_counter()
        f()
        t1 = time.perf_counter()
        g()
        t2 = time.perf_counter()
        tf.append(t1 - t0)
        tg.append(t2 - t1)
    return statistics.median(tf), statistics.median(tg)


def reps_for(seconds_per_call: float, budget: float = 1.0, lo: int = 5, hi: int = 200) -> int:
    return max(lo, min(hi, int(budget / max(seconds_per_call, 1e-6))))


def _worker(mode: str, name: str, reps: int) -> None:
    """Run in a subprocess; prints one JSON line."""
    make, size, tiny, _, _ = PROBLEMS[name]
    if mode == "cold":
        launch, _, check, _ = make(size)
        t0 = time.perf_counter()
        k = launch()
        first = time.perf_counter() - t0
        ms = getattr(k, "metadata", {}).get("compile_ms", {})
        print(json.dumps({"first_s": first, "compile_ms": ms.get("total_ms"), "err": check()}))
    elif mode == "interp":
        launch, _, check, _ = make(size)
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            launch()
            ts.append(time.perf_counter() - t0)
        print(json.dumps({"times": ts, "err": check()}))


def _subprocess(mode: str, name: str, env: dict[str, str], reps: int = 1, timeout: float = 600) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, name, "--interp-reps", str(reps)]
    r = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def measure(name: str, interp: bool, interp_reps: int, cold_reps: int) -> dict[str, Any]:
    make, size, tiny, label, unit = PROBLEMS[name]
    row: dict[str, Any] = {"kernel": name, "size": label, "unit": unit}
    # Cold compile: a fresh process and an empty cache directory each time; the median of a few.
    firsts, compiles = [], []
    for _ in range(cold_reps):
        with tempfile.TemporaryDirectory(prefix="anvil-cold-") as d:
            cold = _subprocess("cold", name, {"ANVIL_CACHE_DIR": d, "ANVIL_CACHE": "1"})
        firsts.append(cold.get("first_s", float("nan")) * 1e3)
        compiles.append(cold.get("compile_ms") or float("nan"))
    row["cold_first_ms"] = statistics.median(firsts)
    row["cold_compile_ms"] = statistics.median(compiles)
    launch, torch_fn, check, work = make(size)
    launch()
    row["err"] = check()
    t_anvil, t_torch = paired_medians(launch, torch_fn)
    row.update(anvil_ms=t_anvil * 1e3, torch_ms=t_torch * 1e3, anvil_rate=work / t_anvil, torch_rate=work / t_torch)
    tiny_launch, _, _, _ = make(tiny)
    row["warm_launch_us"] = median_time(tiny_launch, 2000, warmup=20) * 1e6
    row["interp_ms"] = float("nan")
    if interp:
        res = _subprocess("interp", name, {"TRITON_INTERPRET": "1", "ANVIL_BENCH_BACKEND": "triton"}, interp_reps)
        if "times" in res:
            row["interp_ms"] = statistics.median(res["times"]) * 1e3
            row["interp_err"] = res["err"]
        else:
            row["interp_error"] = res.get("error")
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ["kernel", "size", "Anvil ms", "torch ms", "interp ms", "Anvil/torch", "interp/Anvil", "Anvil rate",
            "torch rate", "cold first ms", "cold compile ms", "warm launch us"]
    body = []
    for r in rows:
        body.append([r["kernel"], r["size"], f"{r['anvil_ms']:.3f}", f"{r['torch_ms']:.3f}",
                     f"{r['interp_ms']:.0f}" if r["interp_ms"] == r["interp_ms"] else "n/a",
                     f"{r['anvil_ms'] / r['torch_ms']:.2f}x",
                     f"{r['interp_ms'] / r['anvil_ms']:.0f}x" if r["interp_ms"] == r["interp_ms"] else "n/a",
                     f"{r['anvil_rate']:.1f} {r['unit']}", f"{r['torch_rate']:.1f} {r['unit']}",
                     f"{r['cold_first_ms']:.0f}", f"{r['cold_compile_ms']:.0f}", f"{r['warm_launch_us']:.1f}"])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.rjust(w) if i >= 2 else c.ljust(w) for i, (c, w) in pairs)

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for b in body:
        print(line(b))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-interp", action="store_true", help="skip Triton's interpreter")
    ap.add_argument("--interp-reps", type=int, default=2, help="timed runs of the interpreter per kernel")
    ap.add_argument("--cold-reps", type=int, default=3, help="fresh processes timed for the cold compile")
    ap.add_argument("--kernels", default=",".join(PROBLEMS), help="comma-separated subset of add,softmax,matmul")
    ap.add_argument("--threads", type=int, default=0,
                    help="CPU threads for Anvil (ANVIL_CPU_THREADS) and torch (default: all cores)")
    ap.add_argument("--json", action="store_true", help="also print the rows as JSON")
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "KERNEL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.threads:
        os.environ["ANVIL_CPU_THREADS"] = str(args.threads)  # inherited by the worker processes too
        torch.set_num_threads(args.threads)
    if args.worker:
        _worker(args.worker[0], args.worker[1], args.interp_reps)
        return
    import llvmlite

    print(f"Anvil CPU backend vs torch {torch.__version__} (CPU, {torch.get_num_threads()} threads) vs Triton's "
          f"interpreter; llvmlite {llvmlite.__version__}; {os.cpu_count()} CPUs; "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    rows = []
    for name in args.kernels.split(","):
        rows.append(measure(name, not args.no_interp, args.interp_reps, args.cold_reps))
        for r in rows[-1:]:
            if r.get("interp_error"):
                print(f"  interpreter failed on {name}: {r['interp_error']}", file=sys.stderr)
    print_table(rows)
    print("max abs error vs torch: " + ", ".join(f"{r['kernel']} {r['err']:.1e}" for r in rows))
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
