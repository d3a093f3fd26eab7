"""GPU probe: W4A16 AWQ GEMV variants on the H200 (block sizes, warps, rows in flight, K split).

    python benchmarks/quant_probe.py              # the sweep, one table per shape (< 3 minutes)
    python benchmarks/quant_probe.py --quick      # a few configs only

For each shape (batch 1 on 28672x8192 and 14336x4096, then batch 16 on 14336x4096) it prints
torch's bf16 time, then one row per Anvil config: median ms (L2 flushed before every call), GB/s
of weight bytes (int4 + fp16 scales + packed zeros), and the speedup over torch. Every config is
checked against torch before it is timed; a config that fails to compile, run or match prints
its error and the sweep goes on. The sweep stops early when it nears its time budget.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.kernels.int4 import awq_dequantize, awq_gemm, awq_gemv, awq_gemv_split, awq_quantize_pack  # noqa: E402

SHAPES = [(28672, 8192, 1), (14336, 4096, 1), (14336, 4096, 16)]
# (block_n, num_warps): block_k below puts one row per thread (a thread holds 32 columns)
TILES = [(512, 4), (256, 2), (1024, 4), (512, 8), (256, 4), (1024, 8), (512, 2), (256, 1)]
UNROLLS = [4, 2, 8]
PROGRAMS_PER_SM = [4, 2, 8]


def median_ms(fn: Callable[[], Any], flush: torch.Tensor, reps: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def configs(quick: bool) -> list[dict[str, Any]]:
    out = []
    tiles = TILES[:3] if quick else TILES
    unrolls = UNROLLS[:2] if quick else UNROLLS
    for (bn, nw), u in itertools.product(tiles, unrolls):
        bk = max(1, 1024 * nw // bn)
        if bk * u > 128:
            continue
        out.append({"block_n": bn, "num_warps": nw, "block_k": bk, "unroll": u})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few configs only")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=160.0, help="seconds before the sweep stops early")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    t_start = time.perf_counter()
    dev = "cuda"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    torch.manual_seed(0)
    print(f"W4A16 AWQ GEMV probe on {torch.cuda.get_device_name()} ({sms} SMs), group 128, bf16 activations")
    best: dict[str, tuple[float, str]] = {}
    for n, k, m in SHAPES:
        w = torch.randn(n, k, device=dev) * 0.02
        qw, qz, sc = awq_quantize_pack(w, 128)
        wb = awq_dequantize(qw, qz, sc, torch.bfloat16)
        del w
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        ref = x @ wb.t()
        t_torch = median_ms(partial(torch.matmul, x, wb.t()), flush, args.reps)
        wbytes = qw.numel() * 4 + qz.numel() * 4 + sc.numel() * 2
        key = f"M={m} {n}x{k}"
        print(f"\n{key}: torch bf16 {t_torch:.4f} ms ({wb.numel() * 2 / t_torch / 1e6:.0f} GB/s); "
              f"int4+scales+zeros {wbytes / 1e6:.1f} MB (ideal at 3.7 TB/s: {wbytes / 3.7e6:.4f} ms)")
        print(f"{'kernel':<8} {'config':<58} {'ms':>9} {'GB/s':>7} {'speedup':>8}  rel err")
        rows: list[tuple[str, str, Callable[[], torch.Tensor]]] = []
        for c in configs(args.quick):
            n_tiles = -(-(n // 8) // (c["block_n"] // 8))
            seen = set()
            for pps in PROGRAMS_PER_SM:
                split = awq_gemv_split(n_tiles, k // 128, torch.device(dev), programs_per_sm=pps)
                if split in seen:
                    continue
                seen.add(split)
                name = (f"BN={c['block_n']} BK={c['block_k']} U={c['unroll']} warps={c['num_warps']} "
                        f"split={split} ({n_tiles * split} progs)")
                rows.append(("gemv", name, partial(awq_gemv, x, qw, qz, sc, split_k=split, **c)))
        if m > 1:
            for bm, bn, bk in [(16, 64, 64), (16, 128, 64), (16, 64, 128), (16, 128, 128)]:
                rows.append(("gemm", f"BM={bm} BN={bn} BK={bk}",
                             partial(awq_gemm, x, qw, qz, sc, block_m=bm, block_n=bn, block_k=bk)))
        for kind, name, fn in rows:
            if time.perf_counter() - t_start > args.budget:
                print("(time budget reached: sweep stopped)")
                break
            try:
                err = rel(fn(), ref)
                if not err < 2e-2:
                    raise AssertionError(f"relative error {err:.3g}")
                ms = median_ms(fn, flush, args.reps)
            except Exception as exc:  # noqa: BLE001 - one failing config must not stop the sweep
                msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                print(f"{kind:<8} {name:<58} FAILED {type(exc).__name__}: {msg[:120]}")
                if "--trace" in sys.argv:
                    traceback.print_exc()
                continue
            print(f"{kind:<8} {name:<58} {ms:>9.4f} {wbytes / ms / 1e6:>7.0f} {t_torch / ms:>7.2f}x  {err:.1e}",
                  flush=True)
            if key not in best or ms < best[key][0]:
                best[key] = (ms, f"{kind} {name} ({t_torch / ms:.2f}x)")
    print("\nbest per shape:")
    for key, (ms, name) in best.items():
        print(f"  {key:<18} {ms:.4f} ms  {name}")
    print(f"\nprobe took {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
