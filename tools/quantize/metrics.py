"""Error metrics of a quantized tensor: SQNR, relative error, cosine, max error (sums pooled in float64)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["ErrorSums", "sqnr_db"]


def sqnr_db(signal_sq: float, noise_sq: float) -> float | None:
    """10 log10(signal / noise) from squared norms; None when the noise is zero (exact)."""
    if noise_sq <= 0.0:
        return None
    if signal_sq <= 0.0:
        return -math.inf
    return 10.0 * math.log10(signal_sq / noise_sq)


@dataclass
class ErrorSums:
    """Sums that pool the error of one or many tensors."""

    signal_sq: float = 0.0  # sum W^2
    approx_sq: float = 0.0  # sum W~^2
    noise_sq: float = 0.0  # sum (W - W~)^2
    dot: float = 0.0  # sum W W~
    max_abs: float = 0.0

    @classmethod
    def of(cls, w: torch.Tensor, w_hat: torch.Tensor) -> ErrorSums:
        a = w.detach().float().reshape(-1)
        b = w_hat.detach().float().reshape(-1)
        d = a - b
        norm = torch.linalg.vector_norm
        ss, aa, nn = (float(norm(t)) ** 2 for t in (a, b, d))
        # W . W~ from the three norms (no fp64 copies of the tensors; exact enough for a cosine).
        return cls(ss, aa, nn, (ss + aa - nn) / 2, float(d.abs().max()) if d.numel() else 0.0)

    def add(self, other: ErrorSums) -> None:
        self.signal_sq += other.signal_sq
        self.approx_sq += other.approx_sq
        self.noise_sq += other.noise_sq
        self.dot += other.dot
        self.max_abs = max(self.max_abs, other.max_abs)

    @property
    def sqnr_db(self) -> float | None:
        return sqnr_db(self.signal_sq, self.noise_sq)

    @property
    def rel_error(self) -> float:
        return math.sqrt(self.noise_sq / self.signal_sq) if self.signal_sq > 0 else (0.0 if self.noise_sq == 0 else 1.0)

    @property
    def cosine(self) -> float:
        den = math.sqrt(self.signal_sq * self.approx_sq)
        return self.dot / den if den > 0 else (1.0 if self.noise_sq == 0 else 0.0)
