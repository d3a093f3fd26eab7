"""How the timing method moves the W4A16 ratios: the same kernels and torch's bf16 GEMV timed four ways.

    python benchmarks/probes/quant_timing.py            # H200: both shapes, batch 1 and 16
    python benchmarks/probes/quant_timing.py --quick    # the first config of each

- write: one call per timing, L2 flushed before it by writing 256 MiB (triton.testing.do_bench's
  method; benchmarks/quant.py's adds a GPU spin after the flush, so that host time is never
  timed): the lines the call evicts are dirty and are written back to memory while it runs;
- read: the same with the flush reading 256 MiB (L2 left holding clean lines);
- rotate: R calls back to back, each on its own copy of the weights (R copies are far larger than
  L2, so every call reads its weights from memory), the time of the R calls over R;
- graph: those R calls captured in a CUDA graph and replayed (no launch gaps), over R: how a
  decoding step runs its layers.

Every Anvil config is checked against torch first. Prints one table per shape and batch: the
host time of one call (its Python side, launches queued without waiting), then median
microseconds per call under each method and the speedup over torch's bf16 matmul under the same
method; the last rows are read floors: the packed int4 words alone, read as the packed kernel
reads them (benchmarks/probes/quant_ceiling.py's packed_read).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from quant_ceiling import packed_read  # noqa: E402

from tools.kernels.int4 import awq_dequantize, awq_quantize_pack  # noqa: E402
from tools.kernels.w4a16 import GemvConfig, awq_gemv, awq_gemv_pack  # noqa: E402

SHAPES = [(28672, 8192), (14336, 4096)]
METHODS = ("write", "read", "rotate", "graph")
# awq_gemv keywords as in benchmarks/quant.py: (block_n, num_warps, extra, split_k)
# packed: qweight in awq_gemv_pack's layout (streamed one group per step)
P1 = {"packed": 1}
# awq_gemv's default sums the K splits in a thread block cluster for 2-4 splits of 2+ warps
# (the first two here); cluster=False: through global memory
PG = {"packed": 1, "cluster": False}
# and loads the weight words with the L2 policy evict_first for one row of x; evict_first=False: without
PE = {"packed": 1, "evict_first": False}
CFG_1 = [(128, 2, P1, 4), (128, 2, PE, 4), (512, 8, P1, 4), (512, 8, PG, 4), (64, 1, P1, 4), (512, 8, P1, 8),
         (128, 2, P1, 8), (128, 2, {**PE, "cluster": False}, 8), (512, 8, {"stages": 1}, 4)]
B8 = {"packed": 1, "block_m": 8}
CFG_16 = [(256, 4, B8, 4), (128, 2, B8, 4), (64, 1, B8, 4), (256, 4, P1, 2), (128, 2, {"stages": 1, "block_m": 8}, 4)]
FLOOR = {28672: [(8, 4), (8, 8)], 14336: [(8, 8), (4, 16)]}  # warps, split of packed_read


class Clock:
    def __init__(self, reps: int, copies: int) -> None:
        self.reps, self.copies = reps, copies
        self.flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

    def _events(self, run: Callable[[], Any], before: Callable[[], Any] | None) -> float:
        times = []
        for _ in range(self.reps):
            if before is not None:
                before()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            run()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times) * 1e3

    def all(self, fns: Sequence[Callable[[], Any]]) -> dict[str, float]:
        """Microseconds per call under each method; fns: one call per copy of the weights."""
        # warm-up: every copy, and 100 ms of calls (compiling, module loading and the launch
        # path's native entry, built in the background after the first launches, are over)
        t_end = time.perf_counter() + 0.1
        while time.perf_counter() < t_end:
            for f in fns:
                f()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(100):
            fns[0]()
        host = (time.perf_counter() - t0) * 1e4
        torch.cuda.synchronize()
        out = {"host": host, "write": self._events(fns[0], self.flush.zero_),
               "read": self._events(fns[0], partial(self.flush.sum, dtype=torch.int64))}

        def every() -> None:
            for f in fns:
                f()
        out["rotate"] = self._events(every, None) / len(fns)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            every()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            every()
        graph.replay()
        torch.cuda.synchronize()
        out["graph"] = self._events(graph.replay, None) / len(fns)
        return out


def table(title: str, torch_us: dict[str, float], rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"\n{title}")
    print(f"{'':50}{'host':>6}" + "".join(f"{m:>16}" for m in METHODS))
    print(f"{'torch bf16 (us)':50}{torch_us['host']:>6.1f}" + "".join(f"{torch_us[m]:>16.1f}" for m in METHODS))
    for name, us in rows:
        print(f"{name:50}{us['host']:>6.1f}" + "".join(f"{us[m]:>8.1f} {torch_us[m] / us[m]:>6.2f}x" for m in METHODS),
              flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--copies", type=int, default=8, help="copies of the weights the rotating methods cycle through")
    args = ap.parse_args(argv)
    clock = Clock(args.reps, args.copies)
    torch.manual_seed(0)
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    for n, k in SHAPES:
        w = torch.randn(n, k, device="cuda") * 0.02
        qw, qz, sc = awq_quantize_pack(w, 128)
        wb = awq_dequantize(qw, qz, sc, torch.bfloat16)
        del w
        wbs = [wb] + [wb.clone() for _ in range(args.copies - 1)]
        packs = [(qw, qz, sc)] + [(qw.clone(), qz.clone(), sc.clone()) for _ in range(args.copies - 1)]
        packed_sets = [(awq_gemv_pack(p[0]), p[1], p[2]) for p in packs]
        for m, cfgs in ((1, CFG_1), (16, CFG_16)):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            ref = (x.double() @ wb.double().t())
            t_torch = clock.all([partial(torch.matmul, x, b.t()) for b in wbs])
            rows = []
            for bn, nw, kw, sk in cfgs[:1] if args.quick else cfgs:
                name = f"BN={bn} w{nw} {' '.join(f'{a}={b}' for a, b in kw.items())} split={sk}"
                opts: dict[str, Any] = dict(kw)
                sets = packs
                if opts.pop("packed", 0):
                    sets = packed_sets
                mode = "mma" if sets is packed_sets else "mma-sub"
                cfg = GemvConfig(block_n=bn, num_warps=nw, split_k=sk, mode=mode, **opts)
                fns = [partial(awq_gemv, x, *p, cfg) for p in sets]
                y = fns[0]().double()
                err = float((y - ref).norm() / ref.norm())
                if not err < 2e-2:
                    print(f"  {name}: relative error {err:.3g}: skipped")
                    continue
                rows.append((name, clock.all(fns)))
            if m == 1:
                octets = n // 64
                out = torch.empty(octets * 128, dtype=torch.int32, device="cuda")
                for nw, split in FLOOR[n]:
                    fns = [partial(packed_read[(octets // nw, split)], p[0], out, k // 128 // split, NW=nw,
                                   O=octets, num_warps=nw) for p in packed_sets]
                    rows.append((f"floor: packed words w{nw} split {split}", clock.all(fns)))
            table(f"{n}x{k}, batch {m}: us per call and speedup over torch", t_torch, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
