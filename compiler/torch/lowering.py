"""ATen ops (after AOTAutograd's decompositions) -> the fusion library's ops.

`convert(node)` says what one FX node computes in fusion terms, or None when the node is not
fusable (it then runs as the torch op it is). Views that only add or drop size-1 dimensions are
fusable as copies: the values they produce keep their order.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._decomp import core_aten_decompositions, get_decompositions

from ..fusion.ops import ELEMENTWISE, TL_DTYPE

__all__ = ["Lowered", "convert", "dtype_name", "decompositions"]

aten = torch.ops.aten
prims = torch.ops.prims


@dataclass(frozen=True)
class Lowered:
    """`name`(args) from fusion/ops.py; `reduce`: the node reduces its input's last dim."""

    name: str
    args: tuple[Any, ...]
    reduce: bool = False
    keepdim: bool = True
    view: bool = False
    over_rows: bool = False  # a reduction over every dim but the last (a bias's gradient), not over the last


def dtype_name(dt: torch.dtype) -> str | None:
    name = str(dt).removeprefix("torch.")
    return name if name in TL_DTYPE else None


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, fx.Node) else None


_SIMPLE = {
    aten.neg.default: "neg", aten.abs.default: "abs", aten.exp.default: "exp", aten.exp2.default: "exp2",
    aten.expm1.default: "expm1", aten.log.default: "log", aten.log2.default: "log2", aten.log1p.default: "log1p",
    aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.reciprocal.default: "reciprocal",
    aten.sin.default: "sin", aten.cos.default: "cos", aten.tanh.default: "tanh", aten.erf.default: "erf",
    aten.sigmoid.default: "sigmoid", aten.relu.default: "relu", aten.silu.default: "silu",
    aten.logical_not.default: "logical_not", aten.clone.default: "clone", aten.alias.default: "copy",
    aten.mul.Tensor: "mul", aten.mul.Scalar: "mul", aten.div.Tensor: "div", aten.div.Scalar: "div",
    aten.maximum.default: "maximum", aten.minimum.default: "minimum", aten.where.self: "where",
    aten.pow.Tensor_Tensor: "pow", aten.logical_and.default: "logical_and", aten.logical_or.default: "logical_or",
}
# prims that decompositions leave (var_mean, the norms): the same ops under other names
for _name in ("neg", "abs", "exp", "exp2", "expm1", "log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
              "cos", "tanh", "erf", "mul", "div", "maximum", "minimum", "gt", "lt", "ge", "le", "eq", "ne", "add",
              "sub", "where"):
    if hasattr(prims, _name):
        _SIMPLE[getattr(prims, _name).default] = _name
for _name in ("gt", "lt", "ge", "le", "eq", "ne"):
    for _overload in ("Tensor", "Scalar"):
        _SIMPLE[getattr(getattr(aten, _name), _overload)] = _name


def _add_sub(name: str) -> Callable[[fx.Node], Lowered | None]:
    def lower(node: fx.Node) -> Lowered | None:
        a, b = node.args[0], node.args[1]
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:  # a + alpha * b: two ops; not worth a table entry of its own
            return None
        return Lowered(name, (a, b))

    return lower


def _pow(node: fx.Node) -> Lowered | None:
    x, e = node.args[0], node.args[1]
    if e == 2:
        return Lowered("square", (x,))
    if e == 1:
        return Lowered("copy", (x,))
    if e == 0.5:
        return Lowered("sqrt", (x,))
    if e == -1:
        return Lowered("reciprocal", (x,))
    if not isinstance(e, (int, float)):
        return None
    return Lowered("pow", (x, float(e)))


def _gelu(node: fx.Node) -> Lowered | None:
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    return Lowered("gelu_tanh" if approx == "tanh" else "gelu", (node.args[0],))


