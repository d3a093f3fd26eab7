"""Lowerings over the last dim: reductions, softmax and its relatives, the norms.

Each is written as the row reductions (sum, mean, amax, amin, var) and elementwise ops it consists
of; a generated kernel holds whole rows, so every reduction of a row shares its loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from tools.generate.registry import lowering, num, operand, py, up
from tools.generate.values import Pair, Val

if TYPE_CHECKING:
    from tools.generate.translate import Translator

_F = torch.nn.functional


def _with_dtype(tr: Translator, x: Val, dtype: Any) -> Val:
    target = py(tr, dtype, "dtype")
    if target is None:
        return x
    if not isinstance(target, torch.dtype):
        tr.fail(None, "dtype must be a torch dtype")
    return tr.convert(x, target)


def _reduction(op: str) -> Any:
    def lower(tr: Translator, input: Any, dim: Any, keepdim: Any, dtype: Any) -> Val:
        x = _with_dtype(tr, tr.tensor(input, op), dtype)
        return tr.reduce(op, x, py(tr, dim, "dim"), keepdim)

    return lower


lowering("input, dim=None, keepdim=False, dtype=None", "torch.sum", "Tensor.sum")(_reduction("sum"))
lowering("input, dim=None, keepdim=False, dtype=None", "torch.mean", "Tensor.mean")(_reduction("mean"))


def _extreme(op: str) -> Any:
    def lower(tr: Translator, input: Any, dim: Any, keepdim: Any) -> Val:
        return tr.reduce(op, tr.tensor(input, op), py(tr, dim, "dim"), keepdim)

    return lower


lowering("input, dim=None, keepdim=False", "torch.amax", "Tensor.amax")(_extreme("amax"))
lowering("input, dim=None, keepdim=False", "torch.amin", "Tensor.amin")(_extreme("amin"))


def _max_min(op: str, elementwise: str) -> Any:
    def lower(tr: Translator, input: Any, dim: Any, keepdim: Any) -> Any:
        if isinstance(dim, Val) and dim.is_tensor:  # torch.max(a, b): elementwise
            return tr.ew(elementwise, operand(tr, input, op), dim)
        if dim is None:
            tr.fail(None, f"{op[1:]} over all elements", "Generated kernels reduce over the last dim: pass dim=-1.")
        return Pair(tr.reduce(op, tr.tensor(input, op), py(tr, dim, "dim"), keepdim))

    return lower


lowering("input, dim=None, keepdim=False", "torch.max", "Tensor.max")(_max_min("amax", "maximum"))
lowering("input, dim=None, keepdim=False", "torch.min", "Tensor.min")(_max_min("amin", "minimum"))


def _correction(tr: Translator, unbiased: Any, correction: Any) -> int | float:
    c = py(tr, correction, "correction")
    if c is not None:
        if not isinstance(c, int | float) or isinstance(c, bool):
            tr.fail(None, "correction must be a number")
        return c
    u = py(tr, unbiased, "unbiased")
    return 0 if u is False else 1


@lowering("input, dim=None, unbiased=None, keepdim=False, correction=None", "torch.var", "Tensor.var")
def _var(tr: Translator, input: Any, dim: Any, unbiased: Any, keepdim: Any, correction: Any) -> Val:
    x = tr.tensor(input, "var")
    return tr.reduce("var", x, py(tr, dim, "dim"), keepdim, (_correction(tr, unbiased, correction),))


@lowering("input, dim=None, unbiased=None, keepdim=False, correction=None", "torch.std", "Tensor.std")
def _std(tr: Translator, input: Any, dim: Any, unbiased: Any, keepdim: Any, correction: Any) -> Val:
    return tr.ew("sqrt", _var(tr, input, dim, unbiased, keepdim, correction))


def _keep(tr: Translator, v: Val, keepdim: Any) -> Val:
    """A per-row value computed with keepdim=True, as the caller's keepdim asks."""
    return v if tr.flag(keepdim, "keepdim") else tr.view(v, lambda t: t.squeeze(-1), "keepdim=False")


