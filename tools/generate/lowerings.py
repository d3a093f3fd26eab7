"""What each function of the reference language becomes in a generated kernel: one small lowering
per function, registered under every name it is called by (`torch.softmax`, `F.softmax`,
`Tensor.softmax` for `x.softmax(...)`).

Each registers into the table of registry.py (which says what a lowering receives) and builds ops
of the fusion library (compiler/fusion/ops.py) through the translator. Importing this module fills
the whole table (rowwise.py included). Composite functions (softmax, the norms) are written
as the reductions and elementwise ops they consist of, computed in float32 for 16-bit inputs and
stored in the dtype torch gives them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from tools.generate.catalog import describe
from tools.generate.registry import LOWERINGS, lowering, num, operand, py
from tools.generate.values import Const, Val

if TYPE_CHECKING:
    from tools.generate.translate import Translator

__all__ = ["LOWERINGS", "supported_functions"]

_F = torch.nn.functional


# ---------------------------------------------------------------------------------------------- elementwise
_UNARY: dict[str, tuple[str, ...]] = {
    "abs": ("torch.abs", "torch.absolute", "Tensor.abs"),
    "exp": ("torch.exp", "Tensor.exp"),
    "exp2": ("torch.exp2", "special.exp2", "Tensor.exp2"),
    "expm1": ("torch.expm1", "special.expm1", "Tensor.expm1"),
    "log": ("torch.log", "Tensor.log"),
    "log2": ("torch.log2", "Tensor.log2"),
    "log1p": ("torch.log1p", "special.log1p", "Tensor.log1p"),
    "sqrt": ("torch.sqrt", "Tensor.sqrt"),
    "rsqrt": ("torch.rsqrt", "Tensor.rsqrt"),
    "reciprocal": ("torch.reciprocal", "Tensor.reciprocal"),
    "sin": ("torch.sin", "Tensor.sin"),
    "cos": ("torch.cos", "Tensor.cos"),
    "tanh": ("torch.tanh", "F.tanh", "Tensor.tanh"),
    "erf": ("torch.erf", "special.erf", "Tensor.erf"),
    "sigmoid": ("torch.sigmoid", "F.sigmoid", "special.expit", "Tensor.sigmoid"),
    "relu": ("torch.relu", "F.relu", "Tensor.relu"),
    "silu": ("F.silu",),
    "neg": ("torch.neg", "torch.negative", "Tensor.neg"),
    "square": ("torch.square", "Tensor.square"),
    "logical_not": ("torch.logical_not", "Tensor.logical_not"),
}


def _unary(op: str) -> Callable[..., Any]:
    def lower(tr: Translator, input: Any) -> Val:
        return tr.ew(op, operand(tr, input, op))

    return lower


for _op, _keys in _UNARY.items():
    lowering("input", *_keys)(_unary(_op))

_BINARY: dict[str, tuple[str, ...]] = {
    "mul": ("torch.mul", "torch.multiply", "Tensor.mul"),
    "maximum": ("torch.maximum", "Tensor.maximum"),
    "minimum": ("torch.minimum", "Tensor.minimum"),
    "gt": ("torch.gt", "Tensor.gt"), "lt": ("torch.lt", "Tensor.lt"), "ge": ("torch.ge", "Tensor.ge"),
    "le": ("torch.le", "Tensor.le"), "eq": ("torch.eq", "Tensor.eq"), "ne": ("torch.ne", "Tensor.ne"),
    "logical_and": ("torch.logical_and", "Tensor.logical_and"),
    "logical_or": ("torch.logical_or", "Tensor.logical_or"),
}  # fmt: skip


def _binary(op: str) -> Callable[..., Any]:
    def lower(tr: Translator, input: Any, other: Any) -> Val:
        return tr.ew(op, operand(tr, input, op), operand(tr, other, op))

    return lower


for _op, _keys in _BINARY.items():
    lowering("input, other", *_keys)(_binary(_op))


def _scaled(tr: Translator, v: Any, factor: Any, what: str) -> Val:
    """v * factor, or v where the factor is 1 (add's alpha, addcmul's value)."""
    x = operand(tr, v, what)
    return x if py(tr, factor, what) == 1 else tr.ew("mul", x, operand(tr, factor, what))


def _add_sub(op: str) -> Callable[..., Any]:
    def lower(tr: Translator, input: Any, other: Any, alpha: Any) -> Val:
        return tr.ew(op, operand(tr, input, op), _scaled(tr, other, alpha, "alpha"))

    return lower


lowering("input, other, alpha=1", "torch.add", "Tensor.add")(_add_sub("add"))
lowering("input, other, alpha=1", "torch.sub", "torch.subtract", "Tensor.sub")(_add_sub("sub"))


@lowering("input, other, rounding_mode=None", "torch.div", "torch.divide", "Tensor.div")
def _div(tr: Translator, input: Any, other: Any, rounding_mode: Any) -> Val:
    if py(tr, rounding_mode, "rounding_mode") is not None:
        tr.fail(None, "div with a rounding_mode cannot be part of a generated kernel", "Use plain division.")
    return tr.ew("div", operand(tr, input, "div"), operand(tr, other, "div"))


@lowering("input, exponent", "torch.pow", "Tensor.pow")
def _pow(tr: Translator, input: Any, exponent: Any) -> Val:
    return tr.power(operand(tr, input, "pow"), operand(tr, exponent, "pow"))


@lowering("condition, input, other", "torch.where")
def _where(tr: Translator, condition: Any, input: Any, other: Any) -> Val:
    return tr.ew("where", operand(tr, condition, "where"), operand(tr, input, "where"), operand(tr, other, "where"))


@lowering("input, condition, other", "Tensor.where")
def _where_method(tr: Translator, input: Any, condition: Any, other: Any) -> Val:
    return _where(tr, condition, input, other)


@lowering("input, mask, value", "Tensor.masked_fill")
def _masked_fill(tr: Translator, input: Any, mask: Any, value: Any) -> Val:
    return tr.ew("where", operand(tr, mask, "masked_fill"), operand(tr, value, "masked_fill"),
                 operand(tr, input, "masked_fill"))


def clamp(tr: Translator, x: Val, lo: Any, hi: Any) -> Val:
    if lo is not None:
        x = tr.ew("maximum", x, operand(tr, lo, "clamp"))
    if hi is not None:
        x = tr.ew("minimum", x, operand(tr, hi, "clamp"))
    return x


@lowering("input, min=None, max=None", "torch.clamp", "torch.clip", "Tensor.clamp", "Tensor.clip")
def _clamp(tr: Translator, input: Any, min: Any, max: Any) -> Val:
    return clamp(tr, operand(tr, input, "clamp"), min, max)


@lowering("input, min_val=-1.0, max_val=1.0", "F.hardtanh")
def _hardtanh(tr: Translator, input: Any, min_val: Any, max_val: Any) -> Val:
    return clamp(tr, operand(tr, input, "hardtanh"), min_val, max_val)


@lowering("input", "F.relu6")
def _relu6(tr: Translator, input: Any) -> Val:
    return clamp(tr, operand(tr, input, "relu6"), 0.0, 6.0)


@lowering("input, end, weight", "torch.lerp", "Tensor.lerp")
def _lerp(tr: Translator, input: Any, end: Any, weight: Any) -> Val:
    a = operand(tr, input, "lerp")
    return tr.ew("add", a, tr.ew("mul", operand(tr, weight, "lerp"), tr.ew("sub", operand(tr, end, "lerp"), a)))


def _addc(op: str) -> Callable[..., Any]:
    def lower(tr: Translator, input: Any, tensor1: Any, tensor2: Any, value: Any) -> Val:
        term = tr.ew(op, operand(tr, tensor1, op), operand(tr, tensor2, op))
        return tr.ew("add", operand(tr, input, op), _scaled(tr, term, value, "value"))

    return lower


lowering("input, tensor1, tensor2, value=1", "torch.addcmul")(_addc("mul"))
lowering("input, tensor1, tensor2, value=1", "torch.addcdiv")(_addc("div"))


@lowering("input", "torch.log10", "Tensor.log10")
def _log10(tr: Translator, input: Any) -> Val:
    return tr.ew("mul", tr.ew("log", operand(tr, input, "log10")), num(1.0 / math.log(10.0)))


@lowering("input", "torch.erfc", "special.erfc")
def _erfc(tr: Translator, input: Any) -> Val:
    return tr.ew("sub", num(1.0), tr.ew("erf", operand(tr, input, "erfc")))


@lowering("input", "special.ndtr")
def _ndtr(tr: Translator, input: Any) -> Val:
    x = operand(tr, input, "ndtr")
    return tr.ew("mul", num(0.5), tr.ew("add", num(1.0), tr.ew("erf", tr.ew("mul", x, num(math.sqrt(0.5))))))


# ---------------------------------------------------------------------------------------------- activations
@lowering("input, approximate='none'", "F.gelu")
def _gelu(tr: Translator, input: Any, approximate: Any) -> Val:
    mode = py(tr, approximate, "approximate")
    if mode not in ("none", "tanh"):
        tr.fail(None, f"gelu approximate={mode!r}", "Use 'none' or 'tanh'.")
    return tr.ew("gelu_tanh" if mode == "tanh" else "gelu", operand(tr, input, "gelu"))


def softplus(tr: Translator, x: Val, beta: Any = 1, threshold: Any = 20) -> Val:
    b = operand(tr, beta, "beta")
    bx = tr.ew("mul", x, b) if py(tr, beta, "beta") != 1 else x
    soft = tr.ew("log1p", tr.ew("exp", bx))
    if py(tr, beta, "beta") != 1:
        soft = tr.ew("div", soft, b)
    return tr.ew("where", tr.ew("gt", bx, operand(tr, threshold, "threshold")), x, soft)


@lowering("input, beta=1, threshold=20", "F.softplus")
def _softplus(tr: Translator, input: Any, beta: Any, threshold: Any) -> Val:
    return softplus(tr, operand(tr, input, "softplus"), beta, threshold)


@lowering("input, negative_slope=0.01", "F.leaky_relu")
def _leaky_relu(tr: Translator, input: Any, negative_slope: Any) -> Val:
    x = operand(tr, input, "leaky_relu")
    return tr.ew("where", tr.ew("gt", x, num(0.0)), x, tr.ew("mul", x, operand(tr, negative_slope, "slope")))


def elu(tr: Translator, x: Val, alpha: Any, scale: float = 1.0, inner: Any = None) -> Val:
    arg = tr.ew("div", x, operand(tr, inner, "alpha")) if inner is not None else x
    neg = tr.ew("mul", tr.ew("expm1", arg), operand(tr, alpha, "alpha"))
    out = tr.ew("where", tr.ew("gt", x, num(0.0)), x, neg)
    return tr.ew("mul", out, num(scale)) if scale != 1.0 else out


@lowering("input, alpha=1.0", "F.elu")
def _elu(tr: Translator, input: Any, alpha: Any) -> Val:
    return elu(tr, operand(tr, input, "elu"), alpha)


@lowering("input, alpha=1.0", "F.celu")
def _celu(tr: Translator, input: Any, alpha: Any) -> Val:
    return elu(tr, operand(tr, input, "celu"), alpha, inner=alpha)


@lowering("input", "F.selu")
def _selu(tr: Translator, input: Any) -> Val:
    return elu(tr, operand(tr, input, "selu"), 1.6732632423543772, scale=1.0507009873554805)


def hardsigmoid(tr: Translator, x: Val) -> Val:
    return clamp(tr, tr.ew("add", tr.ew("div", x, num(6.0)), num(0.5)), 0.0, 1.0)


@lowering("input", "F.hardsigmoid")
def _hardsigmoid(tr: Translator, input: Any) -> Val:
    return hardsigmoid(tr, operand(tr, input, "hardsigmoid"))


@lowering("input", "F.hardswish")
def _hardswish(tr: Translator, input: Any) -> Val:
    x = operand(tr, input, "hardswish")
    return tr.ew("mul", x, hardsigmoid(tr, x))


@lowering("input", "F.mish")
def _mish(tr: Translator, input: Any) -> Val:
    x = operand(tr, input, "mish")
    return tr.ew("mul", x, tr.ew("tanh", softplus(tr, x)))


@lowering("input", "F.logsigmoid")
def _logsigmoid(tr: Translator, input: Any) -> Val:
    return tr.ew("neg", softplus(tr, tr.ew("neg", operand(tr, input, "logsigmoid"))))


@lowering("input", "F.softsign")
def _softsign(tr: Translator, input: Any) -> Val:
    x = operand(tr, input, "softsign")
    return tr.ew("div", x, tr.ew("add", num(1.0), tr.ew("abs", x)))


@lowering("input", "F.tanhshrink")
def _tanhshrink(tr: Translator, input: Any) -> Val:
    x = operand(tr, input, "tanhshrink")
    return tr.ew("sub", x, tr.ew("tanh", x))


# ---------------------------------------------------------------------------------------------- conversions
def _to_dtype(dtype: torch.dtype) -> Callable[..., Any]:
    def lower(tr: Translator, input: Any) -> Val:
        return tr.convert(tr.tensor(input, "conversion"), dtype)

    return lower


for _name, _dtype in {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16,
                      "double": torch.float64, "int": torch.int32, "long": torch.int64, "bool": torch.bool}.items():
    lowering("input", f"Tensor.{_name}")(_to_dtype(_dtype))


@lowering("input, dtype=None", "Tensor.to")
def _to(tr: Translator, input: Any, dtype: Any) -> Val:
    target = py(tr, dtype, "dtype")
    if not isinstance(target, torch.dtype):
        tr.fail(None, "to() takes a dtype here", "Write x.to(torch.float16).")
    return tr.convert(tr.tensor(input, "to"), target)


@lowering("input, other", "Tensor.type_as")
def _type_as(tr: Translator, input: Any, other: Any) -> Val:
    o = tr.tensor(other, "type_as")
    assert o.meta is not None
    return tr.convert(tr.tensor(input, "type_as"), o.meta.dtype)


@lowering("input", "Tensor.contiguous", "Tensor.clone", "torch.clone")
def _identity(tr: Translator, input: Any) -> Val:
    return tr.tensor(input, "clone")


# ---------------------------------------------------------------------------------------------- numbers
def _fold_math(fn: Callable[..., float]) -> Callable[..., Any]:
    def lower(tr: Translator, input: Any) -> Val:
        x = py(tr, input, "a math function's argument")
        if not isinstance(x, int | float):
            tr.fail(None, "math functions take numbers")
        try:
            return num(fn(x))
        except (ArithmeticError, ValueError) as exc:
            tr.fail(None, f"cannot compute it: {exc}")

    return lower


for _name, _fn in {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "log10": math.log10,
                   "cos": math.cos, "sin": math.sin, "tan": math.tan, "tanh": math.tanh, "erf": math.erf,
                   "fabs": math.fabs, "ceil": math.ceil, "floor": math.floor}.items():
    lowering("input", f"math.{_name}")(_fold_math(_fn))


@lowering("input", "builtin.float")
def _float(tr: Translator, input: Any) -> Val:
    x = py(tr, input, "float()")
    if isinstance(x, str) and x.strip().lower() in ("inf", "-inf", "+inf", "nan", "infinity", "-infinity"):
        return num(float(x))
    if isinstance(x, int | float):
        return num(float(x))
    tr.fail(None, "float() takes a number or 'inf', '-inf', 'nan'")


@lowering("input", "builtin.int")
def _int(tr: Translator, input: Any) -> Val:
    x = py(tr, input, "int()")
    if isinstance(x, int | float) and math.isfinite(x):
        return num(int(x))
    tr.fail(None, "int() takes a finite number")


@lowering("input", "builtin.abs")
def _abs_builtin(tr: Translator, input: Any) -> Val:
    return tr.ew("abs", operand(tr, input, "abs"))


def _minmax(fn: Callable[..., Any]) -> Callable[..., Any]:
    def lower(tr: Translator, values: list[Any]) -> Val:
        items = [py(tr, v, "min()/max()") for v in values]
        if not items or not all(isinstance(v, int | float) for v in items):
            tr.fail(None, "builtin min()/max() take numbers", "Use torch.minimum/maximum on tensors.")
        return num(fn(items))

    return lower


lowering("*values", "builtin.min")(_minmax(min))
lowering("*values", "builtin.max")(_minmax(max))


# ---------------------------------------------------------------------------------------------- shapes
@lowering("input, dim=None", "Tensor.size")
def _size(tr: Translator, input: Any, dim: Any) -> Any:
    x = tr.tensor(input, "size")
    assert x.meta is not None
    shape = tuple(int(s) for s in x.meta.shape)
    d = py(tr, dim, "dim")
    if d is None:
        return Const(shape)
    if not isinstance(d, int) or not -len(shape) <= d < len(shape):
        tr.fail(None, f"size({d!r}) of a {len(shape)}-d tensor")
    return num(shape[d])


@lowering("input", "Tensor.dim")
def _dim(tr: Translator, input: Any) -> Val:
    x = tr.tensor(input, "dim")
    assert x.meta is not None
    return num(x.meta.dim())


@lowering("input", "Tensor.numel")
def _numel(tr: Translator, input: Any) -> Val:
    x = tr.tensor(input, "numel")
    assert x.meta is not None
    return num(x.meta.numel())


def _ints(tr: Translator, values: Any, what: str) -> tuple[int, ...]:
    items = values if isinstance(values, list | tuple) else [values]
    out = []
    for v in items:
        p = py(tr, v, what)
        for q in p if isinstance(p, tuple) else (p,):
            if not isinstance(q, int) or isinstance(q, bool):
                tr.fail(None, f"{what} must be integers")
            out.append(q)
    return tuple(out)


# views of an argument: (signature, names, the view given the integer arguments in order)
_VIEWS: dict[str, tuple[str, tuple[str, ...], Callable[[torch.Tensor, tuple[int, ...]], torch.Tensor]]] = {
    ".t()": ("input", ("Tensor.t", "torch.t"), lambda t, _: t.t()),
    "transpose": ("input, dim0, dim1", ("Tensor.transpose", "torch.transpose"), lambda t, d: t.transpose(*d)),
    "permute": ("input, *dims", ("Tensor.permute",), lambda t, d: t.permute(*d)),
    "torch.permute": ("input, dims", ("torch.permute",), lambda t, d: t.permute(*d)),
    "unsqueeze": ("input, dim", ("Tensor.unsqueeze", "torch.unsqueeze"), lambda t, d: t.unsqueeze(*d)),
    "reshape": ("input, *shape", ("Tensor.reshape", "Tensor.view"), lambda t, d: t.reshape(d)),
    "torch.reshape": ("input, shape", ("torch.reshape",), lambda t, d: t.reshape(d)),
    "flatten": ("input, start_dim=0, end_dim=-1", ("Tensor.flatten", "torch.flatten"), lambda t, d: t.flatten(*d)),
    "expand": ("input, *sizes", ("Tensor.expand",), lambda t, d: t.expand(*d)),
    "broadcast_to": ("input, size", ("torch.broadcast_to", "Tensor.broadcast_to"), lambda t, d: t.expand(*d)),
}


def _view(what: str, apply: Callable[[torch.Tensor, tuple[int, ...]], torch.Tensor]) -> Callable[..., Any]:
    def lower(tr: Translator, input: Any, **sizes: Any) -> Val:
        ints = _ints(tr, [v for vs in sizes.values() for v in (vs if isinstance(vs, list) else [vs])],
                     f"{what}'s arguments")
        return tr.view(tr.tensor(input, what), lambda t: apply(t, ints), what)

    return lower


for _what, (_signature, _keys, _apply) in _VIEWS.items():
    lowering(_signature, *_keys)(_view(_what, _apply))


@lowering("input, dim=None", "Tensor.squeeze", "torch.squeeze")
def _squeeze(tr: Translator, input: Any, dim: Any) -> Val:
    dims = None if py(tr, dim, "dim") is None else _ints(tr, [dim], "squeeze's dim")
    return tr.view(tr.tensor(input, "squeeze"), lambda t: t.squeeze(dims) if dims else t.squeeze(), "squeeze")


@lowering("input, other", "Tensor.expand_as")
def _expand_as(tr: Translator, input: Any, other: Any) -> Val:
    o = tr.tensor(other, "expand_as")
    assert o.meta is not None
    shape = tuple(int(s) for s in o.meta.shape)
    return tr.view(tr.tensor(input, "expand_as"), lambda t: t.expand(*shape), "expand_as")


# ---------------------------------------------------------------------------------------------- matmul
@lowering("input, other", "torch.matmul", "torch.mm", "Tensor.matmul", "Tensor.mm")
def _matmul(tr: Translator, input: Any, other: Any) -> Val:
    return tr.dot(tr.tensor(input, "matmul"), tr.tensor(other, "matmul"))


@lowering("input, weight, bias=None", "F.linear")
def _linear(tr: Translator, input: Any, weight: Any, bias: Any) -> Val:
    w = tr.view(tr.tensor(weight, "linear"), lambda t: t.t(), "the weight's transpose")
    out = tr.dot(tr.tensor(input, "linear"), w)
    return out if bias is None else tr.ew("add", out, operand(tr, bias, "bias"))


@lowering("input, mat1, mat2, beta=1, alpha=1", "torch.addmm")
def _addmm(tr: Translator, input: Any, mat1: Any, mat2: Any, beta: Any, alpha: Any) -> Val:
    if py(tr, beta, "beta") != 1 or py(tr, alpha, "alpha") != 1:
        tr.fail(None, "addmm with beta or alpha other than 1", "Write the scaling as ops: (x @ w) * a + b * c.")
    return tr.ew("add", tr.dot(tr.tensor(mat1, "addmm"), tr.tensor(mat2, "addmm")), operand(tr, input, "addmm"))


from tools.generate import rowwise  # noqa: E402,F401  (registers the row reductions and norms)


def supported_functions() -> str:
    """Every function generate_kernel fuses, as a caller writes it."""
    return describe(LOWERINGS)