def _clamp(node: fx.Node) -> Lowered | None:
    args = list(node.args) + [None] * 3
    x, lo, hi = args[0], node.kwargs.get("min", args[1]), node.kwargs.get("max", args[2])
    if lo is not None and hi is not None:
        return None  # two ops; clamp_min/clamp_max cover the decomposed forms
    if lo is not None:
        return Lowered("maximum", (x, lo))
    if hi is not None:
        return Lowered("minimum", (x, hi))
    return Lowered("copy", (x,))


def _last_dim(node: fx.Node, dims: Any) -> bool:
    val = _val(node.args[0])
    if val is None or val.dim() == 0:
        return False
    if isinstance(dims, int):
        dims = [dims]
    return dims is not None and len(dims) == 1 and dims[0] in (-1, val.dim() - 1)


def _leading_dims(node: fx.Node, dims: Any) -> bool:
    """`dims` are every dim of the operand but the last (at least one)."""
    val = _val(node.args[0])
    if val is None or val.dim() < 2 or dims is None:
        return False
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % val.dim() for d in dims) == list(range(val.dim() - 1))


def _reduction(name: str) -> Callable[[fx.Node], Lowered | None]:
    def lower(node: fx.Node) -> Lowered | None:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        if node.kwargs.get("dtype") is not None:
            return None
        if _last_dim(node, dims):
            return Lowered(name, (node.args[0],), reduce=True, keepdim=bool(keepdim))
        if _leading_dims(node, dims):
            return Lowered(name, (node.args[0],), reduce=True, keepdim=bool(keepdim), over_rows=True)
        return None

    return lower


def _var(node: fx.Node) -> Lowered | None:
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if not _last_dim(node, dims):
        return None
    correction = node.kwargs.get("correction", 1)
    return Lowered("var", (node.args[0], 1 if correction is None else correction), reduce=True,
                   keepdim=bool(node.kwargs.get("keepdim", False)))


def _prims_reduction(name: str) -> Callable[[fx.Node], Lowered | None]:
    def lower(node: fx.Node) -> Lowered | None:
        if set(node.kwargs) - {"output_dtype"} or node.kwargs.get("output_dtype") is not None:
            return None
        args = (node.args[0], node.args[2]) if name == "var" else (node.args[0],)
        if _last_dim(node, node.args[1]):
            return Lowered(name, args, reduce=True, keepdim=False)
        if name != "var" and _leading_dims(node, node.args[1]):
            return Lowered(name, args, reduce=True, keepdim=False, over_rows=True)
        return None

    return lower


def _broadcast_in_dim(node: fx.Node) -> Lowered | None:
    low = _view(node)  # adding size-1 dims only: a view
    return low if low is not None else Lowered("copy", (node.args[0],))


def _convert(node: fx.Node) -> Lowered | None:
    if node.target is aten._to_copy.default and not _same_place(node):
        return None  # a device or layout change is not ours
    return Lowered("convert", (node.args[0],))


def _same_place(node: fx.Node) -> bool:
    """A `_to_copy` that changes at most the dtype (AOTAutograd's upcasts in backward graphs carry
    `memory_format=contiguous_format`). A fused group's outputs are dense row-major tensors on its
    inputs' device; where the traced value was laid out otherwise (`preserve_format` of a strided
    input), the graph's views of it check the layout at run time (wrapper.py)."""
    src, out = _val(node.args[0]), _val(node)
    kw = node.kwargs
    if not isinstance(src, torch.Tensor) or not isinstance(out, torch.Tensor) or set(kw) - {
            "dtype", "memory_format", "layout", "device", "pin_memory"}:
        return False
    return (kw.get("memory_format") in (None, torch.preserve_format, torch.contiguous_format)
            and kw.get("layout") in (None, torch.strided) and not kw.get("pin_memory")
            and (kw.get("device") is None or torch.device(str(kw["device"])) == src.device))


def _view(node: fx.Node) -> Lowered | None:
    src, out = _val(node.args[0]), _val(node)
    if src is None or out is None:
        return None
    squeeze = [s for s in src.shape if s != 1], [s for s in out.shape if s != 1]
    if len(squeeze[0]) != len(squeeze[1]) or any(str(a) != str(b) for a, b in zip(*squeeze, strict=True)):
        return None
    return Lowered("copy", (node.args[0],), view=True)


