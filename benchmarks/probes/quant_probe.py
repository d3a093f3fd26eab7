"""GPU probe: W4A16 AWQ GEMV/GEMM variants on the H200 beside torch bf16, one table per shape.

    python benchmarks/probes/quant_probe.py --gemv-variants  # every arithmetic mode x tiles x K splits (< 4 min)
    python benchmarks/probes/quant_probe.py                  # the older block-size sweep of the fp32 mode
    python benchmarks/probes/quant_probe.py --quick          # a few configs of either

Shapes: batch 1 on 28672x8192 and 14336x4096, then batch 16 on both. For each it prints torch's
bf16 time, then one row per Anvil variant: median ms (L2 flushed before every call), GB/s of
weight bytes (int4 + fp16 scales + packed zeros), the speedup over torch and the relative error
against torch's result. Every variant is checked against torch before it is timed; one that fails
to compile, run or match prints its error and the probe goes on. The probe stops early when it
nears its time budget (--budget). --modes restricts the arithmetic modes (tools/kernels/int4.py
GEMV_MODES); --trace prints tracebacks of failures.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack  # noqa: E402
from tools.kernels.w4a16 import GEMV_MODES, GemvConfig, awq_gemm, awq_gemv, awq_gemv_split  # noqa: E402

GEMV_SHAPES = [(28672, 8192), (14336, 4096)]
# the older sweep (fp32 mode): (block_n, num_warps); block_k puts one row per thread (32 columns)
TILES = [(512, 4), (256, 2), (1024, 4), (512, 8), (256, 4), (1024, 8), (512, 2), (256, 1)]
UNROLLS = [4, 2, 8]
PROGRAMS_PER_SM = [4, 2, 8]
# --gemv-variants, fp32 and bf16x2 modes: (block_n, block_k, unroll, num_warps); a thread holds 4
# words (16 bytes) of a row when block_n * block_k >= 4096 * num_warps / 8, else 2
VARIANT_TILES = [(512, 8, 4, 4), (512, 8, 2, 4), (256, 8, 4, 2), (1024, 4, 4, 4), (256, 8, 8, 4)]
# mma modes: (num_warps, words per thread V, chunks of 16 rows per step U); block_n = 64 * num_warps * V
MMA_TILES = [(4, 4, 2), (2, 4, 2), (4, 4, 1), (4, 2, 2), (4, 2, 4), (2, 2, 4), (4, 1, 4), (2, 1, 4), (4, 1, 8),
             (8, 1, 4), (8, 2, 2), (1, 1, 4)]
VARIANT_PPS = [1, 2, 4, 8]  # programs per SM the K split aims at (awq_gemv_split)
MODE_ORDER = ["mma", "mma-sub", "bf16x2-sub", "bf16x2", "f32", "f32-exact"]
GEMM_TILES = [(16, 64, 64), (16, 128, 64), (16, 64, 128), (16, 128, 128)]


def median_ms(fn: Callable[[], Any], flush: torch.Tensor, reps: int, clean: bool = False) -> float:
    """Median of `reps` timed calls, L2 flushed before each: by writing 256 MiB (the lines the call
    then evicts are dirty and written back during it), or with `clean`, by reading them. Warm-up:
    calls for 100 ms first, so that compiling, module loading and the launch path's native entry
    (built in the background after the first launches) are over before the timed calls."""
    t_end = time.perf_counter() + 0.1
    for i in itertools.count():
        fn()
        if i >= 2 and time.perf_counter() > t_end:
            break
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if clean:
            flush.sum(dtype=torch.int64)
        else:
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


Row = tuple[str, str, Callable[[], torch.Tensor]]


def sweep_rows(x: torch.Tensor, qw: torch.Tensor, qz: torch.Tensor, sc: torch.Tensor, quick: bool) -> list[Row]:
    """The older sweep: fp32 mode over block sizes, warps, rows in flight and K splits."""
    n, k = qw.shape[1] * 8, qw.shape[0]
    rows: list[Row] = []
    tiles = TILES[:3] if quick else TILES
    unrolls = UNROLLS[:2] if quick else UNROLLS
    for (bn, nw), u in itertools.product(tiles, unrolls):
        bk = max(1, 1024 * nw // bn)
        if bk * u > 128:
            continue
        n_tiles = -(-(n // 8) // (bn // 8))
        seen = set()
        for pps in PROGRAMS_PER_SM:
            split = awq_gemv_split(n_tiles, k // 128, x.device, programs_per_sm=pps)
            if split in seen:
                continue
            seen.add(split)
            name = f"f32 BN={bn} BK={bk} U={u} w={nw} split={split} ({n_tiles * split} progs)"
            cfg = GemvConfig(split_k=split, block_n=bn, block_k=bk, unroll=u, num_warps=nw, mode="f32")
            rows.append(("gemv", name, partial(awq_gemv, x, qw, qz, sc, cfg)))
    return rows


def variant_rows(x: torch.Tensor, qw: torch.Tensor, qz: torch.Tensor, sc: torch.Tensor, modes: list[str],
                 quick: bool, splits: list[int] | None = None, aheads: tuple[int, ...] = (1,),
                 stages: tuple[int, ...] = (0,), pair_list: list[tuple[int, int]] | None = None) -> list[Row]:
    """Every arithmetic mode x its tiles x the distinct K splits that VARIANT_PPS give (or
    `splits`). Batch > 1: the mma modes only (the others read the weights once per row of x).
    mma modes: `stages` 0 is the kernel that loads steps ahead in registers; 1 or more streams one
    group per step, pipelined that deep (unroll, ahead unused), for the (num_warps, words per
    thread) of `pair_list` (default: those of MMA_TILES)."""
    m, n, k = x.shape[0], qw.shape[1] * 8, qw.shape[0]
    rows: list[Row] = []
    for mode in sorted(modes, key=MODE_ORDER.index):  # the likeliest winners first (the budget may cut the rest)
        if mode == "f32-exact" or (mode != "f32" and x.dtype != torch.bfloat16):
            continue
        if m > 1 and not mode.startswith("mma"):
            continue
        tiles: list[dict[str, Any]]
        if mode.startswith("mma"):
            tiles = [{"block_n": 64 * nw * v, "num_warps": nw, "unroll": u, "ahead": a} for nw, v, u in MMA_TILES
                     for a in aheads] if 0 in stages else []
            pairs = list(dict.fromkeys(pair_list or [(nw, v) for nw, v, _ in MMA_TILES]))
            tiles += [{"block_n": 64 * nw * v, "num_warps": nw, "stages": st, **({"block_m": bm} if m > 8 else {})}
                      for nw, v in pairs for st in stages if st > 0 for bm in ((16, 8) if m > 8 else (16,))]
        else:
            tiles = [{"block_n": bn, "block_k": bk, "unroll": u, "num_warps": nw} for bn, bk, u, nw in VARIANT_TILES]
        for cfg in tiles[:2] if quick else tiles:
            n_tiles = -(-(n // 8) // (cfg["block_n"] // 8))
            seen = set()
            pps_splits = [awq_gemv_split(n_tiles, k // 128, x.device, programs_per_sm=pps)
                          for pps in (VARIANT_PPS[1:3] if quick else VARIANT_PPS)]
            for split in splits or pps_splits:
                if split in seen or split > k // 128:
                    continue
                seen.add(split)
                short = {"block_n": "Bn", "block_k": "Bk", "num_warps": "w", "unroll": "U", "ahead": "A", "stages": "S",
                         "block_m": "Bm"}
                desc = " ".join(f"{short[key]}={val}" for key, val in cfg.items())
                name = f"{mode:<10} {desc} split={split} ({n_tiles * split} progs)"
                rows.append(("gemv", name, partial(awq_gemv, x, qw, qz, sc,
                                                   GemvConfig(split_k=split, mode=mode, **cfg))))
    return rows


def gemm_rows(x: torch.Tensor, qw: torch.Tensor, qz: torch.Tensor, sc: torch.Tensor) -> list[Row]:
    """awq_gemm as called (bf16 with few rows: the mma GEMV kernel), then its tl.dot kernel."""
    rows: list[Row] = [("gemm", "default", partial(awq_gemm, x, qw, qz, sc))]
    rows += [("gemm", f"tl.dot BM={bm} BN={bn} BK={bk}", partial(awq_gemm, x, qw, qz, sc, block_m=bm, block_n=bn,
                                                                  block_k=bk, mma_rows=0))
             for bm, bn, bk in GEMM_TILES]
    return rows


def run_rows(rows: list[Row], ref: torch.Tensor, t_torch: float, wbytes: int, flush: torch.Tensor, reps: int,
             deadline: float, trace: bool) -> tuple[float, str] | None:
    """Checks then times each row; prints one line per row; returns the fastest (ms, name)."""
    best: tuple[float, str] | None = None
    for kind, name, fn in rows:
        if time.perf_counter() > deadline:
            print("(time budget reached: the rest of this shape is skipped)")
            break
        try:
            err = rel(fn(), ref)
            if not err < 2e-2:
                raise AssertionError(f"relative error {err:.3g}")
            ms = median_ms(fn, flush, reps)
        except Exception as exc:  # noqa: BLE001 - one failing variant must not stop the probe
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print(f"{kind:<5} {name:<66} FAILED {type(exc).__name__}: {msg[:120]}", flush=True)
            if trace:
                traceback.print_exc()
            continue
        print(f"{kind:<5} {name:<66} {ms:>8.4f} {wbytes / ms / 1e6:>6.0f} {t_torch / ms:>6.2f}x  {err:.1e}", flush=True)
        if best is None or ms < best[0]:
            best = (ms, f"{kind} {name} ({t_torch / ms:.2f}x)")
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemv-variants", action="store_true", help="every arithmetic mode x a few tiles")
    ap.add_argument("--modes", default=",".join(GEMV_MODES), help="comma-separated modes for --gemv-variants")
    ap.add_argument("--quick", action="store_true", help="a few configs only")
    ap.add_argument("--splits", default="", help="comma-separated K splits for --gemv-variants (default: by "
                    "programs per SM)")
    ap.add_argument("--shapes", default="", help="comma-separated M:NxK (default: batch 1 and 16 on both shapes)")
    ap.add_argument("--ahead", default="1", help="comma-separated steps loaded ahead (mma modes: 1, 2)")
    ap.add_argument("--stages", default="0", help="comma-separated pipeline depths (mma modes; 0: not streamed, "
                    "1: streamed, not pipelined)")
    ap.add_argument("--tiles", default="", help="comma-separated warps:words-per-thread of the streamed mma kernels")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=210.0, help="seconds before the probe stops early")
    ap.add_argument("--trace", action="store_true", help="print the traceback of each failure")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in GEMV_MODES]
    if bad:
        ap.error(f"unknown modes {bad}; choose from {GEMV_MODES}")
    t_start = time.perf_counter()
    dev = "cuda"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    torch.manual_seed(0)
    print(f"W4A16 AWQ probe on {torch.cuda.get_device_name()} ({sms} SMs), group 128, bf16 activations")
    shapes = [(n, k, 1) for n, k in GEMV_SHAPES] + [(n, k, 16) for n, k in GEMV_SHAPES]
    if args.shapes:
        shapes = [(int(nk.split("x")[0]), int(nk.split("x")[1]), int(m))
                  for m, nk in (item.split(":") for item in args.shapes.split(","))]
    splits = [int(v) for v in args.splits.split(",") if v]
    aheads = tuple(int(v) for v in args.ahead.split(",") if v)
    depths = tuple(int(v) for v in args.stages.split(",") if v)
    pairs = [(int(t.split(":")[0]), int(t.split(":")[1])) for t in args.tiles.split(",") if t] or None
    best: dict[str, tuple[float, str]] = {}
    for i, (n, k, m) in enumerate(shapes):
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
              f"int4+scales+zeros {wbytes / 1e6:.1f} MB (ideal at 3.7 TB/s: {wbytes / 3.7e6:.4f} ms, "
              f"{t_torch / (wbytes / 3.7e6):.2f}x)")
        print(f"{'kind':<5} {'variant':<66} {'ms':>8} {'GB/s':>6} {'speedup':>7}  rel err")
        if m > 1:
            rows = gemm_rows(x, qw, qz, sc)
            if args.gemv_variants:
                rows += variant_rows(x, qw, qz, sc, modes, args.quick, splits, aheads, depths, pairs)
        elif args.gemv_variants:
            rows = variant_rows(x, qw, qz, sc, modes, args.quick, splits, aheads, depths, pairs)
        else:
            rows = sweep_rows(x, qw, qz, sc, args.quick)
        # each shape gets an equal share of what is left of the budget
        deadline = time.perf_counter() + (args.budget - (time.perf_counter() - t_start)) / (len(shapes) - i)
        got = run_rows(rows, ref, t_torch, wbytes, flush, args.reps, deadline, args.trace)
        if got is not None:
            best[key] = got
        del qw, qz, sc, wb, x, ref
        torch.cuda.empty_cache()
    print("\nbest per shape:")
    for key, (ms, name) in best.items():
        print(f"  {key:<18} {ms:.4f} ms  {name}")
    print(f"\nprobe took {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
