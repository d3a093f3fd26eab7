"""torch.compile(backend="anvil") on CUDA: outputs and gradients against eager torch, and the fused
kernels' outputs against the same graph run on the CPU backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from compiler.torch.backend import anvil

pytestmark = pytest.mark.gpu


def _run(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor], device: str,
         compiled: bool) -> tuple[torch.Tensor, list[torch.Tensor | None]]:
    xs = [t.detach().to(device).requires_grad_(t.is_floating_point()) for t in inputs]
    f = torch.compile(fn, backend=anvil) if compiled else fn
    out = f(*xs)
    out.backward(torch.ones_like(out) * 0.5)
    return out.detach().cpu(), [None if x.grad is None else x.grad.cpu() for x in xs]


PATTERNS: dict[str, tuple[Callable[..., torch.Tensor], Callable[[], list[torch.Tensor]]]] = {
    "layer_norm_gelu": (lambda x, w, b: F.gelu(F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)),
                        lambda: [torch.randn(37, 4, 1000), torch.randn(1000), torch.randn(1000)]),
    "rms_norm_swiglu": (lambda x, w, u: F.silu(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w) * u,
                        lambda: [torch.randn(129, 768), torch.randn(768), torch.randn(129, 768)]),
    "masked_softmax": (lambda x, m: torch.softmax(x * 0.125 + m, -1),
                       lambda: [torch.randn(2, 3, 77, 77), torch.randn(77, 77)]),
    "bias_gelu": (lambda x, b: F.gelu(x + b, approximate="tanh"), lambda: [torch.randn(513, 1000), torch.randn(1000)]),
    "log_softmax": (lambda x: torch.log_softmax(x, -1), lambda: [torch.randn(33, 5000)]),
    # weight and bias gradients over 4099 rows: column sums split over chunks of rows (fusion/split.py)
    "layer_norm_many_rows": (lambda x, w, b: F.layer_norm(x, (768,), w, b) * 2,
                             lambda: [torch.randn(4099, 768), torch.randn(768), torch.randn(768)]),
}


def test_column_sums_of_many_rows_run_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler.torch import runner

    monkeypatch.setattr(runner, "_SHARED", {})
    monkeypatch.setenv("ANVIL_FUSION_DUMP", str(tmp_path))
    torch._dynamo.reset()
    fn, make = PATTERNS["layer_norm_many_rows"]
    _run(fn, make(), "cuda", compiled=True)
    assert any("chunk = tl.program_id(1)" in p.read_text() for p in tmp_path.glob("*.py"))


@pytest.mark.parametrize("name", list(PATTERNS))
def test_pattern_matches_eager_and_the_cpu_backend(name: str) -> None:
    torch._dynamo.reset()
    fn, make = PATTERNS[name]
    inputs = make()
    want, want_g = _run(fn, inputs, "cuda", compiled=False)
    got, got_g = _run(fn, inputs, "cuda", compiled=True)
    torch._dynamo.reset()
    cpu, cpu_g = _run(fn, inputs, "cpu", compiled=True)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(got, cpu, atol=2e-5, rtol=2e-5)
    for a, b, c in zip(got_g, want_g, cpu_g, strict=True):
        if b is not None:
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(a, c, atol=1e-4, rtol=1e-4)


def test_bf16_encoder_layer() -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True,
                                             activation="gelu").cuda().to(torch.bfloat16)
    x = torch.randn(4, 100, 256, device="cuda", dtype=torch.bfloat16)
    want = layer(x)
    got = torch.compile(layer, backend=anvil)(x)
    cos = F.cosine_similarity(got.float().flatten(), want.float().flatten(), dim=0)
    assert cos > 0.9999, cos


def test_static_graph_kernels_compile_ahead_of_the_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """A static graph's kernels are compiled on background threads while torch finishes the graph,
    all at once; the first call waits for one under way instead of compiling it again."""
    import threading

    from compiler.runtime import compiled

    seen: list[tuple[str, str]] = []
    real = compiled._compile

    def spy(fn: object, specs: object, opts: object, target: str, key: str) -> object:
        seen.append((threading.current_thread().name, key))
        return real(fn, specs, opts, target, key)  # type: ignore[arg-type]
    monkeypatch.setattr(compiled, "_compile", spy)
    torch._dynamo.reset()
    ln = torch.nn.LayerNorm(333).cuda()
    w = torch.randn(333, 130, device="cuda")

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax((F.gelu(ln(x)) @ w) * 0.5, -1) + torch.sigmoid(x).sum(-1, keepdim=True)
    x = torch.randn(77, 333, device="cuda")
    torch.testing.assert_close(torch.compile(f, backend=anvil)(x), f(x), rtol=1e-4, atol=1e-4)
    keys = [k for _, k in seen]
    assert len(keys) >= 2 and len(set(keys)) == len(keys), seen  # each kernel compiled once
    assert any(t.startswith("anvil-ahead") for t, _ in seen), seen
