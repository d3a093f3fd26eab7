"""SASS of Anvil's Hopper GEMM (benchmarks/gemm_kernels.py): tensor-core instructions, registers, spills.

Compiles the matmul kernel for sm_90a (fp16, bf16, fp8 e4m3) and disassembles the cubin with
cuobjdump (or nvdisasm) from the CUDA toolkit; no GPU needed. Prints per config the count of
HGMMA / QGMMA / HMMA instructions, registers and spill bytes, and an excerpt of the main loop.

    python benchmarks/probes/gemm_sass.py [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import compiler  # noqa: E402
import compiler.language as tl  # noqa: E402

SRC = (Path(__file__).resolve().parents[1] / "gemm_kernels.py").read_text()
# the tiles benchmarks/gemm.py finds best on the H200
CASES = [("fp16", (128, 256, 64, 8)), ("bf16", (128, 256, 64, 8)), ("fp8e4nv", (128, 256, 128, 8))]


def disassembler() -> list[str] | None:
    """cuobjdump or nvdisasm: on PATH, in a CUDA toolkit under /usr/local, or the copies the triton
    package ships."""
    import importlib.util

    spec = importlib.util.find_spec("triton")
    bundled = Path(spec.origin).parent / "backends" / "nvidia" / "bin" if spec and spec.origin else None
    for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", [])):
        path = shutil.which(tool) or next((str(p) for p in Path("/usr/local").glob(f"cuda*/bin/{tool}")), None)
        if path is None and bundled is not None and (bundled / tool).exists():
            path = str(bundled / tool)
        if path:
            return [path, *args]
    return None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None, help="also write each cubin and its SASS here")
    args = ap.parse_args()
    dis = disassembler()
    if dis is None:
        print("no cuobjdump or nvdisasm found (CUDA toolkit)")
        return 1
    kernel = compiler.compile_source(SRC, kernel="matmul_kernel", filename="gemm_kernels.py")
    out = args.out or Path(tempfile.mkdtemp(prefix="anvil-sass-"))
    out.mkdir(parents=True, exist_ok=True)
    for dtype, (bm, bn, bk, warps) in CASES:
        sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": "*fp16", "M": "i32:16", "N": "i32:16",
               "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"}
        consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                  "GROUP_M": 8, "ACTIVATION": "", "ACC_DTYPE": tl.float32}
        ck = kernel.compile(sig, consts, target="cuda:sm_90a", num_warps=warps)
        name = f"gemm_{dtype}_{bm}x{bn}x{bk}_w{warps}"
        cubin = out / f"{name}.cubin"
        cubin.write_bytes(ck.asm["cubin"])
        sass = subprocess.run([*dis, str(cubin)], capture_output=True, text=True, check=False).stdout
        (out / f"{name}.sass").write_text(sass)
        counts = {op: len(re.findall(rf"\b{op}\.", sass)) for op in ("HGMMA", "QGMMA", "HMMA", "WARPGROUP")}
        regs = ck.metadata["n_regs"]
        if dis[0].endswith("cuobjdump"):  # the cubin's own resource usage
            res = subprocess.run([dis[0], "-res-usage", str(cubin)], capture_output=True, text=True, check=False)
            if (m := re.search(r"REG:(\d+)", res.stdout)) is not None:
                regs = int(m.group(1))
        print(f"{name}: regs {regs} spills {ck.metadata['n_spills']} "
              + " ".join(f"{k} {v}" for k, v in counts.items())
              + f"  assembler remarks: {ck.metadata['ptxas_notes'] or 'none'}")
        lines = [ln.strip() for ln in sass.splitlines()
                 if re.search(r"GMMA|WARPGROUP|BAR\.SYNC|LDGSTS|LDGDEPBAR|DEPBAR", ln)]
        for ln in lines[:24]:
            print("   ", re.sub(r"\s+", " ", ln)[:150])
    return 0


if __name__ == "__main__":
    sys.exit(main())
