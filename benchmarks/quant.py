"""Low-precision kernels of tools/kernels beside torch, in the same run, as one table of medians.

    python benchmarks/quant.py                  # H200: the issue's shapes (needs Anvil's NVIDIA backend)
    python benchmarks/quant.py --cpu --small    # CPU backend, small shapes: exercises every case here
    python benchmarks/quant.py --json out.json  # also write the rows as JSON

Cases (goals from issue 6, H200):
- W4A16 AWQ GEMV, batch 1, on 28672x8192 and 14336x4096, against torch's bf16 GEMV: >= 3.0x
  (ideal 3.85x: the int4 weights, scales and zeros at copy bandwidth).
- W4A16 at batch 16 against torch's bf16 matmul: >= 1.5x.
- FP8 GEMM 8192^3 (per-tensor and per-row scales) against torch._scaled_mm: >= 0.8x.

GPU timing: CUDA events around each call, L2 flushed (a 256 MiB write) before every call so that
weights that fit in L2 are not read from it, then a 100 us spin on the GPU before the start event
so that the host's side of the call (its Python, measured by benchmarks/probes/quant_timing.py) is not
timed as GPU time, median of the repetitions. The W4A16 tensor-core configs marked "packed" read
qweight in awq_gemv_pack's layout, made once before timing (as an engine repacks at load time); "blocks": its blocks
layout (awq_gemv_pack(qweight, qzeros, scales): words, scales and zeros of an octet's group in one block, streamed by
bulk copies into shared memory, the default for batch 1 here); "evict_first": that
kernel loads the words with that L2 policy (awq_gemv's default where one program row covers x), so a call does not
write back as many of the flush's dirty lines (benchmarks/probes/quant_timing.py compares it under four timing methods).
CPU timing: wall clock, median. Every Anvil output is checked against torch before it is timed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.kernels.fp8 import fp8_gemm, fp8_quantize  # noqa: E402
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack  # noqa: E402
from tools.kernels.w4a16 import GemvConfig, awq_gemm, awq_gemv, awq_gemv_pack  # noqa: E402

FULL = {"gemv": [(28672, 8192), (14336, 4096)], "batch": 16, "fp8": (8192, 8192, 8192)}
SMALL = {"gemv": [(1024, 512), (512, 256)], "batch": 16, "fp8": (256, 256, 256)}


class Timer:
    def __init__(self, device: str, reps: int, warmup: int) -> None:
        self.device, self.reps, self.warmup = device, reps, warmup
        self.flush = torch.empty(256 << 20, dtype=torch.int8, device=device) if device == "cuda" else None

    def median_ms(self, fn: Callable[[], Any]) -> float:
        # warm-up: `warmup` calls and at least 100 ms of them, so that compiling, module loading
        # and the launch path's native entry (built in the background) are over before timing
        t_end = time.perf_counter() + 0.1
        n = 0
        while n < self.warmup or time.perf_counter() < t_end:
            fn()
            n += 1
        times = []
        if self.device == "cuda":
            torch.cuda.synchronize()
            for _ in range(self.reps):
                assert self.flush is not None
                self.flush.zero_()
                torch.cuda._sleep(200_000)  # ~100 us of GPU cycles: the host queues the call meanwhile
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            for _ in range(self.reps):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _check(name: str, got: torch.Tensor, ref: torch.Tensor, tol: float) -> float:
    err = _rel(got, ref)
    if not err <= tol:
        raise AssertionError(f"{name}: relative error {err:.3g} > {tol:g}")
    return err


def _best(timer: Timer, variants: Mapping[str, Callable[[], Any]]) -> tuple[float, str]:
    """The fastest of a few block-size variants (a manual autotune); returns (ms, variant)."""
    best = min((timer.median_ms(fn), name) for name, fn in variants.items())
    return best


def w4a16_cases(timer: Timer, shapes: dict[str, Any], device: str, sweep: bool) -> list[dict[str, Any]]:
    rows = []
    for n, k in shapes["gemv"]:
        w = torch.randn(n, k, device=device) * 0.02
        qw, qz, sc = awq_quantize_pack(w, 128)
        w_bf16 = awq_dequantize(qw, qz, sc, torch.bfloat16)
        qw_packed = awq_gemv_pack(qw) if device == "cuda" else qw
        qw_blocks = awq_gemv_pack(qw, qz, sc) if device == "cuda" else qw
        for m in (1, shapes["batch"]):
            x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
            ref = x @ w_bf16.t()
            variants: dict[str, Callable[[], Any]]
            if device != "cuda":
                variants = {"BN=64 U=4 warps=4": partial(awq_gemv, x, qw, qz, sc,
                                                         GemvConfig(block_n=64, unroll=4, num_warps=4))}
                if m > 1:
                    variants = {"BM=16 BN=64 BK=64": partial(awq_gemm, x, qw, qz, sc, block_m=16, block_n=64,
                                                             block_k=64)}
            else:
                # awq_gemv keywords: the best of benchmarks/probes/quant_probe.py --gemv-variants on the H200;
                # the tensor-core modes dequantize into mma.sync fragments and take up to 16 rows of x
                # per program (block_m); S: one group per loop step, its loads at the top of the step
                # (stages=1), or U chunks per step loaded one step ahead (unroll)
                cfgs: list[tuple[int, int, dict[str, Any], int]]
                # (packed: qweight in awq_gemv_pack's layout, its own kernel (int4_packed.py): 16-byte
                # loads, zero points folded out of the loop, the next group loaded ahead for <= 8 rows)
                # (awq_gemv's default sums a tile's K splits in a thread block cluster for one row
                # of x, 2-4 splits and 2+ warps; cluster=False: through global memory)
                pk: dict[str, Any] = {"packed": True}
                pg = {**pk, "cluster": False}
                b8 = {**pk, "block_m": 8}
                # (warp_split: the warps of a program share one octet's K)
                cfgs = ([(128, 2, pk, 4), (64, 8, {**pk, "warp_split": True, "ahead": 1}, 1), (512, 8, pk, 4),
                         (512, 8, pg, 4), (64, 1, pk, 4), (512, 8, pk, 8), (128, 2, pk, 8), (64, 1, pk, 8),
                         (512, 8, {"stages": 1}, 4)]
                        if m == 1 else
                        [(256, 4, b8, 4), (128, 2, b8, 4), (64, 1, b8, 4), (128, 2, {**b8, "ahead": 1}, 4),
                         (256, 4, pk, 2), (128, 2, {"stages": 1, "block_m": 8}, 4)])
                if torch.cuda.get_device_capability() < (9, 0):  # clusters: sm_90 and newer
                    cfgs = [c for c in cfgs if not c[2].get("cluster")]
                if not sweep:
                    cfgs = cfgs[:1]
                short = {"stages": "S", "unroll": "U", "block_m": "BM", "packed": "packed", "ahead": "A",
                         "cluster": "cluster", "warp_split": "warp_split"}
                variants = {}
                for bn, nw, kw, sk in cfgs:
                    opts = {k: v for k, v in kw.items() if k != "packed"}
                    name = " ".join(short[k] if v is True else f"{short[k]}={v}" for k, v in kw.items())
                    if kw.get("packed") and "cluster" not in kw and m == 1 and 2 <= sk <= 4 and nw >= 2:
                        name += " cluster"  # awq_gemv's default there
                    if kw.get("packed") and m <= kw.get("block_m", 16):
                        name += " evict_first"  # the words' L2 policy where one program row covers x
                    mode = "mma" if kw.get("packed") else "mma-sub"
                    variants[f"{mode} BN={bn} warps={nw} {name} split={sk}"] = partial(
                        awq_gemv, x, qw_packed if kw.get("packed") else qw, qz, sc,
                        GemvConfig(block_n=bn, num_warps=nw, split_k=sk, mode=mode, **opts))
                if m == 1:  # the blocks layout (awq_gemv's defaults there: 8 warps sharing K, a ring of 1 slot,
                    # the int8 arithmetic)
                    blk = "blocks ring=1 BN=64 split=1 evict_first"
                    variants = {f"{blk} int8 warps=8": partial(awq_gemv, x, qw_blocks, qz, sc),
                                f"{blk} int8 warps=4": partial(awq_gemv, x, qw_blocks, qz, sc, GemvConfig(num_warps=4)),
                                f"{blk} bf16 warps=8": partial(awq_gemv, x, qw_blocks, qz, sc, GemvConfig(mode="mma")),
                                **variants}
                if m > 1 and sweep:
                    variants["awq_gemm (default)"] = partial(awq_gemm, x, qw, qz, sc)
            err = _check(f"w4a16 {m}x{n}x{k}", next(iter(variants.values()))(), ref, 2e-2)
            t_torch = timer.median_ms(partial(torch.matmul, x, w_bf16.t()))
            t_anvil, cfg = _best(timer, variants)
            weight_bytes = qw.numel() * 4 + qz.numel() * 4 + sc.numel() * 2
            rows.append({
                "case": f"W4A16 {'GEMV' if m == 1 else 'GEMM'} M={m}", "shape": f"{n}x{k}", "baseline": "torch bf16",
                "torch_ms": t_torch, "anvil_ms": t_anvil, "speedup": t_torch / t_anvil,
                "goal": 3.0 if m == 1 else 1.5, "anvil_gbps": weight_bytes / t_anvil / 1e6,
                "torch_gbps": w_bf16.numel() * 2 / t_torch / 1e6, "config": cfg, "rel_err": err,
            })
    return rows


def fp8_cases(timer: Timer, shapes: dict[str, Any], device: str) -> list[dict[str, Any]]:
    m, n, k = shapes["fp8"]
    a = torch.randn(m, k, device=device)
    b = torch.randn(n, k, device=device) * 0.1
    rows = []
    for scheme in ("tensor", "row"):
        qa, sa = fp8_quantize(a, scheme=scheme)
        qb, sb = fp8_quantize(b, scheme=scheme)
        if scheme == "tensor":
            sa_t, sb_t = sa.reshape(()), sb.reshape(())
        else:
            sa_t, sb_t = sa.reshape(m, 1), sb.reshape(1, n)

        def torch_mm(qa: torch.Tensor = qa, qb: torch.Tensor = qb, sa_t: torch.Tensor = sa_t,
                     sb_t: torch.Tensor = sb_t) -> torch.Tensor:
            return torch._scaled_mm(qa, qb.t(), sa_t, sb_t, out_dtype=torch.bfloat16)

        ref = torch_mm()
        # 8 warps = two warpgroups of wgmma on Hopper for the 128-row tiles
        configs = ([(128, 256, 128, 8), (256, 128, 128, 8), (128, 128, 128, 8), (128, 256, 64, 8)]
                   if device == "cuda" else [(32, 64, 64, 4)])
        variants = {f"BM={bm} BN={bn} BK={bk} w{w}": partial(fp8_gemm, qa, qb, sa, sb, torch.bfloat16, bm, bn, bk, w)
                    for bm, bn, bk, w in configs}
        err = _check(f"fp8 {scheme}", next(iter(variants.values()))(), ref, 2e-2)
        t_torch = timer.median_ms(torch_mm)
        t_anvil, cfg = _best(timer, variants)
        flops = 2 * m * n * k
        rows.append({
            "case": f"FP8 GEMM {scheme} scales", "shape": f"{m}x{n}x{k}", "baseline": "torch._scaled_mm",
            "torch_ms": t_torch, "anvil_ms": t_anvil, "speedup": t_torch / t_anvil, "goal": 0.8,
            "anvil_tflops": flops / t_anvil / 1e9, "torch_tflops": flops / t_torch / 1e9, "config": cfg,
            "rel_err": err,
        })
    return rows


def print_table(rows: list[dict[str, Any]], device_name: str) -> None:
    print(f"\nAnvil low-precision kernels vs torch on {device_name} (medians)\n")
    head = (f"{'case':<26} {'shape':<16} {'baseline':<17} {'torch ms':>10} {'anvil ms':>10} {'speedup':>8} "
            f"{'goal':>6} {'rate (anvil / torch)':>22}  config")
    print(head)
    print("-" * len(head))
    for r in rows:
        if "anvil_gbps" in r:
            rate = f"{r['anvil_gbps']:.3g} / {r['torch_gbps']:.3g} GB/s"
        else:
            rate = f"{r['anvil_tflops']:.3g} / {r['torch_tflops']:.3g} TF/s"
        ok = "ok" if r["speedup"] >= r["goal"] else "--"
        print(f"{r['case']:<26} {r['shape']:<16} {r['baseline']:<17} {r['torch_ms']:>10.4f} {r['anvil_ms']:>10.4f} "
              f"{r['speedup']:>7.2f}x {r['goal']:>5.1f}x {rate:>22}  {r['config']} {ok}")
    print("\nspeedup = torch ms / anvil ms; W4A16 GB/s count the weight bytes read (int4 + scales + zeros vs bf16).")


def gpu_unavailable_message(exc: BaseException) -> str:
    return (
        "Anvil could not run its kernels on this GPU, so the benchmark cannot compare anything yet.\n"
        f"  cause: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}\n"
        "The kernels (tools/kernels) need Anvil's NVIDIA backend (compiler/backends/nvidia) with tl.dot on\n"
        "tensor cores for the GEMMs. Until it lands, run the CPU variant: python benchmarks/quant.py --cpu --small"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="run on the CPU backend even if a GPU is present")
    ap.add_argument("--small", action="store_true", help="small shapes (seconds on a CPU)")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per case (default 100 GPU, 5 CPU)")
    ap.add_argument("--no-sweep", action="store_true", help="time one block-size config per kernel")
    ap.add_argument("--json", type=Path, default=None, help="write the rows to this file")
    args = ap.parse_args(argv)

    device = "cpu" if args.cpu or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and not args.cpu:
        print("No CUDA GPU visible: running on the CPU backend (use --cpu --small for a quick run).")
    shapes = SMALL if args.small else FULL
    reps = args.reps or (100 if device == "cuda" else 5)
    timer = Timer(device, reps=reps, warmup=10 if device == "cuda" else 1)
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU (Anvil CPU backend)"
    torch.manual_seed(0)
    try:
        rows = w4a16_cases(timer, shapes, device, sweep=device == "cuda" and not args.no_sweep)
        rows += fp8_cases(timer, shapes, device)
    except Exception as exc:  # noqa: BLE001
        if device != "cuda" or isinstance(exc, AssertionError):
            raise
        traceback.print_exc(limit=3, file=sys.stderr)
        print(gpu_unavailable_message(exc), file=sys.stderr)
        return 2
    print_table(rows, name)
    if args.json:
        args.json.write_text(json.dumps({"device": name, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
