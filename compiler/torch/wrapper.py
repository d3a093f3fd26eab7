"""A compiled graph with static shapes as straight-line Python: what runs on every call.

An FX graph module's generated forward calls every ATen op through its Python `OpOverload` and
runs each view (view, permute, transpose, expand, ...) through the dispatcher: on a GPU, where a
BERT-size layer's kernels take less time than the host needs to queue them, that host time is the
layer's time. This module writes the same graph as one Python function instead:

* a view of a value whose layout is known (the static sizes, strides and storage offset that
  fake-tensor propagation gave it) is made in one step from the value it views (its root), with
  `_reinterpret_tensor` (no dispatch): `v = _rt(root, size, stride, offset) if ok else view(x, ...)`,
  where `ok` checks, once, right after the root exists, that its layout is the one the graph was
  traced with. A root whose layout differs (a library picking another kernel, with another output
  layout) takes the ops as written, so the result never depends on the prediction;
* other ops are called through their C++ entry (`OpOverload._op`), fused groups through their
  runner, `getitem` inline;
* each value is released after its last use, as FX's forward does, so peak memory is unchanged.

Graphs with symbolic sizes keep FX's forward (their runners read sizes at run time).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

__all__ = ["lean_forward"]

_reinterpret: Callable[..., torch.Tensor] | None = getattr(getattr(torch._C, "_dynamo", None) and
                                                         torch._C._dynamo.guards, "_reinterpret_tensor", None)


def _as_strided(t: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...], offset_from: int) -> torch.Tensor:
    return t.as_strided(size, stride, t.storage_offset() + offset_from)


_RT: Callable[..., torch.Tensor] = _reinterpret or _as_strided


def _static_layout(val: Any) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """(sizes, strides, storage offset) of a traced tensor value, if all are plain ints."""
    if not isinstance(val, torch.Tensor) or val.layout != torch.strided:
        return None
    try:
        size, stride, offset = tuple(val.shape), tuple(val.stride()), val.storage_offset()
    except RuntimeError:  # a tensor without strides (sparse, nested)
        return None
    if all(type(s) is int for s in (*size, *stride)) and type(offset) is int:
        return size, stride, offset
    return None


def _is_view(node: fx.Node) -> bool:
    """An op whose single result aliases its first argument without writing it (view, permute, ...)."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    if len(schema.returns) != 1 or not schema.arguments:
        return False
    out, first = schema.returns[0].alias_info, schema.arguments[0].alias_info
    return (out is not None and first is not None and not out.is_write and not first.is_write
            and set(out.before_set) == set(first.before_set) and bool(node.args)
            and isinstance(node.args[0], fx.Node))


def _static_graph(gm: fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        if node.op in ("call_module", "call_method"):
            return False
        val = node.meta.get("val")
        vals = val if isinstance(val, list | tuple) else [val]
        for v in vals:
            if isinstance(v, torch.SymInt | torch.SymFloat | torch.SymBool):
                return False
            if isinstance(v, torch.Tensor) and _static_layout(v) is None:
                return False
    return True


class _Writer:
    def __init__(self, gm: fx.GraphModule) -> None:
        self.gm = gm
        self.globals: dict[str, Any] = {"_rt": _RT}
        self.names: dict[fx.Node, str] = {}
        self.lines: list[tuple[str | None, str, set[str]]] = []  # (defined name, code, names read)

    def ref(self, obj: Any) -> str:
        for k, v in self.globals.items():
            if v is obj:
                return k
        name = f"_g{len(self.globals)}"
        self.globals[name] = obj
        return name

    def fmt(self, a: Any, reads: set[str]) -> str:
        if isinstance(a, fx.Node):
            reads.add(self.names[a])
            return self.names[a]
        if a is None or type(a) in (bool, int, str):
            return repr(a)
        if type(a) is float:
            return repr(a) if math.isfinite(a) else self.ref(a)
        if isinstance(a, list):  # FX's immutable_list too
            return "[" + ", ".join(self.fmt(x, reads) for x in a) + "]"
        if type(a) is tuple or type(a) is torch.Size:
            return "(" + "".join(self.fmt(x, reads) + ", " for x in a) + ")"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{self.fmt(k, reads)}: {self.fmt(v, reads)}" for k, v in a.items()) + "}"
        if isinstance(a, tuple | slice):  # a named tuple, a slice: the object itself, if it holds no value of the graph
            assert not any(isinstance(x, fx.Node) for x in (a if isinstance(a, tuple) else (a.start, a.stop, a.step)))
        return self.ref(a)

    def call(self, node: fx.Node, reads: set[str]) -> str:
        target = node.target
        fn = target._op if isinstance(target, torch._ops.OpOverload) else target
        args = [self.fmt(a, reads) for a in node.args]
        args += [f"{k}={self.fmt(v, reads)}" for k, v in node.kwargs.items()]
        return f"{self.ref(fn)}({', '.join(args)})"

    def emit(self, name: str | None, code: str, reads: set[str]) -> None:
        self.lines.append((name, code, reads))

    def source(self, fname: str, keep: set[str]) -> str:
        last: dict[str, int] = {}
        for i, (_, _, reads) in enumerate(self.lines):
            for r in reads:
                last[r] = i
        out = [f"def {fname}(args):"]
        for i, (name, code, _) in enumerate(self.lines):
            out.append(f"    {name} = {code}" if name is not None else f"    {code}")
            dead = sorted(r for r, j in last.items() if j == i and r not in keep)
            if dead and not code.startswith("return"):
                out.append(f"    del {', '.join(dead)}")
        return "\n".join(out) + "\n"