@lowering("input, dim, keepdim=False", "torch.logsumexp", "special.logsumexp", "Tensor.logsumexp")
def _logsumexp(tr: Translator, input: Any, dim: Any, keepdim: Any) -> Val:
    x = tr.tensor(input, "logsumexp")
    assert x.meta is not None
    tr.check_last_dim(x, py(tr, dim, "dim"))
    expected = torch.logsumexp(x.meta, dim=-1, keepdim=tr.flag(keepdim, "keepdim"))
    xf = up(x)
    m = tr.reduce("amax", xf, -1, True)
    # rows whose maximum is infinite: torch subtracts 0 instead (no inf - inf)
    m = tr.ew("where", tr.ew("eq", tr.ew("abs", m), num(float("inf"))), num(0.0), m)
    s = tr.reduce("sum", tr.ew("exp", tr.ew("sub", xf, m)), -1, True)
    return tr.as_result(_keep(tr, tr.ew("add", tr.ew("log", s), m), keepdim), expected)


def softmax(tr: Translator, x: Val, log: bool) -> Val:
    assert x.meta is not None
    expected = (torch.log_softmax if log else torch.softmax)(x.meta, dim=-1)
    xf = up(x)
    shifted = tr.ew("sub", xf, tr.reduce("amax", xf, -1, True))
    e = tr.ew("exp", shifted)
    s = tr.reduce("sum", e, -1, True)
    out = tr.ew("sub", shifted, tr.ew("log", s)) if log else tr.ew("div", e, s)
    return tr.as_result(out, expected)


def _softmax(log: bool, negate: bool = False) -> Any:
    def lower(tr: Translator, input: Any, dim: Any, dtype: Any) -> Val:
        x = _with_dtype(tr, tr.tensor(input, "softmax"), dtype)
        if py(tr, dim, "dim") is None:
            tr.fail(None, "softmax needs dim", "Pass dim=-1.")
        tr.check_last_dim(x, py(tr, dim, "dim"))
        return softmax(tr, tr.ew("neg", x) if negate else x, log)

    return lower


lowering("input, dim=None, dtype=None", "torch.softmax", "F.softmax", "special.softmax",
         "Tensor.softmax")(_softmax(False))
lowering("input, dim=None, dtype=None", "torch.log_softmax", "F.log_softmax", "Tensor.log_softmax")(_softmax(True))
lowering("input, dim=None, dtype=None", "F.softmin")(_softmax(False, negate=True))


def _normalized_last(tr: Translator, x: Val, normalized_shape: Any, what: str) -> tuple[int, ...]:
    assert x.meta is not None
    shape = py(tr, normalized_shape, "normalized_shape")
    shape = (shape,) if isinstance(shape, int) else shape
    if x.meta.dim() == 0 or shape != (int(x.meta.shape[-1]),):
        last = int(x.meta.shape[-1]) if x.meta.dim() else 1
        tr.fail(None, f"{what} over {shape}",
                f"Generated kernels normalize over the last dim: normalized_shape=({last},).")
    return shape  # type: ignore[no-any-return]


def _probe(v: Any) -> Any:
    return v.meta if isinstance(v, Val) and v.is_tensor else None


@lowering("input, normalized_shape, weight=None, bias=None, eps=1e-05", "F.layer_norm")
def _layer_norm(tr: Translator, input: Any, normalized_shape: Any, weight: Any, bias: Any, eps: Any) -> Val:
    x = tr.tensor(input, "layer_norm")
    shape = _normalized_last(tr, x, normalized_shape, "layer_norm")
    e = operand(tr, eps, "eps")
    try:
        assert x.meta is not None
        expected = _F.layer_norm(x.meta, shape, _probe(weight), _probe(bias), float(tr.number(e, "eps")))
    except (RuntimeError, TypeError, ValueError) as exc:
        tr.fail(None, f"layer_norm does not apply: {str(exc).strip().splitlines()[0]}")
    xf = up(x)
    centered = tr.ew("sub", xf, tr.reduce("mean", xf, -1, True))
    var = tr.reduce("mean", tr.ew("square", centered), -1, True)
    y = tr.ew("mul", centered, tr.ew("rsqrt", tr.ew("add", var, e)))
    if weight is not None:
        y = tr.ew("mul", y, up(tr.tensor(weight, "weight")))
    if bias is not None:
        y = tr.ew("add", y, up(tr.tensor(bias, "bias")))
    return tr.as_result(y, expected)


