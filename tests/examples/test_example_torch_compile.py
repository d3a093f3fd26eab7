"""examples/torch_compile.py: LayerNorm -> GELU -> Linear before and after the anvil backend, and
AdamW training steps of a small pre-norm transformer compiled with it against the same steps in
eager torch. The fused kernels' outputs start as NaN (`anvil_poisoned`)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest
import torch

pytestmark = pytest.mark.usefixtures("anvil_poisoned")


@pytest.mark.parametrize("shape", [(4, 16, 96), (37, 200)])
def test_kernels_before_and_after(example: Callable[[str], ModuleType], shape: tuple[int, ...]) -> None:
    tc = example("torch_compile")
    r = tc.kernels_before_and_after(shape, out=48)
    assert r["eager"] == ["aten::native_layer_norm", "aten::gelu", "aten::addmm"]
    fused = [k for k in r["anvil"] if k.endswith("(anvil)")]
    assert len(fused) == 1 and fused[0].startswith("fused_"), r["anvil"]
    assert [k for k in r["anvil"] if k not in fused] == ["aten::addmm"], r["anvil"]
    # one generated kernel: the layer norm's statistics, the normalization and the GELU in one pass
    (source,) = r["sources"].values()
    assert "@triton.jit" in source and "tl.rsqrt" in source and "tl.erf" in source and "tl.sum" in source
    assert r["max_diff"] < 1e-5


def test_training_steps_match_eager(example: Callable[[str], ModuleType]) -> None:
    tc = example("torch_compile")
    t = tc.training_eager_vs_anvil(steps=3, batch=3, seq=12)
    assert t["n_grads"] == 18  # every parameter of TinyLM got a gradient, on both sides
    torch.testing.assert_close(t["anvil_losses"], t["eager_losses"], rtol=1e-5, atol=1e-6)
    assert max(t["grad_rel_diff"]) < 1e-4, t
    assert max(t["grad_abs_diff"]) < 1e-5, t
    assert t["eager_losses"][-1] < t["eager_losses"][0]  # the steps train
