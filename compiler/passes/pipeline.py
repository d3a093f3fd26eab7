"""Software pipelining of the loads that feed tensor-core dots: `num_stages`-deep asynchronous
copies from global into shared memory (GPU only; the NVIDIA backend lowers the ops made here).

    for i in range(lb, ub, step):              prologue: for s in 0 .. S-2:
        a = load(pa(i, args), ma, 0)                 async_copy(pa(lb + s*step, args_s), ma, lb + s*step < ub, slot s)
        b = load(pb(i, args), mb, 0)   ==>     for i in range(...) carrying slot, ahead = args(i + (S-1)*step):
        acc = dot(a, b, acc)                       a, b = async_wait(slot)      (the copies of iteration i landed)
        args = next(i, args)                       acc = dot(a, b, acc)         (reads shared memory directly)
                                                   async_copy(pa(i + (S-1)*step, ahead), ..., slot (slot-1) mod S)
                                                   ahead = next(i + (S-1)*step, ahead); slot = (slot + 1) mod S
                                               async_drain

S buffers per operand ("slots") live in shared memory; S-1 iterations' copies are in flight while
an iteration's dot runs. The copy issued in iteration i overwrites the slot the dot of iteration
i-1 read: every warp finished that dot before the barrier in this iteration's `async_wait`, or,
for a dot marked `in_flight` (`acc = dot(a, b, acc)` with nothing else reading the accumulator),
before the barrier its lowering places after waiting for all but its own newest wgmma group, which
stays in flight into the next iteration; the loop's results then pass through `async_drain`, which
completes that group. The
address and mask of iteration i + (S-1)*step are computed by cloning the pure ops that compute
them, from loop-carried copies of the arguments S-1 iterations ahead (`ahead`); the predicate
`i + (S-1)*step < ub` keeps the copies past the end (and those of an empty loop) from being issued.

Only loops whose body has no side effects are changed, and only loads whose result goes nowhere
but into operand A or B of dots the backend runs from shared memory (`eligible(dot)`), directly or
through a transpose (`tl.trans(k)`: the copy then writes the tile transposed, attribute
`transposed`), with no `other` or a zero `other` (masked elements are zero-filled by the copy).
Loads that do not qualify stay in the loop as they are.

Private staging: a loop written `tl.range(..., num_stages=S)` (S >= 2) with no such dot loads
pipelines its other tile loads instead (any rank and use; no `other` or a zero one), attribute
`private`: each thread's copies land in its own part of the slot, in the layout its registers hold
the tile in, and `async_wait` reads them back into registers. No thread reads another's data, so
the wait needs no barrier: S-1 iterations of loads are in flight without holding registers (a
streaming loop whose arithmetic would otherwise stall on each iteration's loads). The backend says
which loads it can stage and their bytes per slot (`private`); S is lowered until the slots fit
`budget` bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count

from ..ir import types as T
from ..ir.core import Block, Function, Location, Op, Value
from ..ir.ops import is_pure
from .dce import dce
from .prefetch import clone_ops, slice_of
from .uses import replace_all_uses

__all__ = ["pipeline_dot_loads"]

_buffers = count()


def pipeline_dot_loads(fn: Function, stages: int, eligible: Callable[[Op, int], bool],
                       in_flight: bool = False, private: Callable[[Op], int] | None = None,
                       budget: int = 0) -> int:
    """Pipeline every eligible loop of `fn` `stages` deep; returns the number of loads moved to
    asynchronous copies. `eligible(dot, operand)`: the backend reads that operand (0: A, 1: B) of
    `dot` straight from shared memory. `in_flight`: a dot whose accumulator feeds only itself keeps
    its newest group in flight into the next iteration (attribute `in_flight`). `private(load)`:
    the bytes of one slot of `load` staged per thread (0: not stageable), for the loops that ask
    for `num_stages`; their slots take at most `budget` bytes of shared memory."""
    total = 0
    for op in list(fn.walk()):
        if op.opcode != "for" or op.parent is None:
            continue
        asked = op.attrs.get("num_stages")
        if stages >= 2:
            n = _loop(fn, op, stages if asked is None else min(asked, stages), eligible, in_flight, None)
            if n:
                total += n
                continue
        if asked is not None and asked >= 2 and private is not None:
            total += _loop(fn, op, asked, eligible, False, (private, budget))
    if total:
        dce(fn)
    return total


def _zero(v: Value) -> bool:
    """`v` is the constant 0 (a scalar constant, or a splat of one)."""
    op = v.op
    while op is not None and op.opcode in ("splat", "broadcast"):
        op = op.operands[0].op
    return op is not None and op.opcode == "constant" and op.attrs.get("value") in (0, 0.0) \
        and not str(op.attrs.get("value")).startswith("-")


def _private_candidates(body: Block, private: Callable[[Op], int]) -> list[tuple[Op, Op | None, int]]:
    """(load, None, -1) for each tile load of the body the backend can stage per thread."""
    return [(op, None, -1) for op in body.ops
            if op.opcode == "load" and not op.attrs.get("volatile") and isinstance(op.result.type, T.TileType)
            and (not op.attrs.get("has_other") or _zero(op.operands[-1])) and private(op) > 0]


def _candidates(body: Block, eligible: Callable[[Op, int], bool]) -> list[tuple[Op, Op | None, int]]:
    """(load, transpose or None, operand index) for each load whose only use is operand A or B of
    one dot, directly or through a 2-D transpose (whose only use is that operand)."""
    uses: dict[Value, list[tuple[Op, int]]] = {}
    for op in body.walk():
        for k, v in enumerate(op.operands):
            uses.setdefault(v, []).append((op, k))
    out: list[tuple[Op, Op | None, int]] = []
    for op in body.ops:
        if op.opcode != "load" or op.attrs.get("volatile") or not isinstance(op.result.type, T.TileType):
            continue
        if len(T.shape_of(op.result.type)) != 2:
            continue
        if op.attrs.get("has_other") and not _zero(op.operands[-1]):
            continue
        u = uses.get(op.result, [])
        if len(u) != 1:
            continue
        user, k = u[0]
        trans = None
        if user.opcode == "trans" and tuple(user.attrs.get("perm", ())) == (1, 0) and user.parent is body:
            trans = user
            u = uses.get(user.result, [])
            if len(u) != 1:
                continue
            user, k = u[0]
        if user.opcode != "dot" or k > 1 or user.parent is not body or not eligible(user, k):
            continue
        out.append((op, trans, k))
    return out


def _const(v: int, ty: T.Type, loc: Location, out: list[Op]) -> Value:
    c = Op("constant", [], [ty], {"value": v}, loc=loc)
    out.append(c)
    return c.result


def _binary(opcode: str, a: Value, b: Value, loc: Location, out: list[Op], **attrs: object) -> Value:
    op = Op(opcode, [a, b], [T.i1 if opcode == "cmp" else a.type], dict(attrs), loc=loc)
    out.append(op)
    return op.result


def _copies(loads: list[tuple[Op, Op | None, int]], ids: list[int], mapping: dict[Value, Value], pred: Value,
            slot: Value, stages: int, out: list[Op]) -> None:
    """One async_copy per load, addresses through `mapping`; the last one commits the group."""
    for n, ((ld, trans, k), buf) in enumerate(zip(loads, ids, strict=True)):
        ops = [mapping.get(ld.operands[0], ld.operands[0])]
        if ld.attrs.get("has_mask"):
            ops.append(mapping.get(ld.operands[1], ld.operands[1]))
        attrs = {"buffer": buf, "stages": stages, "has_mask": bool(ld.attrs.get("has_mask")),
                 "commit": n == len(loads) - 1, "transposed": trans is not None, "private": k < 0}
        out.append(Op("async_copy", [*ops, pred, slot], [], attrs, loc=ld.loc))


def _loop(fn: Function, loop: Op, stages: int, eligible: Callable[[Op, int], bool], in_flight: bool,
          private: tuple[Callable[[Op], int], int] | None) -> int:
    """Pipelines the dot loads of `loop` (private None) or, with (private, budget), its loads staged
    per thread; returns how many loads became copies."""
    body = loop.regions[0]
    sign = loop.attrs.get("step_sign", 0)
    y = body.terminator
    if sign not in (1, -1) or y is None or stages < 2:
        return 0
    if any(not is_pure(o) and o.opcode != "yield" for o in body.walk()):
        return 0
    if private is None:
        loads = _candidates(body, eligible)
    else:
        sizer, budget = private
        loads = _private_candidates(body, sizer)
        per_stage = sum(sizer(ld) for ld, _, _ in loads)
        while stages >= 2 and stages * per_stage > budget:
            stages -= 1
        if stages < 2:
            return 0
    if not loads:
        return 0
    iv, carried = body.args[0], body.args[1:]
    lb, ub, step = loop.operands[:3]
    inits = loop.operands[3:]
    chains = [slice_of([v for v in ld.operands[:2] if ld.attrs.get("has_mask") or v is ld.operands[0]], body)
              for ld, _, _ in loads]
    if any(c is None for c in chains):
        return 0
    addr_ops = sorted({op for c in chains if c is not None for op in c}, key=body.ops.index)
    used = [a for a in carried if any(a in op.operands for op in addr_ops)
            or any(a in ld.operands for ld, _, _ in loads)]
    nexts = {a: y.operands[carried.index(a)] for a in used}
    next_chain = slice_of(list(nexts.values()), body)
    if next_chain is None or any(ld in next_chain for ld, _, _ in loads):
        return 0
    parent = loop.parent
    assert parent is not None
    pred = "lt" if sign == 1 else "gt"
    ids = [next(_buffers) for _ in loads]
    ity = iv.type
    dist = stages - 1  # iterations the copies run ahead
    chained = _chained_dots(body, loads, carried, y) if in_flight else []

    # Prologue: the copies of iterations 0 .. dist-1, each group predicated on its iteration existing.
    pro: list[Op] = []
    ivs: Value = lb
    args = {a: inits[carried.index(a)] for a in used}
    for s in range(dist):
        if s:
            amap: dict[Value, Value] = {iv: ivs, **args}
            clone_ops(next_chain, amap, pro)
            args = {a: amap.get(nexts[a], nexts[a]) for a in used}
            ivs = _binary("add", ivs, step, loop.loc, pro)
        here = _binary("cmp", ivs, ub, loop.loc, pro, pred=pred)
        pmap: dict[Value, Value] = {iv: ivs, **args}
        clone_ops(addr_ops, pmap, pro)
        _copies(loads, ids, pmap, here, _const(s, T.i32, loop.loc, pro), stages, pro)
    # the loop's `ahead` arguments start `dist` iterations ahead of the loop's own
    amap = {iv: ivs, **args}
    clone_ops(next_chain, amap, pro)
    ahead_init = [amap.get(nexts[a], nexts[a]) for a in used]

    # The loop: new block arguments for the slot and the ahead arguments.
    slot = body.add_arg(T.i32)
    ahead = [body.add_arg(a.type) for a in used]
    top: list[Op] = []
    waited: dict[Value, Value] = {}
    for n, ((ld, trans, _), buf) in enumerate(zip(loads, ids, strict=True)):
        seen = trans if trans is not None else ld  # what the dot reads
        w = Op("async_wait", [slot], [seen.result.type],
               {"buffer": buf, "stages": stages, "sync": n == 0, "pending": dist - 1,
                "private": private is not None}, loc=ld.loc)
        top.append(w)
        waited[seen.result] = w.result
    tail: list[Op] = []
    span = _binary("mul", step, _const(dist, ity, loop.loc, tail), loop.loc, tail)
    iv_ahead = _binary("add", iv, span, loop.loc, tail)
    more = _binary("cmp", iv_ahead, ub, loop.loc, tail, pred=pred)
    last = _const(stages - 1, T.i32, loop.loc, tail)
    zero = _const(0, T.i32, loop.loc, tail)
    one = _const(1, T.i32, loop.loc, tail)
    # the slot of iteration i + dist: (slot + dist) mod S
    ahead_slot = _binary("add", slot, _const(dist, T.i32, loop.loc, tail), loop.loc, tail)
    wraps = _binary("cmp", ahead_slot, _const(stages, T.i32, loop.loc, tail), loop.loc, tail, pred="ge")
    wslot_op = Op("select", [wraps, _binary("sub", ahead_slot, _const(stages, T.i32, loop.loc, tail), loop.loc,
                                            tail), ahead_slot], [T.i32], loc=loop.loc)
    tail.append(wslot_op)
    nmap: dict[Value, Value] = {iv: iv_ahead, **dict(zip(used, ahead, strict=True))}
    clone_ops(addr_ops, nmap, tail)
    _copies(loads, ids, nmap, more, wslot_op.result, stages, tail)
    amap = {iv: iv_ahead, **dict(zip(used, ahead, strict=True))}
    clone_ops(next_chain, amap, tail)
    ahead_next = [amap.get(nexts[a], nexts[a]) for a in used]
    wrap = _binary("cmp", slot, last, loop.loc, tail, pred="eq")
    slot_next = Op("select", [wrap, zero, _binary("add", slot, one, loop.loc, tail)], [T.i32], loc=loop.loc)
    tail.append(slot_next)

    gone = {op for ld, trans, _ in loads for op in (ld, trans) if op is not None}
    for op in top + tail:
        op.parent = body
    body.ops = top + [o for o in body.ops if o not in gone and o is not y] + tail + [y]
    y.operands = [*y.operands, slot_next.result, *ahead_next]
    zero_slot = _const(0, T.i32, loop.loc, pro)
    new_loop = Op("for", [*loop.operands, zero_slot, *ahead_init],
                  [*(r.type for r in loop.results), T.i32, *(a.type for a in used)], dict(loop.attrs),
                  regions=[body], loc=loop.loc)
    # after the loop: no copy in flight, and the dot groups left in flight complete (their results
    # pass through the drain, so nothing reads them before)
    for dot, _ in chained:
        dot.attrs["in_flight"] = True
    kept = [j for _, j in chained]
    drain = Op("async_drain", [new_loop.results[j] for j in kept], [loop.results[j].type for j in kept], {},
               loc=loop.loc)
    idx = parent.ops.index(loop)
    for op in [*pro, new_loop, drain]:
        op.parent = parent
    parent.ops[idx:idx + 1] = [*pro, new_loop, drain]
    final = dict(zip(loop.results, new_loop.results, strict=False))
    final.update({loop.results[j]: r for j, r in zip(kept, drain.results, strict=True)})
    replace_all_uses(fn, {**waited, **final})
    _drop_dead_carried(fn, new_loop)
    return len(loads)


def _chained_dots(body: Block, loads: list[tuple[Op, Op | None, int]], carried: list[Value],
                  y: Op) -> list[tuple[Op, int]]:
    """(dot, index of its loop-carried accumulator) for the dots whose wgmma group can stay in flight
    into the next iteration: both operands pipelined, `acc = dot(a, b, acc)` on an fp32 accumulator
    that nothing else reads; [] unless every pipelined dot is such."""
    dots: dict[Op, set[int]] = {}
    for ld, trans, k in loads:
        v = (trans or ld).result
        user = next(op for op in body.ops if op.opcode == "dot" and op.operands[k] is v)
        dots.setdefault(user, set()).add(k)
    out = []
    for dot, ks in dots.items():
        acc = dot.operands[2]
        if ks != {0, 1} or acc not in carried or T.elem_of(dot.result.type) != T.fp32:
            return []
        j = carried.index(acc)
        users = [op for op in body.walk() if dot.result in op.operands]
        acc_users = [op for op in body.walk() if acc in op.operands]
        if users != [y] or y.operands.count(dot.result) != 1 or y.operands[j] is not dot.result \
                or acc_users != [dot]:
            return []
        out.append((dot, j))
    return out


def _drop_dead_carried(fn: Function, loop: Op) -> None:
    """Remove loop-carried values that only compute their own next value and are not used after
    the loop (the loads' original addresses, now that the copies use their own `ahead` ones)."""
    body = loop.regions[0]
    y = body.terminator
    assert y is not None
    used_outside = {v for op in fn.walk() if op is not y for v in op.operands}
    dead = []
    for j, a in enumerate(body.args[1:]):
        if loop.results[j] in used_outside:
            continue
        chain = slice_of([y.operands[j]], body)
        if chain is None:
            continue
        inside = set(chain)
        users = [op for op in body.walk() if op is not y and any(v is a or (v.op in inside) for v in op.operands)]
        if any(op not in inside for op in users) or any(v is a for k, v in enumerate(y.operands) if k != j) \
                or any(v.op in inside for k, v in enumerate(y.operands) if k != j):
            continue
        dead.append(j)
    if not dead:
        return
    keep = [j for j in range(len(body.args) - 1) if j not in dead]
    body.args = [body.args[0], *(body.args[1 + j] for j in keep)]
    for i, a in enumerate(body.args):
        a.index = i
    y.operands = [y.operands[j] for j in keep]
    loop.operands = [*loop.operands[:3], *(loop.operands[3 + j] for j in keep)]
    old = loop.results
    loop.results = [old[j] for j in keep]
    for i, r in enumerate(loop.results):
        r.index = i
