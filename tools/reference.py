"""Evaluate torch reference expressions from agents without running them as Python.

An agent checks a kernel against an expression such as ``torch.softmax(x, dim=-1)`` or
``(x_ptr + y_ptr).half()``. The text is parsed with :mod:`ast`, validated by the reference
language's rules (:mod:`tools.reference_language`, which the server process uses alone) and
interpreted here node by node over the same whitelists; nothing is passed to ``eval``, ``exec``
or ``compile``. What resolves:

- the names of the launch's arguments (tensors and scalars), ``torch``, ``F`` (for
  ``torch.nn.functional``) and ``math``;
- numeric, boolean, ``None`` and short string literals, tuples and lists of them;
- arithmetic, comparison, bitwise and unary operators, subscripts and slices;
- calls of the functions in :data:`NAMESPACES` (``torch.*``, ``torch.nn.functional.*``,
  ``torch.special.*``, ``torch.linalg.*``, ``math.*``) and of a few numeric builtins;
- tensor methods in :data:`TENSOR_METHODS`, tensor properties in :data:`TENSOR_PROPERTIES`,
  dtypes such as ``torch.float16``.

Everything else (other attributes, dunders, imports, lambdas, comprehensions, keyword ``out=``,
in-place methods) is refused with a message that gives the column and what to write instead.
Sizes are bounded: expression length, node count and depth, the magnitude of Python integer
arithmetic, and before anything real is computed the whole expression runs on torch's meta
device (shapes, no data; :mod:`tools.reference_sizes`): it is refused there when any intermediate
tensor or a function's work space exceeds the element limit, when all intermediates together
exceed the byte limit, or when a size depends on tensor values. Python sequences and strings
never grow: operators take only tensors and numbers.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import torch

from tools.errors import ToolInputError
from tools.reference_language import (
    BINOPS,
    BUILTINS,
    CMPOPS,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_ELEMENTS,
    DTYPE_NAMES,
    MATH_CONSTANTS,
    MAX_INT_BITS,
    NAMESPACES,
    RESULT_FIELDS,
    ROOTS,
    TENSOR_METHODS,
    TENSOR_PROPERTIES,
    TORCH_CONSTANTS,
    UNARYOPS,
    Reference,
    dotted_name,
    fail_at,
    parse_reference,
    split_namespace,
)
from tools.reference_program import setup_program
from tools.reference_sizes import (
    CREATION_FUNCTIONS,
    DATA_DEPENDENT_HINT,
    SIZE_METHODS,
    ByteBudget,
    creation_elements,
    is_data_dependent,
    repeat_elements,
    tensors_in,
    to_meta,
    workspace_elements,
)

# the language's names that callers of the evaluator use with it (parse, then evaluate)
__all__ = ["DTYPES", "BUILTINS", "NAMESPACES", "TENSOR_METHODS", "MATH_CONSTANTS", "TORCH_CONSTANTS",
           "DEFAULT_MAX_BYTES", "DEFAULT_MAX_ELEMENTS", "Reference", "parse_reference", "dotted_name",
           "check_sizes", "evaluate", "evaluate_expression", "evaluate_setup"]

DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name) for name in DTYPE_NAMES if isinstance(getattr(torch, name, None), torch.dtype)
}

_NAMESPACE_OBJECTS: dict[str, Any] = {
    "torch": torch,
    "torch.nn.functional": torch.nn.functional,
    "F": torch.nn.functional,
    "torch.special": torch.special,
    "torch.linalg": torch.linalg,
    "math": math,
}


class _Evaluator:
    """Interprets a validated tree. Re-checks every rule the validator enforced."""

    def __init__(self, ref: Reference, env: Mapping[str, Any], max_elements: int, max_bytes: int, meta: bool) -> None:
        self.ref = ref
        self.env = env
        self.max_elements = max_elements
        self.meta = meta  # the sizing pass: every tensor is a meta tensor, nothing is computed
        self.budget = ByteBudget(max_bytes, env)

    def fail(self, node: ast.AST | None, what: str, hint: str = "") -> NoReturn:
        fail_at(self.ref.expression, self.ref.label, node, what, hint)

    def check_size(self, node: ast.AST, value: Any) -> Any:
        for tensor in tensors_in(value):
            self.check_elements(node, tensor.numel())
        total = self.budget.add(value)
        if total is not None:
            self.fail(
                node,
                f"the intermediate results up to here take {total} bytes together; "
                f"the limit (max_reference_bytes) is {self.budget.limit}",
                "Compute less at once (e.g. reduce before expanding) or in a smaller dtype.",
            )
        return value

    def check_elements(self, node: ast.AST, elements: float, what: str = "elements") -> None:
        if elements > self.max_elements:
            self.fail(
                node,
                f"would create {int(elements)} {what}; the limit (max_reference_elements) is {self.max_elements}",
            )

    def eval(self, node: ast.AST) -> Any:
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            self.fail(node, f"{type(node).__name__} is not supported")
        return method(node)

    def eval_Expression(self, node: ast.Expression) -> Any:
        return self.eval(node.body)

    def eval_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def eval_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self.eval(e) for e in node.elts)

    def eval_List(self, node: ast.List) -> Any:
        return [self.eval(e) for e in node.elts]

    def eval_Name(self, node: ast.Name) -> Any:
        if node.id not in self.env or node.id.startswith("__"):
            self.fail(node, f"unknown name {node.id!r}")
        return self.env[node.id]

    def _namespace_member(self, node: ast.AST) -> tuple[str, str] | None:
        dotted = dotted_name(node)
        if dotted is None:
            return None
        root = dotted.split(".")[0]
        if root not in ROOTS or root in self.env:
            return None
        return split_namespace(dotted)

    def eval_Attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            self.fail(node, f"attribute {node.attr!r} is not allowed")
        member = self._namespace_member(node)
        if member is not None:
            namespace, name = member
            if namespace == "torch" and name in DTYPES:
                return DTYPES[name]
            if namespace == "torch" and name in TORCH_CONSTANTS:
                return TORCH_CONSTANTS[name]
            if namespace == "math" and name in MATH_CONSTANTS:
                return MATH_CONSTANTS[name]
            self.fail(node, f"{namespace}.{name} is not an allowed value")
        value = self.eval(node.value)
        if isinstance(value, torch.Tensor) and node.attr in TENSOR_PROPERTIES:
            return getattr(value, node.attr)
        if type(value).__module__ == "torch.return_types" and node.attr in RESULT_FIELDS:
            return getattr(value, node.attr)
        self.fail(node, f"attribute {node.attr!r} is not available on a {type(value).__name__}")

    def eval_BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.eval(node.left), self.eval(node.right)
        for side in (left, right):
            if not isinstance(side, torch.Tensor | int | float | bool):
                self.fail(node, f"operator needs tensors or numbers, got a {type(side).__name__}")
        if isinstance(node.op, ast.MatMult):
            if self.meta:
                self.check_workspace(node, "@", [left, right], {})
        elif isinstance(left, torch.Tensor) or isinstance(right, torch.Tensor):
            shapes = [v.shape for v in (left, right) if isinstance(v, torch.Tensor)]
            try:
                shape = torch.broadcast_shapes(*shapes)
            except RuntimeError as exc:
                self.fail(node, f"shapes do not broadcast: {exc}")
            self.check_elements(node, math.prod(shape))
        else:
            self._check_int_arith(node, left, right)
        return self.check_size(node, self._apply(node, BINOPS[type(node.op)], left, right))

    def _check_int_arith(self, node: ast.BinOp, left: Any, right: Any) -> None:
        if not (isinstance(left, int) and isinstance(right, int)):
            return
        bits = max(abs(left), 1).bit_length(), max(abs(right), 1).bit_length()
        if isinstance(node.op, ast.Pow) and right > 0 and abs(left) > 1 and bits[0] * right > MAX_INT_BITS:
            self.fail(node, "integer power too large")
        if isinstance(node.op, ast.Mult) and sum(bits) > MAX_INT_BITS:
            self.fail(node, "integer product too large")
        if isinstance(node.op, ast.LShift) and right > MAX_INT_BITS:
            self.fail(node, "shift too large")

    def check_workspace(self, node: ast.AST, name: str, args: list[Any], kwargs: dict[str, Any]) -> None:
        try:
            elements = workspace_elements(name, args, kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError, OverflowError):
            return  # the call itself reports what is wrong with its arguments
        self.check_elements(node, elements, "elements of work space")

    def _apply(self, node: ast.AST, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        receiver = getattr(fn, "__self__", None)  # a tensor method's tensor
        inputs = [t for a in (receiver, *args, *kwargs.values()) for t in tensors_in(a)]
        before = [_version(t) for t in inputs]
        try:
            out = fn(*args, **kwargs)
            if any(_version(t) != v for t, v in zip(inputs, before, strict=True)):
                # e.g. F.embedding(..., max_norm=) renormalizes its weight; F.relu(x, True) is in place:
                # an argument's new values would be what the kernel reads, and what it is checked against
                self.fail(node, "this call changed its argument in place",
                          "References never write into tensors: drop the argument that makes the call "
                          "work in place (inplace=True, or F.embedding's max_norm).")
            return out
        except ToolInputError:
            raise
        except MemoryError:
            self.fail(node, "evaluation ran out of memory", "Use smaller arguments.")
        except (
            RuntimeError, NotImplementedError, TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError,
        ) as exc:  # fmt: skip
            if self.meta and is_data_dependent(exc):
                self.fail(node, "the size of this result depends on tensor values", DATA_DEPENDENT_HINT)
            if self.meta and isinstance(exc, NotImplementedError):
                self.fail(node, "this call cannot be sized before it runs, so it is not evaluated")
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.fail(node, f"evaluation failed: {message}")

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        op = UNARYOPS.get(type(node.op))
        if op is None:
            self.fail(node, "`not` is not supported; use ~ or torch.logical_not")
        operand = self.eval(node.operand)
        if not isinstance(operand, torch.Tensor | int | float | bool):
            self.fail(node, f"operator needs a tensor or a number, got a {type(operand).__name__}")
        return self._apply(node, op, operand)

    def eval_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1 or type(node.ops[0]) not in CMPOPS:
            self.fail(node, "only single ==, !=, <, <=, >, >= comparisons are supported")
        left, right = self.eval(node.left), self.eval(node.comparators[0])
        return self.check_size(node, self._apply(node, CMPOPS[type(node.ops[0])], left, right))

    def eval_Slice(self, node: ast.Slice) -> Any:
        parts = [None if p is None else self.eval(p) for p in (node.lower, node.upper, node.step)]
        for part in parts:
            if part is not None and not isinstance(part, int | torch.Tensor):
                self.fail(node, "slice bounds must be integers")
        return slice(*parts)

    def eval_Subscript(self, node: ast.Subscript) -> Any:
        value = self.eval(node.value)
        index = self.eval(node.slice)
        if not isinstance(value, torch.Tensor | tuple | list | torch.Size):
            self.fail(node, f"cannot index a {type(value).__name__}")
        if isinstance(index, list):
            index = tuple(index) if any(isinstance(i, slice | torch.Tensor) for i in index) else index
        return self.check_size(node, self._apply(node, operator.getitem, value, index))

    def eval_Call(self, node: ast.Call) -> Any:
        args = [self.eval(a) for a in node.args]
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None or kw.arg == "out" or kw.arg.startswith("_"):
                self.fail(kw.value, "this keyword argument is not allowed")
            kwargs[kw.arg] = self.eval(kw.value)
        func = node.func
        if isinstance(func, ast.Name):
            builtin = BUILTINS.get(func.id)
            if builtin is None:
                self.fail(func, f"function {func.id!r} is not allowed")
            if any(isinstance(a, torch.Tensor) for a in args) and func.id in ("min", "max", "round"):
                self.fail(
                    func,
                    f"builtin {func.id}() on a tensor is not supported",
                    "Use torch.minimum/maximum, x.min() or torch.round.",
                )
            return self.check_size(node, self._apply(node, builtin, *args, **kwargs))
        if not isinstance(func, ast.Attribute) or func.attr.startswith("_"):
            self.fail(func, "only named functions and tensor methods can be called")
        member = self._namespace_member(func)
        if member is not None:
            namespace, name = member
            if namespace not in NAMESPACES or name not in NAMESPACES[namespace]:
                self.fail(func, f"{namespace}.{name} is not an allowed function")
            if name in CREATION_FUNCTIONS and namespace == "torch":
                self.check_elements(node, creation_elements(name, args, kwargs))
                if self.meta:
                    kwargs["device"] = "meta"
            if self.meta:
                if "device" in kwargs:
                    kwargs["device"] = "meta"  # e.g. zeros_like(x, device="cpu") must not allocate here
                self.check_workspace(node, name, args, kwargs)
            target = getattr(_NAMESPACE_OBJECTS[namespace], name)
            return self.check_size(node, self._apply(node, target, *args, **kwargs))
        receiver = self.eval(func.value)
        if not isinstance(receiver, torch.Tensor):
            self.fail(func, f"method {func.attr!r} needs a tensor, got a {type(receiver).__name__}")
        if func.attr not in TENSOR_METHODS:
            self.fail(func, f"tensor method {func.attr!r} is not allowed")
        if func.attr == "to" and not all(isinstance(a, torch.dtype) for a in [*args, *kwargs.values()]):
            self.fail(func, "tensor.to() takes only a dtype here", "Write x.to(torch.float16).")
        if func.attr in SIZE_METHODS:
            self.check_elements(node, repeat_elements(func.attr, receiver, args))
        if self.meta:
            self.check_workspace(node, func.attr, [receiver, *args], kwargs)
        return self.check_size(node, self._apply(node, getattr(receiver, func.attr), *args, **kwargs))


def _version(t: torch.Tensor) -> int | None:
    """The tensor's in-place write counter (every in-place op bumps it); None where not kept."""
    try:
        return int(t._version)
    except RuntimeError:  # an inference-mode tensor keeps none
        return None


