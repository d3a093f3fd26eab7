"""Every example's `__main__` demo runs (in process) and prints its results."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

DEMOS = ["argmax", "block_ptr", "cross_entropy", "cumsum", "dropout", "flash_attention", "fused_softmax", "histogram",
         "flash_attention_bwd", "layer_norm", "matmul", "persistent_matmul", "rms_norm", "vector_add"]


@pytest.mark.parametrize("name", DEMOS)
def test_demo_runs(name, capsys):
    runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.strip()
    assert not re.search(r"(:|equal) False", out), out  # the demos print their checks as "...: True"
