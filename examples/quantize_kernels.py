"""Low-precision kernels written in Anvil's DSL (tools/kernels), checked against torch.

- W4A16: AutoAWQ int4 weights, dequantized in registers by a GEMV (batch 1) and a GEMM.
- FP8 GEMM with per-tensor, per-row and DeepSeek-V3 128x128 block scales.
- NVFP4 and MXFP4 weight-only GEMV, dequantizing to bf16.

The same kernels run on the CPU backend here and, with Anvil's NVIDIA backend, on GPUs.

    python examples/quantize_kernels.py
"""

from __future__ import annotations

import torch

from tools.kernels.fp4 import fp4_dequantize, fp4_gemv, mxfp4_quantize, nvfp4_quantize
from tools.kernels.fp8 import fp8_dequantize, fp8_gemm, fp8_quantize
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack
from tools.kernels.w4a16 import awq_gemm, awq_gemv


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


def main(n: int = 512, k: int = 384, m: int = 16) -> None:
    torch.manual_seed(0)
    w = torch.randn(n, k) * 0.02

    qweight, qzeros, scales = awq_quantize_pack(w, group_size=128)
    w4 = awq_dequantize(qweight, qzeros, scales)
    x1 = torch.randn(1, k, dtype=torch.bfloat16)
    xm = torch.randn(m, k, dtype=torch.float16)
    print(f"int4 AWQ g128: weight error {rel(w4, w):.4f}; "
          f"GEMV vs float64 {rel(awq_gemv(x1, qweight, qzeros, scales), x1.double() @ w4.double().t()):.1e}; "
          f"GEMM M={m} {rel(awq_gemm(xm, qweight, qzeros, scales), xm.double() @ w4.double().t()):.1e}")

    a = torch.randn(m, k)
    for scheme in ("tensor", "row", "block"):
        qa, sa = fp8_quantize(a, scheme="group" if scheme == "block" else scheme)
        qw, sw = fp8_quantize(w, scheme=scheme)
        y = fp8_gemm(qa, qw, sa, sw, out_dtype=torch.float32)
        ref = fp8_dequantize(qa, sa).double() @ fp8_dequantize(qw, sw).double().t()
        print(f"fp8 GEMM, {scheme} scales: vs float64 on the same fp8 values {rel(y, ref):.1e}; "
              f"vs the unquantized product {rel(y, a.double() @ w.double().t()):.4f}")

    for name, (packed, bs, g) in (("nvfp4", nvfp4_quantize(w)), ("mxfp4", (*mxfp4_quantize(w), None))):
        wd = fp4_dequantize(packed, bs, g)
        y = fp4_gemv(x1, packed, bs, g)
        print(f"{name}: weight error {rel(wd, w):.4f}; bf16 GEMV vs float64 "
              f"{rel(y, x1.double() @ wd.to(torch.bfloat16).double().t()):.1e}")


if __name__ == "__main__":
    main()
