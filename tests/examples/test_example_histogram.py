from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("n,num_bins", [(1, 1), (1000, 7), (100_003, 100), (5000, 256)])
@pytest.mark.parametrize("local", [False, True])
def test_bincount(example, n, num_bins, local):
    h = example("histogram")
    x = torch.randint(0, num_bins, (n,), dtype=torch.int32)
    bins = h.bincount(x, num_bins, local=local, BLOCK_SIZE=1024)
    assert torch.equal(bins, torch.bincount(x, minlength=num_bins).to(torch.int32))


@pytest.mark.parametrize("local", [False, True])
def test_bincount_ignores_out_of_range(example, local):
    h = example("histogram")
    x = torch.randint(-20, 70, (9999,), dtype=torch.int64)
    bins = h.bincount(x, 50, local=local, BLOCK_SIZE=512)
    kept = x[(x >= 0) & (x < 50)]
    assert torch.equal(bins, torch.bincount(kept, minlength=50).to(torch.int32))


@pytest.mark.parametrize("n,bins,lo,hi", [(1, 4, -1.0, 1.0), (10_000, 16, -2.0, 2.0), (77_777, 30, 0.0, 3.0)])
def test_histc(example, n, bins, lo, hi):
    h = example("histogram")
    x = torch.randn(n)
    x[: min(n, 3)] = hi  # the right edge belongs to the last bin
    got = h.histc(x, bins, lo, hi, BLOCK_SIZE=1024)
    assert torch.equal(got, torch.histc(x, bins, lo, hi).to(torch.int32))