@lowering("input, normalized_shape, weight=None, eps=None", "F.rms_norm")
def _rms_norm(tr: Translator, input: Any, normalized_shape: Any, weight: Any, eps: Any) -> Val:
    x = tr.tensor(input, "rms_norm")
    assert x.meta is not None
    shape = _normalized_last(tr, x, normalized_shape, "rms_norm")
    e = operand(tr, eps if eps is not None else float(torch.finfo(x.meta.dtype).eps), "eps")
    try:
        expected = _F.rms_norm(x.meta, shape, _probe(weight), float(tr.number(e, "eps")))
    except (RuntimeError, TypeError, ValueError) as exc:
        tr.fail(None, f"rms_norm does not apply: {str(exc).strip().splitlines()[0]}")
    xf = up(x)
    ms = tr.reduce("mean", tr.ew("square", xf), -1, True)
    y = tr.ew("mul", xf, tr.ew("rsqrt", tr.ew("add", ms, e)))
    if weight is not None:
        y = tr.ew("mul", y, up(tr.tensor(weight, "weight")))
    return tr.as_result(y, expected)


def vector_norm(tr: Translator, x: Val, p: Any, keepdim: Any) -> Val:
    """The p-norm of each row (p: 2, 1, inf, -inf or another positive number)."""
    order = py(tr, p, "ord")
    if order == "fro":
        order = 2
    if not isinstance(order, int | float) or isinstance(order, bool) or order == 0:
        tr.fail(None, f"norm of order {order!r}", "Generated kernels compute p-norms: p = 2, 1, inf, -inf or p > 0.")
    assert x.meta is not None
    xf = up(x)
    if order == 2:
        n = tr.ew("sqrt", tr.reduce("sum", tr.ew("square", xf), -1, True))
    elif order == 1:
        n = tr.reduce("sum", tr.ew("abs", xf), -1, True)
    elif order in (float("inf"), float("-inf")):
        n = tr.reduce("amax" if order > 0 else "amin", tr.ew("abs", xf), -1, True)
    elif order > 0:
        s = tr.reduce("sum", tr.ew("pow", tr.ew("abs", xf), num(float(order))), -1, True)
        n = tr.ew("pow", s, num(1.0 / order))
    else:
        tr.fail(None, f"norm of order {order!r}", "Use a positive order, inf or -inf.")
    expected = torch.linalg.vector_norm(x.meta, ord=order, dim=-1, keepdim=tr.flag(keepdim, "keepdim"))
    return tr.as_result(_keep(tr, n, keepdim), expected)


@lowering("input, ord=2, dim=None, keepdim=False, dtype=None", "linalg.vector_norm")
def _vector_norm(tr: Translator, input: Any, ord: Any, dim: Any, keepdim: Any, dtype: Any) -> Val:
    x = _with_dtype(tr, tr.tensor(input, "vector_norm"), dtype)
    tr.check_last_dim(x, py(tr, dim, "dim"))
    return vector_norm(tr, x, ord, keepdim)


@lowering("input, ord=None, dim=None, keepdim=False", "linalg.norm")
def _linalg_norm(tr: Translator, input: Any, ord: Any, dim: Any, keepdim: Any) -> Val:
    x = tr.tensor(input, "norm")
    tr.check_last_dim(x, py(tr, dim, "dim"))
    return vector_norm(tr, x, 2 if py(tr, ord, "ord") is None else ord, keepdim)


@lowering("input, p='fro', dim=None, keepdim=False, dtype=None", "torch.norm", "Tensor.norm")
def _norm(tr: Translator, input: Any, p: Any, dim: Any, keepdim: Any, dtype: Any) -> Val:
    x = _with_dtype(tr, tr.tensor(input, "norm"), dtype)
    tr.check_last_dim(x, py(tr, dim, "dim"))
    return vector_norm(tr, x, p, keepdim)


@lowering("input, p=2.0, dim=1, eps=1e-12", "F.normalize")
def _normalize(tr: Translator, input: Any, p: Any, dim: Any, eps: Any) -> Val:
    x = tr.tensor(input, "normalize")
    assert x.meta is not None
    tr.check_last_dim(x, py(tr, dim, "dim"))
    expected = _F.normalize(x.meta, p=float(py(tr, p, "p")), dim=-1)
    n = vector_norm(tr, x, p, True)
    return tr.as_result(tr.ew("div", up(x), tr.ew("maximum", up(n), operand(tr, eps, "eps"))), expected)
