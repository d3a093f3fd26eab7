"""Anvil beside Triton on the two memory-bound kernels that trailed it: RMS norm forward (bf16,
16384 x 8192) and cross-entropy forward (fp32 logits, 8192 x 128k), over BLOCK x num_warps.

Same kernel source for both (benchmarks/gpu_kernels.py), medians of triton.testing.do_bench (L2
flushed), GB/s counting each input read once and each output written once; every output is checked
against torch before it is timed. Also prints which ptxas Anvil assembled with and, per config,
registers and how Anvil's global loads are grouped in the SASS (a run of N loads issued back to
back = N loads in flight per thread).

    python benchmarks/probes/probe_rms_ce.py [--quick] [--ptxas PATH]

--ptxas assembles Anvil's PTX with that ptxas binary (e.g. Triton's bundled one), bypassing the
in-process libnvJitLink assembler, to separate code-generation effects from assembler effects.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ARGS = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ARGS.add_argument("--quick", action="store_true", help="fewer rows (a smoke run)")
ARGS.add_argument("--ptxas", help="the ptxas Anvil uses (sets ANVIL_PTXAS)")
OPTS = ARGS.parse_args()
if OPTS.ptxas:
    os.environ["ANVIL_PTXAS"] = OPTS.ptxas
    os.environ["ANVIL_NVJITLINK"] = "0"  # the in-process assembler would otherwise take precedence
os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-probe-"))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: gpu_kernels
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import gpu_kernels as tk  # noqa: E402

import compiler  # noqa: E402
from compiler.backends.nvidia.toolchain import find_ptxas  # noqa: E402

SRC = (Path(__file__).resolve().parents[1] / "gpu_kernels.py").read_text()
RMS = compiler.compile_source(SRC, kernel="rms_norm_fwd", filename="gpu_kernels.py")
CE = compiler.compile_source(SRC, kernel="cross_entropy_fwd", filename="gpu_kernels.py")


def bench(fn: Any) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def ldg_groups(cubin: bytes) -> str:
    """Runs of global loads in the SASS (loads fewer than 8 instructions apart), e.g. '4,4'."""
    ptxas = find_ptxas()
    tools = ([str(Path(ptxas).with_name("cuobjdump"))] if ptxas else []) + [
        "cuobjdump", str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.cubin"
        p.write_bytes(cubin)
        for tool in tools:
            try:
                sass = subprocess.run([tool, "-sass", str(p)], capture_output=True, text=True, check=True).stdout
                break
            except (OSError, subprocess.CalledProcessError):
                continue
        else:
            return "?"
    groups: list[int] = []
    gap = 99
    for ins in re.findall(r"/\*[0-9a-f]{4}\*/\s+(.*?);", sass):
        if "LDG" in ins:
            if gap < 8:
                groups[-1] += 1
            else:
                groups.append(1)
            gap = 0
        else:
            gap += 1
    return ",".join(map(str, groups))


def anvil_info(ck: Any) -> str:
    md = ck.metadata
    return f"{md['n_regs']:3} regs, loads {ldg_groups(ck.asm['cubin'])}"


def check(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str) -> None:
    err = float((out.double() - ref.double()).abs().max())
    if not err <= tol:
        raise SystemExit(f"{what}: wrong output (max abs error {err:.3g} > {tol})")


def row(name: str, ta: float, tt: float, nbytes: int, info: str) -> None:
    ga, gt = nbytes / ta / 1e6, nbytes / tt / 1e6
    print(f"{name:34} anvil {ga:6.0f} GB/s  triton {gt:6.0f} GB/s  ratio {ga / gt:5.3f}   [{info}]", flush=True)


def rms(quick: bool) -> None:
    m, n = (2048 if quick else 16384), 8192
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16)
    ref = torch.nn.functional.rms_norm(x.float(), (n,), w.float(), 1e-6)
    ya, yt = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    for nw in (4, 8, 16):
        fa = lambda nw=nw: RMS[(m,)](x, ya, w, n, n, 1e-6, BLOCK=n, num_warps=nw)  # noqa: E731
        ft = lambda nw=nw: tk.rms_norm_fwd[(m,)](x, yt, w, n, n, 1e-6, BLOCK=n, num_warps=nw)  # noqa: E731
        ck = RMS.warmup(x, ya, w, n, n, 1e-6, BLOCK=n, num_warps=nw, grid=(m,))
        fa()
        ft()
        torch.cuda.synchronize()
        check(ya, ref, 0.05, f"anvil rms norm warps={nw}")
        check(yt, ref, 0.05, f"triton rms norm warps={nw}")
        ya.fill_(float("nan"))
        row(f"rms norm bf16 BLOCK={n} warps={nw:2}", bench(fa), bench(ft), 2 * m * n * 2, anvil_info(ck))


def ce(quick: bool) -> None:
    rows, vocab = (1024 if quick else 8192), 128 * 1024
    lg = torch.randn(rows, vocab, device="cuda")
    tgt = torch.randint(0, vocab, (rows,), device="cuda")
    ref = torch.nn.functional.cross_entropy(lg.double(), tgt, reduction="none")
    oa, ot = torch.full((rows,), float("nan"), device="cuda"), torch.full((rows,), float("nan"), device="cuda")
    for block in (1024, 2048, 4096, 8192):
        for nw in (4, 8, 16):
            fa = lambda b=block, w=nw: CE[(rows,)](lg, tgt, oa, vocab, vocab, BLOCK=b, num_warps=w)  # noqa: E731
            ft = lambda b=block, w=nw: tk.cross_entropy_fwd[(rows,)](  # noqa: E731
                lg, tgt, ot, vocab, vocab, BLOCK=b, num_warps=w)
            ck = CE.warmup(lg, tgt, oa, vocab, vocab, BLOCK=block, num_warps=nw, grid=(rows,))
            fa()
            ft()
            torch.cuda.synchronize()
            check(oa, ref, 1e-3, f"anvil cross-entropy BLOCK={block} warps={nw}")
            check(ot, ref, 1e-3, f"triton cross-entropy BLOCK={block} warps={nw}")
            oa.fill_(float("nan"))
            row(f"cross-entropy fp32 BLOCK={block:4} warps={nw:2}", bench(fa), bench(ft), rows * vocab * 4,
                anvil_info(ck))


def main() -> None:
    ptxas = find_ptxas()
    ver = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:] \
        if ptxas else ["none"]
    tptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    tver = subprocess.run([str(tptxas), "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:] \
        if tptxas.exists() else ["?"]
    print(f"{torch.cuda.get_device_name()}; ANVIL_NVJITLINK={os.environ.get('ANVIL_NVJITLINK', '1')}; "
          f"Anvil ptxas: {ptxas} ({' '.join(ver)}); "
          f"Triton {triton.__version__} ptxas: {os.environ.get('TRITON_PTXAS_PATH', tptxas)} ({' '.join(tver)})")
    rms(OPTS.quick)
    ce(OPTS.quick)


if __name__ == "__main__":
    main()
