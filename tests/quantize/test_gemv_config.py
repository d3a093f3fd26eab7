"""GemvConfig (tools/kernels/gemv_config.py): awq_gemv's knobs as one frozen value, each checked
where the config is made, with a message that names the field, the allowed values and the value."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from tools.kernels.int4 import awq_quantize_pack
from tools.kernels.w4a16 import GEMV_MODES, GemvConfig, awq_gemv, awq_gemv_pack


def test_defaults_are_awq_gemvs_own_choices() -> None:
    cfg = GemvConfig()
    assert (cfg.mode, cfg.block_n, cfg.split_k, cfg.num_warps, cfg.ahead, cfg.stages, cfg.maxnreg) == (None,) * 7
    assert (cfg.block_k, cfg.unroll, cfg.block_m) == (8, 4, 16)
    assert (cfg.cluster, cfg.evict_first, cfg.warp_split) == (None, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.mode = "mma"  # type: ignore[misc]
    # a value object: equal configs are one plan, a changed field another
    assert GemvConfig(mode="mma", num_warps=2) == GemvConfig(num_warps=2, mode="mma")
    assert hash(GemvConfig(stages=1)) == hash(GemvConfig(stages=1))
    assert dataclasses.replace(GemvConfig(mode="mma"), ahead=2) == GemvConfig(mode="mma", ahead=2)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("mode", "fp8", "GemvConfig.mode must be None or one of f32, f32-exact, bf16x2"),
    ("mode", "MMA", "got 'MMA'"),
    ("block_n", 96, "GemvConfig.block_n must be None or a power of two and a multiple of 8, got 96"),
    ("block_n", 4, "GemvConfig.block_n must be None or a power of two and a multiple of 8, got 4"),
    ("block_n", 0, "block_n must be None or a power of two"),
    ("block_k", 6, "GemvConfig.block_k must be a power of two, got 6"),
    ("block_k", None, "GemvConfig.block_k must be an int, got None"),
    ("unroll", 3, "GemvConfig.unroll must be a power of two, got 3"),
    ("unroll", 0, "GemvConfig.unroll must be a power of two, got 0"),
    ("split_k", 0, "GemvConfig.split_k must be None or at least 1, got 0"),
    ("split_k", 2.0, "GemvConfig.split_k must be an int, got float 2.0"),
    ("num_warps", 3, "GemvConfig.num_warps must be None, 1, 2, 4, 8 or 16, got 3"),
    ("num_warps", 32, "GemvConfig.num_warps must be None, 1, 2, 4, 8 or 16, got 32"),
    ("ahead", 3, "GemvConfig.ahead must be None, 1 or 2, got 3"),
    ("stages", 9, "GemvConfig.stages must be None or 0 to 8, got 9"),
    ("stages", -1, "GemvConfig.stages must be None or 0 to 8, got -1"),
    ("block_m", 32, "GemvConfig.block_m must be 1, 2, 4, 8 or 16, got 32"),
    ("block_m", True, "GemvConfig.block_m must be an int, got bool True"),
    ("maxnreg", 256, "GemvConfig.maxnreg must be None or 1 to 255, got 256"),
    ("cluster", 1, "GemvConfig.cluster must be True, False or None, got 1"),
    ("evict_first", "yes", "GemvConfig.evict_first must be True, False or None, got 'yes'"),
    ("warp_split", 0, "GemvConfig.warp_split must be True, False or None, got 0"),
])
def test_invalid_values_are_refused_with_the_field_and_the_choices(field: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
        GemvConfig(**{field: value})


@pytest.mark.parametrize("mode", [*GEMV_MODES, None])
def test_every_mode_and_edge_value_is_accepted(mode: str | None) -> None:
    GemvConfig(mode=mode, block_n=8, block_k=1, unroll=1, split_k=1, num_warps=16, ahead=2, stages=0, block_m=1,
               maxnreg=255, cluster=False, evict_first=True, warp_split=False)


def test_call_dependent_checks_stay_with_awq_gemv() -> None:
    """A config valid on its own can still not fit a call: awq_gemv says why."""
    qw, qz, sc = awq_quantize_pack(torch.randn(64, 128) * 0.05, 128)
    x = torch.randn(1, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="block_k \\* unroll = 256 must divide the group size 128"):
        awq_gemv(x, qw, qz, sc, GemvConfig(block_k=64, unroll=4))
    with pytest.raises(ValueError, match="stages must be None or 1 to 8, got 0"):  # 0 (plain loads): blocks only
        awq_gemv(x, qw, qz, sc, GemvConfig(mode="mma", stages=0))
    with pytest.raises(ValueError, match="block_n must be 64 with warp_split"):
        awq_gemv(x, awq_gemv_pack(qw, qz, sc), qz, sc, GemvConfig(block_n=128))
