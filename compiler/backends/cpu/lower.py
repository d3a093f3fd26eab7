"""Tile IR -> LLVM IR for the CPU: one program instance is one call of the kernel function.

Tiles are either *lazy* (an elementwise expression evaluated per element inside whatever loop
consumes it, so chains of elementwise ops fuse into one loop) or *buffers* (materialized in
stack or arena memory). A value is materialized when it feeds a non-elementwise op, crosses
control flow, or is expensive and used more than once. Loads fused into a loop never touch
masked-off memory: a masked load is a branch the loop vectorizer turns into a masked load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from ...ir import types as T
from ...ir.core import Block, Function, Location, Op, Value
from ...ir.ops import ELEMENTWISE, EXPENSIVE_BINARY, MOVEMENT
from ...passes.provenance import pointer_roots
from ..llvm.scalar import I1, I8, I32, I64, PTR, llvm_type
from .buffers import Buf, contiguous_strides
from .elementwise import eval_elementwise
from .ops import lower_op
from .versioning import all_true
from .waits import WaitLoop, waiting_loops

__all__ = ["Lowering", "Buf", "KernelABI"]

_LAZY = ELEMENTWISE | MOVEMENT
_SAME_INDEX = ELEMENTWISE - {"broadcast", "expand_dims"}  # operands evaluated at the result's index
# (the math library's functions are inlined, each 30-150 instructions: computed once, stored)
_EXPENSIVE_MATH = {"exp", "exp2", "exp10", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
                   "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
                   "cbrt", "sqrt", "rsqrt", "pow", "atan2", "hypot", "fmod", "remainder", "sigmoid", "div",
                   "lgamma", "tgamma", "j0", "j1", "y0", "y1"}
_STACK_LIMIT = 1 << 20
# loop nests whose innermost loop would run this many times or fewer are one flat loop (loop_nest)
FLAT_INNER = 8

_MAX_FUSED_DEPTH = 64  # elementwise ops fused into one expression along a chain of operands


@dataclass
class KernelABI:
    """The kernel's LLVM parameters: Tile IR args, then program ids and grid size (i32 each)."""

    arg_types: list[T.Type]
    debug: bool


