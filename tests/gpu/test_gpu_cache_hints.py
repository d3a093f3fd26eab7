"""Loads and stores with cache hints (cache_modifier, eviction_policy: ld.global.cg, .L1::evict_*
with an L2 policy register, st.global.cs/.wt, ...) give torch's results on the GPU: vectorized and
masked accesses, `other` where the mask is off, scalars, block pointers (kernels:
tests/compiler/cache_hint_kernels.py; the PTX: tests/compiler/test_cache_hints.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiler"))
from test_cache_hints import DTYPES, HINTS, run_block_copy, run_scale  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hints", HINTS)
@pytest.mark.parametrize("n_in,n_out", [(1000, 1000), (777, 1000), (100_003, 100_160)])
def test_results_on_the_gpu(dtype: torch.dtype, hints: dict[str, str], n_in: int, n_out: int) -> None:
    run_scale("cuda", dtype, hints, n_in, n_out)


@pytest.mark.parametrize("block", [128, 1024])
def test_wide_blocks_on_the_gpu(block: int) -> None:
    run_scale("cuda", torch.float32, HINTS[1], 5000, 5003, block=block)


@pytest.mark.parametrize("hints", HINTS[:3])
def test_block_pointers_on_the_gpu(hints: dict[str, str]) -> None:
    run_block_copy("cuda", hints, 70, 45)
