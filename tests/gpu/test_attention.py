"""Fused attention (examples/flash_attention.py) on the GPU at the tiles benchmarks/attention.py
runs (head dim 64 and 128, 4 and 8 warps, both dots on wgmma on Hopper, p @ v in flight across
iterations): outputs and log-sum-exp against float64 and the CPU backend, sequence lengths that
are not multiples of the blocks, fp16 and bf16, causal and not, poisoned outputs."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.gpu

_PATH = Path(__file__).resolve().parents[2] / "examples" / "flash_attention.py"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("anvil_examples_fa_gpu", _PATH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FA = _module()


def _run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, bm: int, bn: int,
         warps: int) -> tuple[torch.Tensor, torch.Tensor]:
    z, h, n, d = q.shape
    o = torch.full_like(q, float("nan"))
    lse = torch.full((z, h, n), float("nan"), dtype=torch.float32, device=q.device)
    FA._attn_fwd[(math.ceil(n / bm), z * h)](q, k, v, o, lse, 1.0 / math.sqrt(d), *q.stride(), *k.stride(),
                                            *v.stride(), *o.stride(), h, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn,
                                            CAUSAL=causal, num_warps=warps)
    return o, lse


def _lse_reference(q: torch.Tensor, k: torch.Tensor, causal: bool) -> torch.Tensor:
    s = q.double() @ k.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.logsumexp(s, -1)


@pytest.mark.parametrize("cfg", [(128, 128, 8), (128, 64, 8), (64, 64, 4)])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("n", [128, 333, 1000])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_attention_on_gpu(cfg: tuple[int, int, int], d: int, n: int, causal: bool, dtype: torch.dtype) -> None:
    torch.manual_seed(n + d)
    q, k, v = (torch.randn(2, 3, n, d, device="cuda", dtype=dtype) for _ in range(3))
    o, lse = _run(q, k, v, causal, *cfg)
    torch.cuda.synchronize()
    ref = FA.attention_reference(q, k, v, causal)
    # P is rounded to 16 bits before p @ v: errors of a few units in the last place of P
    tol = 1e-2 if dtype == torch.float16 else 3e-2
    torch.testing.assert_close(o.double(), ref, rtol=0, atol=tol)
    torch.testing.assert_close(lse.double(), _lse_reference(q, k, causal), rtol=0, atol=1e-3)


@pytest.mark.parametrize("cfg", [(128, 128, 8), (64, 64, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_gpu_matches_cpu_backend(cfg: tuple[int, int, int], causal: bool) -> None:
    torch.manual_seed(7)
    q, k, v = (torch.randn(1, 2, 200, 64, dtype=torch.float16) for _ in range(3))
    o_cpu, lse_cpu = _run(q, k, v, causal, *cfg)
    o_gpu, lse_gpu = _run(q.cuda(), k.cuda(), v.cuda(), causal, *cfg)
    torch.testing.assert_close(o_gpu.cpu().double(), o_cpu.double(), rtol=0, atol=4e-3)
    torch.testing.assert_close(lse_gpu.cpu().double(), lse_cpu.double(), rtol=0, atol=1e-3)


@pytest.mark.parametrize("pipeline", ["0", "sync"])
@pytest.mark.parametrize("cfg", [(128, 128, 8), (64, 64, 4)])
def test_attention_without_pipelining(pipeline: str, cfg: tuple[int, int, int],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """ANVIL_PIPELINE=0 (K and V staged through registers, q still staged once before the loop) and
    =sync (every wgmma group waited in its iteration) give the same results."""
    monkeypatch.setenv("ANVIL_PIPELINE", pipeline)
    torch.manual_seed(3)
    q, k, v = (torch.randn(1, 2, 333, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    for causal in (False, True):
        o, lse = _run(q, k, v, causal, *cfg)
        torch.testing.assert_close(o.double(), FA.attention_reference(q, k, v, causal), rtol=0, atol=1e-2)
        torch.testing.assert_close(lse.double(), _lse_reference(q, k, causal), rtol=0, atol=1e-3)
