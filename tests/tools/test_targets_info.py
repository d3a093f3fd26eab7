"""device_info's list of compile targets says which are verified on hardware (sm_90a on an H200, the
CPU) and which compile only (the Blackwell targets); every CUDA target it lists does compile, and
compile_kernel takes the Blackwell targets without a GPU."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import pytest

from compiler.backends.nvidia.toolchain import find_ptxas
from server.demo import VECTOR_ADD
from tools.compile import compile_kernel
from tools.device import compile_targets
from tools.models import CompileRequest, DeviceInfo, check_target
from tools.runtime import Runtime

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
BLACKWELL = ("cuda:sm_100a", "cuda:sm_103a", "cuda:sm_120a")


def test_the_targets_say_which_ran_on_hardware() -> None:
    rows = {t.target: t for t in compile_targets()}
    assert rows["cpu"].verified_on_hardware
    assert rows["cuda:sm_90a"].verified_on_hardware and rows["cuda:sm_90a"].verified_on == "H200"
    for name in BLACKWELL:
        assert not rows[name].verified_on_hardware and rows[name].verified_on is None
    assert {n: rows[n].ptx_version for n in BLACKWELL} == {"cuda:sm_100a": "8.6", "cuda:sm_103a": "8.8",
                                                           "cuda:sm_120a": "8.7"}
    for name in ("amd:gfx942", "amd:gfx950"):
        assert not rows[name].verified_on_hardware and "Instinct" in rows[name].family
    assert "Blackwell" in rows["cuda:sm_120a"].family and "compile only" in DeviceInfo.model_fields[
        "targets"].description  # type: ignore[operator]


def test_the_validator_names_the_compile_only_targets() -> None:
    for name in BLACKWELL:
        assert check_target(name.upper()) == name
    with pytest.raises(ValueError, match="'cuda:sm_120a' compile only, not verified on hardware"):
        check_target("cuda:blackwell")


def test_listing_the_targets_does_not_import_the_nvidia_backend() -> None:
    """device_info runs in the server: the table is read without the backend, whose import starts
    LLVM's initialisation and loads the assembler."""
    code = ("import sys; from tools.device import compile_targets; compile_targets(); "
            "print('compiler.backends.nvidia' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@needs_ptxas
def test_every_listed_cuda_target_compiles_without_a_gpu() -> None:
    rt = Runtime()

    async def go(target: str) -> Any:
        return await compile_kernel(rt, CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, target=target,
                                                       artifacts=["ptx"], artifact_lines=10**5))

    for row in compile_targets():
        if not row.target.startswith("cuda:"):
            continue
        res = anyio.run(go, row.target)
        ptx = res.artifacts["ptx"].text
        arch = row.target.removeprefix("cuda:")
        assert f".target {arch}" in ptx and f".version {row.ptx_version}" in ptx, row.target
        assert res.resources.spills == 0 and res.resources.registers
