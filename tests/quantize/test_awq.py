"""AWQ: the torch twin of the kernel, and the searches lowering the layer-output error."""

from __future__ import annotations

import torch

from tools.kernels.int4 import awq_dequantize, awq_quantize_pack
from tools.quantize.awq import awq_search, int4_fake_quant, output_mse


def _outlier_activations(m: int, k: int, n_outliers: int = 8, gain: float = 30.0) -> torch.Tensor:
    x = torch.randn(m, k)
    x[:, torch.randperm(k)[:n_outliers]] *= gain
    return x


def test_fake_quant_is_the_kernel_bit_for_bit() -> None:
    for G in (128, 64):
        w = torch.randn(40, 256) * torch.rand(40, 1) * 0.1
        w[3, :G] = 0.0  # a constant group: range clamped to 1e-5
        w[5] += 1.0  # a group without 0 in its range: zero clamped
        qw, qz, sc = awq_quantize_pack(w, G)
        assert torch.equal(awq_dequantize(qw, qz, sc), int4_fake_quant(w, G))


def test_awq_search_lowers_output_error() -> None:
    x = _outlier_activations(256, 256)
    w = torch.randn(64, 256) * 0.05
    res = awq_search(x, w, 128)
    assert res.scales is not None and res.scales.shape == (256,)
    assert res.awq_mse < 0.6 * res.plain_mse
    # The stored weight is Q(W s); the layer sees X / s (1/s folded upstream): same error as reported.
    w_eff = int4_fake_quant(res.weight, 128) / res.scales
    assert abs(output_mse(x, w, w_eff) - res.awq_mse) <= 1e-6 * res.awq_mse
    # Outlier channels get scaled up (protected), and the scale is normalised around 1.
    top = x.abs().mean(0).topk(8).indices
    assert res.scales[top].min() > res.scales.median()


def test_clip_search_alone_never_hurts() -> None:
    x = _outlier_activations(256, 256)
    w = torch.randn(32, 256) * 0.05
    w[:, 7] *= 8  # weight outliers that clipping can trade away
    res = awq_search(x, w, 128, scale=False)
    assert res.scales is None
    assert res.awq_mse <= res.plain_mse
