from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("shape,max_block", [((1, 1), 2048), ((9, 1000), 2048), ((33, 4099), 512), ((5, 70), 16)])
def test_argmax_matches_torch(example, shape, max_block):
    am = example("argmax")
    x = torch.randn(shape) - 5
    vals, idx = am.argmax(x, max_block=max_block)
    ref_vals, ref_idx = torch.max(x, dim=1)
    assert torch.equal(idx, ref_idx)
    assert torch.equal(vals, ref_vals)


@pytest.mark.parametrize("max_block", [2048, 32])
def test_argmax_ties_take_first_index(example, max_block):
    am = example("argmax")
    x = torch.randint(0, 3, (64, 300)).float()
    x[5] = 7.0  # all equal: index 0
    vals, idx = am.argmax(x, max_block=max_block)
    assert torch.equal(idx, torch.argmax(x, 1))
    assert idx[5].item() == 0


def test_argmax_fp16_and_inf(example):
    am = example("argmax")
    x = torch.randn(17, 333).half()
    x[3, 200] = float("inf")
    x[4, :] = float("-inf")
    vals, idx = am.argmax(x, max_block=128)
    ref_vals, ref_idx = torch.max(x.float(), 1)
    assert torch.equal(idx, ref_idx)
    assert torch.equal(vals.float(), ref_vals)
