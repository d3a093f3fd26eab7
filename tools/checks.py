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
from tools.tensors import count_poison, dtype_name, poison_mask, poison_possible

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


# Everything below runs with torch ops on the tensors' own device: what crosses to the host is a short
# vector of scalars per tensor (one synchronisation), never a whole tensor. The *_vector functions
# take no decision on the data, so they run on the meta device too (tests/tools/test_checks.py).
# Each has a fast form for the common case (all finite; all close), answered in two or three passes,
# and a full form that only runs when the fast one says it must.


def _widened(flat: torch.Tensor) -> torch.Tensor:
    """Floats of 16 bits and fewer as float32 (exact); float32 and float64 as they are."""
    return flat if flat.dtype in (torch.float32, torch.float64) else flat.float()


def stats_fast_vector(flat: torch.Tensor) -> torch.Tensor:
    """[min, max, sum, zeros] in float64; min and max are NaN or infinite when any element is. Floats are
    summed in their own width (float32 for 32 bits and fewer), integers in int64."""
    x = _widened(flat) if flat.dtype.is_floating_point else flat.to(torch.int64 if flat.dtype == torch.bool else
                                                                         flat.dtype)
    lo, hi = torch.aminmax(x)
    return torch.stack([lo.double(), hi.double(), x.sum().double(), torch.count_nonzero(x == 0).double()])


def stats_full_vector(flat: torch.Tensor, poison: torch.Tensor | None) -> torch.Tensor:
    """[min, max, sum over finite elements, finite count, NaN count, poison count] in float64
    (``poison``: the mask of elements holding the poison pattern, or None)."""
    x = _widened(flat)
    finite = torch.isfinite(x)
    inf = torch.tensor(float("inf"), dtype=x.dtype, device=x.device)
    lo = torch.where(finite, x, inf).amin()
    hi = torch.where(finite, x, -inf).amax()
    total = torch.where(finite, x, 0).sum(dtype=torch.float64)
    zero = torch.zeros((), device=x.device, dtype=torch.int64)
    poisoned = torch.count_nonzero(poison) if poison is not None else zero
    return torch.stack([lo.double(), hi.double(), total, torch.count_nonzero(finite).double(),
                        torch.count_nonzero(torch.isnan(x)).double(), poisoned.double()])


def tensor_stats(t: torch.Tensor, *, poisoned: bool = False, values: int = STATS_VALUES) -> TensorStats:
    """Shape, dtype, min/max/mean over finite elements, NaN/Inf/zero counts, unwritten count, first values."""
    flat = t.detach().reshape(-1)
    stats = TensorStats(shape=list(t.shape), dtype=dtype_name(t.dtype))
    n = flat.numel()
    if n == 0:
        if poisoned:
            stats.unwritten_count = 0
        return stats
    if flat.dtype.is_floating_point:
        head: list[Any] = flat[:values].double().tolist()
    else:
        head = flat[:values].tolist()
    lo, hi, total, zeros = stats_fast_vector(flat).tolist()
    stats.zero_count = int(zeros)
    if flat.dtype.is_floating_point and not math.isfinite(total):  # past float32's range: sum again in float64
        total = float(_widened(flat).sum(dtype=torch.float64))
    if flat.dtype.is_floating_point and not (math.isfinite(lo) and math.isfinite(hi)):
        marker = poison_mask(flat) if poisoned else None
        lo, hi, total, finite, nans, unwritten = stats_full_vector(flat, marker).tolist()
        stats.nan_count, stats.inf_count = int(nans), int(n - finite - nans)
        count = int(finite)
    else:  # all finite: no NaN, so no float poison either; an integer poison is the extreme value
        count = n
        unwritten = 0
        if poisoned and not flat.dtype.is_floating_point and poison_possible(flat.dtype, lo, hi):
            unwritten = count_poison(t)
    if poisoned:
        stats.unwritten_count = int(unwritten)
    if count:
        stats.min, stats.max, stats.mean = _finite(lo), _finite(hi), _finite(total / count)
    stats.values = [_number(v) for v in head]
    return stats


def _as_expected(expected: Any, out: torch.Tensor) -> torch.Tensor:
    if not isinstance(expected, torch.Tensor):
        expected = torch.as_tensor(expected)
    return torch.broadcast_to(expected.to(out.device), out.shape)


def _compare_dtype(out: torch.dtype, expected: torch.dtype) -> torch.dtype:
    """float32 when both sides are floats of at most 32 bits (their differences near agreement are exact in
    it), int64 when neither is a float, float64 otherwise."""
    if not out.is_floating_point and not expected.is_floating_point:
        return torch.int64
    if out.is_floating_point and expected.is_floating_point and torch.float64 not in (out, expected):
        return torch.float32
    return torch.float64


