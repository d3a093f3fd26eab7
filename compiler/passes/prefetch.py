"""Prefetch the loads that feed `tl.dot` in a loop one iteration ahead.

    for i in range(lb, ub, step):             x0 = load(addr(lb, init), mask & (lb < ub))
        x = load(addr(i, args))         ==>    for i in range(...) carrying x:
        acc = dot(x, ..., acc)                     xn = load(addr(i + step, next(args)), mask & (i + step < ub))
        args = next(args)                          acc = dot(x, ..., acc)
                                                   args = next(args); carry xn

The next iteration's load is issued at the top of the body, so its memory latency overlaps
this iteration's dot instead of stalling the next one. The address and mask of iteration
i + step are recomputed by cloning the pure ops that compute them (and the next values of the
loop-carried pointers); the extra `i + step < ub` term keeps the last prefetch (and the
prologue of an empty loop) from touching memory.

Only loops whose body has no side effects (stores, atomics, barriers, prints) are changed,
so reading one iteration early cannot observe a different memory state.
"""

from __future__ import annotations

from ..ir import types as T
from ..ir.core import Block, Function, Op, Value
from ..ir.ops import is_pure
from .dce import dce
from .uses import replace_all_uses

__all__ = ["prefetch_dot_operands", "slice_of", "clone_ops"]

_LIMIT = 64  # ops cloned per prefetched load at most
# Registers per thread that the dot accumulators and the prefetched tiles may take together: more
# and the kernel spills, which costs more than the latency the prefetch hides.
_REGISTER_BUDGET = 160
_THROUGH = ("cast", "trans", "bitcast")
_SHARED_ONLY = ("yield", "async_copy", "async_wait")


def prefetch_dot_operands(fn: Function, num_warps: int | None = None) -> int:
    """Rewrite every eligible loop of `fn`; returns the number of loads prefetched. With
    `num_warps`, loops whose accumulators and prefetched tiles would exceed the register budget
    per thread are left alone."""
    total = 0
    for op in list(fn.walk()):
        if op.opcode == "for" and op.parent is not None:
            total += _loop(fn, op, num_warps)
    if total:
        dce(fn)
    return total


def _defined_in(v: Value, block: Block) -> bool:
    owner = v.owner
    if isinstance(owner, Block):
        return owner is block
    return owner is not None and owner.parent is block


def slice_of(vals: list[Value], body: Block) -> list[Op] | None:
    """The body ops computing `vals` (in body order), or None if one is not clonable."""
    need: set[Op] = set()
    stack = [v for v in vals]
    while stack:
        v = stack.pop()
        if not _defined_in(v, body) or isinstance(v.owner, Block):
            continue
        op = v.op
        assert op is not None
        if op in need:
            continue
        if op.regions or not is_pure(op) or op.opcode in ("load", "dot", "reduce", "scan"):
            return None
        need.add(op)
        if len(need) > _LIMIT:
            return None
        stack.extend(op.operands)
    return [o for o in body.ops if o in need]


def _feeds_dot(v: Value, body: Block) -> bool:
    for op in body.ops:
        if v in op.operands:
            if op.opcode == "dot" and op.operands.index(v) < 2:
                return True
            if op.opcode in _THROUGH and _feeds_dot(op.result, body):
                return True
    return False


def clone_ops(ops: list[Op], mapping: dict[Value, Value], out: list[Op]) -> None:
    for op in ops:
        new = Op(op.opcode, [mapping.get(v, v) for v in op.operands], [r.type for r in op.results], dict(op.attrs),
                 loc=op.loc)
        out.append(new)
        for a, b in zip(op.results, new.results, strict=True):
            mapping[a] = b


def _guarded(load: Op, mapping: dict[Value, Value], cond: Value, out: list[Op]) -> Op:
    """A copy of `load` with operands remapped and its mask and-ed with the scalar `cond`."""
    ptr = mapping.get(load.operands[0], load.operands[0])
    shape = T.shape_of(ptr.type)
    mask_t = T.TileType(shape, T.i1)
    splat = Op("splat", [cond], [mask_t], loc=load.loc)
    out.append(splat)
    attrs = dict(load.attrs)
    ops = [mapping.get(v, v) for v in load.operands]
    if attrs.get("has_mask"):
        both = Op("and", [ops[1], splat.result], [mask_t], loc=load.loc)
        out.append(both)
        ops[1] = both.result
    else:
        ops.insert(1, splat.result)
        attrs["has_mask"] = True
    new = Op("load", ops, [load.result.type], attrs, loc=load.loc)
    out.append(new)
    return new


