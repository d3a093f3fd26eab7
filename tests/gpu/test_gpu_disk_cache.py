"""A CUDA kernel cached on disk by one process loads and runs in another without a stage running
(tests/compiler/test_backend_contract.py checks the same up to the module load, without a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

_LAUNCH = """
import json, sys
import torch
from compiler.runtime import compiled, stages
from tests.compiler.test_backend_contract import axpy

if sys.argv[1] == "cached":
    def no_stage(*args, **kwargs):
        raise AssertionError("a stage ran: the kernel was compiled again instead of loaded from the disk cache")
    stages.run_stages = no_stage
    compiled._build = no_stage
errors = []
for n in (1000, 4096, 77):
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    ck = axpy[((n + 255) // 256,)](x, y, out, n, 1.5, BLOCK=256)
    errors.append((out.double() - (1.5 * x.double() + y.double())).abs().max().item())
print(json.dumps({"compile_ms": ck.metadata["compile_ms"], "errors": errors}))
"""


def _run(mode: str, cache: Path) -> dict[str, object]:
    env = {**os.environ, "ANVIL_CACHE_DIR": str(cache), "ANVIL_CACHE": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _LAUNCH, mode], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_kernel_compiled_by_one_process_runs_from_the_disk_cache_in_another(tmp_path: Path) -> None:
    first = _run("compile", tmp_path)
    assert "frontend_ms" in first["compile_ms"]  # type: ignore[operator]
    again = _run("cached", tmp_path)
    assert "cache_load_ms" in again["compile_ms"] and "frontend_ms" not in again["compile_ms"]  # type: ignore[operator]
    assert all(e < 1e-5 for e in first["errors"] + again["errors"])  # type: ignore[operator]