def compare_fast_vector(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """[elements not within atol + rtol * |want| (NaN counts as not), max |got - want|, max |got - want| / |want|]
    in float64, over float tensors of one dtype and shape."""
    diff = (got - want).abs_()
    scale = want.abs()
    outside = diff.numel() - torch.count_nonzero(diff <= scale.mul(rtol).add_(atol))
    max_abs = diff.amax()
    max_rel = diff.div_(scale.clamp_min_(torch.finfo(scale.dtype).tiny)).amax()
    return torch.stack([outside.double(), max_abs.double(), max_rel.double()])


def compare_full_vector(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> tuple[torch.Tensor,
                                                                                                 torch.Tensor]:
    """(the mask of mismatched elements, [mismatched, max abs error, max rel error, first mismatch]):
    NaN matches NaN, an infinity the same infinity, integers match exactly; errors over elements finite on
    both sides."""
    if got.dtype == torch.int64:
        bad = got != want
        diff = (got.double() - want.double()).abs()
        rel = diff / want.abs().double().clamp_min(torch.finfo(torch.float64).tiny)
        return bad, torch.stack([torch.count_nonzero(bad).double(), diff.amax().double(), rel.amax().double(),
                                 _first(bad)])
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))  # also equal infinities
    finite = torch.isfinite(got) & torch.isfinite(want)
    diff = torch.where(finite, (got - want).abs(), 0)
    bad = ~(same | (finite & (diff <= atol + rtol * want.abs())))
    denom = want.abs().clamp_min(torch.finfo(want.dtype).tiny)
    rel = torch.where(finite & (diff > 0), diff / denom, 0)
    return bad, torch.stack([torch.count_nonzero(bad).double(), diff.amax().double(), rel.amax().double(),
                             _first(bad)])


def _first(bad: torch.Tensor) -> torch.Tensor:
    """The flat index of the first True of ``bad`` (0 when there is none)."""
    return bad.reshape(-1).to(torch.uint8).argmax().double()


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
    exp = _as_expected(expected, out)
    work = _compare_dtype(out.dtype, exp.dtype)
    got, want = out.detach().to(work), exp.detach().to(work)
    total = out.numel()
    result = CheckResult(passed=True, reference=reference, max_abs_error=0.0, max_rel_error=0.0, atol=atol,
                         rtol=rtol, mismatched=0, total=total)
    if total == 0:
        return result
    if work != torch.int64:
        outside, max_abs, max_rel = compare_fast_vector(got, want, atol, rtol).tolist()
        if outside == 0 and math.isfinite(max_abs):  # every element finite on both sides and close
            result.max_abs_error, result.max_rel_error = _finite(max_abs), _finite(max_rel)
            return result
    _, summary = compare_full_vector(got, want, atol, rtol)
    mismatched, max_abs, max_rel, first_index = summary.tolist()
    result.passed = mismatched == 0
    result.mismatched = int(mismatched)
    result.max_abs_error, result.max_rel_error = _finite(max_abs), _finite(max_rel)
    if mismatched:
        flat_index = int(first_index)
        index = [int(i) for i in torch.unravel_index(torch.tensor(flat_index), out.shape)] if out.dim() else []
        result.first_mismatch = Mismatch(index=index, got=_number(out.reshape(-1)[flat_index].item()),
                                         expected=_number(exp.reshape(-1)[flat_index].item()))
    return result


def reference_shape_error(name: str, expected: Any, out: torch.Tensor, expression: str) -> str | None:
    """Why ``expected`` cannot be compared with output ``name`` (None when it can)."""
    if not isinstance(expected, torch.Tensor | int | float | bool):
        kind = type(expected).__name__
        return f"reference for {name!r} evaluates to a {kind}, not a tensor or number: {expression}"
    shape = tuple(expected.shape) if isinstance(expected, torch.Tensor) else ()
    if isinstance(expected, torch.Tensor) and expected.dim() == 0 and out.numel() > 1:
        # a number fills the output; a 0-d tensor is a reduction's result, for a whole output most
        # likely a reduction too many (a row sum for every row, written as a total)
        return (
            f"reference for {name!r} is a single value (a 0-d tensor, e.g. a reduction over every element) but "
            f"{name} has shape {list(out.shape)}; make the expression produce the output's shape (reduce along a "
            f"dim, e.g. .sum(dim=-1)), or if every element should equal that value, say so: "
            f"({expression}).expand({list(out.shape)})."
        )
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
