"""Helpers a kernel calls at compile time: `@triton.constexpr_function`, or `@tl.constexpr` on a def.

Triton evaluates such a helper while it compiles the kernel: its arguments are compile-time values
(block sizes, dtypes, flags) and so is its result (`BLOCK_K: tl.constexpr = pick_block(K_HINT)`).
Two kinds of kernel reach one:

- a kernel written in Python holds the helper as a Python object of its own module: it is called
  as Python, in this process, with the arguments' values (`call_python_helper`), the user's own
  code run as Triton runs it;
- kernel source text (what the server compiles) holds only the helper's text: its body is
  evaluated by the frontend's own evaluator over the closed world of compile-time values
  (closed.py), as Python would run it: loops run at compile time, `break`, `continue` and `return`
  anywhere, integer `//` and `%` by Python's rule. Nothing of it is executed, and its work is
  bounded like all compile-time work (`call_compile_time`, `CompileTimeGenerator`).
"""

from __future__ import annotations

import ast
import builtins as py
from typing import Any

from .. import errors as E
from ..ir.core import Block
from ..language import core as lc
from .closed import MAX_UNROLL, LimitError, check_value, is_closed
from .source import FunctionSource
from .statements import KernelGenerator
from .values import BlockPointer, Returned, _normalize_global, _unwrap, is_tensor

__all__ = ["CompileTimeGenerator", "call_compile_time", "call_python_helper"]


class _Break(Exception):
    """`break` in a loop evaluated at compile time."""


class _Continue(Exception):
    """`continue` in a loop evaluated at compile time."""


def _runtime(v: Any) -> bool:
    if is_tensor(v) or isinstance(v, BlockPointer) or type(v).__name__ == "TensorDescriptor":
        return True
    return isinstance(v, (tuple, list)) and any(_runtime(x) for x in v)


class CompileTimeGenerator(KernelGenerator):
    """Evaluates the body of a compile-time helper of source text: every value is a compile-time one."""

    def _need_constant(self, v: Any, node: ast.AST, what: str) -> Any:
        if _runtime(v):
            raise self.error(E.ConstexprError, node, f"{what} is a runtime value in a constexpr_function",
                             "a constexpr_function computes with compile-time values only (constexpr "
                             "arguments, numbers, dtypes)")
        return v

    def visit_if(self, node: ast.If, rest: list[ast.stmt]) -> Returned | None:
        self._need_constant(self.visit(node.test), node.test, "the condition")
        return super().visit_if(node, rest)

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self._need_constant(self.visit(node.test), node.test, "the condition")
        return self.visit(node.body if cond else node.orelse)

    def visit_For(self, node: ast.For) -> Returned | None:  # type: ignore[override]
        if node.orelse:
            raise self.error(E.UnsupportedError, node, "for ... else is not supported")
        it = node.iter
        fn = self.visit(it.func) if isinstance(it, ast.Call) else None
        if fn is py.range or fn is lc.range or fn is lc.static_range:
            assert isinstance(it, ast.Call)
            bounds = [self._need_constant(b, it, "a range bound") for b in self._range_args(it)]
            seq: Any = py.range(*[int(b) for b in bounds])
        else:
            seq = self._need_constant(self.visit(it), it, "the sequence")
            if not isinstance(seq, (tuple, list, str)):
                raise self.error(E.UnsupportedError, it, "a constexpr_function loops over range(...) or a tuple")
        if len(seq) > MAX_UNROLL:
            raise self.error(LimitError, it, f"a loop of {len(seq):,} iterations at compile time; the limit is "
                             f"{MAX_UNROLL:,}")
        for v in seq:
            self.assign(node.target, v)
            r = self._pass(node.body)
            if r is False:
                break
            if isinstance(r, Returned):
                return r
        return None

    def visit_While(self, node: ast.While) -> Returned | None:  # type: ignore[override]
        if node.orelse:
            raise self.error(E.UnsupportedError, node, "while ... else is not supported")
        while self._need_constant(self.visit(node.test), node.test, "the condition"):
            r = self._pass(node.body)  # each pass visits nodes: the frontend's step budget bounds the loop
            if r is False:
                break
            if isinstance(r, Returned):
                return r
        return None

    def _pass(self, body: list[ast.stmt]) -> Returned | bool | None:
        """One pass of a loop body: what it returned, False after `break`, None otherwise."""
        try:
            return self.visit_body(body)
        except _Break:
            return False
        except _Continue:
            return None

    def visit_Break(self, node: ast.Break) -> None:
        raise _Break

    def visit_Continue(self, node: ast.Continue) -> None:
        raise _Continue


def call_compile_time(gen: Any, src: FunctionSource, args: list[Any], kwargs: dict[str, Any],
                      node: ast.AST) -> Any:
    """Evaluate the compile-time helper `src` of source text on compile-time `args`; ops it would
    make go to a block that is thrown away, and its result must be a compile-time value."""
    if any(_runtime(a) for a in [*args, *kwargs.values()]):
        raise gen.error(E.ConstexprError, node, f"{src.name}() is a constexpr_function: its arguments must be "
                        "compile-time values", "pass constexprs, numbers or dtypes (x.dtype, not x)")
    with gen.b.at(Block()):
        result = gen.inline(src, args, kwargs, node, CompileTimeGenerator)
    if _runtime(result):
        raise gen.error(E.ConstexprError, node, f"{src.name}() is a constexpr_function but returned a runtime "
                        "value")
    return check_value(_unwrap(result))


def call_python_helper(gen: Any, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    """Call a Python kernel's compile-time helper (runtime/jit.python_helper) as Python; its result
    must be a value of the closed world."""
    name = getattr(fn, "__name__", "helper")
    if gen.src.text_module:  # source text never holds Python objects (textmodule.py); kept closed regardless
        raise gen.error(E.UnsupportedError, node, f"cannot call {name} inside a kernel")
    if any(_runtime(a) for a in [*args, *kwargs.values()]):
        raise gen.error(E.ConstexprError, node, f"{name}() is a constexpr_function: its arguments must be "
                        "compile-time values", "pass constexprs, numbers or dtypes (x.dtype, not x)")
    try:
        result = fn.fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
    except E.CompilationError:
        raise
    except Exception as e:  # noqa: BLE001 - the helper is the user's code: its failure, located at the call
        raise gen.error(E.CompilationError, node, f"{name}() raised {type(e).__name__}: {str(e)[:300]}") from None
    result = _normalize_global(result)
    if not is_closed(result):
        raise gen.error(E.UnsupportedError, node, f"{name}() returned a {type(result).__name__}, which kernels "
                        "cannot use", "a constexpr_function returns numbers, strings, tuples, dtypes or None")
    return check_value(result)