class Lowering:
    """Lowers one Tile IR function into `module` as an internal kernel function."""

    def __init__(self, fn: Function, module: ir.Module, name: str, debug: bool, loc_table: list[Location],
                 loc_args: list[int | None] | None = None):
        self.fn = fn
        self.m = module
        self.name = name
        self.debug = debug
        self.loc_table = loc_table
        # per loc_table entry: the tensor argument an out-of-bounds access went through
        self.loc_args: list[int | None] = loc_args if loc_args is not None else []
        self.vals: dict[Value, Any] = {}
        self.lazy_info: dict[Value, tuple[bool, bool]] = {}  # (has_load, expensive)
        self.lazy_depth: dict[Value, int] = {}  # lazy ops on the longest operand chain down to a buffer
        self.uses: dict[Value, int] = {}
        self.nested_use: set[Value] = set()
        self.pending: list[Value] = []
        self.memo: dict[Any, ir.Value] = {}
        self.true_masks: set[Value] = set()  # masks known true where the code is being emitted
        self.fmf: tuple[str, ...] = ()
        self.arena_bytes = 0
        self.stack_bytes = 0
        self._alloc_id = 0
        self.zero = ir.Constant(I64, 0)
        self._count_uses(fn.body, set())
        # provenance of pointers: the initial one's for loop-carried pointers (which tensors a store
        # may overwrite); for debug bounds checks only provenance that holds in every iteration
        self.checked_roots = {v: fn.args[i] for v, i in pointer_roots(fn).items()} if debug else {}
        self.waiting = waiting_loops(fn)  # loops in which a program may wait for another (waits.py)
        self.waits: list[WaitLoop] = []  # those being emitted, outermost first

    # ------------------------------------------------------------------ analysis
    def _count_uses(self, block: Block, _outer: set[Value]) -> None:
        owner: dict[Value, Block] = {}
        for a in block.args:
            owner[a] = block
        ops = list(block.walk())
        for op in ops:
            for r in op.regions:
                for a in r.args:
                    owner[a] = r
            for res in op.results:
                assert op.parent is not None
                owner[res] = op.parent
        for op in ops:
            for v in op.operands:
                self.uses[v] = self.uses.get(v, 0) + 1
                if owner.get(v) is not op.parent:
                    self.nested_use.add(v)

    # ------------------------------------------------------------------ function
    def build(self) -> ir.Function:
        types = [llvm_type(a.type) if not _is_bool(a.type) else I32 for a in self.fn.args]
        extra = [I32] * 6 + [PTR, PTR, PTR]  # pids, grid, arena, debug error record, debug bounds
        fty = ir.FunctionType(ir.VoidType(), types + extra)
        f = ir.Function(self.m, fty, self.name)
        f.linkage = "internal"
        f.attributes.add("alwaysinline")
        self.f = f
        entry = f.append_basic_block("entry")
        body = f.append_basic_block("body")
        self.entry_builder = ir.IRBuilder(entry)
        self.b = ir.IRBuilder(body)
        n = len(self.fn.args)
        self.pid = f.args[n:n + 3]
        self.nprog = f.args[n + 3:n + 6]
        self.arena, self.err, self.bounds = f.args[n + 6], f.args[n + 7], f.args[n + 8]
        for a, p in zip(self.fn.args, f.args, strict=False):
            self.vals[a] = self.b.trunc(p, I1) if _is_bool(a.type) else p
        self.lower_block(self.fn.body)
        self.b.ret_void()
        self.entry_builder.branch(body)
        return f

    # ------------------------------------------------------------------ memory
    def alloc(self, shape: tuple[int, ...], elem: T.ElemType) -> Buf:
        n = 1
        for d in shape:
            n *= d
        ty = llvm_type(elem)
        size = max(1, n * _nbytes(elem))
        self._alloc_id += 1
        if self.stack_bytes + size <= _STACK_LIMIT:
            self.stack_bytes += size
            p = self.entry_builder.alloca(ty, size=ir.Constant(I64, n))
            p.align = 64
        else:
            off = (self.arena_bytes + 63) & ~63
            self.arena_bytes = off + size
            p = self.entry_builder.gep(self.arena, [ir.Constant(I64, off)], source_etype=I8)
        return Buf(p, shape, contiguous_strides(shape), elem, self._alloc_id)

    # ------------------------------------------------------------------ loops
    def loop(self, n: int | ir.Value, body: Callable[[ir.Value], None], reverse: bool = False,
             loop_md: ir.MDValue | None = None) -> None:
        b = self.b
        count = ir.Constant(I64, n) if isinstance(n, int) else n
        if isinstance(n, int) and n <= 0:  # the loop below runs its body at least once
            return
        if isinstance(n, int) and n == 1:
            body(self.zero)
            return
        pre = b.block
        loop_bb = b.append_basic_block("loop")
        exit_bb = b.append_basic_block("loop.end")
        b.branch(loop_bb)
        b.position_at_end(loop_bb)
        i = b.phi(I64)
        i.add_incoming(self.zero, pre)
        idx = b.sub(b.sub(count, ir.Constant(I64, 1)), i) if reverse else i
        body(idx)
        nxt = b.add(i, ir.Constant(I64, 1))
        i.add_incoming(nxt, b.block)
        br = b.cbranch(b.icmp_unsigned("<", nxt, count), loop_bb, exit_bb)
        if loop_md is not None:
            br.set_metadata("llvm.loop", loop_md)
        b.position_at_end(exit_bb)

    def masked_loop_nest(self, shape: tuple[int, ...], roots: list[Value], body: Callable[[tuple[ir.Value, ...]], None],
                         mask: Value | None = None) -> None:
        """loop_nest(shape, body) for a body that evaluates `roots` (and a store masked by `mask`) at
        each index. Where the masks of the loads that reach the roots through ops of the same index
        (and `mask`) are comparisons that versioning.all_true can check for the whole block at
        once, the loop is emitted twice: with those masks taken as true (plain vector loads and
        stores) when the check holds, as it does in all but the edge blocks, else as written."""
        n = 1
        for d in shape:
            n *= d
        masks = self._index_masks(roots, mask) if not self.debug and n >= 8 else []
        known, checks = [], []
        for m in masks:
            ok = all_true(self, m)
            if ok is not None:
                known.append(m)
                checks.append(ok)
        if not known:
            self.loop_nest(shape, body)
            return
        cond = checks[0]
        for c in checks[1:]:
            cond = self.b.and_(cond, c)
        inside = self.b.append_basic_block("all.true")
        edge = self.b.append_basic_block("masked")
        end = self.b.append_basic_block("versions.end")
        self.b.cbranch(cond, inside, edge)
        self.b.position_at_end(inside)
        before = self.true_masks
        self.true_masks = before | set(known)
        try:
            self.loop_nest(shape, body)
        finally:
            self.true_masks = before
        self.b.branch(end)
        self.b.position_at_end(edge)
        self.loop_nest(shape, body)
        self.b.branch(end)
        self.b.position_at_end(end)

    def _index_masks(self, roots: list[Value], mask: Value | None) -> list[Value]:
        """`mask` and the masks of the loads that reach `roots` through ops evaluated at the same
        index (not broadcasts, transposes...), those that read no memory themselves."""
        found = [] if mask is None else [mask]
        for _, op in self.lazy_tree(roots, _SAME_INDEX):
            if op is not None and op.opcode == "load" and op.attrs.get("has_mask"):
                found.append(op.operands[1])
        return [m for m in dict.fromkeys(found)
                if not any(op is not None and op.opcode in ("load", "gather") for _, op in self.lazy_tree([m]))]

    def lazy_tree(self, roots: list[Value], through: frozenset[str] | None = None) -> Iterator[tuple[Value, Op | None]]:
        """Each value the lazy expressions `roots` evaluate, once, with its lazy op (None: a scalar
        or a buffer); the walk goes into the operands of every lazy op, or of those in `through`."""
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            u = stack.pop()
            if id(u) in seen:
                continue
            seen.add(id(u))
            x = self.vals.get(u)
            op = x[0] if isinstance(x, tuple) else None
            yield u, op
            if op is not None and (through is None or op.opcode in through):
                stack.extend(op.operands)

    def loop_nest(self, shape: tuple[int, ...], body: Callable[[tuple[ir.Value, ...]], None]) -> None:
        """body(idx) for every index of `shape`, in row-major order. A nest whose dims are powers of
        two and whose innermost loop would be short (FLAT_INNER or fewer) is one loop over the
        flat index, each index its bits: a short inner loop vectorizes poorly, and the thousands of
        tiny nests of an emulated tensor-core kernel made LLVM's loop passes take most of a
        compile."""
        dims = [d for d in shape if d > 1]
        if len(dims) > 1 and dims[-1] <= FLAT_INNER and all(d & (d - 1) == 0 for d in dims):
            total = 1
            for d in shape:
                total *= d

            def flat(f: ir.Value) -> None:
                idx, below = [], total
                for d in shape:
                    below //= d
                    if d == 1:
                        idx.append(self.zero)
                        continue
                    i = self.b.lshr(f, ir.Constant(I64, below.bit_length() - 1)) if below > 1 else f
                    idx.append(self.b.and_(i, ir.Constant(I64, d - 1)) if below * d < total else i)
                self.memo = {}
                body(tuple(idx))

            self.loop(total, flat)
            return

        def rec(d: int, idx: tuple[ir.Value, ...]) -> None:
            if d == len(shape):
                self.memo = {}
                body(idx)
                return
            self.loop(shape[d], lambda i: rec(d + 1, (*idx, i)))

        rec(0, ())

    # ------------------------------------------------------------------ values
    def scalar(self, v: Value) -> ir.Value:
        x = self.vals[v]
        assert isinstance(x, ir.Value), f"{v} is not a scalar"
        return x

    def ev(self, v: Value, idx: tuple[ir.Value, ...]) -> ir.Value:
        """The element of `v` at `idx` (scalars ignore idx)."""
        x = self.vals[v]
        if isinstance(x, ir.Value):
            return x
        if isinstance(x, Buf):
            return self.b.load(x.addr(self.b, idx), typ=llvm_type(x.elem))
        key = (id(v), tuple(id(i) for i in idx))
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        op, k = x
        r = self.ev_op(op, k, idx)
        self.memo[key] = r
        return r

    def ev_op(self, op: Op, k: int, idx: tuple[ir.Value, ...]) -> ir.Value:
        return eval_elementwise(self, op, k, idx)

    def materialize(self, v: Value) -> Buf:
        x = self.vals[v]
        if isinstance(x, Buf):
            return x
        assert isinstance(v.type, T.TileType)
        buf = self.alloc(v.type.shape, v.type.elem)
        self.store_tile(v, buf)
        self.vals[v] = buf
        if v in self.pending:
            self.pending.remove(v)
        return buf

    def store_tile(self, v: Value, buf: Buf) -> None:
        """Write the elements of `v` into `buf` (one fused loop nest)."""
        self.consume(v)
        self.masked_loop_nest(buf.shape, [v], lambda idx: self.b.store(self.ev(v, idx), buf.addr(self.b, idx)))

    def consume(self, v: Value) -> None:
        """`v` is being evaluated by a root: it and its lazy inputs are no longer pending."""
        for u, _ in self.lazy_tree([v]):
            if u in self.pending:
                self.pending.remove(u)

    def lazy_flags(self, v: Value) -> tuple[bool, bool]:
        return self.lazy_info.get(v, (False, False))

    # ------------------------------------------------------------------ ops
    def lower_block(self, block: Block) -> None:
        for op in block.ops:
            if op.opcode in ("yield", "condition"):
                continue
            spec_pure = op.opcode not in ("store", "atomic_rmw", "atomic_cas", "print", "assert") and not (
                op.regions and _has_side_effects(op))
            if not spec_pure:
                self.flush_pending(op)
            lower_op(self, op)

    def define_lazy(self, op: Op) -> None:
        """Make `op`'s results lazy (evaluated where consumed), or buffers where that pays or must."""
        has_load = op.opcode == "load"
        expensive = op.opcode == "math" and op.attrs.get("fn") in _EXPENSIVE_MATH or op.opcode in EXPENSIVE_BINARY
        depth = 1
        for o in op.operands:
            hl, ex = self.lazy_flags(o)
            has_load |= hl
            expensive |= ex
            if isinstance(self.vals.get(o), tuple):
                depth = max(depth, self.lazy_depth.get(o, 0) + 1)
        for k, r in enumerate(op.results):
            self.vals[r] = (op, k)
            self.lazy_info[r] = (has_load, expensive)
            self.lazy_depth[r] = depth
            if (has_load or expensive) and (self.uses.get(r, 0) > 1 or r in self.nested_use) or (
                    depth >= _MAX_FUSED_DEPTH and isinstance(r.type, T.TileType)):
                # (a chain this long is evaluated by recursion, one level per op: cut it into buffers)
                self.materialize(r)
            elif has_load:
                self.pending.append(r)

    def flush_pending(self, op: Op) -> None:
        """Before a side effect, materialize lazy loads that must read memory before it."""
        feeding = {id(u) for u, _ in self.lazy_tree(op.operands)} if not op.regions else set()
        # A load fused into the side effect's element loop reads element i when the loop is at
        # element i: right when it reads the element the loop writes there (or memory the store
        # never writes). Loads at other indices are read in full first, whatever argument they go
        # through: two pointer arguments may be the same tensor (y = shift(x) called with y is x),
        # and a program loads its whole tile before it stores, as on the GPU.
        target = op.operands[0] if op.operands and not op.regions and op.opcode == "store" else None
        target_key = _index_key(target) if target is not None else None
        for v in list(self.pending):
            if id(v) not in feeding or target is None or _reads_elsewhere(self, v, target, target_key):
                self.materialize(v)

    # ------------------------------------------------------------------ debug support
    def loc_id(self, op: Op, arg: int | None = None) -> int:
        self.loc_table.append(op.loc)
        self.loc_args.append(arg)
        return len(self.loc_table)

    def root_arg(self, ptr: Value) -> int | None:
        """The index of the kernel argument pointer `ptr` was derived from (when unique)."""
        root = self.checked_roots.get(ptr)
        return None if root is None else self.fn.args.index(root)

    def record_error(self, cond_bad: ir.Value, kind: int, op: Op, detail: ir.Value, arg: int | None = None) -> None:
        """If `cond_bad`, record (kind, location, program id, detail) unless already recorded;
        `arg` is the tensor argument an out-of-bounds access went through."""
        b = self.b
        bad_bb = b.append_basic_block("dbg.bad")
        ok_bb = b.append_basic_block("dbg.ok")
        b.cbranch(cond_bad, bad_bb, ok_bb)
        b.position_at_end(bad_bb)
        slot = b.gep(self.err, [ir.Constant(I64, 0)], source_etype=I64)
        res = b.cmpxchg(slot, ir.Constant(I64, 0), ir.Constant(I64, kind << 32 | self.loc_id(op, arg)), "monotonic",
                        "monotonic")
        won = b.extract_value(res, 1)
        store_bb = b.append_basic_block("dbg.store")
        b.cbranch(won, store_bb, ok_bb)
        b.position_at_end(store_bb)
        for i, val in enumerate([*self.pid, detail]):
            p = b.gep(self.err, [ir.Constant(I64, i + 1)], source_etype=I64)
            b.store(b.sext(val, I64) if val.type != I64 else val, p)
        b.branch(ok_bb)
        b.position_at_end(ok_bb)


