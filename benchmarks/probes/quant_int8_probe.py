"""Probe: the W4A16 batch-1 GEMV on the int8 tensor cores written in CUDA (quant_int8_probe.cu, built
with nvcc, its own layout), with timing-only variants that take parts away, beside Anvil's blocks
kernel in both arithmetics (awq_gemv on awq_gemv_pack's blocks) and torch's bf16 GEMV, under quant.py's
timer, in one process; the sums are checked against float64 first (the probe's and Anvil's int8 sums
are the same bits).

    python benchmarks/probes/quant_int8_probe.py      # needs nvcc and an sm_90 GPU
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.quant import Timer  # noqa: E402
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack, awq_unpack  # noqa: E402
from tools.kernels.w4a16 import GemvConfig, awq_gemv, awq_gemv_pack  # noqa: E402


def build() -> ctypes.CDLL:
    so = Path(os.environ.get("OUT", "/tmp")) / "quant_int8_probe.so"
    subprocess.run(["nvcc", "-O3", "-arch=sm_90a", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o",
                    str(so), str(Path(__file__).with_suffix(".cu"))], check=True)
    lib = ctypes.CDLL(str(so))
    vp, i = ctypes.c_void_p, ctypes.c_int
    lib.run_int8.argtypes = [i, vp, vp, vp, i, i, vp, vp]
    return lib


def pack_int8(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """int32 [O, NG, 1064]: per octet and group of 128 the words of 8 chunks (M block mb, half: rows
    16 mb + 8 half + gid), lane l = 4 gid + tig's 4 words s = 2p + r, nibble 2b + h of word s the code
    of k = 32 (2p + h) + 16 r + 4 tig + b; then 32 scale words (lane l: columns 16 tig + gid and + 8),
    8 zeros words (byte l: the same two columns' zero points)."""
    K, N8 = qweight.shape
    N, NG = N8 * 8, qzeros.shape[0]
    assert N % 64 == 0 and K == NG * 128
    O = N // 64
    codes = awq_unpack(qweight).to(torch.int64) & 0xF  # [K, N]
    zeros = awq_unpack(qzeros).to(torch.int64) & 0xF  # [NG, N]
    # k = (g, p, h, r, tig, b), col = (o, mb, half, gid)
    c = codes.view(NG, 2, 2, 2, 4, 4, O, 4, 2, 8)
    c = c.permute(6, 0, 7, 8, 9, 4, 1, 3, 5, 2)  # o, g, mb, half, gid, tig, p, r, b, h
    shifts = (4 * torch.arange(8, device=c.device)).view(4, 2)
    words = (c << shifts).sum(dim=(-1, -2))  # [O, NG, 4, 2, 8, 4, 2, 2]
    words = words.reshape(O, NG, 1024)
    s = scales.view(torch.int16).to(torch.int64) & 0xFFFF
    s = s.view(NG, O, 4, 2, 8).permute(1, 0, 4, 2, 3)  # o, g, gid, tig(mb), half
    sw = (s[..., 0] | s[..., 1] << 16).reshape(O, NG, 32)
    z = zeros.view(NG, O, 4, 2, 8).permute(1, 0, 4, 2, 3)
    zb = (z[..., 0] | z[..., 1] << 4)  # o, g, gid, tig: byte 4 gid + tig
    zw = (zb << (8 * torch.arange(4, device=z.device))).sum(-1)  # o, g, gid
    out = torch.cat([words, sw, zw], dim=2)
    return torch.where(out >= 1 << 31, out - (1 << 32), out).to(torch.int32).contiguous()


MODES = {0: "CUDA int8, x cut before the first wait", 4: "CUDA int8, x loaded first, cut after the first refill",
         5: "CUDA int8, x cut per step", 1: "CUDA reads only (no x, no sum, no store)",
         2: "CUDA reads + the warps' sum + store", 3: "CUDA int8 without each warp's last block's compute"}


def shape_rows(lib: ctypes.CDLL, timer: Timer, n: int, k: int) -> dict[str, list[float]]:
    flag = torch.zeros(4, dtype=torch.int32, device="cuda")
    qw, qz, sc = awq_quantize_pack(torch.randn(n, k, device="cuda") * 0.02, 128)
    w_deq = awq_dequantize(qw, qz, sc, torch.float64)
    blocks, b8 = awq_gemv_pack(qw, qz, sc), pack_int8(qw, qz, sc)
    O, NG = n // 64, k // 128
    y = torch.empty((1, n), device="cuda", dtype=torch.bfloat16)

    def probe(mode: int, x: torch.Tensor) -> None:
        rc = lib.run_int8(mode, b8.data_ptr(), x.data_ptr(), y.data_ptr(), O, NG, flag.data_ptr(),
                          torch.cuda.current_stream().cuda_stream)
        if rc:
            raise RuntimeError(f"launch failed ({rc})")

    for trial in range(3):  # x of three magnitudes: the probe, Anvil's int8 and bf16 arithmetic against float64
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16) * (10.0 ** (trial - 1))
        ref = (x.double() @ w_deq.t()).float()
        yi = awq_gemv(x, blocks, qz, sc, GemvConfig(mode="mma-int8"))
        ys = awq_gemv(x, blocks, qz, sc, GemvConfig(mode="mma"))
        for mode in (0, 4, 5):
            y.fill_(float("nan"))
            probe(mode, x)
            err, err_i, err_s = (float((v.double() - ref).norm() / ref.norm()) for v in (y, yi, ys))
            print(f"{n}x{k} x*{10.0 ** (trial - 1):g} probe mode {mode}: rel err {err:.3g}, Anvil int8 {err_i:.3g} "
                  f"(the probe's bits: {torch.equal(yi, y)}), Anvil bf16 {err_s:.3g}", flush=True)
            assert err < 5e-3 and err_i < 5e-3, (err, err_i)
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    wb = w_deq.to(torch.bfloat16)
    cases: dict[str, Callable[[], object]] = {
        "torch bf16": lambda: torch.matmul(x, wb.t()),
        "Anvil blocks, bf16 mma (mode='mma')": lambda: awq_gemv(x, blocks, qz, sc, GemvConfig(mode="mma")),
        "Anvil blocks, int8 (the default)": lambda: awq_gemv(x, blocks, qz, sc),
        **{name: partial(probe, mode, x) for mode, name in MODES.items()},
    }
    out: dict[str, list[float]] = {}
    for _ in range(3):
        for name, fn in cases.items():
            out.setdefault(name, []).append(timer.median_ms(fn) * 1e3)
    return out


def main() -> None:
    lib = build()
    timer = Timer("cuda", reps=200, warmup=20)
    print("| shape | kernel | us (three rounds) |\n|---|---|---|")
    for n, k in ((14336, 4096), (28672, 8192)):
        for name, v in shape_rows(lib, timer, n, k).items():
            print(f"| {n}x{k} | {name} | {' / '.join(f'{t:.2f}' for t in v)} |", flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
