"""Tasks about the machine and the weights: what the device is, and quantizing a layer's weight."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from scripted import Agent

pytestmark = pytest.mark.anyio


async def test_look_at_the_device_then_compile_for_it(agent: Agent) -> None:
    """Task: which device will kernels run on here, and does 'auto' compile for it?"""
    info = await agent.call("device_info")
    assert info["default_target"] == "cpu" and "cpu" in info["backends"]
    cpu = info["devices"][0]
    assert cpu["kind"] == "cpu" and cpu["cores"] >= 1 and cpu["copy_gbps"] > 0
    gen = await agent.call("generate_kernel", expression="torch.sigmoid(x) * x", args={"x": {"shape": [5000]}},
                           target="auto")
    assert gen["target"] == "cpu" and gen["passed"] is True and gen["compile"]["target"] == "cpu"


async def test_quantize_a_weight_to_fp8(agent: Agent, work_dir: Path) -> None:
    """Task: store a projection's weight in fp8 (per-channel scales) and say how much was lost."""
    weight = torch.randn(96, 256, generator=torch.Generator().manual_seed(7))
    save_file({"proj.weight": weight, "proj.bias": torch.zeros(96)}, str(work_dir / "layer.safetensors"))
    result = await agent.call("quantize_weights", source_path="layer.safetensors", format="fp8_e4m3",
                              output_path="layer-fp8.safetensors", scheme="channel", overwrite=True)
    report = {t["name"]: t for t in result["tensors"]}["proj.weight"]
    assert report["sqnr_db"] > 28 and report["bytes_after"] < report["bytes_before"] / 3
    with safe_open(str(work_dir / "layer-fp8.safetensors"), framework="pt") as f:
        stored, scale = f.get_tensor("proj.weight"), f.get_tensor("proj.weight_scale")
    assert stored.dtype == torch.float8_e4m3fn
    restored = stored.float() * scale.float().reshape(-1, 1)
    rel = float((restored - weight).norm() / weight.norm())
    assert rel == pytest.approx(report["rel_error"], rel=0.05) and rel < 0.05
