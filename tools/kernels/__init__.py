"""Kernels Anvil ships, written in its own DSL: quantization and low-bit GEMV/GEMM.

- int4: AutoAWQ "gemm" quantize + pack, unpack, dequantize; W4A16 GEMV (batch 1) and GEMM.
- fp8: amax, quantize (tensor / row / 1x128 group / 128x128 block scales), dequantize, scaled GEMM.
- fp4: NVFP4 and MXFP4 quantize + pack, dequantize, weight-only GEMV dequantizing to bf16.

Each module has the @jit kernels and plain-Python launchers taking torch tensors.
"""
