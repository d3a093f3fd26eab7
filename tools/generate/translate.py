"""A validated reference program -> fusion ops: one visit method per construct of the reference
language, each refusing at its node what a fused kernel cannot compute.

Function calls go through the table of lowerings it is given (lowerings.LOWERINGS). Numbers known
here (literals, sizes, math on them) are folded; scalar arguments stay parameters of the kernel.
Each tensor op's result shape and dtype come from torch on the meta device (values.py); the group
is laid out from them by group.py.
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import torch

import compiler.language as tl
from compiler.frontend.closed import module_export
from compiler.fusion.ops import TL_DTYPE
from tools.errors import ToolInputError
from tools.generate.registry import Lowering
from tools.generate.values import Const, InputRef, OpRef, Pair, ParamRef, PreOp, Scalar, Val
from tools.reference import DTYPES, MATH_CONSTANTS, TORCH_CONSTANTS, dotted_name
from tools.reference_program import Program, Statement
from tools.specs import DTYPES as SPEC_DTYPES
from tools.specs import TensorSpec

__all__ = ["Translator", "MAX_OPS", "dtype_name"]

MAX_OPS = 256
_MAX_INT_BITS = 256
_F = torch.nn.functional

# fusion op -> the torch function with its semantics, applied to meta tensors for shapes and dtypes
TORCH_FN: dict[str, Callable[..., Any]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "neg": torch.neg, "abs": torch.abs,
    "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log2": torch.log2,
    "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "erf": torch.erf, "sigmoid": torch.sigmoid,
    "relu": torch.relu, "silu": _F.silu, "gelu": _F.gelu, "gelu_tanh": lambda x: _F.gelu(x, approximate="tanh"),
    "pow": torch.pow, "square": torch.square, "maximum": torch.maximum, "minimum": torch.minimum,
    "where": torch.where, "gt": torch.gt, "lt": torch.lt, "ge": torch.ge, "le": torch.le, "eq": torch.eq,
    "ne": torch.ne, "logical_not": torch.logical_not, "logical_and": torch.logical_and,
    "logical_or": torch.logical_or, "copy": lambda x: x.clone(),
}  # fmt: skip
# numbers folded here, as Python computes them (the reference evaluator does the same)
_FOLD: dict[str, Callable[..., Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv, "neg": operator.neg,
    "abs": abs, "exp": math.exp, "log": math.log, "log2": math.log2, "log1p": math.log1p, "expm1": math.expm1,
    "sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tanh": math.tanh, "erf": math.erf,
    "maximum": max, "minimum": min, "gt": operator.gt, "lt": operator.lt, "ge": operator.ge, "le": operator.le,
    "eq": operator.eq, "ne": operator.ne, "square": lambda a: a * a, "pow": operator.pow,
    "rsqrt": lambda a: 1.0 / math.sqrt(a), "reciprocal": lambda a: 1.0 / a, "exp2": lambda a: 2.0**a,
    "sigmoid": lambda a: 1.0 / (1.0 + math.exp(-a)), "relu": lambda a: max(a, 0), "copy": lambda a: a,
}  # fmt: skip
_BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
}
_CMPOPS: dict[type[ast.cmpop], str] = {
    ast.Gt: "gt", ast.Lt: "lt", ast.GtE: "ge", ast.LtE: "le", ast.Eq: "eq", ast.NotEq: "ne",
}
_NAMESPACES = {"torch": "torch", "torch.nn.functional": "F", "F": "F", "torch.special": "special",
               "torch.linalg": "linalg", "math": "math"}
Value = Val | Const | Pair


def dtype_name(dtype: torch.dtype) -> str | None:
    """The fusion library's name of a torch dtype, or None when its kernels cannot hold it."""
    name = str(dtype).removeprefix("torch.")
    return name if name in TL_DTYPE else None