def _expand(node: fx.Node) -> Lowered | None:
    return Lowered("copy", (node.args[0],))


_SPECIAL: dict[Any, Callable[[fx.Node], Lowered | None]] = {
    aten.add.Tensor: _add_sub("add"), aten.add.Scalar: _add_sub("add"),
    aten.sub.Tensor: _add_sub("sub"), aten.sub.Scalar: _add_sub("sub"),
    aten.pow.Tensor_Scalar: _pow, aten.gelu.default: _gelu,
    aten.clamp.default: _clamp, aten.clamp_min.default: lambda n: Lowered("maximum", (n.args[0], n.args[1])),
    aten.clamp_max.default: lambda n: Lowered("minimum", (n.args[0], n.args[1])),
    aten.sum.dim_IntList: _reduction("sum"), aten.amax.default: _reduction("amax"),
    aten.amin.default: _reduction("amin"), aten.mean.dim: _reduction("mean"), aten.var.correction: _var,
    prims.convert_element_type.default: _convert, aten._to_copy.default: _convert,
    aten.view.default: _view, aten._unsafe_view.default: _view, aten.reshape.default: _view,
    aten.unsqueeze.default: _view, aten.squeeze.dim: _view, aten.squeeze.dims: _view, aten.squeeze.default: _view,
    aten.expand.default: _expand,
    prims.sum.default: _prims_reduction("sum"), prims.amax.default: _prims_reduction("amax"),
    prims.amin.default: _prims_reduction("amin"), prims.var.default: _prims_reduction("var"),
    prims.broadcast_in_dim.default: _broadcast_in_dim,
}


def convert(node: fx.Node) -> Lowered | None:
    """What `node` computes in fusion terms, or None (not fusable)."""
    if node.op != "call_function":
        return None
    val = _val(node)
    if not isinstance(val, torch.Tensor) or dtype_name(val.dtype) is None or val.is_complex():
        return None
    for a in node.args:
        if isinstance(a, fx.Node):
            v = _val(a)
            if not isinstance(v, torch.Tensor) or dtype_name(v.dtype) is None:
                return None
            if v.device != val.device:  # a CPU scalar tensor beside CUDA ones: torch's job
                return None
        elif not isinstance(a, (bool, int, float, str, list, tuple, type(None))):
            return None
    if node.target in _SIMPLE:
        name = _SIMPLE[node.target]
        if node.target is aten.div.Tensor and node.kwargs.get("rounding_mode"):
            return None
        assert name in ELEMENTWISE
        return Lowered(name, tuple(node.args))
    special = _SPECIAL.get(node.target)
    return special(node) if special is not None else None


@functools.cache
def decompositions() -> Mapping[Any, Callable[..., Any]]:
    """AOTAutograd's decompositions: torch's core ATen set, and the composite ops whose parts fuse
    (softmax, layer norm and their backward) broken into them. Made once per process (making torch's
    table takes about 150 ms), read-only."""
    # Attention stays torch's fused op: its decomposition is slower, and with torch 2.13 on the CPU
    # the gradients through core ATen's decomposition of it are wrong (tests/torch/test_backend.py).
    table = {op: fn for op, fn in core_aten_decompositions().items() if "scaled_dot_product" not in str(op)}
    table.update(get_decompositions([
        aten._softmax, aten._log_softmax, aten._softmax_backward_data, aten._log_softmax_backward_data,
        aten.native_layer_norm, aten.native_layer_norm_backward, aten.gelu_backward, aten.silu_backward,
        aten.sigmoid_backward, aten.tanh_backward, aten.threshold_backward, aten.var_mean,
        aten.addcmul, aten.addcdiv, aten.lerp, aten.hardtanh, aten.leaky_relu, aten.elu, aten.softplus,
    ]))
    return types.MappingProxyType(table)
