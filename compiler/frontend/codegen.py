"""Python AST -> Tile IR: expressions, calls and inlining (statements live in `statements.py`).

Values in a scope are `Tensor`s (runtime values), plain Python objects (compile-time constants:
numbers, None, dtypes, tuples, functions, modules) or `BlockPointer`s. Calls to @jit functions
are inlined at the call site with their own scope; every op records the call chain.
"""

from __future__ import annotations

import ast
import builtins as py
import operator
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import errors as E
from .. import language
from ..ir import types as T
from ..ir.builder import Builder
from ..ir.core import Block, Location
from ..language import TENSOR_METHODS
from ..language import core as lc
from ..runtime.function import ConstexprFunction, python_helper
from . import descriptor
from .closed import (
    MAX_INLINE_DEPTH,
    MISSING,
    Budget,
    CompileTimeMethod,
    LimitError,
    admit_data,
    allowed_function,
    bounded_binary,
    bounded_format,
    check_value,
    close_exports,
    is_closed,
    module_export,
    value_attribute,
)
from .pybuiltins import PY_BUILTIN_IDS, PY_BUILTINS, REFUSED_BUILTINS, python_builtin
from .semantic import Semantic
from .source import UNKNOWN_IMPORTS, FunctionSource, is_constexpr_annotation
from .values import (
    UNKNOWN,
    BlockPointer,
    Returned,
    Shape,
    _BoundMethod,
    _normalize_global,
    _unwrap,
    is_tensor,
)

__all__ = ["GenOptions", "GenContext", "CodeGenerator", "Returned"]


@dataclass(frozen=True)
class GenOptions:
    debug: bool = False
    target: str = "cpu"
    num_warps: int = 4


@dataclass
class GenContext:
    """State shared by a kernel and every function inlined into it."""

    builder: Builder
    sem: Semantic
    options: GenOptions
    resolve_jit: Callable[[Any], FunctionSource | None]
    # compile-time calls (compiletime.py, which builds on this module): a constexpr_function of
    # source text, and a Python kernel's own helper; each (generator, callee, args, kwargs, node)
    call_compile_time: Callable[..., Any]
    call_python_helper: Callable[..., Any]
    depth: int = 0
    budget: Budget = field(default_factory=Budget)


_BINOPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("add", operator.add), ast.Sub: ("sub", operator.sub), ast.Mult: ("mul", operator.mul),
    ast.Div: ("truediv", operator.truediv), ast.FloorDiv: ("floordiv", operator.floordiv),
    ast.Mod: ("mod", operator.mod), ast.BitAnd: ("and", operator.and_), ast.BitOr: ("or", operator.or_),
    ast.BitXor: ("xor", operator.xor), ast.LShift: ("shl", operator.lshift),
    ast.RShift: ("shr", operator.rshift), ast.Pow: ("pow", operator.pow),
    ast.MatMult: ("matmul", operator.matmul),
}
_CMPOPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Eq: ("eq", operator.eq), ast.NotEq: ("ne", operator.ne), ast.Lt: ("lt", operator.lt),
    ast.LtE: ("le", operator.le), ast.Gt: ("gt", operator.gt), ast.GtE: ("ge", operator.ge),
}



