"""The read floor of the W4A16 batch-1 GEMV: how fast the H200 reads the int4 weight words alone
(29.4 MB for 14336x4096, 117 MB for 28672x8192), by any load path, under quant.py's timer (L2
flushed by a 256 MiB write, a GPU spin, CUDA events, medians), beside torch's bf16 GEMV.

    python benchmarks/probes/quant_read_floor.py      # needs nvcc and an sm_90 GPU

Two families of CUDA kernels (quant_read_floor.cu, built with nvcc into $OUT or /tmp), each XOR-ing
every word so that nothing is skipped: plain 16-byte loads (`ld.global.nc`, U loads in flight per
thread, blocks of contiguous words) and bulk copies (`cp.async.bulk`, the TMA's 1-D form) into a
ring of S shared-memory stages, one thread issuing, the block reading each landed stage; each
with and without the L2 policy evict_first. Every config runs twice per shape (two rounds).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.quant import Timer  # noqa: E402

LDG = [(u, per_sm, block) for u in (4, 8) for per_sm in (4, 8, 16) for block in (128, 256)]
BULK = [(s, sb, per_sm) for s, sb in ((2, 4096), (4, 4096), (4, 8192), (8, 8192), (4, 16384), (6, 16384), (3, 32768))
        for per_sm in (1, 2, 4) if per_sm * s * sb <= 200_000]


def build() -> ctypes.CDLL:
    so = Path(os.environ.get("OUT", "/tmp")) / "quant_read_floor.so"
    subprocess.run(["nvcc", "-O3", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o",
                    str(so), str(Path(__file__).with_suffix(".cu"))], check=True)
    lib = ctypes.CDLL(str(so))
    vp, i, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
    lib.run_ldg.argtypes = [i, vp, i64, vp, i, i, i, vp]
    lib.run_bulk.argtypes = [i, i, vp, i64, vp, i, i, i, vp]
    lib.run_empty.argtypes = [i, vp]
    return lib


def cases(lib: ctypes.CDLL, n_out: int, k: int) -> dict[str, Callable[[], None]]:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    words = torch.randint(-2**31, 2**31 - 1, (n_out * k // 8,), dtype=torch.int32, device="cuda")
    w = torch.randn(n_out, k, dtype=torch.bfloat16, device="cuda")
    x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
    flag = torch.zeros(4, dtype=torch.int32, device="cuda")
    p, out, nbytes = ctypes.c_void_p(words.data_ptr()), ctypes.c_void_p(flag.data_ptr()), words.numel() * 4

    def call(rc: int) -> None:
        if rc:
            raise RuntimeError(f"launch failed ({rc})")

    def stream() -> ctypes.c_void_p:
        return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    out_cases: dict[str, Callable[[], None]] = {
        "torch bf16 GEMV": lambda: (torch.matmul(x, w.t()), None)[1],
        "empty kernel, 7 blocks/SM": lambda: call(lib.run_empty(sms * 7, stream())),
    }
    for u, per_sm, block in LDG:
        for ef in (0, 1):
            out_cases[f"16-byte loads U={u}, {per_sm} blocks/SM of {block}, evict_first={ef}"] = (
                lambda u=u, g=sms * per_sm, b=block, ef=ef: call(lib.run_ldg(u, p, nbytes, out, g, b, ef, stream())))
    for s, sb, per_sm in BULK:
        for ef in (0, 1):
            out_cases[f"bulk copies {s} x {sb // 1024} KB stages, {per_sm} blocks/SM, evict_first={ef}"] = (
                lambda s=s, sb=sb, g=sms * per_sm, ef=ef: call(lib.run_bulk(s, sb, p, nbytes, out, g, 128, ef,
                                                                             stream())))
    return out_cases


def main() -> None:
    lib = build()
    timer = Timer("cuda", reps=200, warmup=20)
    res: dict[tuple[str, str], list[float]] = {}
    for _ in range(2):
        for n_out, k in ((14336, 4096), (28672, 8192)):
            for name, fn in cases(lib, n_out, k).items():
                res.setdefault((f"{n_out}x{k}", name), []).append(timer.median_ms(fn) * 1e3)
            torch.cuda.empty_cache()
    print("| shape | kernel | us (two rounds) |\n|---|---|---|")
    for (shape, name), v in res.items():
        print(f"| {shape} | {name} | {' / '.join(f'{t:.2f}' for t in v)} |")


if __name__ == "__main__":
    main()
