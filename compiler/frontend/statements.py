"""Statements: assignment, return, if, for, while, break/continue -> structured Tile IR.

Loop-carried values are found syntactically (names assigned in the body that exist before the
loop), so each body is visited once. `break` and `continue` become i1 flags carried by the
loop; statements after a possible break/continue run under `if not (break or continue)`.
"""

from __future__ import annotations

import ast
import builtins as py
from collections.abc import Callable
from typing import Any

from .. import errors as E
from ..ir import types as T
from ..ir.core import Block
from ..language import core as lc
from ..language.builtins import device_assert, item
from .codegen import CodeGenerator
from .limits import MAX_UNROLL, LimitError, bounded_str_source
from .livecode import Decide, assigned_names
from .livecode import contains as _contains
from .source import is_constexpr_annotation
from .values import UNKNOWN, BlockPointer, Returned, _unwrap, is_tensor

__all__ = ["KernelGenerator", "flatten", "assigned_names"]

_BRK = "__break__"
_CONT = "__continue__"
_MISSING = object()


# ---------------------------------------------------------------------- flattening
def flatten(v: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """Split a value into leaves (tensors and numbers) and a function rebuilding it."""
    if isinstance(v, (tuple, list)) and any(_has_tensor(x) for x in v):
        parts = [flatten(x) for x in v]
        sizes = [len(p[0]) for p in parts]
        leaves = [leaf for p in parts for leaf in p[0]]
        kind = type(v)

        def rebuild(xs: list[Any]) -> Any:
            out, i = [], 0
            for (_, rb), n in zip(parts, sizes, strict=True):
                out.append(rb(xs[i:i + n]))
                i += n
            return kind(out)

        return leaves, rebuild
    if isinstance(v, BlockPointer):
        n = len(v.block_shape)
        leaves = [v.base, *v.shape, *v.strides, *v.offsets]

        def rebuild_bp(xs: list[Any]) -> Any:
            return BlockPointer(xs[0], tuple(xs[1:1 + n]), tuple(xs[1 + n:1 + 2 * n]),
                                tuple(xs[1 + 2 * n:1 + 3 * n]), v.block_shape, v.order)

        return leaves, rebuild_bp
    return [v], lambda xs: xs[0]


def _has_tensor(v: Any) -> bool:
    if is_tensor(v) or isinstance(v, BlockPointer):
        return True
    if isinstance(v, (tuple, list)):
        return any(_has_tensor(x) for x in v)
    return False


def _is_runtime_leaf(v: Any) -> bool:
    return is_tensor(v) or (isinstance(v, (int, float)) and not isinstance(v, py.bool)) or isinstance(v, py.bool)


def _always_returns(stmts: list[ast.stmt], decide: Decide) -> bool:
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return True
    if isinstance(last, ast.If):
        taken = decide(last.test)
        if taken is not None:
            return _always_returns(last.body if taken else last.orelse, decide)
        return _always_returns(last.body, decide) and _always_returns(last.orelse, decide)
    return False


# ---------------------------------------------------------------------- the mixin
class KernelGenerator(CodeGenerator):
    """The code generator with statement support: what compiles kernels."""

    def visit_body(self, stmts: list[ast.stmt]) -> Returned | None:
        i = 0
        while i < len(stmts):
            st = stmts[i]
            rest = stmts[i + 1:]
            if isinstance(st, ast.If) and self._may_return(st):
                return self.visit_if(st, rest)
            r = self.visit(st)
            if isinstance(r, Returned):
                return r
            if rest and (_BRK in self.scope or _CONT in self.scope) and _contains(
                    [st], (ast.Break, ast.Continue), False):
                return self._guarded_rest(rest)
            i += 1
        return None

    def _may_return(self, st: ast.If) -> bool:
        """Whether a `return` under `st` can run (one under a branch settled false at compile time cannot)."""
        return _contains([st], (ast.Return,), False) and _contains([st], (ast.Return,), False, self._settled([st]))

    def _guarded_rest(self, rest: list[ast.stmt]) -> Returned | None:
        """Run `rest` only if neither break nor continue has been taken."""
        flags = [self.scope[n] for n in (_BRK, _CONT) if n in self.scope]
        go: Any = self.sem.not_(flags[0])
        for f in flags[1:]:
            go = self.sem.logical("and", go, self.sem.not_(f))
        self._runtime_if(go, lambda: self.visit_body(rest), lambda: None)
        return None

    # ------------------------------------------------------------ simple statements
    def visit_Expr(self, node: ast.Expr) -> Any:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        self.visit(node.value)
        return None

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Return(self, node: ast.Return) -> Returned:
        return Returned(self.visit(node.value) if node.value is not None else None, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for t in node.targets:
            self.assign(t, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        value = self.visit(node.value)
        if is_constexpr_annotation(node.annotation, self.src.globals):
            if is_tensor(value):
                raise self.error(E.ConstexprError, node, "a tl.constexpr variable needs a compile-time value")
            value = _unwrap(value)
        self.assign(node.target, value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(E.UnsupportedError, node, "augmented assignment only to plain names")
        cur = self.lookup(node.target.id, node.target)
        rhs = self.visit(node.value)
        self.assign(node.target, self.binary(type(node.op), cur, rhs, node))

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            value = _unwrap(value)
            if is_tensor(value) and not value.handle.name and not target.id.startswith("_"):
                value.handle.name = target.id  # readable IR: values named after their variables
            self.scope[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if is_tensor(value):
                raise self.error(E.UnsupportedError, target, "cannot unpack a tensor",
                                 "use tl.split for a trailing axis of size 2")
            vals = list(value)
            if len(vals) != len(target.elts):
                raise self.error(E.ArgumentError, target,
                                 f"cannot unpack {len(vals)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, vals, strict=True):
                self.assign(t, v)
            return
        raise self.error(E.UnsupportedError, target, "only names and tuples of names can be assigned to",
                         "tensors are immutable: store through a pointer with tl.store")

    def visit_Assert(self, node: ast.Assert) -> None:
        cond = self.visit(node.test)
        msg = bounded_str_source(self.visit(node.msg)) if node.msg is not None else ""
        if not is_tensor(cond):
            if not cond:
                raise self.error(E.ArgumentError, node, f"assertion failed: {msg}" if msg else "assertion failed")
            return

        device_assert(cond, str(bounded_str_source(msg)), _sem=self.sem)

    def visit_Break(self, node: ast.Break) -> None:
        if _BRK not in self.scope:
            raise self.error(E.UnsupportedError, node, "break outside a loop")
        self.scope[_BRK] = self.sem.to_tensor(True)

    def visit_Continue(self, node: ast.Continue) -> None:
        if _CONT not in self.scope:
            raise self.error(E.UnsupportedError, node, "continue outside a loop")
        self.scope[_CONT] = self.sem.to_tensor(True)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        raise self.error(E.UnsupportedError, node, "functions cannot be defined inside a kernel",
                         "define it at module level with @jit and call it")

    # ------------------------------------------------------------ if
    def visit_If(self, node: ast.If) -> Returned | None:
        return self.visit_if(node, [])

    def visit_if(self, node: ast.If, rest: list[ast.stmt]) -> Returned | None:
        cond = self.visit(node.test)
        if not is_tensor(cond):
            return self.visit_body((node.body if cond else node.orelse) + rest)
        if cond.is_tile() and cond.numel == 1:
            cond = item(cond, _sem=self.sem)  # a one-element tile decides like its element (Triton's rule)
        if cond.is_tile():
            raise self.error(E.ShapeError, node.test, "an if condition must be a scalar, not a tile",
                             "use tl.where for elementwise choices")
        decide = self._settled([node])
        if not _contains([node], (ast.Return,), False, decide):
            self._runtime_if(cond, lambda: self.visit_body(node.body), lambda: self.visit_body(node.orelse))
            return self.visit_body(rest) if rest else None
        then_stmts = node.body if _always_returns(node.body, decide) else node.body + rest
        else_stmts = node.orelse if _always_returns(node.orelse, decide) else node.orelse + rest
        results = self._runtime_if(cond, lambda: self.visit_body(then_stmts),
                                   lambda: self.visit_body(else_stmts), returns=True)
        return Returned(results)

    def _runtime_if(self, cond: Any, then_fn: Callable[[], Any], else_fn: Callable[[], Any],
                    returns: bool = False) -> Any:
        cond = self.sem.cast(cond, T.i1)
        before = self.scope
        blocks, scopes, rets = [], [], []
        for fn in (then_fn, else_fn):
            blk = Block()
            self.scope = dict(before)
            with self.b.at(blk):
                r = fn()
            if r is not None and not returns:
                raise self.error(E.UnsupportedError, self.src.tree, "return inside a conditional loop body")
            blocks.append(blk)
            scopes.append(self.scope)
            rets.append(r.value if isinstance(r, Returned) else None)
        self.scope = before
        if returns:
            vals = rets
            names: list[str] = []
        else:
            names = [n for n in dict.fromkeys([*scopes[0], *scopes[1]])
                     if n in scopes[0] and n in scopes[1]
                     and (scopes[0][n] is not before.get(n, _MISSING) or scopes[1][n] is not before.get(n, _MISSING))]
            vals = None
        branch_vals = [[s[n] for n in names] for s in scopes] if not returns else [[v] for v in rets]
        kept_names: list[str | None] = []
        leaves_per_branch: list[list[list[Any]]] = [[], []]
        rebuilders: list[Callable[[list[Any]], Any]] = []
        for j in range(len(branch_vals[0])):
            a, b = branch_vals[0][j], branch_vals[1][j]
            if not (_has_tensor(a) or _has_tensor(b)):
                if a is b or (type(a) is type(b) and a == b):
                    if not returns:
                        before_name = names[j]
                        self.scope[before_name] = a
                    continue
                if not (_is_runtime_leaf(a) and _is_runtime_leaf(b)):
                    if returns and (a is None) != (b is None):
                        raise E.UnsupportedError("every path of the function must return a value of the same kind")
                    raise E.DtypeError(f"{names[j] if names else 'the return value'} is a different "
                                       f"compile-time value in each branch ({a!r} vs {b!r})")
            la, rb = flatten(a)
            lb_, _ = flatten(b)
            if len(la) != len(lb_):
                raise E.DtypeError(f"{names[j] if names else 'the return value'} has a different structure "
                                   "in each branch")
            kept_names.append(names[j] if names else None)
            leaves_per_branch[0].append(la)
            leaves_per_branch[1].append(lb_)
            rebuilders.append(rb)
        types: list[T.Type] = []
        flat = [[x for group in leaves_per_branch[k] for x in group] for k in range(2)]
        for x, y in zip(flat[0], flat[1], strict=True):
            types.append(self._unify(x, y))
        for k in range(2):
            with self.b.at(blocks[k]):
                ys = [self._as(x, t).handle for x, t in zip(flat[k], types, strict=True)]
                self.b.create("yield", ys, [])
        op = self.b.create("if", [cond.handle], types, regions=blocks)
        res = [lc.Tensor(r) for r in op.results]
        i = 0
        out_vals = []
        for group, rb in zip(leaves_per_branch[0], rebuilders, strict=True):
            out_vals.append(rb(res[i:i + len(group)]))
            i += len(group)
        if returns:
            return out_vals[0] if out_vals else (vals[0] if vals else None)
        for n, v in zip(kept_names, out_vals, strict=True):
            self.scope[n] = v  # type: ignore[index]
        for n in list(self.scope):
            if n not in scopes[0] or n not in scopes[1]:
                self.scope.pop(n, None)
        return None

    def _unify(self, a: Any, b: Any) -> T.Type:
        if is_tensor(a) and is_tensor(b):
            if a.type != b.type:
                raise E.DtypeError(f"a variable has type {a.type} in one branch and {b.type} in the other",
                                   hint="give both branches the same dtype and shape (cast with .to)")
            return a.type
        if is_tensor(a):
            return a.type
        if is_tensor(b):
            return b.type
        ta, tb = self.sem.to_tensor(a).type, self.sem.to_tensor(b).type
        if ta != tb:
            assert isinstance(ta, T.ScalarType) and isinstance(tb, T.ScalarType)
            return self.sem.computation_type(ta, False, tb, False, False)
        return ta

    def _as(self, x: Any, t: T.Type) -> lc.Tensor:
        if is_tensor(x):
            if x.type != t:
                raise E.DtypeError(f"value of type {x.type} where {t} is required")
            return x
        v = self.sem.constant(x, t) if isinstance(t, T.ScalarType) else None
        if v is None:
            raise E.DtypeError(f"cannot use {x!r} as {t}")
        return v

    # ------------------------------------------------------------ loops
    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(E.UnsupportedError, node, "for ... else is not supported")
        it = node.iter
        fn = self.visit(it.func) if isinstance(it, ast.Call) else None
        if fn is lc.static_range:
            assert isinstance(it, ast.Call)
            args = self._range_args(it)
            if any(is_tensor(a) for a in args):
                raise self.error(E.ConstexprError, it, "static_range bounds must be compile-time constants")
            trips = py.range(*[int(a) for a in args])
            if len(trips) > MAX_UNROLL:
                raise self.error(LimitError, it, f"tl.static_range unrolls {len(trips):,} iterations; the limit is "
                                 f"{MAX_UNROLL:,}", "use a runtime loop: range(...) or tl.range(...)")
            return self._unrolled(node, list(trips))
        if fn is py.range or fn is lc.range:
            assert isinstance(it, ast.Call)
            args = self._range_args(it)
            if not 1 <= len(args) <= 3:
                raise self.error(E.ArgumentError, it, "range takes 1 to 3 arguments")
            lo, hi, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
            return self._runtime_for(node, lo, hi, step, self._num_stages(it) if fn is lc.range else None)
        seq = self.visit(it)
        if isinstance(seq, (tuple, list)):
            if len(seq) > MAX_UNROLL:
                raise self.error(LimitError, it, f"a loop over a compile-time sequence of {len(seq):,} items; the "
                                 f"limit is {MAX_UNROLL:,}")
            return self._unrolled(node, list(seq))
        raise self.error(E.UnsupportedError, it, "for loops iterate over range(...), tl.range(...), "
                         "tl.static_range(...) or a compile-time tuple")

    def _num_stages(self, it: ast.Call) -> int | None:
        """tl.range(..., num_stages=S): S (a compile-time integer >= 0), None when not given."""
        for k in it.keywords:
            if k.arg != "num_stages":
                continue
            v = _unwrap(self.visit(k.value))
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise self.error(E.ConstexprError, k.value,
                                 f"tl.range num_stages must be a compile-time integer >= 0, got {v!r}",
                                 "pass a literal such as num_stages=3, or a tl.constexpr parameter")
            return v
        return None

    def _range_args(self, it: ast.Call) -> list[Any]:
        """[start, end, step] of range(...) / tl.range(...) / tl.static_range(...), given by position
        or by keyword (`step=`); tl.range's num_stages is read by _num_stages, its other scheduling
        hints are accepted and ignored."""
        vals: dict[str, Any] = {"arg1": None, "arg2": None, "step": None}
        if not 1 <= len(it.args) <= 3 and not it.keywords:
            raise self.error(E.ArgumentError, it, "range takes 1 to 3 arguments")
        for n, a in zip(vals, it.args, strict=False):
            vals[n] = _unwrap(self.visit(a))
        for k in it.keywords:
            if k.arg in vals:
                vals[k.arg] = _unwrap(self.visit(k.value))
        a1, a2, st = vals["arg1"], vals["arg2"], vals["step"]
        if a1 is None:
            raise self.error(E.ArgumentError, it, "range needs an end")
        lo, hi = (0, a1) if a2 is None else (a1, a2)
        return [lo, hi, 1 if st is None else st]

    def _unrolled(self, node: ast.For, values: list[Any]) -> None:
        if _contains(node.body, (ast.Break, ast.Continue), False, self._settled(node.body, node.target)):
            raise self.error(E.UnsupportedError, node, "break/continue in a static_range loop",
                             "use a runtime range() loop")
        for v in values:
            self.assign(node.target, v)
            r = self.visit_body(node.body)
            if r is not None:
                raise self.error(E.UnsupportedError, node, "return inside a loop is not supported")

    def _carried(self, body: list[ast.stmt], decide: Decide, extra: tuple[str, ...] = ()) -> list[str]:
        names = [n for n in assigned_names(body, decide) if n in self.scope]
        return names + [e for e in extra if e not in names]

    def _settled(self, body: list[ast.stmt], target: ast.expr | None = None) -> Decide:
        """Settles the `if` tests of a loop body that are compile-time values the loop cannot change:
        tests whose value does not depend on a name the body (or the loop variable) assigns."""
        changing = set(assigned_names(body))
        if target is not None:
            changing.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        return lambda test: self.static_truth(test, changing)

    def static_truth(self, test: ast.expr, unknown: set[str]) -> bool | None:
        """The truth of `test` when it is a compile-time value in the current scope with the names in
        `unknown` unknown (`FLAG or i > 0` settles when FLAG is true), else None. Any op the evaluation
        makes goes to a block that is thrown away; an error means "not settled" (the branch is then
        generated and reports it where it stands)."""
        saved = self.scope
        self.scope = dict(saved)
        self.scope.update(dict.fromkeys(unknown, UNKNOWN))
        try:
            with self.b.at(Block()):
                value = self.visit(test)
        except E.CompilationError:
            return None
        finally:
            self.scope = saved
        if _has_tensor(value) or not isinstance(value, (py.bool, int, float, str, tuple, list, type(None))):
            return None
        return py.bool(value)

    def _loop_inits(self, names: list[str]) -> tuple[list[lc.Tensor], list[Callable[[list[Any]], Any]], list[int]]:
        inits: list[lc.Tensor] = []
        rebuilders, sizes = [], []
        for n in names:
            leaves, rb = flatten(self.scope[n])
            for leaf in leaves:
                if not _is_runtime_leaf(leaf):
                    raise E.UnsupportedError(
                        f"loop variable {n!r} holds a compile-time value ({leaf!r}) that the loop reassigns",
                        hint="assign it before the loop only, or make it a tensor")
                inits.append(self.sem.to_tensor(leaf))
            rebuilders.append(rb)
            sizes.append(len(leaves))
        return inits, rebuilders, sizes

    def _bind(self, names: list[str], rebuilders: list[Any], sizes: list[int], vals: list[lc.Tensor]) -> None:
        i = 0
        for n, rb, k in zip(names, rebuilders, sizes, strict=True):
            self.scope[n] = rb(vals[i:i + k])
            i += k

    def _yield_values(self, names: list[str], inits: list[lc.Tensor]) -> list[lc.Tensor]:
        out: list[lc.Tensor] = []
        for n in names:
            if n not in self.scope:
                raise E.UndefinedNameError(f"loop variable {n!r} is not defined at the end of the loop body")
            leaves, _ = flatten(self.scope[n])
            out.extend(self.sem.to_tensor(x) if not is_tensor(x) else x for x in leaves)
        if len(out) != len(inits):
            raise E.DtypeError("a loop-carried tuple changes its structure inside the loop")
        fixed = []
        for v, init, in zip(out, inits, strict=True):
            if v.type != init.type:
                if not v.is_tile() and not init.is_tile() and v.handle.op is not None and \
                        v.handle.op.opcode == "constant":
                    v = self.sem.cast(v, init.type)  # type: ignore[arg-type]
                else:
                    name = next((n for n in names), "?")
                    raise E.DtypeError(
                        f"loop-carried value {name!r} changes type inside the loop: {init.type} before, "
                        f"{v.type} after one iteration",
                        hint="initialise it with the type the loop produces, e.g. tl.zeros(shape, tl.float32)")
            fixed.append(v)
        return fixed

    def _runtime_for(self, node: ast.For, lo: Any, hi: Any, step: Any, num_stages: int | None = None) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(E.UnsupportedError, node.target, "a range loop variable must be a plain name")
        s = self.sem
        bounds = [s.to_tensor(x) for x in (lo, hi, step)]
        for x in bounds:
            if x.is_tile() or not x.dtype.is_int():
                raise self.error(E.DtypeError, node.iter, f"range bounds must be integer scalars, got {x.type}")
        ity = s.integer_promote(s.integer_promote(bounds[0].ir_elem, bounds[1].ir_elem),  # type: ignore[arg-type]
                                bounds[2].ir_elem)  # type: ignore[arg-type]
        if ity.bits < 32:
            ity = T.i32
        lb, ub, st = (s.cast(x, ity) for x in bounds)
        if isinstance(step, int) and step == 0:
            raise self.error(E.ArgumentError, node.iter, "range step must not be zero")
        decide = self._settled(node.body, node.target)
        has_flow = _contains(node.body, (ast.Break, ast.Continue), False, decide)
        if has_flow:
            return self._for_as_while(node, lb, ub, st, step, decide)
        names = self._carried(node.body, decide)
        names = [n for n in names if n != node.target.id]
        inits, rbs, sizes = self._loop_inits(names)
        body = Block()
        iv = body.add_arg(ity, node.target.id)
        args = [body.add_arg(x.type) for x in inits]
        before = self.scope
        self.scope = dict(before)
        with self.b.at(body):
            self._bind(names, rbs, sizes, [lc.Tensor(a) for a in args])
            self.scope[node.target.id] = lc.Tensor(iv)
            if self.visit_body(node.body) is not None:
                raise self.error(E.UnsupportedError, node, "return inside a loop is not supported")
            ys = self._yield_values(names, inits)
            self.b.create("yield", [y.handle for y in ys], [])
        self.scope = before
        attrs: dict[str, Any] = {"step_sign": (1 if step > 0 else -1) if isinstance(step, int) else 0}
        if num_stages is not None:  # the loads of this loop are pipelined that deep (passes/pipeline.py)
            attrs["num_stages"] = num_stages
        op = self.b.create("for", [lb.handle, ub.handle, st.handle, *[x.handle for x in inits]],
                           [x.type for x in inits], attrs, [body])
        self._bind(names, rbs, sizes, [lc.Tensor(r) for r in op.results])

    def _for_as_while(self, node: ast.For, lb: lc.Tensor, ub: lc.Tensor, st: lc.Tensor, step: Any,
                      decide: Decide) -> None:
        """A range loop with break/continue: a while loop over (iv, break flag, carried...)."""
        assert isinstance(node.target, ast.Name)
        s = self.sem
        ivname = f"__iv_{node.target.id}"
        self.scope[ivname] = lb
        saved_flags = {n: self.scope.get(n, _MISSING) for n in (_BRK, _CONT)}
        self.scope[_BRK] = s.to_tensor(False)
        names = [n for n in self._carried(node.body, decide, (ivname, _BRK)) if n not in (node.target.id, _CONT)]
        self._while_loop(
            names,
            cond_fn=lambda: s.logical("and", s.not_(self.scope[_BRK]),
                                      s.compare("lt" if not isinstance(step, int) or step > 0 else "gt",
                                                self.scope[ivname], ub)),
            body_fn=lambda: self._for_body_with_flags(node, ivname, st),
        )
        for n, v in saved_flags.items():
            if v is _MISSING:
                self.scope.pop(n, None)
            else:
                self.scope[n] = v
        self.scope.pop(ivname, None)

    def _for_body_with_flags(self, node: ast.For, ivname: str, st: lc.Tensor) -> None:
        assert isinstance(node.target, ast.Name)
        iv = self.scope[ivname]
        self.scope[node.target.id] = iv
        self.scope[_CONT] = self.sem.to_tensor(False)
        if self.visit_body(node.body) is not None:
            raise self.error(E.UnsupportedError, node, "return inside a loop is not supported")
        self.scope[ivname] = self.sem.add(iv, st)
        self.scope.pop(_CONT, None)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise self.error(E.UnsupportedError, node, "while ... else is not supported")
        decide = self._settled(node.body)
        if decide(node.test) is False:
            return None  # `while FLAG:` on a false constexpr: the body is never generated
        has_flow = _contains(node.body, (ast.Break, ast.Continue), False, decide)
        saved_flags = {n: self.scope.get(n, _MISSING) for n in (_BRK, _CONT)}
        extra: tuple[str, ...] = ()
        if has_flow:
            self.scope[_BRK] = self.sem.to_tensor(False)
            extra = (_BRK,)
        names = [n for n in self._carried(node.body, decide, extra) if n != _CONT]

        def cond_fn() -> Any:
            c = self.visit(node.test)
            if not is_tensor(c) and not c:
                return False
            c = self.sem.to_tensor(c)
            if has_flow:
                c = self.sem.logical("and", self.sem.not_(self.scope[_BRK]), c)
            return c

        def body_fn() -> None:
            if has_flow:
                self.scope[_CONT] = self.sem.to_tensor(False)
            if self.visit_body(node.body) is not None:
                raise self.error(E.UnsupportedError, node, "return inside a loop is not supported")
            self.scope.pop(_CONT, None)

        self._while_loop(names, cond_fn, body_fn)
        for n, v in saved_flags.items():
            if v is _MISSING:
                self.scope.pop(n, None)
            else:
                self.scope[n] = v

    def _while_loop(self, names: list[str], cond_fn: Callable[[], Any], body_fn: Callable[[], None]) -> None:
        inits, rbs, sizes = self._loop_inits(names)
        before_blk, after_blk = Block(), Block()
        bargs = [before_blk.add_arg(x.type) for x in inits]
        aargs = [after_blk.add_arg(x.type) for x in inits]
        outer = self.scope
        self.scope = dict(outer)
        with self.b.at(before_blk):
            self._bind(names, rbs, sizes, [lc.Tensor(a) for a in bargs])
            c = cond_fn()
            if c is False:
                self.scope = outer
                return
            c = self.sem.cast(c, T.i1)
            if c.is_tile() and c.numel == 1:
                c = item(c, _sem=self.sem)
            if c.is_tile():
                raise E.ShapeError("a while condition must be a scalar")
            self.b.create("condition", [c.handle, *bargs], [])
        self.scope = dict(outer)
        with self.b.at(after_blk):
            self._bind(names, rbs, sizes, [lc.Tensor(a) for a in aargs])
            body_fn()
            ys = self._yield_values(names, inits)
            self.b.create("yield", [y.handle for y in ys], [])
        self.scope = outer
        op = self.b.create("while", [x.handle for x in inits], [x.type for x in inits],
                           regions=[before_blk, after_blk])
        self._bind(names, rbs, sizes, [lc.Tensor(r) for r in op.results])

