"""Anvil beside Triton (the same kernel source, benchmarks/gpu_kernels.py) and torch on one GPU.

Prints one table: medians of CUDA-event timing with L2 flushed between runs (triton.testing.do_bench),
GB/s counting each input read once and each output written once, outputs checked against torch;
then cold compile time per kernel (empty caches) and warm launch overhead for a 1k-element add.

    python benchmarks/gpu.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cold-"))
os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-cold-"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_kernels as tk  # noqa: E402

import compiler  # noqa: E402

SRC = (Path(__file__).resolve().parent / "gpu_kernels.py").read_text()
NAMES = ("add_kernel", "softmax_kernel", "layer_norm_fwd", "rms_norm_fwd", "cross_entropy_fwd", "cumsum_rows")
AK = {name: compiler.compile_source(SRC, kernel=name, filename="gpu_kernels.py") for name in NAMES}


def bench(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def first_call_ms(fn: Any) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def cases(quick: bool) -> list[dict[str, Any]]:
    dev = "cuda"
    out: list[dict[str, Any]] = []

    n = (1 << 24) if quick else (1 << 28)
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    o1, o2 = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    grid = (triton.cdiv(n, 1024),)
    out.append(dict(name="add fp32", bytes=3 * n * 4,
                    anvil=lambda: AK["add_kernel"][grid](x, y, o1, n, BLOCK=1024, num_warps=4),
                    triton=lambda: tk.add_kernel[grid](x, y, o2, n, BLOCK=1024, num_warps=4),
                    torch=lambda: torch.add(x, y), ref=lambda: x + y, outs=(o1, o2)))

    for dt in (torch.float32, torch.float16):
        m, k = (4096 if quick else 32768), 4096
        xs = torch.randn(m, k, device=dev, dtype=dt)
        s1, s2 = torch.full_like(xs, float("nan")), torch.full_like(xs, float("nan"))
        out.append(dict(name=f"softmax {str(dt)[6:]}", bytes=2 * m * k * xs.element_size(),
                        anvil=lambda xs=xs, s1=s1, m=m, k=k: AK["softmax_kernel"][(m,)](
                            s1, xs, k, k, k, BLOCK=k, num_warps=8),
                        triton=lambda xs=xs, s2=s2, m=m, k=k: tk.softmax_kernel[(m,)](
                            s2, xs, k, k, k, BLOCK=k, num_warps=8),
                        torch=lambda xs=xs: torch.softmax(xs, -1),
                        ref=lambda xs=xs: torch.softmax(xs.float(), -1), outs=(s1, s2)))

    out += _norm_cases(quick, dev)
    out += _other_cases(quick, dev)
    return out


def _norm_cases(quick: bool, dev: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    m, k = (2048 if quick else 16384), 8192
    xl = torch.randn(m, k, device=dev, dtype=torch.float16)
    w, bb = torch.rand(k, device=dev, dtype=torch.float16), torch.randn(k, device=dev, dtype=torch.float16)
    mean, rstd = torch.empty(m, device=dev), torch.empty(m, device=dev)
    l1, l2 = torch.full_like(xl, float("nan")), torch.full_like(xl, float("nan"))
    out.append(dict(name="layer norm fp16", bytes=2 * m * k * 2,
                    anvil=lambda: AK["layer_norm_fwd"][(m,)](xl, l1, w, bb, mean, rstd, k, k, 1e-5, BLOCK=k,
                                                             num_warps=8),
                    triton=lambda: tk.layer_norm_fwd[(m,)](xl, l2, w, bb, mean, rstd, k, k, 1e-5, BLOCK=k,
                                                          num_warps=8),
                    torch=lambda: torch.nn.functional.layer_norm(xl, (k,), w, bb, 1e-5),
                    ref=lambda: torch.nn.functional.layer_norm(xl.float(), (k,), w.float(), bb.float(), 1e-5),
                    outs=(l1, l2)))

    xr = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    wr = torch.rand(k, device=dev, dtype=torch.bfloat16)
    r1, r2 = torch.full_like(xr, float("nan")), torch.full_like(xr, float("nan"))
    out.append(dict(name="rms norm bf16", bytes=2 * m * k * 2,
                    anvil=lambda: AK["rms_norm_fwd"][(m,)](xr, r1, wr, k, k, 1e-6, BLOCK=k, num_warps=8),
                    triton=lambda: tk.rms_norm_fwd[(m,)](xr, r2, wr, k, k, 1e-6, BLOCK=k, num_warps=8),
                    torch=lambda: torch.nn.functional.rms_norm(xr, (k,), wr, 1e-6),
                    ref=lambda: torch.nn.functional.rms_norm(xr.float(), (k,), wr.float(), 1e-6),
                    outs=(r1, r2)))
    return out


def _other_cases(quick: bool, dev: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    rows, vocab = (1024 if quick else 8192), 128 * 1024
    lg = torch.randn(rows, vocab, device=dev)
    tgt = torch.randint(0, vocab, (rows,), device=dev)
    c1, c2 = torch.full((rows,), float("nan"), device=dev), torch.full((rows,), float("nan"), device=dev)
    out.append(dict(name="cross-entropy fp32", bytes=rows * vocab * 4,
                    anvil=lambda: AK["cross_entropy_fwd"][(rows,)](lg, tgt, c1, vocab, vocab, BLOCK=4096,
                                                                  num_warps=8),
                    triton=lambda: tk.cross_entropy_fwd[(rows,)](lg, tgt, c2, vocab, vocab, BLOCK=4096, num_warps=8),
                    torch=lambda: torch.nn.functional.cross_entropy(lg, tgt, reduction="none"),
                    ref=lambda: torch.nn.functional.cross_entropy(lg.double(), tgt, reduction="none"),
                    outs=(c1, c2)))

    m, k = (4096 if quick else 32768), 1024
    xc = torch.randn(m, k, device=dev)
    u1, u2 = torch.full_like(xc, float("nan")), torch.full_like(xc, float("nan"))
    out.append(dict(name="cumsum fp32 rows", bytes=2 * m * k * 4,
                    anvil=lambda: AK["cumsum_rows"][(m,)](xc, u1, k, k, BLOCK=k, num_warps=4),
                    triton=lambda: tk.cumsum_rows[(m,)](xc, u2, k, k, BLOCK=k, num_warps=4),
                    torch=lambda: torch.cumsum(xc, -1), ref=lambda: torch.cumsum(xc.double(), -1),
                    outs=(u1, u2)))
    return out


def warm_launch_us() -> dict[str, float]:
    x = torch.randn(1024, device="cuda")
    o = torch.empty_like(x)
    res = {}
    fns = {
        "anvil": lambda: AK["add_kernel"][(1,)](x, x, o, 1024, BLOCK=1024),
        "triton": lambda: tk.add_kernel[(1,)](x, x, o, 1024, BLOCK=1024),
        "torch": lambda: torch.add(x, x, out=o),
    }
    for name, f in fns.items():
        for _ in range(200):
            f()
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(2000):
                f()
            samples.append((time.perf_counter() - t0) / 2000 * 1e6)
            torch.cuda.synchronize()
        res[name] = sorted(samples)[2]
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    for c in cases(args.quick):
        row: dict[str, Any] = {"kernel": c["name"]}
        for who in ("anvil", "triton"):
            try:
                row[f"{who}_cold_ms"] = first_call_ms(c[who])
                ref = c["ref"]()
                got = c["outs"][0 if who == "anvil" else 1]
                row[f"{who}_err"] = rel_err(got, ref)
                row[f"{who}_ms"] = bench(c[who])
            except Exception as e:  # noqa: BLE001 - a failing side is reported, the table goes on
                row[f"{who}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        row["torch_ms"] = bench(c["torch"])
        for who in ("anvil", "triton", "torch"):
            if f"{who}_ms" in row:
                row[f"{who}_gbps"] = c["bytes"] / row[f"{who}_ms"] / 1e6
        rows.append(row)
        print(json.dumps(row), flush=True)
    launch = warm_launch_us()
    print()
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__} | "
          f"anvil {compiler.__version__}")
    hdr = f"{'kernel':20} {'anvil GB/s':>11} {'triton GB/s':>12} {'torch GB/s':>11} {'anvil/triton':>13} " \
          f"{'err anvil':>10} {'cold anvil ms':>14} {'cold triton ms':>15}"
    print(hdr)
    for r in rows:
        a, t = r.get("anvil_gbps"), r.get("triton_gbps")
        ratio = f"{a / t:.3f}" if a and t else "-"
        print(f"{r['kernel']:20} {a or 0:11.0f} {t or 0:12.0f} {r.get('torch_gbps', 0):11.0f} {ratio:>13} "
              f"{r.get('anvil_err', float('nan')):10.1e} {r.get('anvil_cold_ms', float('nan')):14.0f} "
              f"{r.get('triton_cold_ms', float('nan')):15.0f}")
        if "anvil_error" in r:
            print(f"    anvil: {r['anvil_error']}")
        if "triton_error" in r:
            print(f"    triton: {r['triton_error']}")
    from compiler.backends.nvidia import native_launch

    kinds = {type(e).__name__ for e in AK["add_kernel"].launcher.fast.values()}
    entry = "native entry" if kinds == {"builtin_function_or_method"} else f"entries {sorted(kinds)}"
    print(f"warm launch, 1k-element add (us/call): anvil {launch['anvil']:.1f}  triton {launch['triton']:.1f}  "
          f"torch {launch['torch']:.1f}  (anvil: {entry}{'; ' if native_launch.failures else ''}"
          f"{'; '.join(native_launch.failures)})")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "launch_us": launch}, indent=1))


if __name__ == "__main__":
    main()
