# ruff: noqa: E501, B023  (a one-off probe)
"""Probe (not a benchmark): parts of the host time of a compiled BERT-base encoder layer forward:
the whole compiled call, the compiled graph alone (no dynamo, no AOTAutograd wrapper), aot_eager's
graph alone, and micro timings of single calls (addmm variants, views, a fused group's runner).

    python benchmarks/probes/host_parts.py [--trace out.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import minilm  # noqa: E402

import compiler.torch.backend as B  # noqa: E402
from compiler.torch import runner as R  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--trace", default=None)
ap.add_argument("--batch", type=int, default=16)
cli = ap.parse_args()


def per_call(fn: Any, n: int = 300) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return us


layer = minilm.BertLayer(768, 12, 3072).cuda().to(torch.bfloat16)
x = torch.randn(cli.batch, 512, 768, device="cuda", dtype=torch.bfloat16)
graphs: dict[str, Any] = {}
runners: list[Any] = []
orig_cg, orig_init = B.compile_graph, R.GroupRunner.__init__


def capture(label: str) -> Any:
    def cg(gm: Any, ex: Any) -> Any:
        out = orig_cg(gm, ex) if label == "anvil" else (lambda args: gm(*args))
        if label != "anvil":
            out._boxed_call = True  # type: ignore[attr-defined]
        graphs[label] = (out, [t for t in ex])
        return out
    return cg


def init(self: Any, *a: Any, **k: Any) -> None:
    orig_init(self, *a, **k)
    runners.append(self)


R.GroupRunner.__init__ = init  # type: ignore[method-assign]
with torch.no_grad():
    print(f"eager: {per_call(lambda: layer(x)):.0f} us/call")
    for label in ("anvil", "aot_eager_graph"):
        B.compile_graph = capture(label)
        torch._dynamo.reset()
        f = torch.compile(layer, backend=B.anvil)
        print(f"{label} compiled call: {per_call(lambda: f(x)):.0f} us/call")
    B.compile_graph = orig_cg
    torch._dynamo.reset()
    ind = torch.compile(layer)
    print(f"inductor compiled call: {per_call(lambda: ind(x)):.0f} us/call")
    params = [p for p in layer.parameters()]
    for label, (fn, ex) in graphs.items():
        real = [x if t.dim() == 3 else None for t in ex]
        # graph inputs in order: the input and the parameters, matched by shape
        pool = list(params)
        args: list[Any] = []
        for t in ex:
            if t.dim() == 3:
                args.append(x)
                continue
            for i, p in enumerate(pool):
                if p.shape == t.shape:
                    args.append(pool.pop(i))
                    break
        print(f"{label} graph alone: {per_call(lambda: fn(list(args))):.0f} us/call")
    w, b = layer.up.weight, layer.up.bias
    xa = x.view(-1, 768)
    wt = w.t()
    wd, bd = w.detach(), b.detach()
    out = torch.empty(xa.shape[0], 3072, device="cuda", dtype=torch.bfloat16)
    op = torch.ops.aten.addmm.default
    for label, fn in (("aten.addmm.default(param)", lambda: op(b, xa, w.t())),
                      ("aten.addmm.default(plain)", lambda: op(bd, xa, wd.t())),
                      ("aten.addmm._op(plain)", lambda: op._op(bd, xa, wd.t())),
                      ("torch.addmm(out=)", lambda: torch.addmm(bd, xa, wd.t(), out=out)),
                      ("aten.view.default", lambda: torch.ops.aten.view.default(x, [8192, 768])),
                      ("reinterpret", lambda: torch._C._dynamo.guards._reinterpret_tensor(x, (8192, 768), (768, 1), 0)),
                      ("torch.empty", lambda: torch.empty((8192, 768), device="cuda", dtype=torch.bfloat16))):
        print(f"{label}: {per_call(fn, 2000):.1f} us")
    q = torch.randn(2, 12, 128, 64, device="cuda", dtype=torch.bfloat16)
    aten = torch.ops.aten
    for label, fn in (("sdpa (dispatch)", lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q)),
                      ("sdpa flash", lambda: aten._scaled_dot_product_flash_attention.default(q, q, q)),
                      ("sdpa cudnn", lambda: aten._scaled_dot_product_cudnn_attention.default(q, q, q, None, False)),
                      ("sdpa efficient", lambda: aten._scaled_dot_product_efficient_attention.default(q, q, q, None, False))):
        try:
            print(f"{label} (small, host-bound): {per_call(fn, 2000):.1f} us")
        except Exception as e:  # noqa: BLE001
            print(f"{label}: {type(e).__name__}: {e}"[:200])
    for r in runners[:3]:
        plan_key, plan = next(iter(r.plans.items()))
        print(f"runner {r.name}: plan inputs {plan_key}")
    if cli.trace:
        fn, _ = graphs["anvil"]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                f(x)
            torch.cuda.synchronize()
        prof.export_chrome_trace(cli.trace)
