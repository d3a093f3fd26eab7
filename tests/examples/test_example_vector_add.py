from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch


@pytest.mark.parametrize("n", [1, 1000, 1024, 4097, 98_432])
def test_add_matches_torch(example, n):
    va = example("vector_add")
    x, y = torch.rand(n), torch.rand(n)
    torch.testing.assert_close(va.add(x, y), x + y, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.float64])
def test_add_dtypes(example, dtype):
    va = example("vector_add")
    n = 3001
    if dtype.is_floating_point:
        x, y = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)
    else:
        x, y = torch.randint(-1000, 1000, (n,), dtype=dtype), torch.randint(-1000, 1000, (n,), dtype=dtype)
    torch.testing.assert_close(va.add(x, y, BLOCK_SIZE=256), x + y, rtol=0, atol=0)


def test_add_into_view_leaves_the_rest(example):
    va = example("vector_add")
    big = torch.full((3000,), -1.0)
    x, y = torch.rand(1234), torch.rand(1234)
    va.add(x, y, out=big[100:1334])
    torch.testing.assert_close(big[100:1334], x + y, rtol=0, atol=0)
    assert (big[:100] == -1).all() and (big[1334:] == -1).all()


def test_launched_kernels_are_checked_for_sm90a(ptx_outcomes):
    """The conftest's sm_90a check sees the kernels a test launches: a fresh copy of the example
    (new kernel objects, so the launch compiles) puts add_kernel's outcome back, assembled."""
    for key in [k for k in ptx_outcomes if k.startswith("add_kernel")]:
        del ptx_outcomes[key]
    path = Path(__file__).resolve().parents[2] / "examples" / "vector_add.py"
    spec = importlib.util.spec_from_file_location("anvil_examples_fresh_vector_add", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x, y = torch.rand(300), torch.rand(300)
    torch.testing.assert_close(mod.add(x, y), x + y, rtol=0, atol=0)
    assert [v for k, v in ptx_outcomes.items() if k.startswith("add_kernel")] == [""]
