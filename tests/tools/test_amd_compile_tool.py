"""compile_kernel through tools/ for an AMD target: the AMDGCN assembly comes back as an artifact,
with the kernel's resources from the code object's metadata."""

from __future__ import annotations

import anyio

from server.demo import VECTOR_ADD
from tools.compile import compile_kernel
from tools.limits import Limits
from tools.models import CompileRequest
from tools.runtime import Runtime


def test_compile_kernel_for_amd_returns_the_assembly() -> None:
    rt = Runtime(limits=Limits(max_grid_programs=4096))
    req = CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, target="amd:gfx942",
                         artifacts=["amdgcn", "asm"], artifact_lines=10**5)
    result = anyio.run(compile_kernel, rt, req)
    for name in ("amdgcn", "asm"):
        text = result.artifacts[name].text
        assert '.amdgcn_target "amdgcn-amd-amdhsa--gfx942"' in text
        assert "global_load_dword" in text and "global_store_dword" in text
    assert result.resources.num_warps == 4 and result.resources.spills == 0
    assert result.resources.shared_memory_bytes == 0 and result.resources.registers