def _is_bool(t: T.Type) -> bool:
    return t == T.i1


def _nbytes(e: T.ElemType) -> int:
    if isinstance(e, T.PointerType):
        return 8
    return max(1, e.bits // 8)


def _has_side_effects(op: Op) -> bool:
    return any(o.opcode in ("store", "atomic_rmw", "atomic_cas", "print", "assert") for o in op.walk())


def _index_key(ptr: Value) -> tuple[int, ...] | None:
    """The element offsets of a pointer tile built as `uniform base + o1 + o2 + ...`: the ids of
    the offset tiles (sorted), or None when the base is not one pointer for the whole tile. Two
    pointer tiles with the same key address element i at the same offset from their bases."""
    offsets: list[int] = []
    v = ptr
    while isinstance(v.type, T.TileType):
        d = v.op
        if d is None:
            return None
        if d.opcode == "addptr":
            offsets.append(id(d.operands[1]))
            v = d.operands[0]
        elif d.opcode == "splat":  # the base: one scalar pointer
            v = d.operands[0]
        else:
            return None
    return tuple(sorted(offsets))


def _reads_elsewhere(lw: Lowering, v: Value, ptr: Value, key: tuple[int, ...] | None) -> bool:
    """True if lazy `v` loads through a pointer tile that may address another element than `ptr`
    does at the same index (not `ptr` itself, nor the same offsets from another base)."""
    for _, op in lw.lazy_tree([v]):
        if op is not None and op.opcode == "load":
            p = op.operands[0]
            if p is not ptr and (key is None or _index_key(p) != key):
                return True
    return False