def lean_forward(gm: fx.GraphModule, name: str = "graph") -> tuple[Callable[[list[Any]], Any], str] | None:
    """The graph as one straight-line function of a list of inputs (AOTAutograd's boxed calling
    convention), and its source; None for a graph this does not cover (symbolic sizes)."""
    if not _static_graph(gm):
        return None
    w = _Writer(gm)
    layouts: dict[fx.Node, tuple[tuple[int, ...], tuple[int, ...], int] | None] = {}
    root: dict[fx.Node, fx.Node] = {}  # a view -> the value (not a view) whose storage it reads
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(gm.graph.nodes):
        w.names[n] = f"v{i}"
    if placeholders:
        targets = "".join(w.names[n] + ", " for n in placeholders)
        w.emit(None, f"({targets}) = args", set())
        w.emit(None, "args.clear()", set())  # the graph owns its inputs now: each is freed after its last use
    views = {n for n in gm.graph.nodes if _is_view(n)}
    for n in gm.graph.nodes:
        layouts[n] = _static_layout(n.meta.get("val"))
        base = n.args[0] if n in views else None
        if isinstance(base, fx.Node) and layouts[n] is not None:
            r = root.get(base, base)
            if layouts.get(r) is not None:
                root[n] = r
    roots = set(root.values())
    seen: dict[Any, fx.Node] = {}  # a view already made: (root, layout) -> its node
    for n in gm.graph.nodes:
        reads: set[str] = set()
        if n.op == "placeholder":
            pass
        elif n.op == "get_attr":
            obj: Any = gm
            for part in str(n.target).split("."):
                obj = getattr(obj, part)
            w.emit(w.names[n], w.ref(obj), reads)
        elif n.op == "output":
            w.emit(None, "return " + w.fmt(n.args[0], reads), reads)
        elif n.target is operator.getitem and isinstance(n.args[0], fx.Node):
            w.emit(w.names[n], f"{w.fmt(n.args[0], reads)}[{w.fmt(n.args[1], reads)}]", reads)
        elif n in root:
            r = root[n]
            flag = f"ok_{w.names[r]}"
            size, stride, offset = layouts[n]  # type: ignore[misc]
            plain = w.call(n, reads)
            if all(root.get(u) is r for u in n.users):  # only views of the same root read it: made only
                w.emit(w.names[n], f"None if {flag} else {plain}", reads | {flag})  # for their plain path
                continue
            same = seen.get((r, size, stride, offset))
            if same is not None:  # the same view of the same tensor: one is enough
                w.emit(w.names[n], f"{w.names[same]} if {flag} else {plain}", reads | {flag, w.names[same]})
                continue
            seen[(r, size, stride, offset)] = n
            fast = f"_rt({w.names[r]}, {size!r}, {stride!r}, {offset - layouts[r][2]})"  # type: ignore[index]
            w.emit(w.names[n], f"{fast} if {flag} else {plain}", reads | {w.names[r], flag})
        else:
            w.emit(w.names[n], w.call(n, reads), reads)
        if n in roots:
            size, stride, offset = layouts[n]  # type: ignore[misc]
            v = w.names[n]
            w.emit(f"ok_{v}", f"{v}.stride() == {stride!r} and {v}.storage_offset() == {offset}", {v})
    fname = f"lean_{name}" if name.isidentifier() else "lean_graph"
    src = w.source(fname, keep=set())
    namespace = dict(w.globals)
    exec(compile(src, f"<anvil {fname}>", "exec"), namespace)  # noqa: S102 - written above from the graph
    return namespace[fname], src
