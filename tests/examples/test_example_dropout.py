from __future__ import annotations

import numpy as np
import pytest
import torch


def _philox_rand(seed: int, offsets: np.ndarray) -> np.ndarray:
    """Triton's tl.rand(seed, offsets) (Philox 4x32, 10 rounds, counter c0 = offset), in numpy."""
    u32 = np.uint32
    c0 = offsets.astype(np.int64).astype(np.uint32)
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0 = np.full_like(c0, seed & 0xFFFFFFFF)
    k1 = np.full_like(c0, (seed >> 32) & 0xFFFFFFFF)
    A, B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    with np.errstate(over="ignore"):
        for _ in range(10):
            p0 = A * c0.astype(np.uint64)
            p2 = B * c2.astype(np.uint64)
            c0, c1, c2, c3 = (
                (p2 >> np.uint64(32)).astype(u32) ^ c1 ^ k0,
                p2.astype(u32),
                (p0 >> np.uint64(32)).astype(u32) ^ c3 ^ k1,
                p0.astype(u32),
            )
            k0 = k0 + u32(0x9E3779B9)
            k1 = k1 + u32(0xBB67AE85)
    x = c0.view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


@pytest.mark.parametrize("n", [1, 1000, 3 * 4097])
@pytest.mark.parametrize("p", [0.0, 0.25, 0.9])
def test_dropout_matches_philox_reference(example, n, p):
    do = example("dropout")
    seed = 1234567
    x = torch.randn(n)
    y = do.seeded_dropout(x, p=p, seed=seed, BLOCK_SIZE=1024)
    keep = torch.from_numpy(_philox_rand(seed, np.arange(n)) > np.float32(p)).to(x.device)
    ref = torch.where(keep, x / (1 - p), torch.zeros(()))
    torch.testing.assert_close(y.cpu(), ref.cpu(), rtol=1e-6, atol=0)


def test_dropout_deterministic_in_seed(example):
    do = example("dropout")
    x = torch.randn(5000)
    a = do.seeded_dropout(x, 0.5, seed=7)
    assert torch.equal(a, do.seeded_dropout(x, 0.5, seed=7))
    assert not torch.equal(a, do.seeded_dropout(x, 0.5, seed=8))
    # Same stream for any block size: the mask depends only on (seed, offset).
    assert torch.equal(a, do.seeded_dropout(x, 0.5, seed=7, BLOCK_SIZE=128))


def test_dropout_keep_rate(example):
    do = example("dropout")
    kept = (do.seeded_dropout(torch.ones(200_001), 0.3, seed=42) != 0).double().mean().item()
    assert abs(kept - 0.7) < 0.01


def test_dropout_seed_above_32_bits(example):
    do = example("dropout")
    seed = (5 << 32) + 17
    x = torch.ones(777)
    keep = torch.from_numpy(_philox_rand(seed, np.arange(777)) > np.float32(0.5))
    torch.testing.assert_close(do.seeded_dropout(x, 0.5, seed=seed).cpu(), torch.where(keep, 2.0, 0.0))
