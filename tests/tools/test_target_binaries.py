"""compile_kernel for the compile-only targets (AMD Instinct, NVIDIA Blackwell) returns the assembly and
the loadable binary: a cubin or an AMD code object, as the `binary` artifact (size, SHA-256, base64),
which decodes to an ELF file for that machine."""

from __future__ import annotations

import base64
import hashlib
import re
import struct

import anyio
import pytest

from compiler.backends.amd.toolchain import find_linker
from compiler.backends.nvidia.toolchain import find_ptxas
from server.demo import SOFTMAX, VECTOR_ADD
from tools.compile import compile_kernel, read_artifact
from tools.limits import Limits
from tools.models import CompileRequest
from tools.runtime import Runtime

DOT = """\
import triton
import triton.language as tl

@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    k = tl.arange(0, BK)
    a = tl.load(a_ptr + m[:, None] * BK + k[None, :])
    b = tl.load(b_ptr + k[:, None] * BN + n[None, :])
    tl.store(c_ptr + m[:, None] * BN + n[None, :], tl.dot(a, b))
"""
KERNELS = {
    "vector_add": (VECTOR_ADD, {"BLOCK": 256}, {}),
    "softmax": (SOFTMAX, {"BLOCK": 1024}, {}),
    "dot_fp16": (DOT, {"BM": 128, "BN": 128, "BK": 64}, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"}),
}
EM_CUDA, EM_AMDGPU = 190, 224
TARGETS = {  # target -> (ELF machine, what the assembly must show)
    "cuda:sm_100a": (EM_CUDA, r"\.target sm_100a"),
    "cuda:sm_120a": (EM_CUDA, r"\.target sm_120a"),
    "amd:gfx942": (EM_AMDGPU, r'\.amdgcn_target "amdgcn-amd-amdhsa--gfx942"'),
    "amd:gfx950": (EM_AMDGPU, r'\.amdgcn_target "amdgcn-amd-amdhsa--gfx950"'),
}


def _needs_tools(target: str) -> None:
    if target.startswith("cuda") and find_ptxas() is None:
        pytest.skip("ptxas not found")
    if target.startswith("amd") and find_linker() is None:
        pytest.skip("no ld.lld (the `amd` extra installs one)")


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_compile_kernel_returns_assembly_and_a_binary(target: str, kernel: str) -> None:
    _needs_tools(target)
    source, constexprs, signature = KERNELS[kernel]
    rt = Runtime(limits=Limits(max_grid_programs=4096))
    req = CompileRequest(source=source, constexprs=constexprs, signature=signature or None, target=target,
                         artifacts=["asm", "binary"], artifact_lines=10**6)
    result = anyio.run(compile_kernel, rt, req)
    machine, marker = TARGETS[target]
    assert re.search(marker, result.artifacts["asm"].text), target
    if kernel == "dot_fp16":  # the tensor-core instruction of each target
        want = {"cuda:sm_100a": "tcgen05.mma", "cuda:sm_120a": "mma.sync", "amd:gfx942": "v_mfma",
                "amd:gfx950": "v_mfma"}[target]
        assert want in result.artifacts["asm"].text
    header, *body = result.artifacts["binary"].text.splitlines()
    data = base64.b64decode("".join(body), validate=True)
    size, digest = re.fullmatch(r"# \w+ for \S+: (\d+) bytes, sha256 ([0-9a-f]{64}); .*", header).groups()  # type: ignore[union-attr]
    assert int(size) == len(data) and hashlib.sha256(data).hexdigest() == digest
    assert data[:4] == b"\x7fELF" and struct.unpack_from("<H", data, 18)[0] == machine
    assert "binary" in result.available_artifacts
    page = anyio.run(read_artifact, rt, result.kernel_id, "binary", 1, 2)  # paged like any artifact
    assert page.text.splitlines()[0] == header and page.next_page


def test_the_cpu_target_has_no_binary_artifact() -> None:
    rt = Runtime()
    result = anyio.run(compile_kernel, rt, CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}))
    assert "binary" not in result.available_artifacts
