"""LLVM IR semantics every LLVM-based backend shares: each Tile IR scalar op as LLVM instructions
(scalar.py: integer and float arithmetic, comparisons, conversions, the loop-exit test), bfloat16
and fp8 conversions without hardware support (bf16.py, fp8.py), and the float32 math library as
polynomials (mathlib/). The CPU backend vectorizes them; the NVIDIA backend applies them per
register value (its math calls go to libdevice)."""