class CodeGenerator(ast.NodeVisitor):
    """Generates IR for one function body into the context's builder."""

    def __init__(self, ctx: GenContext, src: FunctionSource, scope: dict[str, Any],
                 inlined_at: Location | None = None) -> None:
        self.ctx = ctx
        self.src = src
        self.scope = scope
        self.inlined_at = inlined_at
        self.b = ctx.builder
        self.sem = ctx.sem

    # ------------------------------------------------------------------ plumbing
    @property
    def options(self) -> GenOptions:
        return self.ctx.options

    def loc(self, node: ast.AST) -> Location:
        return self.src.loc(node, self.inlined_at)

    def error(self, cls: type[E.CompilationError], node: ast.AST, msg: str, hint: str = "") -> E.CompilationError:
        loc = self.loc(node)
        return cls(msg, loc, self.src.source_line(loc), hint)

    def visit(self, node: ast.AST) -> Any:
        if not hasattr(node, "lineno"):
            return super().visit(node)
        stop = self.ctx.budget.step(self.b.ops)
        if stop is not None:
            raise self.error(LimitError, node, stop, "unroll less (tl.static_range over fewer iterations, smaller "
                             "constexpr tuples), or use a runtime range() loop")
        saved = self.b.loc
        self.b.loc = self.loc(node)
        try:
            return super().visit(node)
        except E.CompilationError as e:
            if e.loc is None:
                raise type(e)(e.message, self.b.loc, self.src.source_line(self.b.loc), e.hint) from None
            raise
        except RecursionError:
            raise self.error(LimitError, node, "the kernel nests too deeply to compile (deep expressions or "
                             "recursive @jit calls)", "split long expressions into several assignments") from None
        except MemoryError:
            raise self.error(LimitError, node, "compile-time evaluation ran out of memory") from None
        except (TypeError, ValueError, ZeroDivisionError, IndexError, KeyError, OverflowError, AttributeError) as e:
            raise self.error(E.CompilationError, node, f"{type(e).__name__}: {_short(e)}") from None
        finally:
            self.b.loc = saved

    def generic_visit(self, node: ast.AST) -> Any:
        raise self.error(E.UnsupportedError, node, f"unsupported construct: {type(node).__name__}",
                         "kernels support assignments, arithmetic, calls, if/for/while and return")

    # ------------------------------------------------------------------ names
    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            value = self.scope[name]
            if value is UNKNOWN:
                raise self.error(E.ConstexprError, node, f"{name!r} has no value yet")
            return value
        g = self.src.globals
        if name in g:
            return self.admit_global(name, g[name], node)
        if name in PY_BUILTINS:
            return PY_BUILTINS[name]
        if name in REFUSED_BUILTINS:
            raise self.error(E.UnsupportedError, node, f"{name!r} is not available in kernels",
                             "kernel code can call tl.* functions, @jit functions and len, min, max, int, float, "
                             "bool, abs, round, str, tuple, list, isinstance, getattr, hasattr, enumerate, zip, "
                             "range and print")
        module = g.get(UNKNOWN_IMPORTS, {}).get(name)
        if module is not None:
            raise self.error(E.UnsupportedError, node, f"{name!r} is the module {module!r}, which kernels cannot use",
                             "a kernel is compiled to device code: use tl.* functions in its place (tl.exp, "
                             "tl.sqrt, tl.math.erf, tl.where, tl.sum, tl.zeros, ...); see language_reference")
        raise self.error(E.UndefinedNameError, node, f"name {name!r} is not defined",
                         "define it before use, pass it as a parameter, or make it a module-level constant")

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def admit_global(self, name: str, value: Any, node: ast.AST) -> Any:
        """A global of the kernel's module as a compile-time value, if it is one of the closed world."""
        helper = None if self.src.text_module else python_helper(value)
        if helper is not None:  # a Python kernel's @triton.constexpr_function / @tl.constexpr helper
            return helper
        v = _normalize_global(value)
        if is_closed(v):
            return v
        # a Python kernel's module may also hold dicts and modules of its own, read as data; source
        # text holds only what its imports and constants gave it (textmodule.py)
        data = MISSING if self.src.text_module else admit_data(v)
        if data is not MISSING:
            return data
        raise self.error(E.UnsupportedError, node, f"global {name!r} is a {type(v).__name__}, which kernels "
                         "cannot use", "kernels read numbers, strings, tuples, dicts of those, dtypes, tl.constexpr "
                         "values, @jit functions and modules from their module")

    def visit_Constant(self, node: ast.Constant) -> Any:
        v = node.value
        if isinstance(v, (bytes, complex)):
            raise self.error(E.UnsupportedError, node, f"{type(v).__name__} literals are not supported in kernels")
        return check_value(v)

    def visit_Tuple(self, node: ast.Tuple) -> Any:
        return check_value(tuple(self.visit(e) for e in node.elts))

    def visit_List(self, node: ast.List) -> Any:
        return check_value([self.visit(e) for e in node.elts])

    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                x = self.visit(v.value)
                if is_tensor(x):
                    raise self.error(E.ConstexprError, v, "f-strings can only format compile-time values")
                spec = self.visit(v.format_spec) if v.format_spec else ""
                parts.append(bounded_format(x, str(spec)))
        return check_value("".join(parts))

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.visit(node.value)
        return self.attribute(base, node.attr, node)

    def attribute(self, base: Any, attr: str, node: ast.AST) -> Any:
        if not isinstance(attr, str) or attr.startswith("_"):
            raise self.error(E.UnsupportedError, node, f"attribute {attr!r} is not accessible in kernels",
                             "names starting with '_' are private to the compiler")
        if isinstance(base, (int, float)) and not hasattr(base, attr) and (
                attr in TENSOR_METHODS or attr in ("dtype", "shape", "numel", "T")):
            # A number stays a compile-time value until used as a tensor: in Triton `acc = 0` is
            # already an int32 tensor, so `acc.to(tl.int64)` and `value.dtype` work on it.
            base = self.sem.to_tensor(base)
        if is_tensor(base):
            if attr == "dtype":
                return base.dtype
            if attr == "shape":
                return Shape(base.shape)
            if attr == "numel":
                return base.numel
            if attr == "T":
                return self.sem.permute(base, [1, 0])
            if attr == "type":
                return lc.block_type(base.dtype, list(base.shape)) if base.is_tile() else base.dtype
            fn = TENSOR_METHODS.get(attr)
            if fn is None:
                raise self.error(E.UnsupportedError, node, f"tensors have no attribute {attr!r}",
                                 "see the language reference for tensor methods")
            return _BoundMethod(fn, base)
        if isinstance(base, BlockPointer):
            return base.attribute(attr)
        if isinstance(base, descriptor.TensorDescriptor):
            return descriptor.attribute(self, base, attr)
        if isinstance(base, types.ModuleType):
            ok, value = module_export(base, attr)
            if ok:
                return value
            owner = ast.unparse(node.value) if isinstance(node, ast.Attribute) else "tl"
            near = " or ".join(f"{owner}.{n}" for n in close_exports(base, attr))
            raise self.error(E.UndefinedNameError, node, f"{_describe(base)} has no attribute {attr!r} a kernel "
                             "can use", (f"did you mean {near}? " if near else "") + "see the language reference "
                             "(language_reference) for the names of tl, tl.math and tl.extra")
        value = value_attribute(base, attr)
        if value is MISSING:
            hint = ("lists and tuples in a kernel are compile-time values that do not change: accumulate into a "
                    "tile (acc = tl.zeros([BLOCK], tl.float32); acc += ...) or build a new tuple (t = t + (x,))"
                    if isinstance(base, (list, tuple)) else "")
            raise self.error(E.UndefinedNameError, node, f"{_describe(base)} has no attribute {attr!r} a kernel "
                             "can use", hint)
        return value

    # ------------------------------------------------------------------ operators
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        lhs = self.visit(node.left)
        rhs = self.visit(node.right)
        return self.binary(type(node.op), lhs, rhs, node)

    def binary(self, op: type, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        name, pyop = _BINOPS[op]
        if not is_tensor(lhs) and not is_tensor(rhs):
            return bounded_binary(name, pyop, lhs, rhs)
        s = self.sem
        if name == "add":
            return s.add(lhs, rhs)
        if name == "sub":
            return s.sub(lhs, rhs)
        if name == "mul":
            return s.mul(lhs, rhs)
        if name == "truediv":
            return s.truediv(lhs, rhs)
        if name == "floordiv":
            return s.floordiv(lhs, rhs)
        if name == "mod":
            return s.mod(lhs, rhs)
        if name in ("and", "or", "xor", "shl"):
            return s.bitwise(name, lhs, rhs)
        if name == "shr":
            return s.bitwise("shr", lhs, rhs)
        if name == "pow":
            raise self.error(E.UnsupportedError, node, "** on tensors is not supported",
                             "use tl.extra.libdevice.pow(x, y), or x * x for squares")
        raise self.error(E.UnsupportedError, node, "@ is not supported on tensors", "use tl.dot(a, b)")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        x = self.visit(node.operand)
        if not is_tensor(x):
            if isinstance(node.op, ast.Not):
                return not x
            if isinstance(node.op, ast.USub):
                return -x
            if isinstance(node.op, ast.UAdd):
                return +x
            return ~x
        if isinstance(node.op, ast.USub):
            return self.sem.minus(x)
        if isinstance(node.op, ast.UAdd):
            return x
        if isinstance(node.op, ast.Not):
            return self.sem.not_(x)
        return self.sem.invert(x)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for v in node.values[1:]:
            if not is_tensor(result):
                if is_and and not result:
                    return result
                if not is_and and result:
                    return result
                result = self.visit(v)
                continue
            rhs = self.visit(v)
            result = self.sem.logical("and" if is_and else "or", result, rhs)
        return result

    def visit_Compare(self, node: ast.Compare) -> Any:
        lhs = self.visit(node.left)
        result: Any = None
        for op, right in zip(node.ops, node.comparators, strict=True):
            rhs = self.visit(right)
            r = self.compare(op, lhs, rhs, node)
            result = r if result is None else self.sem.logical("and", result, r) if (
                is_tensor(result) or is_tensor(r)) else (result and r)
            lhs = rhs
        return result

    def compare(self, op: ast.cmpop, lhs: Any, rhs: Any, node: ast.AST) -> Any:
        if isinstance(op, (ast.Is, ast.IsNot)):
            if is_tensor(lhs) or is_tensor(rhs):
                same = lhs is rhs
            else:
                same = lhs is rhs or (lhs is None) == (rhs is None) and lhs == rhs and (
                    lhs is None or rhs is None)
            return same if isinstance(op, ast.Is) else not same
        if isinstance(op, (ast.In, ast.NotIn)):
            if is_tensor(rhs) or is_tensor(lhs):
                raise self.error(E.UnsupportedError, node, "`in` works on compile-time values only")
            r = lhs in rhs
            return r if isinstance(op, ast.In) else not r
        pred, pyop = _CMPOPS[type(op)]
        if not is_tensor(lhs) and not is_tensor(rhs):
            return pyop(lhs, rhs)
        return self.sem.compare(pred, lhs, rhs)

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if not is_tensor(cond):
            return self.visit(node.body if cond else node.orelse)
        runtime_if = getattr(self, "_runtime_if", None)
        if cond.is_tile() or runtime_if is None:
            return self.sem.where(cond, self.visit(node.body), self.visit(node.orelse))
        # A scalar condition evaluates only the chosen side (Triton's rule: the sides may store).
        return runtime_if(cond, lambda: Returned(self.visit(node.body)), lambda: Returned(self.visit(node.orelse)),
                          returns=True)

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.visit(node.value)
        idx = self.visit(node.slice)
        if is_tensor(base):
            return self.index_tensor(base, idx, node)
        if is_tensor(idx):
            raise self.error(E.ConstexprError, node, "indexing a compile-time sequence needs a constant index")
        if not isinstance(base, (tuple, list, str, dict)):
            raise self.error(E.UnsupportedError, node, f"cannot index {_describe(base)}")
        return base[idx]

    def visit_Slice(self, node: ast.Slice) -> Any:
        return slice(*(self.visit(x) if x is not None else None for x in (node.lower, node.upper, node.step)))

    def index_tensor(self, t: lc.Tensor, idx: Any, node: ast.AST) -> lc.Tensor:
        items = idx if isinstance(idx, tuple) else (idx,)
        out = t
        dim = 0
        for it in items:
            if it is None:
                out = self.sem.expand_dims(out, dim)
                dim += 1
            elif isinstance(it, slice) and it == slice(None, None, None):
                dim += 1
            else:
                raise self.error(E.UnsupportedError, node, f"unsupported tensor index: {it!r} (tensors can only be "
                                 "indexed with None and ':')",
                                 "use x[:, None] / x[None, :] to add axes; gather or masks to pick elements")
        # As in Triton, ':' only steps past a dimension: x[None, None, :] on a scalar is [1, 1]
        # (a None past the rank is an error, from expand_dims).
        return out

    # ------------------------------------------------------------------ calls
    def visit_Call(self, node: ast.Call) -> Any:
        fn = self.visit(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                v = self.visit(a.value)
                if is_tensor(v):
                    raise self.error(E.UnsupportedError, a, "cannot unpack a tensor with *")
                args.extend(v)
            else:
                args.append(self.visit(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.error(E.UnsupportedError, k, "**kwargs in calls is not supported")
            if k.arg.startswith("_"):
                raise self.error(E.UnsupportedError, k, f"keyword argument {k.arg!r} is not accessible in kernels",
                                 "names starting with '_' are private to the compiler")
            kwargs[k.arg] = self.visit(k.value)
        return self.call(fn, args, kwargs, node)

    def call(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
        """Call `fn`, decided by identity: a language builtin, a @jit function, a language class, an
        allowed method of a compile-time value, an allowed Python builtin or pure helper (closed.py)."""
        if isinstance(fn, _BoundMethod):
            return self.call(fn.fn, [fn.self, *fn.bound, *args], kwargs, node)
        if lc.is_builtin(fn):
            args = [_unwrap(a) for a in args]
            kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
            try:
                return fn(*args, _sem=self.sem, **kwargs)
            except TypeError as e:
                if "argument" in str(e):
                    raise self.error(E.ArgumentError, node, f"bad arguments to {fn.__name__}: {e}") from None
                raise
        src = self.ctx.resolve_jit(fn)
        if src is not None:
            if src.compile_time:  # a constexpr_function of source text, evaluated (compiletime.py)
                return self.ctx.call_compile_time(self, src, args, kwargs, node)
            return self.inline(src, args, kwargs, node)
        if isinstance(fn, ConstexprFunction):  # a Python kernel's own compile-time helper
            return self.ctx.call_python_helper(self, fn, args, kwargs, node)
        compile_time = not any(is_tensor(a) for a in [*args, *kwargs.values()])
        if fn is lc.constexpr:
            return _unwrap(args[0]) if args else None
        if fn is lc.pointer_type or fn is lc.dtype or fn is lc.block_type:
            if not compile_time:
                raise self.error(E.ConstexprError, node, f"{fn.__name__}() takes compile-time arguments")
            # Types are compile-time values: `x_ptr.to(tl.pointer_type(val.dtype))`.
            return fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})
        if isinstance(fn, lc.dtype):
            raise self.error(E.UnsupportedError, node, f"{fn} is not callable", "use x.to(dtype)")
        if fn is lc.static_range or fn is lc.range or fn is py.range:
            raise self.error(E.UnsupportedError, node, "range objects can only be iterated in a for loop")
        if isinstance(fn, CompileTimeMethod):
            if kwargs or not compile_time:
                raise self.error(E.UnsupportedError, node, f".{fn.name}() takes compile-time positional arguments")
            return check_value(fn(*[_unwrap(a) for a in args]))
        if id(fn) in PY_BUILTIN_IDS:
            return python_builtin(self, fn, args, kwargs, node)
        if allowed_function(fn):
            if not compile_time or not all(isinstance(_unwrap(a), (int, float)) for a in [*args, *kwargs.values()]):
                name = getattr(fn, "__name__", "")
                device = next((f"{where}.{name}" for where, mod in (("tl", language), ("tl.math", language.math))
                               if callable(getattr(mod, name, None))), "the tl / tl.math functions")
                raise self.error(E.ConstexprError, node, f"{_describe(fn)}() takes compile-time numbers",
                                 f"on tensor values use {device}")
            return check_value(fn(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()}))
        raise self.error(E.UnsupportedError, node, f"cannot call {_describe(fn)} inside a kernel",
                         "only tl.* functions, @jit functions and a few Python builtins (len, min, max, "
                         "int, float, range) can be called")

    def inline(self, src: FunctionSource, args: list[Any], kwargs: dict[str, Any], node: ast.AST,
               cls: type[CodeGenerator] | None = None) -> Any:
        if self.ctx.depth >= MAX_INLINE_DEPTH:
            raise self.error(LimitError, node, f"@jit calls nest more than {MAX_INLINE_DEPTH} deep (recursion?)",
                             "recursive @jit calls are unrolled at compile time: bound them with a constexpr")
        params = src.params
        if len(args) > len(params):
            raise self.error(E.ArgumentError, node,
                             f"{src.name}() takes {len(params)} arguments but {len(args)} were given")
        bound: dict[str, Any] = dict(zip(params, args, strict=False))
        for k, v in kwargs.items():
            if k not in params:
                raise self.error(E.ArgumentError, node, f"{src.name}() got an unexpected argument {k!r}")
            if k in bound:
                raise self.error(E.ArgumentError, node, f"{src.name}() got multiple values for {k!r}")
            bound[k] = v
        callee_gen = (cls or type(self))(self.ctx, src, {}, self.loc(node))
        for p in params:
            if p not in bound:
                if p not in src.defaults:
                    raise self.error(E.ArgumentError, node, f"{src.name}() is missing argument {p!r}")
                bound[p] = callee_gen.visit(src.defaults[p])
            ann = src.annotations.get(p)
            if ann is not None and is_constexpr_annotation(ann, src.globals) and is_tensor(bound[p]):
                raise self.error(E.ConstexprError, node,
                                 f"argument {p!r} of {src.name}() is tl.constexpr but got a runtime value")
            bound[p] = _unwrap(bound[p])
        callee_gen.scope = bound
        self.ctx.depth += 1
        try:
            r = callee_gen.visit_body(src.tree.body)
        finally:
            self.ctx.depth -= 1
        return r.value if isinstance(r, Returned) else None

    # ------------------------------------------------------------------ reductions
    def _region_call(self, fn: Any, elem_types: list[T.ScalarType], nargs_per_side: int,
                     node_loc: Location) -> Block:
        block = Block()
        a = [block.add_arg(t) for t in elem_types]
        b_ = [block.add_arg(t) for t in elem_types]
        with self.b.at(block):
            vals = [lc.Tensor(v) for v in a + b_]
            src = self.ctx.resolve_jit(fn)
            if src is None:
                raise E.ArgumentError(f"combine_fn must be a @jit function, got {_describe(fn)}")
            r = type(self)(self.ctx, src, {}, node_loc).inline(src, vals, {}, src.tree)
            res = list(r) if isinstance(r, tuple) else [r]
            if len(res) != nargs_per_side:
                raise E.ArgumentError(f"combine_fn returned {len(res)} values, expected {nargs_per_side}")
            out = [self.sem.cast(self.sem.to_tensor(v), t).handle for v, t in zip(res, elem_types, strict=True)]
            self.b.create("yield", out, [])
        return block

    def _reduce_inputs(self, input: Any) -> tuple[list[lc.Tensor], bool]:
        is_tuple = isinstance(input, (tuple, list))
        xs = [self.sem.to_tensor(x) for x in (input if is_tuple else [input])]
        shape = xs[0].shape
        for x in xs:
            if x.shape != shape:
                raise E.ShapeError("all inputs of a reduction must have the same shape")
        return xs, is_tuple

    def reduce(self, input: Any, axis: Any, combine_fn: Any, keep_dims: bool) -> Any:
        xs, is_tuple = self._reduce_inputs(input)
        if axis is None:
            xs = [self.sem.reshape(x, [x.numel]) if x.is_tile() else x for x in xs]
            axis = 0
        if not xs[0].is_tile():
            return tuple(xs) if is_tuple else xs[0]
        rank = len(xs[0].shape)
        axis = int(axis)
        if axis < 0:
            axis += rank
        if not 0 <= axis < rank:
            raise E.ShapeError(f"reduction axis {axis} out of range for a tile of rank {rank}")
        elems = [x.ir_elem for x in xs]
        region = self._region_call(combine_fn, elems, len(xs), self.b.loc)  # type: ignore[arg-type]
        shape = xs[0].shape[:axis] + xs[0].shape[axis + 1:]
        rtypes = [T.TileType(shape, e) if shape else e for e in elems]
        op = self.b.create("reduce", [x.handle for x in xs], rtypes, {"axis": axis}, [region])
        res = [lc.Tensor(r) for r in op.results]
        if keep_dims:
            res = [self.sem.expand_dims(r, axis) for r in res]
        return tuple(res) if is_tuple else res[0]

    def scan(self, input: Any, axis: int, combine_fn: Any, reverse: bool) -> Any:
        xs, is_tuple = self._reduce_inputs(input)
        rank = len(xs[0].shape)
        if rank == 0:
            raise E.ShapeError("cannot scan a scalar")
        if axis < 0:
            axis += rank
        if not 0 <= axis < rank:
            raise E.ShapeError(f"scan axis {axis} out of range for a tile of rank {rank}")
        elems = [x.ir_elem for x in xs]
        region = self._region_call(combine_fn, elems, len(xs), self.b.loc)  # type: ignore[arg-type]
        op = self.b.create("scan", [x.handle for x in xs], [x.type for x in xs],
                           {"axis": axis, "reverse": reverse}, [region])
        res = [lc.Tensor(r) for r in op.results]
        return tuple(res) if is_tuple else res[0]

    # ------------------------------------------------------------------ block pointers
    def is_block_ptr(self, p: Any) -> bool:
        return isinstance(p, BlockPointer)

    def make_block_ptr(self, base: Any, shape: Any, strides: Any, offsets: Any, block_shape: Any,
                       order: Any) -> BlockPointer:
        s = self.sem
        if not is_tensor(base) or not isinstance(base.ir_elem, T.PointerType) or base.is_tile():
            raise E.DtypeError("make_block_ptr needs a pointer argument as base")
        n = len(block_shape)
        if not (len(shape) == len(strides) == len(offsets) == len(order) == n):
            raise E.ArgumentError("shape, strides, offsets, block_shape and order must have the same length")
        return BlockPointer(
            base,
            tuple(s.cast(s.to_tensor(x), T.i64) for x in shape),
            tuple(s.cast(s.to_tensor(x), T.i64) for x in strides),
            tuple(s.cast(s.to_tensor(x), T.i32) for x in offsets),
            tuple(int(x) for x in block_shape),
            tuple(int(x) for x in order),
        )

    def advance(self, p: Any, offsets: Any) -> BlockPointer:
        if not isinstance(p, BlockPointer):
            raise E.DtypeError("tl.advance needs a block pointer made by tl.make_block_ptr")
        s = self.sem
        offs = tuple(s.cast(s.add(o, d), T.i32) if is_tensor(d) or d != 0 else o
                     for o, d in zip(p.offsets, offsets, strict=True))
        return BlockPointer(p.base, p.shape, p.strides, offs, p.block_shape, p.order)

    def _block_ptr_tile(self, p: BlockPointer, boundary_check: Any) -> tuple[lc.Tensor, lc.Tensor | None]:
        s = self.sem
        n = len(p.block_shape)
        ptr = p.base
        mask: lc.Tensor | None = None
        checks = {int(c) for c in (boundary_check or ())}
        for d in range(n):
            r = s.arange(0, p.block_shape[d])
            idx = s.add(s.cast(r, T.i64), s.cast(p.offsets[d], T.i64))
            for _ in range(d):
                idx = s.expand_dims(idx, 0)
            for k in range(d + 1, n):
                idx = s.expand_dims(idx, k)
            ptr = s.add(ptr, s.mul(idx, p.strides[d]))
            if d in checks:
                ok = s.logical("and", s.compare("ge", idx, 0), s.compare("lt", idx, p.shape[d]))
                mask = ok if mask is None else s.logical("and", mask, ok)
        ptr = s.broadcast_to(ptr, p.block_shape)
        if mask is not None:
            mask = s.broadcast_to(mask, p.block_shape)
        return ptr, mask

    def block_ptr_load(self, p: BlockPointer, boundary_check: Any, padding: str, cache: str = "",
                       eviction: str = "", volatile: bool = False) -> lc.Tensor:
        ptr, mask = self._block_ptr_tile(p, boundary_check)
        other = None
        if mask is not None:
            other = float("nan") if padding == "nan" else 0
        return self.sem.load(ptr, mask, other, cache, eviction, volatile)

    def block_ptr_store(self, p: BlockPointer, value: Any, boundary_check: Any, cache: str = "",
                        eviction: str = "") -> None:
        ptr, mask = self._block_ptr_tile(p, boundary_check)
        self.sem.store(ptr, value, mask, cache, eviction)

    # tensor descriptors (descriptor.py), for the language's builtins: they reach the frontend
    # through the generator they are called with, never by importing it
    def make_tensor_descriptor(self, base: Any, shape: Any, strides: Any, block_shape: Any, padding: str) -> Any:
        return descriptor.make_tensor_descriptor(self.sem, base, shape, strides, block_shape, padding)

    def load_tensor_descriptor(self, desc: Any, offsets: Any) -> lc.Tensor:
        return descriptor.load(self.sem, desc, offsets)

    def store_tensor_descriptor(self, desc: Any, offsets: Any, value: Any) -> None:
        descriptor.store(self.sem, desc, offsets, value)

    def atomic_tensor_descriptor(self, desc: Any, kind: str, offsets: Any, value: Any) -> None:
        descriptor.atomic(self.sem, desc, kind, offsets, value)

    def visit_body(self, stmts: list[ast.stmt]) -> Returned | None:
        """Visit a statement list; see statements.KernelGenerator."""
        raise NotImplementedError


def _short(e: BaseException) -> str:
    text = str(e)
    return text if len(text) <= 300 else text[:300] + "..."


def _describe(x: Any) -> str:
    if isinstance(x, type(ast)):
        return "module " + x.__name__.replace("compiler.triton_compat", "triton").replace("compiler.", "triton.")
    name = getattr(x, "__name__", None)
    return f"{type(x).__name__} {name}" if name else repr(x)

