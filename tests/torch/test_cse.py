"""The backend's CSE of the joint graph (compiler/torch/cse.py): the same forward and backward graphs
as the partitioner's own pass, without loading inductor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F

from compiler.torch.cse import cse_joint

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
import minilm  # noqa: E402

aten = torch.ops.aten


def _graphs(f: Any, x: torch.Tensor, partition: Any) -> list[list[tuple[str, str]]]:
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    from compiler.torch.lowering import decompositions

    got: list[list[tuple[str, str]]] = []

    def keep(gm: fx.GraphModule, _: Any) -> Any:
        got.append([(n.op, str(n.target)) for n in gm.graph.nodes])
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    be = aot_autograd(fw_compiler=keep, bw_compiler=keep, decompositions=decompositions(), partition_fn=partition)
    torch.compile(f, backend=be)(x).sum().backward()
    return got


def test_forward_and_backward_graphs_match_the_partitioners_own_cse() -> None:
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from compiler.torch.backend import partition_joint

    torch.manual_seed(0)
    layer = minilm.BertLayer(64, 4, 128)
    ln = torch.nn.LayerNorm(32)
    for f, shape in ((layer, (2, 8, 64)), (lambda x: F.gelu(ln(x)) * torch.sigmoid(x), (5, 32))):
        x = torch.randn(*shape, requires_grad=True)
        assert _graphs(f, x, partition_joint) == _graphs(f, x, min_cut_rematerialization_partition)


def _trace(f: Any, *shapes: tuple[int, ...]) -> fx.Graph:
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(f)(*[torch.randn(s) for s in shapes]).graph


def _ops(g: fx.Graph) -> list[str]:
    return [str(n.target) for n in g.nodes if n.op == "call_function"]


def test_repeats_merge_and_what_must_stay_distinct_stays() -> None:
    def f(x: torch.Tensor) -> Any:
        a, b = x.sin() * 2, x.sin() * 2  # one value
        z, nz = x * 0.0, x * -0.0  # -0.0 is not 0.0
        r1, r2 = torch.rand_like(x), torch.rand_like(x)  # two draws
        return a + b + z + nz + r1 + r2

    ops = _ops(cse_joint(_trace(f, (8,))))
    assert ops.count("aten.sin.default") == 1
    assert ops.count("aten.rand_like.default") == 2 or ops.count("aten.rand.default") == 2
    assert ops.count("aten.mul.Tensor") == 3  # sin*2 once, x*0.0, x*-0.0


def test_a_write_between_two_reads_keeps_both() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> Any:
        a = x.cos()
        x.add_(y)  # cos(x) after this is another value
        return a + x.cos()

    g = cse_joint(_trace(f, (4,), (4,)))
    assert _ops(g).count("aten.cos.default") == 2


def test_training_compile_does_not_load_inductor_pattern_matcher() -> None:
    script = """
import sys, torch
import torch.nn.functional as F
from compiler.torch.backend import anvil
ln = torch.nn.LayerNorm(16)
x = torch.randn(3, 16, requires_grad=True)
torch.compile(lambda x: F.gelu(ln(x)), backend=anvil)(x).sum().backward()
print("loaded:", "torch._inductor.pattern_matcher" in sys.modules)
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "loaded: False" in p.stdout
