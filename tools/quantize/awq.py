"""AWQ's activation-aware searches, in torch (the quantization itself runs as Anvil kernels).

Given calibration activations X [M, K] feeding a linear layer (or a group of layers sharing
that input, such as q/k/v after one norm):

1. Scale search: ``x_mean[c] = mean |X[:, c]|``; ``w_mean[c]`` = mean over rows of ``|W| / max
   |W|`` of its group; for ``r = i / 20``: ``s = clamp(x_mean^r / (w_mean^(1-r) + 1e-4), min=1e-4)``,
   ``s /= sqrt(max(s) * min(s))``; keep the s minimising the mean squared error of
   ``X @ (Q(W * s) / s)^T`` against ``X @ W^T``. The caller folds ``1/s`` into the op producing X
   and stores ``Q(W * s)``.
2. Clip search: per output row and group, try ``max_val = amax * (1 - i / 20), i = 0..9``,
   clamping W to ``[-max_val, max_val]``, and keep the clip whose partial output (the group's
   share of ``X @ W^T``) has the lowest squared error.

``int4_fake_quant`` is the torch twin of ``tools.kernels.int4.awq_quantize_pack_kernel`` followed
by dequantization (same formulas, same fp16 rounding of the scale), so the searches optimise
exactly what the kernels produce; the tests check the two agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["int4_fake_quant", "AwqSearch", "search_scale", "search_clip", "output_mse", "awq_search"]

N_GRID = 20
MAX_SHRINK = 0.5
CLIP_TOKENS = 512


def int4_fake_quant(w: torch.Tensor, group_size: int = 128) -> torch.Tensor:
    """Quantize-dequantize W[N, K] (fp32) with asymmetric uint4 groups along K."""
    n, k = w.shape
    wg = w.float().reshape(n, k // group_size, group_size)
    wmax = wg.amax(-1, keepdim=True)
    wmin = wg.amin(-1, keepdim=True)
    scale = ((wmax - wmin).clamp(min=1e-5) / 15.0).clamp(max=65504.0).half().float()
    zero = (-torch.round(wmin / scale)).clamp(0, 15)
    q = (torch.round(wg / scale) + zero).clamp(0, 15)
    return ((q - zero) * scale).reshape(n, k)


def output_mse(x: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor) -> float:
    """Mean squared error of X @ W~^T against X @ W^T (in fp32)."""
    return float((x @ (w_hat - w).t()).pow(2).mean())


@dataclass
class AwqSearch:
    """The outcome of the searches for one weight (or group of weights sharing their input)."""

    scales: torch.Tensor | None  # [K] per-input-channel s (None: no scale search)
    weight: torch.Tensor  # W * s after clipping: what to quantize and store
    plain_mse: float  # output MSE of plain rounding of W
    awq_mse: float  # output MSE of the chosen scales and clips (effective weight Q(W s) / s)
    ratio: float | None  # the chosen r of the scale search


def search_scale(x: torch.Tensor, w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, float]:
    """The per-input-channel scale s [K] minimising the output error, and its r."""
    x = x.float()
    w = w.float()
    n, k = w.shape
    x_mean = x.abs().mean(0)
    wg = w.abs().reshape(n, k // group_size, group_size)
    w_mean = (wg / (wg.amax(-1, keepdim=True) + 1e-6)).reshape(n, k).mean(0)
    ref = x @ w.t()
    best: tuple[float, torch.Tensor, float] | None = None
    for i in range(N_GRID):
        r = i / N_GRID
        s = (x_mean.pow(r) / (w_mean.pow(1 - r) + 1e-4)).clamp(min=1e-4)
        s = s / (s.max() * s.min()).sqrt()
        w_eff = int4_fake_quant(w * s, group_size) / s
        err = float((x @ w_eff.t() - ref).pow(2).mean())
        if best is None or err < best[0]:
            best = (err, s, r)
    assert best is not None
    return best[1], best[2]


def search_clip(x: torch.Tensor, w: torch.Tensor, group_size: int, chunk: int = 256) -> torch.Tensor:
    """Per output row and group, the clip max_val [N, K/G] minimising the group's partial-output error."""
    x = x.float()
    w = w.float()
    n, k = w.shape
    ng = k // group_size
    if x.shape[0] > CLIP_TOKENS:
        x = x[torch.linspace(0, x.shape[0] - 1, CLIP_TOKENS).long()]
    xg = x.reshape(-1, ng, group_size).transpose(0, 1)  # [ng, T, G]
    best_max = torch.empty(n, ng)
    for r0 in range(0, n, chunk):
        wc = w[r0 : r0 + chunk].reshape(-1, ng, group_size)  # [c, ng, G]
        org_out = torch.bmm(xg, wc.permute(1, 2, 0))  # [ng, T, c]: each group's share of X @ W^T
        amax = wc.abs().amax(-1, keepdim=True)  # [c, ng, 1]
        best_err = torch.full((wc.shape[0], ng), float("inf"))
        chosen = amax[..., 0].clone()
        for i in range(int(MAX_SHRINK * N_GRID)):
            max_val = amax * (1 - i / N_GRID)
            q = int4_fake_quant(torch.clamp(wc, -max_val, max_val).reshape(-1, k), group_size)
            out = torch.bmm(xg, q.reshape(-1, ng, group_size).permute(1, 2, 0))
            err = (out - org_out).pow(2).mean(1).t()  # [c, ng]
            better = err < best_err
            best_err = torch.where(better, err, best_err)
            chosen = torch.where(better, max_val[..., 0], chosen)
        best_max[r0 : r0 + chunk] = chosen
    return best_max


def apply_clip(w: torch.Tensor, max_val: torch.Tensor, group_size: int) -> torch.Tensor:
    n, k = w.shape
    m = max_val.reshape(n, k // group_size, 1)
    return torch.clamp(w.float().reshape(n, k // group_size, group_size), -m, m).reshape(n, k)


def awq_search(x: torch.Tensor, w: torch.Tensor, group_size: int = 128, scale: bool = True,
               clip: bool = True) -> AwqSearch:
    """Run the scale search (when ``scale``) and then the clip search on the scaled problem.

    Returns the weight to quantize (``W * s``, clipped) and, with ``scale``, the s whose inverse
    the caller folds into the producer of X. The MSEs compare plain rounding of W with the
    effective weight ``Q(W s) / s`` on X.
    """
    x = x.reshape(-1, x.shape[-1]).float()
    w = w.float()
    plain = output_mse(x, w, int4_fake_quant(w, group_size))
    s: torch.Tensor | None = None
    ratio: float | None = None
    ws = w
    xs = x
    if scale:
        s, ratio = search_scale(x, w, group_size)
        ws = w * s
        xs = x / s
    if clip:
        ws = apply_clip(ws, search_clip(xs, ws, group_size), group_size)
    w_eff = int4_fake_quant(ws, group_size)
    if s is not None:
        w_eff = w_eff / s
    mse = output_mse(x, w, w_eff)
    if mse > plain:  # the searches are heuristics: never return worse than plain rounding
        return AwqSearch(scales=None, weight=w, plain_mse=plain, awq_mse=plain, ratio=None)
    return AwqSearch(scales=s, weight=ws, plain_mse=plain, awq_mse=mse, ratio=ratio)