def _registers(values: list[Value], threads: int) -> int:
    """32-bit registers per thread that holding `values` (tiles) takes."""
    total = 0
    for v in values:
        t = v.type
        if isinstance(t, T.TileType):
            e = t.elem
            bits = 64 if isinstance(e, T.PointerType) else max(8, e.bits)
            total += -(-t.numel * bits // (32 * threads))
    return total


def _loop(fn: Function, loop: Op, num_warps: int | None) -> int:
    body = loop.regions[0]
    sign = loop.attrs.get("step_sign", 0)
    y = body.terminator
    if sign not in (1, -1) or y is None:
        return 0
    # pipelined copies (pipeline.py) write only their own shared-memory slots: reading a tensor
    # one iteration early is still safe beside them
    if any(not is_pure(o) and o.opcode not in _SHARED_ONLY for o in body.walk()):
        return 0
    loads = [o for o in body.ops if o.opcode == "load" and not o.attrs.get("volatile")
             and isinstance(o.result.type, T.TileType) and _feeds_dot(o.result, body)]
    if not loads:
        return 0
    iv, carried = body.args[0], body.args[1:]
    lb, ub, step = loop.operands[:3]
    inits = loop.operands[3:]
    chains = [slice_of(list(o.operands), body) for o in loads]
    todo = [(o, c) for o, c in zip(loads, chains, strict=True) if c is not None]
    if not todo:
        return 0
    if num_warps is not None:
        accs = [o.result for o in body.ops if o.opcode == "dot"]
        if _registers(accs + [o.result for o, _ in todo], 32 * num_warps) > _REGISTER_BUDGET:
            return 0
    used_args = {v for o, c in todo for x in [*o.operands, *(w for op in c for w in op.operands)]
                 for v in [x] if v in carried}
    nexts = {a: y.operands[carried.index(a)] for a in used_args}
    next_chain = slice_of(list(nexts.values()), body)
    if next_chain is None or any(o in next_chain for o, _ in todo):
        return 0
    parent = loop.parent
    assert parent is not None
    pred = "lt" if sign == 1 else "gt"

    # Prologue, before the loop: the loads of the first iteration.
    pro: list[Op] = []
    first = Op("cmp", [lb, ub], [T.i1], {"pred": pred}, loc=loop.loc)
    pro.append(first)
    pmap: dict[Value, Value] = {iv: lb, **{a: i for a, i in zip(carried, inits, strict=True)}}
    clone_ops(sorted({op for _, c in todo for op in c}, key=body.ops.index), pmap, pro)
    pro_loads = [_guarded(o, pmap, first.result, pro) for o, _ in todo]

    # Top of the body: the loads of the next iteration.
    top: list[Op] = []
    nxt = Op("add", [iv, step], [iv.type], loc=loop.loc)
    more = Op("cmp", [nxt.result, ub], [T.i1], {"pred": pred}, loc=loop.loc)
    top += [nxt, more]
    amap: dict[Value, Value] = {}
    clone_ops(next_chain, amap, top)
    nmap: dict[Value, Value] = {iv: nxt.result, **{a: amap.get(v, v) for a, v in nexts.items()}}
    clone_ops(sorted({op for _, c in todo for op in c}, key=body.ops.index), nmap, top)
    next_loads = [_guarded(o, nmap, more.result, top) for o, _ in todo]

    # The loop carries the prefetched tiles; the body reads them instead of loading.
    repl: dict[Value, Value] = {o.result: body.add_arg(o.result.type) for o, _ in todo}
    for op in top:
        op.parent = body
    body.ops = top + [o for o in body.ops if o not in {t for t, _ in todo}]
    y.operands = [*y.operands, *(n.result for n in next_loads)]
    new_loop = Op("for", [*loop.operands, *(p.result for p in pro_loads)],
                  [*(r.type for r in loop.results), *(p.result.type for p in pro_loads)], dict(loop.attrs),
                  regions=[body], loc=loop.loc)
    idx = parent.ops.index(loop)
    for op in pro:
        op.parent = parent
    new_loop.parent = parent
    parent.ops[idx:idx + 1] = [*pro, new_loop]
    replace_all_uses(fn, {**repl, **dict(zip(loop.results, new_loop.results, strict=False))})
    return len(todo)
