"""What the harness reports about outputs: stats, and the comparison with a reference.

Tolerances depend on the output's dtype (the defaults below; a caller may override atol and
rtol). An element passes when ``|got - expected| <= atol + rtol * |expected|``, or when both
are NaN, or both are the same infinity. Integer and boolean outputs must match exactly.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from tools.models import CheckResult, Mismatch, TensorStats
from tools.specs import count_poison, dtype_name

# (atol, rtol) by output dtype. Kernels reorder reductions, fuse multiply-adds and use
# approximate exp/log, so float tolerances are looser than torch.testing's defaults.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float8_e4m3fn: (0.125, 0.125),
    torch.float8_e5m2: (0.25, 0.25),
}
STATS_VALUES = 8


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for an output of ``dtype``; exact (0, 0) for integers and booleans."""
    return TOLERANCES.get(dtype, (0.0, 0.0))


def _number(value: float | int | bool) -> float | int | bool | str:
    """A JSON-safe scalar: NaN and infinities as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def tensor_stats(t: torch.Tensor, *, poisoned: bool = False, values: int = STATS_VALUES) -> TensorStats:
    """Shape, dtype, min/max/mean over finite elements, NaN/Inf counts, unwritten count, first values."""
    flat = t.detach().reshape(-1)
    stats = TensorStats(shape=list(t.shape), dtype=dtype_name(t.dtype))
    if poisoned:
        stats.unwritten_count = count_poison(t)
    if flat.numel() == 0:
        return stats
    if t.dtype.is_floating_point:
        wide = flat.double()
        nan = torch.isnan(wide)
        inf = torch.isinf(wide)
        stats.nan_count, stats.inf_count = int(nan.sum()), int(inf.sum())
        finite = wide[~(nan | inf)]
        head: list[Any] = flat[:values].double().tolist()
    else:
        finite = flat.double() if t.dtype != torch.bool else flat.to(torch.float64)
        head = flat[:values].tolist()
    if finite.numel():
        stats.min, stats.max = _finite(float(finite.min())), _finite(float(finite.max()))
        stats.mean = _finite(float(finite.mean()))
    stats.values = [_number(v) for v in head]
    return stats


def _as_expected(expected: Any, out: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(expected, torch.Tensor):
        expected = torch.as_tensor(expected)
    return expected.to(out.device)


def compare(
    out: torch.Tensor,
    expected: Any,
    *,
    reference: str,
    atol: float | None = None,
    rtol: float | None = None,
) -> CheckResult:
    """Compare a kernel's output with a reference value (same shape, or broadcastable to it)."""
    default_atol, default_rtol = default_tolerance(out.dtype)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    exp = _as_expected(expected, out, reference)
    exp = torch.broadcast_to(exp, out.shape)
    got = out.detach().double()
    want = exp.detach().double()
    both_nan = torch.isnan(got) & torch.isnan(want)
    same = (got == want) | both_nan  # also equal infinities
    finite = torch.isfinite(got) & torch.isfinite(want)
    diff = torch.where(finite, (got - want).abs(), torch.zeros_like(got))
    close = same | (finite & (diff <= atol + rtol * want.abs()))
    bad = ~close
    mismatched = int(bad.sum())
    total = out.numel()
    max_abs = float(diff.max()) if total else 0.0
    denom = want.abs().clamp_min(torch.finfo(torch.float64).tiny)
    rel = torch.where(finite & (diff > 0), diff / denom, torch.zeros_like(diff))
    max_rel = float(rel.max()) if total else 0.0
    first: Mismatch | None = None
    if mismatched:
        flat_index = int(bad.reshape(-1).nonzero()[0, 0])
        index = [int(i) for i in torch.unravel_index(torch.tensor(flat_index), out.shape)] if out.dim() else []
        got_v = out.reshape(-1)[flat_index].item()
        want_v = exp.reshape(-1)[flat_index].item()
        first = Mismatch(index=index, got=_number(got_v), expected=_number(want_v))
    return CheckResult(
        passed=mismatched == 0,
        reference=reference,
        max_abs_error=_finite(max_abs),
        max_rel_error=_finite(max_rel),
        atol=atol,
        rtol=rtol,
        mismatched=mismatched,
        total=total,
        first_mismatch=first,
    )


def reference_shape_error(name: str, expected: Any, out: torch.Tensor, expression: str) -> str | None:
    """Why ``expected`` cannot be compared with output ``name`` (None when it can)."""
    if not isinstance(expected, torch.Tensor | int | float | bool):
        kind = type(expected).__name__
        return f"reference for {name!r} evaluates to a {kind}, not a tensor or number: {expression}"
    shape = tuple(expected.shape) if isinstance(expected, torch.Tensor) else ()
    try:
        torch.broadcast_shapes(shape, tuple(out.shape))
        if len(shape) <= out.dim() and torch.broadcast_shapes(shape, tuple(out.shape)) == out.shape:
            return None
    except RuntimeError:
        pass
    hint = f" e.g. ({expression}).reshape({list(out.shape)})" if math.prod(shape) == out.numel() else ""
    return (
        f"reference for {name!r} has shape {list(shape)} but {name} has shape {list(out.shape)}; "
        f"make the expression produce the output's shape{hint}."
    )