class Translator:
    """Walks each statement of a program, building `ops` (values.PreOp) in order."""

    def __init__(self, args: Mapping[str, TensorSpec | Scalar], lowerings: Mapping[str, Lowering]) -> None:
        self.lowerings = lowerings  # function name -> lowering (lowerings.LOWERINGS)
        self.env: dict[str, Value] = {}
        self.roots: dict[str, torch.Tensor] = {}  # each tensor argument as the launch passes it
        for name, value in args.items():
            if isinstance(value, TensorSpec):
                meta = torch.empty(value.shape or [], dtype=SPEC_DTYPES[value.dtype].torch_dtype, device="meta")
                self.env[name] = Val(InputRef(name), meta, view=meta)
                self.roots[name] = meta
            else:
                self.env[name] = Val(ParamRef(name), None, value)
        self.ops: list[PreOp] = []
        self.uses: list[tuple[str, torch.Tensor, int]] = []  # (input, the view it is read through, op)
        self.stmt: Statement | None = None
        self.node: ast.AST | None = None

    # ------------------------------------------------------------------ driving
    def run(self, program: Program) -> dict[str, Val]:
        for stmt in program.statements:
            self.stmt = stmt
            self.env[stmt.target] = self.visit(stmt.tree)
        out: dict[str, Val] = {}
        for name in program.outputs:
            value = self.env[name]
            stmt = next(s for s in program.statements if s.target == name)
            self.stmt, self.node = stmt, stmt.tree
            if isinstance(value, Pair):
                value = value.values
            if not isinstance(value, Val) or not value.is_tensor:
                self.fail(stmt.tree, f"{name} is not a tensor", "An output must be a tensor computed from the args.")
            out[name] = value
        return out

    def fail(self, node: ast.AST | None, what: str, hint: str = "") -> NoReturn:
        node = node if node is not None else self.node
        stmt = self.stmt
        label = stmt.label if stmt else "expression"
        col = getattr(node, "col_offset", None)
        lines = [f"{label}: {what}" + (f" (column {col + 1})" if col is not None else "")]
        if stmt is not None:
            lines.append(f"  {stmt.text}")
            if col is not None:
                lines.append("  " + " " * col + "^")
        if hint:
            lines.append(hint)
        raise ToolInputError("\n".join(lines))

    def visit(self, node: ast.AST) -> Value:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.fail(node, f"{type(node).__name__} cannot be part of a generated kernel")
        outer, self.node = self.node, node
        try:
            return method(node)  # type: ignore[no-any-return]
        finally:
            self.node = outer

    # ------------------------------------------------------------------ building ops
    def source(self, node: ast.AST | None) -> str:
        label = self.stmt.label if self.stmt else "expression"
        try:
            text = ast.unparse(node) if isinstance(node, ast.AST) else ""
        except (RecursionError, ValueError):
            text = ""
        return f"`{text[:60]}` ({label})" if text else label

    def add(self, op: PreOp, operands: tuple[Val, ...]) -> int:
        if len(self.ops) >= MAX_OPS:
            self.fail(self.node, f"the kernel would have more than {MAX_OPS} operations", "Generate smaller parts.")
        op.source = op.source or self.source(self.node)
        self.ops.append(op)
        index = len(self.ops) - 1
        for v in operands:
            if isinstance(v.operand, InputRef):
                assert v.view is not None
                self.uses.append((v.operand.name, v.view, index))
        return index

    def meta_of(self, name: str, vals: tuple[Val, ...], extra: tuple[Any, ...] = (), **kwargs: Any) -> torch.Tensor:
        try:
            result = TORCH_FN[name](*[v.probe() for v in vals], *extra, **kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.fail(self.node, f"{name} does not apply here: {message}")
        return result  # type: ignore[no-any-return]

    def ew(self, name: str, *vals: Val, extra: tuple[Scalar, ...] = ()) -> Val:
        """Elementwise op `name` of ops.py over tensors and numbers."""
        tensors = [v for v in vals if v.is_tensor]
        if not tensors:
            return self.scalar_op(name, vals, extra)
        meta = self.meta_of(name, vals, extra)
        dtype = self.dtype_of(meta)
        rows = [v for v in tensors if v.row]
        row = bool(rows) and all(v.row or isinstance(v.operand, InputRef) for v in tensors) and any(
            tuple(meta.shape) == tuple(v.meta.shape) for v in rows if v.meta is not None)
        if not row:
            for v in rows:
                assert v.meta is not None
                if v.meta.numel() != 1 and (v.meta.dim() != meta.dim() or v.meta.shape[-1] != 1):
                    self.fail(self.node, f"a per-row value of shape {list(v.meta.shape)} meets full values",
                              "Torch lines its last dim up with the last dim of the full values: compute it with "
                              "keepdim=True (or add [..., None]).")
        index = self.add(PreOp(name, tuple(v.operand for v in vals) + extra, meta, dtype, row=row), vals)
        return Val(OpRef(index), meta, row=row)

    def scalar_op(self, name: str, vals: tuple[Val, ...], extra: tuple[Scalar, ...]) -> Val:
        """An op on numbers: folded when all are known here, else computed in the kernel (a scalar
        argument is a parameter)."""
        numbers = [v.number for v in vals]
        fold = _FOLD.get(name)
        if fold is None:
            self.fail(self.node, f"{name} of a number is not supported here", "Apply it to a tensor.")
        try:
            value = fold(*numbers, *extra)
        except (ArithmeticError, ValueError, TypeError) as exc:
            self.fail(self.node, f"cannot compute {name} of {numbers}: {exc}")
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INT_BITS:
            self.fail(self.node, "integer too large")
        if all(not isinstance(v.operand, OpRef | ParamRef) for v in vals):
            return Val(value, None, value)
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
        index = self.add(PreOp(name, tuple(v.operand for v in vals) + extra, None, dtype), vals)
        return Val(OpRef(index), None, value)

    def dtype_of(self, meta: torch.Tensor) -> str:
        name = dtype_name(meta.dtype)
        if name is None:
            self.fail(self.node, f"values of dtype {str(meta.dtype).removeprefix('torch.')} cannot be computed "
                      "in a generated kernel", f"Convert them first (.float()); kernels hold {', '.join(TL_DTYPE)}.")
        return name

    def reduce(self, name: str, x: Val, dim: Any, keepdim: Any, extra: tuple[Scalar, ...] = ()) -> Val:
        """A reduction over the last dim (sum, mean, amax, amin, var with its correction)."""
        x = self.tensor(x, name)
        assert x.meta is not None
        if x.row:
            self.fail(self.node, f"{name} of a value that is already one per row",
                      "A generated kernel reduces each row once per value; reduce the full values instead.")
        self.check_last_dim(x, dim)
        keep = self.flag(keepdim, "keepdim")
        fn: dict[str, Callable[..., torch.Tensor]] = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax,
                                                       "amin": torch.amin}
        try:
            if name == "var":
                meta = torch.var(x.meta, dim=-1, correction=extra[0], keepdim=keep)
            else:
                meta = fn[name](x.meta, dim=-1, keepdim=keep)
        except (RuntimeError, TypeError, ValueError) as exc:
            self.fail(self.node, f"{name} does not apply here: {str(exc).strip().splitlines()[0]}")
        index = self.add(PreOp(name, (x.operand, *extra), meta, self.dtype_of(meta), row=True, reduce=True), (x,))
        return Val(OpRef(index), meta, row=True)

    def convert(self, x: Val, dtype: torch.dtype) -> Val:
        x = self.tensor(x, "conversion")
        assert x.meta is not None
        if x.meta.dtype == dtype:
            return x
        meta = x.meta.to(dtype)
        index = self.add(PreOp("convert", (x.operand,), meta, self.dtype_of(meta), row=x.row), (x,))
        return Val(OpRef(index), meta, row=x.row)

    def dot(self, a: Val, b: Val) -> Val:
        """The matrix product of two arguments (each possibly through a view such as .t())."""
        for v, side in ((a, "left"), (b, "right")):
            if not isinstance(v.operand, InputRef):
                self.fail(self.node, f"the {side} operand of a matmul must be an argument (or its .t())",
                          "Generated matmuls fuse the work after the product (an epilogue), not before it; "
                          "compute the operand in a kernel of its own.")
        assert a.meta is not None and b.meta is not None
        if a.meta.dim() < 2 or b.meta.dim() != 2:
            self.fail(self.node, f"matmul of shapes {list(a.meta.shape)} and {list(b.meta.shape)}",
                      "Generated matmuls take a (..., K) @ (K, N) product: the left operand 2-D or more, the right "
                      "2-D.")
        if not (a.meta.dtype.is_floating_point and b.meta.dtype == a.meta.dtype):
            self.fail(self.node, f"matmul of {a.meta.dtype} and {b.meta.dtype}",
                      "Both operands must have the same float dtype.")
        try:
            meta = torch.matmul(a.meta, b.meta)
        except RuntimeError as exc:
            self.fail(self.node, f"matmul does not apply: {str(exc).strip().splitlines()[0]}")
        index = self.add(PreOp("dot", (a.operand, b.operand), meta, self.dtype_of(meta)), (a, b))
        return Val(OpRef(index), meta)

    def view(self, x: Val, fn: Callable[[torch.Tensor], torch.Tensor], what: str) -> Val:
        """x through a view (transpose, reshape, a new size-1 dim): an argument is read through it;
        a value that is one per row may gain or lose size-1 dims; other computed values cannot."""
        x = self.tensor(x, what)
        assert x.meta is not None
        if isinstance(x.operand, InputRef):
            assert x.view is not None
            try:
                view = fn(x.view)
            except (RuntimeError, TypeError, ValueError, IndexError) as exc:
                self.fail(self.node, f"{what} does not apply: {str(exc).strip().splitlines()[0]}")
            root = self.roots[x.operand.name]
            if view is not root and not (view._is_view() and view._base is root):
                self.fail(self.node, f"{what} of {x.operand.name} here makes a copy (the view's elements do not lie "
                          "in memory as strides can say)",
                          "Pass the argument in the shape you need, or view it so that strides describe it.")
            return Val(x.operand, view if x.meta.dtype == x.view.dtype else view.to(x.meta.dtype), row=x.row,
                       view=view)
        try:
            meta = fn(x.meta)
        except (RuntimeError, TypeError, ValueError, IndexError) as exc:
            self.fail(self.node, f"{what} does not apply: {str(exc).strip().splitlines()[0]}")
        if x.row and [s for s in meta.shape if s != 1] == [s for s in x.meta.shape if s != 1]:
            return Val(x.operand, meta, row=True)
        self.fail(self.node, f"{what} of a computed value",
                  "A generated kernel reads arguments through views (.t(), .reshape(), [:, None]) and adds size-1 "
                  "dims to per-row values; reshape or transpose other values in a kernel of their own.")

    def as_result(self, v: Val, meta: torch.Tensor) -> Val:
        """v (computed in float32 for a 16-bit float input) as torch's result `meta` says it is."""
        assert v.meta is not None
        if tuple(v.meta.shape) != tuple(meta.shape):
            self.fail(self.node, f"internal shape mismatch: {list(v.meta.shape)} vs {list(meta.shape)}")
        if v.meta.dtype == meta.dtype:
            return Val(v.operand, meta, row=v.row, view=v.view)
        last = len(self.ops) - 1
        op = self.ops[last] if self.ops else None
        if (op is not None and op.meta is not None and v.operand == OpRef(last) and v.meta.dtype == torch.float32
                and meta.dtype in (torch.float16, torch.bfloat16)):
            op.meta, op.dtype = op.meta.to(meta.dtype), self.dtype_of(meta)  # rounded where it is stored
            return Val(v.operand, meta, row=v.row)
        return self.convert(v, meta.dtype)

    # ------------------------------------------------------------------ argument helpers
    def tensor(self, v: Value, what: str) -> Val:
        if isinstance(v, Pair):
            self.fail(self.node, f"{what} of torch.max/min's (values, indices)", "Use .values.")
        if not isinstance(v, Val) or not v.is_tensor:
            self.fail(self.node, f"{what} needs a tensor")
        return v

    def number(self, v: Value | None, what: str) -> Scalar:
        """A number known here (a literal, a size, a scalar argument's value)."""
        if isinstance(v, Val) and not v.is_tensor and v.number is not None:
            return v.number
        self.fail(self.node, f"{what} must be a number known before the launch")

    def flag(self, v: Any, what: str) -> bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, Val) and isinstance(v.number, bool | int) and not v.is_tensor:
            return bool(v.number)
        self.fail(self.node, f"{what} must be True or False")

    def operand(self, v: Value, what: str) -> Val:
        """A tensor or a number."""
        if isinstance(v, Val):
            return v
        kind = type(v.value if isinstance(v, Const) else v).__name__
        self.fail(self.node, f"{what}: expected a tensor or a number, got {kind}")

    def check_last_dim(self, x: Val, dim: Any) -> None:
        assert x.meta is not None
        d = dim.value if isinstance(dim, Const) else dim.number if isinstance(dim, Val) and not dim.is_tensor else dim
        if isinstance(d, tuple | list) and len(d) == 1:
            d = d[0]
        rank = x.meta.dim()
        if not isinstance(d, int) or isinstance(d, bool) or rank == 0 or d not in (-1, rank - 1):
            instead = ("; for all elements reduce a flattened argument, e.g. x.reshape(1, -1).sum(-1)" if d is None
                       else "; for dim 0 of a 2-D argument reduce its transpose, e.g. torch.softmax(x.t(), dim=-1) "
                       "(the result is transposed too)" if d in (0, -2) and rank == 2 else "")
            self.fail(self.node, f"reduces over dim {d!r}",
                      f"Generated kernels reduce over the last dim only (dim=-1), one row per reduction{instead}.")

    # ------------------------------------------------------------------ constructs
    def visit_Name(self, node: ast.Name) -> Value:
        value = self.env.get(node.id)
        if value is None:
            self.fail(node, f"unknown name {node.id!r}")
        return value

    def visit_Constant(self, node: ast.Constant) -> Value:
        if isinstance(node.value, bool | int | float):
            return Val(node.value, None, node.value)
        return Const(node.value)

    def _sequence(self, node: ast.Tuple | ast.List) -> Value:
        items: list[Any] = []
        for elt in node.elts:
            v = self.visit(elt)
            if isinstance(v, Val) and not v.is_tensor:
                items.append(v.number)
            elif isinstance(v, Const):
                items.append(v.value)
            else:
                self.fail(elt, "a tuple or list may hold numbers only here")
        return Const(tuple(items))

    visit_Tuple = _sequence
    visit_List = _sequence

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.operand(self.visit(node.operand), "unary operator")
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            return self.ew("neg", v)
        if isinstance(node.op, ast.Invert) and v.is_tensor and v.meta is not None and v.meta.dtype == torch.bool:
            return self.ew("logical_not", v)
        self.fail(node, "this unary operator cannot be part of a generated kernel", "Use -x, or ~mask on booleans.")

    def visit_BinOp(self, node: ast.BinOp) -> Value:
        left = self.operand(self.visit(node.left), "operator")
        right = self.operand(self.visit(node.right), "operator")
        if isinstance(node.op, ast.MatMult):
            return self.dot(self.tensor(left, "@"), self.tensor(right, "@"))
        name = _BINOPS.get(type(node.op))
        if name is None:
            self.fail(node, f"operator {type(node.op).__name__} cannot be part of a generated kernel",
                      "Supported: + - * / ** @ and comparisons.")
        if name == "pow":
            return self.power(left, right)
        if not left.is_tensor and not right.is_tensor:
            self._check_int(node, name, left.number, right.number)
        return self.ew(name, left, right)

    def power(self, base: Val, exponent: Val) -> Val:
        if not base.is_tensor and not exponent.is_tensor:
            self._check_int(self.node, "pow", base.number, exponent.number)
            return self.ew("pow", base, exponent)
        if base.is_tensor and not exponent.is_tensor and not isinstance(exponent.operand, OpRef | ParamRef):
            e = exponent.number
            assert e is not None
            special = {2: "square", 0.5: "sqrt", -1: "reciprocal", -0.5: "rsqrt", 1: "copy"}.get(float(e))
            if special is not None:
                return self.ew(special, base)
            return self.ew("pow", base, Val(float(e), None, float(e)))
        return self.ew("pow", base, exponent)

    def _check_int(self, node: ast.AST | None, name: str, a: Any, b: Any) -> None:
        if not (isinstance(a, int) and isinstance(b, int)):
            return
        bits = max(abs(a), 1).bit_length()
        if name == "pow" and b > 0 and abs(a) > 1 and bits * b > _MAX_INT_BITS:
            self.fail(node, "integer power too large")

    def visit_Compare(self, node: ast.Compare) -> Value:
        if len(node.ops) != 1:
            self.fail(node, "chained comparisons are not supported", "Write (a < b) & (b < c).")
        name = _CMPOPS[type(node.ops[0])]
        left = self.operand(self.visit(node.left), "comparison")
        right = self.operand(self.visit(node.comparators[0]), "comparison")
        return self.ew(name, left, right)

    def visit_Attribute(self, node: ast.Attribute) -> Value:
        dotted = dotted_name(node)
        root = dotted.split(".")[0] if dotted else None
        if dotted and root in ("torch", "math") and root not in self.env:
            namespace, _, name = dotted.rpartition(".")
            if namespace == "torch" and name in DTYPES:
                return Const(DTYPES[name])
            if namespace == "torch" and name in TORCH_CONSTANTS:
                return Val(TORCH_CONSTANTS[name], None, TORCH_CONSTANTS[name])
            if namespace == "math" and name in MATH_CONSTANTS:
                return Val(MATH_CONSTANTS[name], None, MATH_CONSTANTS[name])
            self.fail(node, f"{dotted} is not a value", "Call it, or use a dtype such as torch.float16.")
        value = self.visit(node.value)
        if isinstance(value, Pair):
            if node.attr == "values":
                return value.values
            self.fail(node, f".{node.attr} of torch.max/min is not supported", "Use .values (indices are not).")
        x = self.tensor(value, f".{node.attr}")
        assert x.meta is not None
        if node.attr == "shape":
            return Const(tuple(int(s) for s in x.meta.shape))
        if node.attr == "dtype":
            return Const(x.meta.dtype)
        if node.attr == "ndim":
            return Val(x.meta.dim(), None, x.meta.dim())
        if node.attr == "T":
            return self.view(x, lambda t: t.permute(*reversed(range(t.dim()))), ".T")
        if node.attr == "mT":
            return self.view(x, lambda t: t.transpose(-2, -1), ".mT")
        self.fail(node, f"attribute {node.attr!r} cannot be part of a generated kernel")

    def visit_Subscript(self, node: ast.Subscript) -> Value:
        value = self.visit(node.value)
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(value, Val) and value.is_tensor and all(
                isinstance(e, ast.Slice) or (isinstance(e, ast.Constant) and e.value in (None, Ellipsis))
                for e in elts):
            return self._slices(node, value)
        index = self.visit(node.slice)
        key = index.value if isinstance(index, Const) else index.number if isinstance(index, Val) else None
        if isinstance(value, Const) and isinstance(value.value, tuple) and isinstance(key, int):
            try:
                item = value.value[key]
            except IndexError:
                self.fail(node, f"index {key} is out of range for {value.value}")
            return Val(item, None, item) if isinstance(item, int | float) else Const(item)
        if isinstance(value, Pair) and key == 0:
            return value.values
        self.fail(node, "this subscript cannot be part of a generated kernel",
                  "Allowed: x.shape[i], x[..., None], x[:, None] (new size-1 dims) and full slices.")

    def _slices(self, node: ast.Subscript, value: Value) -> Value:
        """x[:, None] and the like: full slices and new dims only (a kernel reads whole arguments)."""
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        parts: list[Any] = []
        for e in elts:
            if isinstance(e, ast.Slice):
                if e.lower or e.upper or e.step:
                    self.fail(e, "partial slices cannot be part of a generated kernel",
                              "Pass the part you need as its own argument; full slices (:) and None are allowed.")
                parts.append(slice(None))
            elif isinstance(e, ast.Constant) and e.value in (None, Ellipsis):
                parts.append(e.value)
            else:
                self.fail(e, "only :, ... and None can index a tensor here")
        x = self.tensor(value, "indexing")
        return self.view(x, lambda t: t[tuple(parts)], "indexing")

    def visit_Call(self, node: ast.Call) -> Value:
        func = node.func
        args: list[Value] = []
        if isinstance(func, ast.Name):
            key = f"builtin.{func.id}"
        elif isinstance(func, ast.Attribute):
            dotted = dotted_name(func)
            namespace = dotted.rpartition(".")[0] if dotted else ""
            if dotted and dotted.split(".")[0] not in self.env and namespace in _NAMESPACES:
                key = f"{_NAMESPACES[namespace]}.{func.attr}"
            else:
                args.append(self.visit(func.value))  # the receiver of a method, its first argument
                key = f"Tensor.{func.attr}"
        else:
            self.fail(node, "only named functions and tensor methods can be called")
        args += [self.visit(a) for a in node.args]
        kwargs = {kw.arg: self.visit(kw.value) for kw in node.keywords if kw.arg is not None}
        lowering = self.lowerings.get(key)
        if lowering is None:
            self.fail(func, f"{key.removeprefix('builtin.').replace('Tensor.', 'tensor method ')} cannot be fused "
                      "into a generated kernel", _by_hand(key) + _nearest(key, self.lowerings))
        return lowering(self, args, kwargs)


def _nearest(key: str, lowerings: Mapping[str, Any]) -> str:
    """The fusable functions whose names come closest to ``key`` (the description lists them all)."""
    name = key.rsplit(".", 1)[-1]
    by_name: dict[str, list[str]] = {}
    for k in lowerings:
        by_name.setdefault(k.rsplit(".", 1)[-1], []).append(k.replace("Tensor.", "tensor method ."))
    close = [w for n in difflib.get_close_matches(name, list(by_name), n=4, cutoff=0.6) for w in by_name[n]]
    near = f"Fusable functions with close names: {', '.join(close)}. " if close else ""
    return near + "generate_kernel's description lists every function it fuses."


def _by_hand(key: str) -> str:
    """What to do instead of generating: write the kernel (naming the tl op of the same name, if any)."""
    name = key.rsplit(".", 1)[-1]
    op = f" (the language has tl.{name})" if module_export(tl, name)[0] else ""
    return (f"Write this kernel by hand{op}: compile_kernel or launch_kernel with source, and this expression over "
            "the kernel's parameter names as reference={output: expression} checks it. ")
