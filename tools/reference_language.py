"""The reference language: what a reference, baseline or generate_kernel expression may use, and
its parser and validator (tools/reference.py evaluates what passes).

An expression such as ``torch.softmax(x, dim=-1)`` or ``(x_ptr + y_ptr).half()`` is parsed with
:mod:`ast` and checked node by node against the allow-lists here: the launch's argument names,
``torch``, ``F`` (``torch.nn.functional``) and ``math``; literals; operators, subscripts and
slices; the functions of :data:`NAMESPACES`, a few builtins, the tensor methods of
:data:`TENSOR_METHODS` and properties of :data:`TENSOR_PROPERTIES`, dtypes such as
``torch.float16``. Everything else is refused with the column and what to write instead.

Nothing here imports torch: the server process validates requests with this module, and only
the workers evaluate (tests/tools/test_reference.py checks that every listed function and dtype
exists in the installed torch).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, NoReturn

from tools.errors import ToolInputError


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


TORCH_FUNCTIONS = _words(
    """
    abs absolute acos add addcdiv addcmul addmm all allclose amax amin any arange argmax argmin
    argsort asin atan atan2 baddbmm bitwise_and bitwise_not bitwise_or bitwise_xor bmm
    broadcast_to bucketize cat ceil chunk clamp clip clone concat cos cosh count_nonzero cumprod
    cumsum diag diagonal diff div divide dot einsum eq erf erfc exp exp2 expm1 eye flatten flip
    float_power floor floor_divide fmod full full_like gather ge gt isclose isfinite isinf isnan
    kron le lerp linspace log log10 log1p log2 log_softmax logaddexp logical_and logical_not
    logical_or logical_xor logsumexp lt matmul max maximum mean median min minimum mm mul
    multiply nan_to_num narrow ne neg negative norm ones ones_like outer permute pow prod
    reciprocal relu remainder repeat_interleave reshape roll round rsqrt searchsorted sigmoid
    sign sin sinh softmax sort sqrt square squeeze stack std sub subtract sum t tan tanh
    tensordot tile topk transpose tril triu trunc unsqueeze var where zeros zeros_like
    """
)
FUNCTIONAL = _words(
    """
    celu cosine_similarity elu embedding gelu glu group_norm hardsigmoid hardswish hardtanh
    layer_norm leaky_relu linear log_softmax logsigmoid mish normalize pad relu relu6
    rms_norm scaled_dot_product_attention selu sigmoid silu softmax softmin softplus softsign
    tanh tanhshrink conv1d conv2d mse_loss cross_entropy
    """
)
SPECIAL = _words("erf erfc erfinv expit exp2 expm1 log1p logit logsumexp ndtr sinc softmax")
LINALG = _words("matmul norm vector_norm matrix_norm vecdot")
MATH = _words("sqrt exp log log2 log10 cos sin tan tanh ceil floor prod erf fabs")
TORCH_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}
MATH_CONSTANTS: dict[str, float] = {**TORCH_CONSTANTS, "tau": math.tau}

TENSOR_METHODS = _words(
    """
    abs add all amax amin any argmax argmin argsort bfloat16 bitwise_and bitwise_not bitwise_or
    bitwise_xor bmm bool broadcast_to ceil chunk clamp clip clone contiguous cos cumprod cumsum
    diag diagonal dim div double eq erf exp exp2 expand expand_as expm1 flatten flip float floor
    fmod ge gather gt half int isfinite isinf isnan le lerp log log10 log1p log2 log_softmax
    logical_and logical_not logical_or logsumexp long lt masked_fill matmul max maximum mean min
    minimum mm mul narrow ne neg nan_to_num norm numel outer permute pow prod reciprocal relu
    remainder repeat repeat_interleave reshape reshape_as roll round rsqrt sigmoid sign sin size
    softmax sort split sqrt square squeeze std sub sum t tanh tile to topk transpose tril triu
    trunc type_as unflatten unsqueeze var view view_as where
    """
)
TENSOR_PROPERTIES = frozenset({"T", "mT", "shape", "dtype", "ndim"})
RESULT_FIELDS = frozenset({"values", "indices"})

# the dtypes an expression may name (torch.float16, ...); tools/reference.py maps them to torch's
DTYPE_NAMES = _words(
    "float16 float32 float64 bfloat16 half float double int8 int16 int32 int64 uint8 "
    "short int long bool float8_e4m3fn float8_e5m2 complex64"
)

BUILTINS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "min": min,
    "max": max,
    "float": float,
    "int": int,
    "round": round,
    "len": len,
}

DEFAULT_MAX_ELEMENTS = 1 << 27
DEFAULT_MAX_BYTES = 1 << 30

NAMESPACES: dict[str, frozenset[str]] = {
    "torch": TORCH_FUNCTIONS,
    "torch.nn.functional": FUNCTIONAL,
    "F": FUNCTIONAL,
    "torch.special": SPECIAL,
    "torch.linalg": LINALG,
    "math": MATH,
}
ROOTS = frozenset({"torch", "F", "math"})

BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.MatMult: operator.matmul,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
UNARYOPS: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
CMPOPS: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
MAX_INT_BITS = 256
_PRIVATE = "Private and dunder attributes are never accessible."
_MAX_STRING = 64

_REFUSED_NODES: dict[type[ast.AST], str] = {
    ast.Lambda: "lambda is not supported; write the computation inline",
    ast.ListComp: "comprehensions are not supported; use tensor operations",
    ast.SetComp: "comprehensions are not supported; use tensor operations",
    ast.DictComp: "comprehensions are not supported; use tensor operations",
    ast.GeneratorExp: "generator expressions are not supported; use tensor operations",
    ast.BoolOp: "`and`/`or` are not supported on tensors; use `&`, `|` or torch.logical_and/or",
    ast.IfExp: "`a if c else b` is not supported; use torch.where(c, a, b)",
    ast.NamedExpr: "`:=` is not supported",
    ast.Await: "`await` is not supported",
    ast.JoinedStr: "f-strings are not supported",
    ast.Dict: "dict literals are not supported",
    ast.Set: "set literals are not supported",
    ast.Starred: "`*` unpacking is not supported; pass arguments one by one",
    ast.Yield: "`yield` is not supported",
}


def reference_language() -> str:
    """What a reference or baseline expression may use, every allowed name listed (for tool descriptions)."""
    listed = [("torch.", TORCH_FUNCTIONS), ("F. (torch.nn.functional.)", FUNCTIONAL), ("torch.special.", SPECIAL),
              ("torch.linalg.", LINALG), ("math.", MATH)]
    lines = [
        "Reference language: one Python expression over the launch's argument names (their values before the "
        "launch), evaluated by a whitelisting interpreter, never as Python. Numbers, True/False/None, short "
        "strings, tuples and lists; + - * / // % ** @ & | ^ ~ << >> and comparisons; subscripts and slices; "
        "keyword arguments (not out=). Constants: torch.pi/e/inf/nan, math.pi/e/inf/nan/tau; dtypes torch."
        + "/".join(sorted(DTYPE_NAMES)) + ".",
    ]
    lines += [f"{prefix} functions: {' '.join(sorted(names))}." for prefix, names in listed]
    lines.append(f"Builtins: {' '.join(sorted(BUILTINS))}.")
    lines.append(f"Tensor methods (x.sum(dim=-1), ...): {' '.join(sorted(TENSOR_METHODS))}.")
    lines.append(f"Tensor properties: {' '.join(sorted(TENSOR_PROPERTIES))}; results' .values/.indices.")
    lines.append("Not allowed: imports, other attributes, names starting with _, lambdas, comprehensions, "
                 "in-place methods (add_), `and`/`or`/`if`-expressions (use & | torch.where).")
    return "\n".join(lines)


# Refused functions whose result's size depends on the data (sizes are known before anything is
# allocated), with a fixed-size way to write the same check.
_INSTEAD = {
    "bincount": "For counts per value use a fixed number of bins n: (x[:, None] == torch.arange(n)).sum(0). ",
    "histc": "For a histogram use a fixed number of bins n: (bin_index[:, None] == torch.arange(n)).sum(0). ",
    "unique": "Values depend on the data; compare counts per value: (x[:, None] == torch.arange(n)).sum(0). ",
    "nonzero": "Use a mask of the output's shape instead: x != 0, or torch.where(x != 0, ..., ...). ",
    "masked_select": "Use torch.where(mask, x, 0) (same shape) instead. ",
}


def _hint_names(names: Collection[str]) -> str:
    shown = sorted(names)
    return ", ".join(shown) if shown else "(none)"


@dataclass(frozen=True)
class Reference:
    """A parsed and validated expression, ready to evaluate against tensors."""

    expression: str
    tree: ast.Expression
    label: str
    names_used: frozenset[str]


def fail_at(expression: str, label: str, node: ast.AST | None, what: str, hint: str = "") -> NoReturn:
    col = getattr(node, "col_offset", None)
    if isinstance(node, ast.Attribute) and node.end_col_offset is not None:
        col = node.end_col_offset - len(node.attr)  # point at the attribute's name, not its receiver
    # ast columns are UTF-8 byte offsets; expressions are almost always ASCII.
    where = f" (column {col + 1})" if col is not None else ""
    lines = [f"{label}: {what}{where}", f"  {expression}"]
    if col is not None:
        lines.append("  " + " " * col + "^")
    if hint:
        lines.append(hint)
    raise ToolInputError("\n".join(lines))


def dotted_name(node: ast.AST) -> str | None:
    """``torch.nn.functional.softmax`` -> "torch.nn.functional.softmax"; None if not a name chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def split_namespace(dotted: str) -> tuple[str, str] | None:
    namespace, _, member = dotted.rpartition(".")
    return (namespace, member) if namespace else None


