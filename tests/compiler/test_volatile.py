"""A program polling a flag that another program sets (tests/compiler/volatile_kernels.py) finishes
on the CPU backend: volatile loads (and cache_modifier=".cv") are relaxed atomic loads that LLVM
cannot hoist out of the loop. Run in a subprocess with a time limit, so a regression fails instead
of hanging the suite. The NVIDIA side: test_ptx_volatile.py and tests/gpu/test_gpu_volatile.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, torch
sys.path.insert(0, {root!r}); sys.path.insert(1, {here!r})
from volatile_kernels import handoff
flag = torch.zeros(1, dtype=torch.int32, device={dev!r})
out = torch.zeros(2, dtype=torch.int32, device={dev!r})
handoff[(2,)](flag, out, CV={cv})
print(out.tolist())
"""


def run_handoff(dev: str, cv: bool) -> str:
    code = SCRIPT.format(root=str(ROOT), here=str(Path(__file__).resolve().parent), dev=dev, cv=cv)
    try:
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the polling program never saw the flag (its load was not repeated)")
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip()


@pytest.mark.parametrize("cv", [False, True])
def test_polling_finishes_on_the_cpu(cv: bool) -> None:
    assert run_handoff("cpu", cv) == "[1, 1]"