def check_sizes(
    ref: Reference,
    env: Mapping[str, Any],
    *,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Any:
    """Run ``ref`` on meta copies of ``env``; raise ToolInputError if a size is over a limit or data-dependent.

    Returns the result as meta tensors (its shape and dtype, no data). Nothing is allocated.
    """
    return _Evaluator(ref, to_meta(env), max_elements, max_bytes, meta=True).eval(ref.tree)


def evaluate(
    ref: Reference,
    env: Mapping[str, Any],
    *,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    max_bytes: int = DEFAULT_MAX_BYTES,
    sized: bool = False,
) -> Any:
    """Evaluate a validated reference against ``env`` (argument name -> tensor or number).

    The sizing pass (:func:`check_sizes`) runs first unless ``sized`` says it already held for
    arguments of these shapes (a baseline timed many times is sized once).
    """
    if not sized:
        check_sizes(ref, env, max_elements=max_elements, max_bytes=max_bytes)
    return _Evaluator(ref, env, max_elements, max_bytes, meta=False).eval(ref.tree)


def evaluate_expression(
    expression: str,
    env: Mapping[str, Any],
    *,
    label: str = "reference",
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Any:
    """Parse, validate and evaluate in one step (for tests and scripts)."""
    ref = parse_reference(expression, names=list(env), label=label)
    return evaluate(ref, env, max_elements=max_elements, max_bytes=max_bytes)


def evaluate_setup(text: str | None, envs: list[dict[str, Any]], **size_limits: Any) -> list[dict[str, Any]]:
    """Each of ``envs`` (the input sets, of one set of names) with the values a baseline_setup assigns,
    each statement evaluated in turn (the reference evaluator: validated trees, size limits), never
    executed as Python. The text is parsed once."""
    if text is None or not envs:
        return [dict(env) for env in envs]
    names = list(envs[0])
    refs = []
    for stmt in setup_program(text, names, 2000).statements:
        refs.append((stmt.target, parse_reference(stmt.text, names=names, label=f"baseline_setup {stmt.label}")))
        names.append(stmt.target)
    out = []
    for env in envs:
        values = dict(env)
        for target, ref in refs:
            values[target] = evaluate(ref, values, **size_limits)
        out.append(values)
    return out