class _Validator(ast.NodeVisitor):
    """Checks the shape of an expression before any tensor exists: nodes, names, attributes."""

    def __init__(self, expression: str, label: str, names: Collection[str]) -> None:
        self.expression = expression
        self.label = label
        self.names = frozenset(names)
        self.used: set[str] = set()

    def fail(self, node: ast.AST | None, what: str, hint: str = "") -> NoReturn:
        fail_at(self.expression, self.label, node, what, hint)

    def generic_visit(self, node: ast.AST) -> None:
        refused = _REFUSED_NODES.get(type(node))
        if refused is not None:
            self.fail(node, refused)
        allowed = (
            ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Subscript, ast.Slice,
            ast.Tuple, ast.List, ast.Load, ast.operator, ast.unaryop, ast.cmpop, ast.keyword,
        )  # fmt: skip
        if not isinstance(node, allowed):
            self.fail(node, f"{type(node).__name__} is not supported in a reference expression")
        super().generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self.fail(node, "`not` is not supported on tensors", "Use `~mask` or torch.logical_not(mask).")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) != 1:
            self.fail(node, "chained comparisons are not supported", "Write (a < b) & (b < c).")
        if type(node.ops[0]) not in CMPOPS:
            self.fail(node, "only ==, !=, <, <=, >, >= comparisons are supported")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool) or value is None or value is Ellipsis or isinstance(value, float):
            return
        if isinstance(value, int):
            if value.bit_length() > MAX_INT_BITS:
                self.fail(node, "integer literal too large")
            return
        if isinstance(value, str):
            if len(value) > _MAX_STRING:
                self.fail(node, f"string literal longer than {_MAX_STRING} characters")
            return
        self.fail(node, f"{type(value).__name__} literals are not supported")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__"):
            self.fail(node, f"name {node.id!r} is not allowed", "Dunder names are never accessible.")
        if node.id in self.names:
            self.used.add(node.id)
            return
        if node.id in ROOTS:
            self.fail(
                node,
                f"{node.id!r} cannot be used on its own",
                f"Use a member, e.g. {node.id}.exp(x)." if node.id != "math" else "Use e.g. math.sqrt(2).",
            )
        if node.id in BUILTINS:
            self.fail(node, f"builtin {node.id!r} can only be called")
        self.fail(
            node,
            f"unknown name {node.id!r}",
            f"Names available: the launch's arguments ({_hint_names(self.names)}), "
            "torch, F (torch.nn.functional), math.",
        )

    def _namespace_member(self, node: ast.Attribute) -> tuple[str, str] | None:
        dotted = dotted_name(node)
        if dotted is None or dotted.split(".")[0] not in ROOTS or dotted.split(".")[0] in self.names:
            return None
        split = split_namespace(dotted)
        return split

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            self.fail(node, f"attribute {node.attr!r} is not allowed", _PRIVATE)
        member = self._namespace_member(node)
        if member is not None:
            namespace, name = member
            if namespace == "torch" and (name in DTYPE_NAMES or name in TORCH_CONSTANTS):
                return
            if namespace == "math" and name in MATH_CONSTANTS:
                return
            if namespace in NAMESPACES and name in NAMESPACES[namespace]:
                self.fail(node, f"{namespace}.{name} can only be called")
            self.fail(
                node,
                f"{namespace}.{name} is not an allowed value",
                "Allowed: dtypes (torch.float16, ...), constants (torch.pi, math.inf), and calls of allowed functions.",
            )
        if node.attr not in TENSOR_PROPERTIES | RESULT_FIELDS:
            self.fail(
                node,
                f"attribute {node.attr!r} is not allowed",
                f"Allowed tensor attributes: {_hint_names(TENSOR_PROPERTIES | RESULT_FIELDS)}; "
                "methods must be called, e.g. x.sum(dim=-1).",
            )
        self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        for kw in node.keywords:
            if kw.arg is None:
                self.fail(kw.value, "`**` unpacking is not supported")
            if kw.arg in ("out", "inplace"):
                self.fail(kw.value, f"keyword `{kw.arg}=` is not allowed", "References never write into tensors.")
        if isinstance(func, ast.Name):
            if func.id not in BUILTINS:
                self.fail(
                    func,
                    f"function {func.id!r} is not allowed",
                    f"Callable names: {_hint_names(BUILTINS)}, and torch./F./math. functions.",
                )
        elif isinstance(func, ast.Attribute):
            if func.attr.startswith("_"):
                self.fail(func, f"attribute {func.attr!r} is not allowed", _PRIVATE)
            member = self._namespace_member(func)
            if member is not None:
                namespace, name = member
                if namespace not in NAMESPACES:
                    self.fail(
                        func,
                        f"namespace {namespace!r} is not allowed",
                        f"Allowed namespaces: {_hint_names(NAMESPACES)}.",
                    )
                if name not in NAMESPACES[namespace]:
                    allowed = ", ".join(sorted(NAMESPACES[namespace]))
                    self.fail(
                        func,
                        f"{namespace}.{name} is not an allowed function",
                        _INSTEAD.get(name, "") + f"Allowed {namespace} functions: {allowed}.",
                    )
            else:
                self.visit(func.value)  # an unknown receiver is the better message
                if func.attr not in TENSOR_METHODS:
                    if func.attr.endswith("_"):
                        hint = "In-place methods are never allowed; use the out-of-place form."
                    else:
                        hint = f"Allowed tensor methods include: {', '.join(sorted(TENSOR_METHODS)[:40])}, ..."
                    self.fail(func, f"tensor method {func.attr!r} is not allowed", hint)
        else:
            self.visit(func)  # e.g. a lambda: its own message is the clearer one
            self.fail(func, "only named functions and tensor methods can be called")
        for arg in node.args:
            self.visit(arg)
        for kw in node.keywords:
            self.visit(kw.value)


