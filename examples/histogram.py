"""Histograms with atomics: `tl.atomic_add` into global bins, or `tl.histogram` per block.

Two ways to count:
- scatter: every element adds 1 to its bin with `tl.atomic_add(bins + idx, 1, mask=...)`;
  many programs hit the same bins, so the adds must be atomic.
- local: each program counts its block with `tl.histogram` into NUM_BINS private bins, then
  adds its whole histogram to the global one with one vector `tl.atomic_add` (far fewer
  atomic operations when blocks are large).

`bincount` counts integer values in [0, num_bins); `histc` bins floats into equal-width bins
over [lo, hi] like torch.histc (values outside are ignored; hi goes to the last bin).

    python examples/histogram.py
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import cdiv, jit, next_power_of_2


@jit
def bincount_kernel(x_ptr, bins_ptr, n_elements, num_bins, BLOCK_SIZE: tl.constexpr,
                    NUM_BINS_P2: tl.constexpr, LOCAL: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    idx = tl.load(x_ptr + offsets, mask=mask, other=0)
    valid = mask & (idx >= 0) & (idx < num_bins)
    if LOCAL:
        counts = tl.histogram(idx, NUM_BINS_P2, mask=valid)
        bin_ids = tl.arange(0, NUM_BINS_P2)
        tl.atomic_add(bins_ptr + bin_ids, counts, mask=(bin_ids < num_bins) & (counts > 0))
    else:
        tl.atomic_add(bins_ptr + idx, 1, mask=valid)


@jit
def histc_kernel(x_ptr, bins_ptr, n_elements, lo, hi, NUM_BINS: tl.constexpr,
                 BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    inside = mask & (x >= lo) & (x <= hi)
    # torch.histc's arithmetic, in its order; x >= lo, so truncation is floor.
    idx = ((x - lo) * NUM_BINS / (hi - lo)).to(tl.int32)
    idx = tl.minimum(idx, NUM_BINS - 1)
    tl.atomic_add(bins_ptr + idx, 1, mask=inside)


def bincount(x: torch.Tensor, num_bins: int, local: bool = True, BLOCK_SIZE: int = 4096) -> torch.Tensor:
    """Counts (int32) of each value in [0, num_bins) of a 1-D integer tensor; others are ignored."""
    assert x.dim() == 1 and x.is_contiguous() and not x.is_floating_point()
    bins = torch.zeros(num_bins, dtype=torch.int32, device=x.device)
    n = x.numel()
    grid = (cdiv(n, BLOCK_SIZE),)
    bincount_kernel[grid](x, bins, n, num_bins, BLOCK_SIZE=BLOCK_SIZE, NUM_BINS_P2=next_power_of_2(num_bins),
                          LOCAL=local)
    return bins


def histc(x: torch.Tensor, bins: int, lo: float, hi: float, BLOCK_SIZE: int = 4096) -> torch.Tensor:
    """torch.histc(x, bins, lo, hi) for a float tensor (counts as int32)."""
    assert hi > lo
    x = x.reshape(-1).contiguous()
    out = torch.zeros(bins, dtype=torch.int32, device=x.device)
    n = x.numel()
    histc_kernel[(cdiv(n, BLOCK_SIZE),)](x, out, n, lo, hi, NUM_BINS=bins, BLOCK_SIZE=BLOCK_SIZE)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randint(0, 100, (1_000_003,), dtype=torch.int32)
    ref = torch.bincount(x, minlength=100).to(torch.int32)
    print("bincount, atomic scatter equals torch:", torch.equal(bincount(x, 100, local=False), ref))
    print("bincount, tl.histogram + atomic add equals torch:", torch.equal(bincount(x, 100, local=True), ref))
    xf = torch.randn(100_000)
    h = histc(xf, 16, -2.0, 2.0)
    print("histc(16 bins over [-2, 2]):", h.tolist())
    print("torch.histc               :", torch.histc(xf, 16, -2.0, 2.0).to(torch.int32).tolist())
