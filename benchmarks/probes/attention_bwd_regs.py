"""The attention backward's kernels (examples/flash_attention_bwd.py) at each config benchmarks/attention.py
times, built for sm_90a by Anvil and by Triton from the same text, without a GPU: registers, bytes of spill
stores and tensor-core instructions per kernel, from ptxas's report of each compiler's PTX (its remarks, such
as serialized wgmma, in the last column).

    python benchmarks/probes/attention_bwd_regs.py [--head-dim 128] [--arch sm_90a]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import attention as A  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.compiler import compile as triton_compile  # noqa: E402

from compiler.backends.nvidia.toolchain import assemble_with_ptxas  # noqa: E402

_COMMON = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "DO": "*fp16", "LSE": "*fp32", "Delta": "*fp32",
           "sm_scale": "fp32", "N_CTX": "i32"}
SIGS = {"_bwd_dkdv": {**_COMMON, "DK": "*fp16", "DV": "*fp16"}, "_bwd_dq": {**_COMMON, "DQ": "*fp16"}}


def _anvil_ptx(fn: Any, sig: dict[str, str], consts: dict[str, Any], arch: str, warps: int) -> str:
    # N_CTX as a multiple of 16, as both compilers specialize it at the benchmark's sequence lengths
    return str(fn.compile({**sig, "N_CTX": "i32:16"}, consts, target=f"cuda:{arch}", num_warps=warps).asm["ptx"])


def _triton_ptx(fn: Any, sig: dict[str, str], consts: dict[str, Any], arch: str, warps: int) -> str:
    full = {name: "constexpr" if name in consts else sig[name] for name in fn.arg_names}
    attrs = {(fn.arg_names.index("N_CTX"),): [["tt.divisibility", 16]]}
    src = ASTSource(fn, signature=full, constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
                    attrs=attrs)
    cc = int(arch.removeprefix("sm_").rstrip("a"))
    return str(triton_compile(src, target=GPUTarget("cuda", cc, 32), options={"num_warps": warps}).asm["ptx"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--arch", default="sm_90a")
    args = ap.parse_args()
    mods = A.modules()
    print(f"{'config':18} {'causal':6} {'kernel':9} {'compiler':8} {'regs':>4} {'spill st':>8} "
          f"{'wgmma':>5} {'mma.sync':>8}  ptxas notes")
    for cfg in A.BWD_CONFIGS:
        m1, n1, m2, n2, warps = cfg
        for causal in (False, True):
            for kernel, blocks in (("_bwd_dkdv", (m1, n1)), ("_bwd_dq", (m2, n2))):
                consts = {"HEAD_DIM": args.head_dim, "BLOCK_M": blocks[0], "BLOCK_N": blocks[1], "CAUSAL": causal}
                for name, build in (("anvil", _anvil_ptx), ("triton", _triton_ptx)):
                    fn = getattr(mods[name][1], kernel)
                    try:
                        ptx = build(fn, SIGS[kernel], consts, args.arch, warps)
                        _, rep = assemble_with_ptxas(ptx, args.arch)
                    except Exception as e:  # noqa: BLE001 - report it and go on
                        print(f"{A._bwd_name(cfg):18} {causal!s:6} {kernel[5:]:9} {name:8} "
                              f"{type(e).__name__}: {str(e)[:160]}")
                        continue
                    notes = "; ".join(n[:60] for n in rep.notes)
                    print(f"{A._bwd_name(cfg):18} {causal!s:6} {kernel[5:]:9} {name:8} {rep.registers:4} "
                          f"{rep.spill_stores:8} {ptx.count('wgmma.mma_async'):5} "
                          f"{ptx.count('mma.sync'):8}  {notes}", flush=True)


if __name__ == "__main__":
    main()