def measure_tree(tree: ast.AST) -> tuple[int, int]:
    """(node count, depth) of a tree."""
    count, deepest = 0, 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return count, deepest


def parse_reference(
    expression: str,
    *,
    names: Collection[str],
    label: str = "reference",
    max_chars: int = 2000,
    max_nodes: int = 400,
    max_depth: int = 40,
) -> Reference:
    """Parse and validate ``expression`` over the argument ``names``; raise ToolInputError if refused."""
    if not isinstance(expression, str) or not expression.strip():
        raise ToolInputError(f"{label}: the expression is empty; write e.g. 'x_ptr + y_ptr'.")
    if len(expression) > max_chars:
        raise ToolInputError(f"{label}: expression has {len(expression)} characters; the limit is {max_chars}.")
    text = expression.strip()
    if "\n" in text or "\r" in text:
        raise ToolInputError(f"{label}: write the expression on one line.")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        col = (exc.offset or 1) - 1
        marker = "  " + " " * max(col, 0) + "^"
        raise ToolInputError(
            f"{label}: syntax error (column {col + 1}): {exc.msg}\n  {text}\n{marker}\n"
            "Write a Python expression over the arguments, e.g. torch.softmax(x, dim=-1), or assignments then "
            "the value: m = x.amax(-1, keepdim=True); torch.exp(x - m)."
        ) from None
    except (RecursionError, MemoryError, ValueError):
        raise ToolInputError(f"{label}: the expression is too deeply nested or invalid.") from None
    count, depth = measure_tree(tree)
    if count > max_nodes:
        raise ToolInputError(f"{label}: expression has {count} syntax nodes; the limit is {max_nodes}.")
    if depth > max_depth:
        raise ToolInputError(f"{label}: expression nests {depth} levels deep; the limit is {max_depth}.")
    validator = _Validator(text, label, names)
    validator.visit(tree)
    return Reference(text, tree, label, frozenset(validator.used))
