"""Axis info: per-dimension contiguity, divisibility and constancy of integer and pointer tiles.

- contiguity[d]: values come in runs of this many consecutive integers along d (stride 1);
- divisibility[d]: the first value of each run is a multiple of this (bytes for pointers);
- constancy[d]: values come in runs of this many equal values along d.
All are powers of two. Facts come from specialization (arguments divisible by 16), constants,
`tl.arange` and `tl.multiple_of` / `tl.max_contiguous` hints, and propagate through arithmetic.
The GPU lowering uses them to pick 16-byte vector loads and stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ..ir import types as T
from ..ir.core import Block, Function, Op, Value

__all__ = ["AxisInfo", "analyze_axis_info"]

_MAX_DIV = 1 << 30


@dataclass(frozen=True)
class AxisInfo:
    contiguity: tuple[int, ...]
    divisibility: tuple[int, ...]
    constancy: tuple[int, ...]

    @staticmethod
    def unknown(rank: int) -> AxisInfo:
        return AxisInfo((1,) * rank, (1,) * rank, (1,) * rank)


def _pow2_div(v: int) -> int:
    if v == 0:
        return _MAX_DIV
    return min(_MAX_DIV, v & -v)


def _p2gcd(a: int, b: int) -> int:
    g = gcd(a, b)
    return g & -g if g else _MAX_DIV


def _shape(v: Value) -> tuple[int, ...]:
    return T.shape_of(v.type)


def _elem_bytes(v: Value) -> int:
    e = T.elem_of(v.type)
    if isinstance(e, T.PointerType):
        inner = e.elem
        return 8 if isinstance(inner, T.PointerType) else max(1, inner.bits // 8)
    return 1


def analyze_axis_info(fn: Function) -> dict[Value, AxisInfo]:
    info: dict[Value, AxisInfo] = {}
    for a, attrs in zip(fn.args, fn.arg_attrs, strict=True):
        info[a] = AxisInfo((1,), (int(attrs.get("divisibility", 1)),), (1,))
    _block(fn.body, info)
    return info


def _block(block: Block, info: dict[Value, AxisInfo]) -> None:
    for op in block.ops:
        if op.opcode == "for":
            _for(op, info)
            continue
        for region in op.regions:
            for arg in region.args:
                info[arg] = AxisInfo.unknown(max(1, len(_shape(arg))))
            _block(region, info)
        for r in op.results:
            info[r] = _infer(op, r, info)
        hints = op.attrs.get("axis_hints")
        if hints and len(op.results) == 1:
            info[op.results[0]] = _hinted(info[op.results[0]], dict(hints))


def _hinted(a: AxisInfo, hints: dict[str, tuple[int, ...]]) -> AxisInfo:
    """`a` strengthened by the kernel's promises (tl.multiple_of, tl.max_contiguous,
    tl.max_constancy): taken on trust, as Triton does."""
    out = []
    for name, facts in (("max_contiguous", a.contiguity), ("multiple_of", a.divisibility),
                        ("max_constancy", a.constancy)):
        promised = hints.get(name)
        if promised is None or len(promised) != len(facts):
            out.append(facts)
        else:
            out.append(tuple(min(_MAX_DIV, max(f, p)) for f, p in zip(facts, promised, strict=True)))
    return AxisInfo(*out)


def _join(a: AxisInfo, b: AxisInfo) -> AxisInfo:
    """Facts that hold for a value that may be either `a` or `b`."""
    if len(a.contiguity) != len(b.contiguity):
        return AxisInfo.unknown(len(a.contiguity))
    return AxisInfo(*(tuple(_p2gcd(x, y) for x, y in zip(p, q, strict=True))
                      for p, q in ((a.contiguity, b.contiguity), (a.divisibility, b.divisibility),
                                   (a.constancy, b.constancy))))


def _for(op: Op, info: dict[Value, AxisInfo]) -> None:
    """Loop-carried values hold what both their initial and their yielded values hold: iterate
    the body from the initial facts until the join stops changing (facts only weaken)."""
    body = op.regions[0]
    # the induction variable steps from lb by step: divisible by gcd of both
    lb, step = _scalar_div(info, op.operands[0]), _scalar_div(info, op.operands[2])
    info[body.args[0]] = AxisInfo((1,), (_p2gcd(lb, step),), (1,))
    carried = [_get(info, v) for v in op.operands[3:]]
    for attempt in range(6):
        for arg, c in zip(body.args[1:], carried, strict=True):
            info[arg] = c
        _block(body, info)
        yielded = body.ops[-1].operands if body.ops and body.ops[-1].opcode == "yield" else []
        new = [_join(c, _get(info, y)) for c, y in zip(carried, yielded, strict=False)]
        new += carried[len(new):]
        if new == carried:
            break
        carried = new if attempt < 4 else [AxisInfo.unknown(len(c.contiguity)) for c in carried]
    for r, c in zip(op.results, carried, strict=False):
        info[r] = c


def _get(info: dict[Value, AxisInfo], v: Value) -> AxisInfo:
    return info.get(v) or AxisInfo.unknown(max(1, len(_shape(v))))


def _scalar_div(info: dict[Value, AxisInfo], v: Value) -> int:
    i = info.get(v)
    return i.divisibility[-1] if i and i.divisibility else 1


def _infer(op: Op, r: Value, info: dict[Value, AxisInfo]) -> AxisInfo:
    shape = _shape(r)
    rank = max(1, len(shape))
    full = shape if shape else (1,)
    oc = op.opcode
    if oc == "constant":
        v = op.attrs["value"]
        d = _pow2_div(int(v)) if isinstance(v, int) and not isinstance(v, bool) else 1
        return AxisInfo((1,), (d,), (1,))
    if oc == "make_range":
        n = op.attrs["end"] - op.attrs["start"]
        return AxisInfo((n,), (_pow2_div(op.attrs["start"]),), (1,))
    if oc == "splat":
        d = _scalar_div(info, op.operands[0])
        return AxisInfo((1,) * rank, (d,) * rank, tuple(full))
    if oc == "program_id" or oc == "num_programs":
        return AxisInfo((1,), (1,), (1,))
    if oc == "expand_dims":
        src = _get(info, op.operands[0])
        ax = op.attrs["axis"]
        cl, dl, kl = list(src.contiguity), list(src.divisibility), list(src.constancy)
        # along the new dim every element starts a run: all of them must be multiples, so its
        # divisibility is what every element has (a contiguous dim contributes 1: x, x+1, ...)
        new = src.divisibility[0] if src.divisibility else 1
        for c, dv in zip(src.contiguity, src.divisibility, strict=True):
            new = _p2gcd(new, 1 if c > 1 else dv)
        if not T.shape_of(op.operands[0].type):
            cl, dl, kl = [], [], []
        cl.insert(ax, 1)
        dl.insert(ax, new)
        kl.insert(ax, 1)
        return AxisInfo(tuple(cl), tuple(dl), tuple(kl))
    if oc == "broadcast":
        src = _get(info, op.operands[0])
        sshape = _shape(op.operands[0])
        ct = tuple(1 if s == 1 and t != 1 else x for x, s, t in zip(src.contiguity, sshape, shape, strict=True))
        kt = tuple(t if s == 1 else x for x, s, t in zip(src.constancy, sshape, shape, strict=True))
        return AxisInfo(ct, src.divisibility, kt)
    if oc in ("add", "sub", "addptr"):
        a, b = _get(info, op.operands[0]), _get(info, op.operands[1])
        scale = _elem_bytes(op.operands[0]) if oc == "addptr" else 1
        if len(a.contiguity) != rank or len(b.contiguity) != rank:
            return AxisInfo.unknown(rank)
        cont: list[int] = []
        div: list[int] = []
        const: list[int] = []
        for d in range(rank):
            bdiv = b.divisibility[d] * scale if b.divisibility[d] < _MAX_DIV else _MAX_DIV
            if oc == "sub":
                run = gcd(a.contiguity[d], b.constancy[d])
            else:
                run = max(gcd(a.contiguity[d], b.constancy[d]), gcd(b.contiguity[d], a.constancy[d]))
            cont.append(run & -run if run else 1)
            div.append(_p2gcd(a.divisibility[d], bdiv))
            const.append(_p2gcd(a.constancy[d], b.constancy[d]))
        return AxisInfo(tuple(cont), tuple(div), tuple(const))
    if oc == "mul":
        a, b = _get(info, op.operands[0]), _get(info, op.operands[1])
        if len(a.contiguity) != rank or len(b.contiguity) != rank:
            return AxisInfo.unknown(rank)
        mdiv = tuple(min(_MAX_DIV, x * y) for x, y in zip(a.divisibility, b.divisibility, strict=True))
        mconst = tuple(_p2gcd(x, y) for x, y in zip(a.constancy, b.constancy, strict=True))
        return AxisInfo((1,) * rank, mdiv, mconst)
    if oc == "rem" and isinstance(T.elem_of(r.type), T.ScalarType):
        a, b = _get(info, op.operands[0]), _get(info, op.operands[1])
        if len(a.contiguity) != rank or len(b.contiguity) != rank:
            return AxisInfo.unknown(rank)
        # x % m with m constant: runs of x stay runs while they do not cross a multiple of m
        rcont = tuple(_p2gcd(c, bd) if bk >= f else 1
                      for c, bd, bk, f in zip(a.contiguity, b.divisibility, b.constancy, full, strict=True))
        rdiv = tuple(_p2gcd(ad, bd) if bk >= f else 1
                     for ad, bd, bk, f in zip(a.divisibility, b.divisibility, b.constancy, full, strict=True))
        return AxisInfo(rcont, rdiv, tuple(_p2gcd(x, y) for x, y in zip(a.constancy, b.constancy, strict=True)))
    if oc == "cmp":
        a, b = _get(info, op.operands[0]), _get(info, op.operands[1])
        if len(a.contiguity) != rank or len(b.contiguity) != rank:
            return AxisInfo.unknown(rank)
        runs: list[int] = []
        for d in range(rank):
            kk = _p2gcd(a.constancy[d], b.constancy[d])
            if op.attrs["pred"] in ("lt", "le", "gt", "ge") and b.constancy[d] >= full[d]:
                # a contiguous run starting at a multiple of m against a multiple of m: the
                # comparison is constant over runs of gcd(contiguity, divisibilities).
                kk = max(kk, _p2gcd(_p2gcd(a.contiguity[d], a.divisibility[d]), b.divisibility[d]))
            runs.append(min(kk, full[d]))
        return AxisInfo((1,) * rank, (1,) * rank, tuple(runs))
    if oc in ("and", "or") and T.elem_of(r.type) == T.i1:
        a, b = _get(info, op.operands[0]), _get(info, op.operands[1])
        if len(a.constancy) != rank or len(b.constancy) != rank:
            return AxisInfo.unknown(rank)
        return AxisInfo((1,) * rank, (1,) * rank, tuple(_p2gcd(x, y) for x, y in zip(a.constancy, b.constancy,
                                                                                         strict=True)))
    if oc in ("cast", "bitcast") and isinstance(T.elem_of(r.type), T.ScalarType):
        return _get(info, op.operands[0])
    if oc in ("cast", "bitcast") and isinstance(T.elem_of(op.operands[0].type), T.PointerType):
        # a pointer cast keeps the address: its byte alignment and constant runs; runs of
        # consecutive elements only when the elements keep their size
        a = _get(info, op.operands[0])
        if len(a.contiguity) != rank:
            return AxisInfo.unknown(rank)
        same = _elem_bytes(op.operands[0]) == _elem_bytes(r)
        return AxisInfo(a.contiguity if same else (1,) * rank, a.divisibility, a.constancy)
    if oc == "select":
        ci, ai, bi = (_get(info, v) for v in op.operands)
        if len(ai.contiguity) != rank or len(bi.contiguity) != rank or len(ci.constancy) != rank:
            return AxisInfo.unknown(rank)
        return AxisInfo(
            tuple(min(x, y, z) for x, y, z in zip(ai.contiguity, bi.contiguity, ci.constancy, strict=True)),
            tuple(_p2gcd(x, y) for x, y in zip(ai.divisibility, bi.divisibility, strict=True)),
            tuple(_p2gcd(_p2gcd(x, y), z) for x, y, z in zip(ai.constancy, bi.constancy, ci.constancy, strict=True)))
    return AxisInfo.unknown(rank)
