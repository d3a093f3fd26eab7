"""`torch.compile(model, backend="anvil")`: fused Anvil kernels for the graph's elementwise chains
and row reductions; everything else runs as the torch ops it is.

dynamo captures the graph; AOTAutograd splits forward and backward and decomposes composite ops
(softmax, layer norm, their gradients) into ATen ops; `compile_graph` then partitions each graph
(partition.py), writes one kernel per group (fusion/emit.py) and returns the graph with each group
replaced by a call of its `GroupRunner`. Dynamic shapes need nothing more: a group's sizes and
strides are kernel arguments, read from the actual tensors at each call; dynamo guards and
recompiles as it does for any backend. `ANVIL_FUSION_DUMP=dir` writes each kernel's source there.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx

from .cse import cse_joint
from .lowering import decompositions
from .partition import FxGroup, partition
from .runner import GroupRunner, dump_source, external_values, fallback_module, log
from .wrapper import lean_forward

__all__ = ["anvil", "compile_graph"]

_graph_ids = itertools.count()


def _free_symbols(shapes: Sequence[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    for shape in shapes:
        for s in shape:
            if isinstance(s, torch.SymInt):
                for sym in sorted(s.node.expr.free_symbols, key=str):
                    if sym not in out:
                        out.append(sym)
    return out


def _symbol_sources(gm: fx.GraphModule) -> dict[Any, tuple[fx.Node, int | None]]:
    """Where each size symbol can be read at run time: a graph input's dim, or a size input."""
    # deferred: start-up cost: sympy (about 0.9 s), loaded by torch.compile before it calls a backend
    import sympy

    found: dict[Any, tuple[fx.Node, int | None]] = {}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt) and isinstance(val.node.expr, sympy.Symbol):
            found.setdefault(val.node.expr, (node, None))
        elif isinstance(val, torch.Tensor):
            for d, s in enumerate(val.shape):
                if isinstance(s, torch.SymInt) and isinstance(s.node.expr, sympy.Symbol):
                    found.setdefault(s.node.expr, (node, d))
    return found


def _group_shapes(g: FxGroup) -> list[tuple[Any, ...]]:
    return [g.domain] + [tuple(n.meta["val"].shape) for n in g.outputs()]


def compile_graph(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """An ATen FX graph -> the same graph with its fusion groups replaced by fused kernels."""
    sources = _symbol_sources(gm)
    groups = []
    for g in partition(gm):
        syms = _free_symbols(_group_shapes(g))
        if all(s in sources for s in syms):  # else its sizes cannot be read at run time: torch runs it
            groups.append((g, syms))
    owner = {n: g for g, _ in groups for n in g.nodes}
    new = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    emitted: set[int] = set()

    def emit_group(g: FxGroup, syms: list[Any]) -> None:
        name = f"fused_{g.to_group(g.outputs()).describe()}"
        extra = external_values(g)
        runner = GroupRunner(g, name, fallback_module(gm, g), len(extra), [(s, sources[s][1]) for s in syms])
        runner.prepare([n.meta.get("val") for n in g.inputs])
        args = [env[n] for n in g.inputs] + [env[n] for n in extra] + [env[sources[s][0]] for s in syms]
        call = new.call_function(runner, tuple(args))
        for j, out in enumerate(g.outputs()):
            env[out] = new.call_function(operator.getitem, (call, j))
            # as traced: views of it were traced from this layout (the runner's output is contiguous,
            # which lean_forward's check finds where the traced one was not)
            env[out].meta["val"] = out.meta["val"]
        emitted.add(id(g))
        log(f"anvil: {name}: {len(g.nodes)} ops, {len(g.inputs)} inputs, {len(g.outputs())} outputs")

    by_id = {id(g): (g, syms) for g, syms in groups}
    for node in gm.graph.nodes:
        for a in node.all_input_nodes:
            producer = owner.get(a)
            if producer is not None and owner.get(node) is not producer and id(producer) not in emitted:
                emit_group(*by_id[id(producer)])
        if node in owner:
            continue
        env[node] = new.node_copy(node, lambda x: env[x])
    new.lint()
    out = fx.GraphModule(gm, new)
    lean = lean_forward(out, f"graph{next(_graph_ids)}")
    if lean is None:  # symbolic sizes: FX's forward, whose runners read the sizes at each call
        # deferred: start-up cost: AOTAutograd (about 3 s), loaded by torch.compile before it calls a backend
        from torch._functorch.aot_autograd import make_boxed_func

        return make_boxed_func(out.forward)  # type: ignore[no-untyped-call]
    fn, source = lean
    dump_source(fn.__name__, source, "graphs")
    fn._boxed_call = True  # type: ignore[attr-defined]
    return fn


def partition_joint(joint: fx.GraphModule, joint_inputs: Sequence[Any], **kwargs: Any) -> tuple[fx.GraphModule,
                                                                                            fx.GraphModule]:
    """The min-cut partitioner of forward and backward, after this backend's own CSE (cse.py says why)."""
    # deferred: start-up cost: AOTAutograd (about 3 s), loaded by torch.compile before it calls a backend
    from torch._functorch import config as functorch_config

    # deferred: start-up cost: the partitioner comes with AOTAutograd, loaded by torch.compile
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    joint.graph.eliminate_dead_code()
    joint.graph = cse_joint(joint.graph)
    joint.recompile()
    with functorch_config.patch(cse=False):
        return min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)  # type: ignore[no-any-return]


def anvil(gm: fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Callable[..., Any]:
    """The torch.compile backend (registered as "anvil" through the `torch_dynamo_backends` entry point)."""
    # deferred: start-up cost: torch._dynamo (about 3 s), loaded by torch.compile before it calls a backend
    from torch._dynamo.backends.common import aot_autograd

    backend = aot_autograd(fw_compiler=compile_graph, bw_compiler=compile_graph,
                           decompositions=decompositions(), partition_fn=partition_joint)
    return backend(gm, example_inputs)  # type: ignore[no-any-return]
