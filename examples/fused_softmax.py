"""Fused row softmax: one read and one write of each row.

A fixed number of programs stride over the rows (`tl.range(start, n_rows, step)`); each row
is loaded whole into one block (BLOCK_SIZE is the next power of two >= n_cols, padded with
-inf so the padding never wins the max nor adds to the sum), then max-subtracted,
exponentiated, normalized and stored. Works for fp32, fp16 and bf16 inputs (computed in fp32).

    python examples/fused_softmax.py
"""

from __future__ import annotations

import os

import torch

import compiler.language as tl
from compiler import jit, next_power_of_2


@jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf")).to(tl.float32)
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output.to(output_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor, out: torch.Tensor | None = None, num_programs: int | None = None) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor whose rows are contiguous."""
    assert x.dim() == 2 and x.stride(1) == 1
    n_rows, n_cols = x.shape
    BLOCK_SIZE = next_power_of_2(n_cols)
    if out is None:
        out = torch.empty_like(x)
    if num_programs is None:
        # Enough programs to keep every CPU thread (or GPU SM) busy; each walks many rows.
        num_programs = min(n_rows, 32 * (os.cpu_count() or 1))
    softmax_kernel[(num_programs,)](out, x, x.stride(0), out.stride(0), n_rows, n_cols,
                                    BLOCK_SIZE=BLOCK_SIZE, num_stages=2)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(1823, 781)
    y = softmax(x)
    ref = torch.softmax(x, dim=1)
    print(f"softmax {tuple(x.shape)}: max abs difference from torch {(y - ref).abs().max().item():.3e}")
    xh = torch.randn(257, 1000, dtype=torch.float16)
    yh = softmax(xh)
    print(f"softmax fp16 {tuple(xh.shape)}: max abs difference "
          f"{(yh.float() - torch.softmax(xh.float(), 1)).abs().max().item():.3e}")
