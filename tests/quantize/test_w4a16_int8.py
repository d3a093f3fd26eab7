"""The W4A16 GEMV's int8 arithmetic (mode "mma-int8", tools/kernels/int4_i8.py) on the CPU backend,
which computes the GPU's integers: against float64 within its stated bound (x cut per group of 128
to 15-bit fixed point on the group's largest exponent), on ragged N, uneven warps, K splits, x of
any magnitude, NaN, and the errors of what it does not take."""

from __future__ import annotations

import pytest
import torch

from tools.kernels.int4 import awq_dequantize, awq_quantize_pack
from tools.kernels.w4a16 import GemvConfig, awq_gemv, awq_gemv_pack


def _cut_bound(x: torch.Tensor, wd: torch.Tensor) -> torch.Tensor:
    """Per column, the most that cutting x can move y: half a unit of 2^(E - 13) per element, E the
    largest exponent of x's group of 128."""
    xg = x.double().view(-1, 128)
    e = torch.floor(torch.log2(xg.abs().amax(dim=1).clamp_min(2.0 ** -126)))
    unit = (2.0 ** (e - 14)).repeat_interleave(128)
    return wd.abs() @ unit


@pytest.mark.parametrize(("N", "K", "opts"), [
    (200, 512, {}),  # ragged N (the last octet's columns past N are not stored), 4 groups for 8 warps
    (72, 384, {"num_warps": 4}),  # 3 groups for 4 warps: one warp's step scales a group by zero
    (136, 1024, {"num_warps": 2, "split_k": 3}),  # uneven K splits summed by the last program
])
@pytest.mark.parametrize("scale", [1e-3, 1.0, 300.0])
def test_int8_gemv_against_float64(N: int, K: int, opts: dict[str, int], scale: float) -> None:
    g = torch.Generator().manual_seed(N + K)
    qw, qz, sc = awq_quantize_pack(torch.randn(N, K, generator=g) * 0.05, 128)
    wd = awq_dequantize(qw, qz, sc).double()
    x = (torch.randn(1, K, generator=g) * scale + scale).to(torch.bfloat16)
    x[0, 5] = x[0, 7] * 2 ** 12  # a group whose small elements are cut
    x[0, 128:256] = 0  # a group of zeros
    blocks = awq_gemv_pack(qw, qz, sc)
    y = awq_gemv(x, blocks, qz, sc, GemvConfig(mode="mma-int8", **opts))
    ref = (x.double() @ wd.t())[0]
    assert y.shape == (1, N) and y.dtype == torch.bfloat16
    err = (y[0].double() - ref).abs()
    fold = (wd.abs() @ x.double().abs()[0]) * 2 ** -20  # the fp32 sums of the groups' totals
    assert (err <= _cut_bound(x, wd) + ref.abs() * 2 ** -8 + fold).all()
    # the default for the blocks layout, one row of x and groups of 128
    assert torch.equal(awq_gemv(x, blocks, qz, sc, GemvConfig(**opts)), y)


def test_int8_gemv_nan_and_extreme_x() -> None:
    qw, qz, sc = awq_quantize_pack(torch.randn(64, 256) * 0.05, 128)
    wd = awq_dequantize(qw, qz, sc).double()
    blocks = awq_gemv_pack(qw, qz, sc)
    for scale in (2.0 ** 90, 2.0 ** -110):
        x = (torch.randn(1, 256) * scale).to(torch.bfloat16)
        y = awq_gemv(x, blocks, qz, sc, GemvConfig(mode="mma-int8"))
        ref = x.double() @ wd.t()
        assert torch.isfinite(y).all()
        assert float((y.double() - ref).norm() / ref.norm()) < 1e-2
    x = torch.randn(1, 256).to(torch.bfloat16)
    x[0, 200] = float("nan")
    assert torch.isnan(awq_gemv(x, blocks, qz, sc, GemvConfig(mode="mma-int8"))).all()


def test_int8_gemv_errors() -> None:
    qw, qz, sc = awq_quantize_pack(torch.randn(64, 256) * 0.05, 128)
    blocks = awq_gemv_pack(qw, qz, sc)
    x = torch.randn(1, 256).to(torch.bfloat16)
    with pytest.raises(ValueError, match="reads awq_gemv_pack's blocks"):
        awq_gemv(x, awq_gemv_pack(qw), qz, sc, GemvConfig(mode="mma-int8"))
    with pytest.raises(ValueError, match="one row of x and groups of 128, got 2 rows"):
        awq_gemv(torch.randn(2, 256).to(torch.bfloat16), blocks, qz, sc, GemvConfig(mode="mma-int8"))
    with pytest.raises(ValueError, match="cluster must be None or False"):
        awq_gemv(x, blocks, qz, sc, GemvConfig(mode="mma-int8", split_k=2, cluster=True))
    with pytest.raises(ValueError, match="needs bf16 x"):
        awq_gemv(x.float(), blocks, qz, sc, GemvConfig(mode="mma-int8"))
    q64, z64, s64 = awq_quantize_pack(torch.randn(64, 256) * 0.05, 64)
    with pytest.raises(ValueError, match="groups of 64"):
        awq_gemv(x, awq_gemv_pack(q64, z64, s64), z64, s64, GemvConfig(mode="mma-int8"))
