"""Every kernel the example tests launch also compiles and assembles for sm_90a.

Runs tests/examples (on the CPU) in a subprocess with tests/examples/ptx_plugin.py, which compiles
each launched specialization for the NVIDIA backend too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.backends.nvidia.toolchain import find_ptxas

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found"), pytest.mark.slow]

# kernels of examples/*.py that tests/examples launch (at least these must have been compiled)
EXPECTED = {"add_kernel", "softmax_kernel", "matmul_kernel", "bincount_kernel", "histc_kernel", "cumsum_kernel",
            "argmax_kernel", "rms_norm_kernel", "_layer_norm_fwd", "_attn_fwd", "_seeded_dropout",
            "cross_entropy_fwd_kernel", "matmul_block_ptr_kernel"}


def test_example_kernels_compile_for_sm90a(tmp_path: Path) -> None:
    record = tmp_path / "ptx.json"
    env = dict(os.environ, ANVIL_PTX_RECORD=str(record), ANVIL_PTX_ARCH="sm_90a",
               PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "examples"), str(ROOT)]))
    env.pop("ANVIL_TEST_DEVICE", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "ptx_plugin", "-p", "no:cacheprovider",
                           "tests/examples"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert record.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(record.read_text())
    failed = [r for r in rows if not r["ok"]]
    assert not failed, "\n".join(f"{r['kernel']}: {r['error'][:300]}" for r in failed)
    assert {r["kernel"] for r in rows} >= EXPECTED
    assert all(r["spills"] == 0 for r in rows), [r for r in rows if r["spills"]]
