"""The AMD backend (amd:gfx942, amd:gfx950), compile only: the stages, the AMDGCN assembly of small
kernels and the linked code object (ELF header, kernel descriptor), the metadata a loader needs,
and the errors for what the slice does not lower. No AMD GPU is needed; the tests that link skip
without an ld.lld (ROCm's, PATH, or the ziglang package: `pip install 'anvil[amd]'`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import compiler.language as tl
from compiler import errors as E
from compiler import jit
from compiler.backends.amd.metadata import EM_AMDGPU, MACH, elf_machine, kernel_descriptor
from compiler.backends.amd.toolchain import find_linker
from compiler.backends.registry import backend_for, canonical_target

ARCHS = ("gfx942", "gfx950")
ROOT = Path(__file__).resolve().parents[2]
needs_linker = pytest.mark.skipif(find_linker() is None, reason="no ld.lld (ROCm, PATH, or pip install ziglang)")


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@jit
def chain_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=-1.0)
    y = tl.where(x > 0, x * 2.0 + 1.0, tl.exp(x)) - tl.sqrt(tl.abs(x))
    tl.store(out_ptr + offs, y.to(tl.float16), mask=mask)


@jit
def row_sum_kernel(x_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.sum(x, axis=1), mask=rows < M)


@jit
def softmax_rows(x_ptr, out_ptr, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    ptrs = rows[:, None] * stride + cols[None, :]
    mask = cols[None, :] < N
    x = tl.load(x_ptr + ptrs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    tl.store(out_ptr + ptrs, e / tl.sum(e, axis=1)[:, None], mask=mask)


ROW_SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32", "stride": "i32"}


def _compile(kernel: Any, sig: dict[str, str], consts: dict[str, Any], arch: str, **kw: Any) -> Any:
    return kernel.compile(sig, consts, target=f"amd:{arch}", **kw)


def _field(asm: str, name: str) -> int:
    m = re.search(rf"^\s*\.amdhsa_{name}\s+(\d+)\s*$", asm, re.M)
    assert m is not None, f".amdhsa_{name} not in the kernel descriptor"
    return int(m.group(1))


def _check_common(ck: Any, arch: str) -> str:
    """What every kernel's assembly and metadata must show; returns the assembly."""
    asm = ck.asm["amdgcn"]
    assert f'.amdgcn_target "amdgcn-amd-amdhsa--{arch}"' in asm
    assert _field(asm, "private_segment_fixed_size") == 0  # no scratch: nothing spilled to memory
    lds = _field(asm, "group_segment_fixed_size")
    assert lds == ck.metadata["shared"] <= 64 * 1024
    k = ck.artifacts.metadata["kernel"]
    assert k["symbol"] == f"{ck.artifacts.symbol}.kd" and k["wavefront_size"] == 64
    assert k["max_flat_workgroup_size"] == 64 * ck.metadata["num_warps"]
    assert k["private_segment_fixed_size"] == 0 and ck.metadata["n_spills"] == 0
    assert re.search(r"^\s*v_\w+", asm, re.M)
    return str(asm)


def _check_code_object(ck: Any, arch: str) -> None:
    co = ck.asm["hsaco"]
    machine, flags = elf_machine(co)
    assert machine == EM_AMDGPU and flags & 0xFF == MACH[arch]
    k = ck.artifacts.metadata["kernel"]
    kd = kernel_descriptor(co, k["symbol"])
    assert kd is not None and kd["size"] == 64
    assert kd["private_segment_fixed_size"] == 0
    assert kd["group_segment_fixed_size"] == ck.metadata["shared"]
    assert kd["kernarg_size"] == k["kernarg_segment_size"]


def test_targets_and_stages() -> None:
    assert canonical_target("amd") == "amd:gfx942"
    assert canonical_target("amd:gfx950") == "amd:gfx950"
    with pytest.raises(E.ArgumentError, match="'amd:gfx942', 'amd:gfx950'"):
        canonical_target("amd:gfx90a")
    b = backend_for("amd:gfx942")
    assert b.device == "cuda"  # ROCm's torch
    assert [s.name for s in b.stages(b.options("amd:gfx942", _options()))] == ["llir", "amdgcn", "hsaco"]


def _options() -> Any:
    from compiler.runtime.specialize import LaunchOptions

    return LaunchOptions()


@pytest.mark.parametrize("arch", ARCHS)
def test_vector_add(arch: str) -> None:
    ck = _compile(add_kernel, ADD_SIG, {"BLOCK": 1024}, arch)
    llir = ck.asm["llir"]
    assert "define amdgpu_kernel void" in llir and "addrspace(1)" in llir
    assert "llvm.amdgcn.workgroup.id.x" in llir and "llvm.amdgcn.workitem.id.x" in llir
    asm = _check_common(ck, arch)
    assert "global_load_dword" in asm and "global_store_dword" in asm and "v_add_f32" in asm
    assert "s_and_saveexec_b64" in asm  # masked lanes leave EXEC around each access (wave64: 64-bit EXEC)
    # the explicit kernel arguments, as the loader packs them
    args = ck.artifacts.metadata["kernel"]["args"]
    assert [(a["name"], a["offset"], a["size"], a["value_kind"]) for a in args] == [
        ("x_ptr", 0, 8, "global_buffer"), ("y_ptr", 8, 8, "global_buffer"), ("out_ptr", 16, 8, "global_buffer"),
        ("n", 24, 4, "by_value")]
    assert ck.metadata["shared"] == 0


@pytest.mark.parametrize("arch", ARCHS)
def test_aligned_accesses_are_vectorized(arch: str) -> None:
    """n divisible by 16: each thread's 4 consecutive floats move in one 16-byte access."""
    ck = _compile(add_kernel, ADD_SIG | {"n": "i32:16"}, {"BLOCK": 1024}, arch)
    asm = _check_common(ck, arch)
    assert "global_load_dwordx4" in asm and "global_store_dwordx4" in asm


@pytest.mark.parametrize("arch", ARCHS)
def test_masked_elementwise_chain(arch: str) -> None:
    ck = _compile(chain_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp16", "n": "i32"}, {"BLOCK": 512}, arch,
                  num_warps=2)
    asm = _check_common(ck, arch)
    assert "v_exp_f32" in asm and "v_sqrt_f32" in asm and "v_cvt_f16_f32" in asm
    assert "global_store_short" in asm and "v_cndmask_b32" in asm


@pytest.mark.parametrize("arch", ARCHS)
def test_row_sum(arch: str) -> None:
    """A row of 256 spreads over 4 lanes-worth of registers and all 64 lanes of one wave per row
    group: lanes combine with ds_bpermute; rows spread over waves need no LDS."""
    ck = _compile(row_sum_kernel, ROW_SIG, {"BM": 4, "BN": 256}, arch)
    asm = _check_common(ck, arch)
    assert "ds_bpermute_b32" in asm and "global_load_dword" in asm


@pytest.mark.parametrize("arch", ARCHS)
def test_row_softmax_across_waves(arch: str) -> None:
    """One row of 2048 over 8 waves: lanes reduce with ds_bpermute, waves through LDS between
    barriers (one slot per wave per row)."""
    ck = _compile(softmax_rows, {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32", "stride": "i32"},
                  {"BM": 1, "BN": 2048}, arch, num_warps=8)
    asm = _check_common(ck, arch)
    assert "ds_bpermute_b32" in asm and "s_barrier" in asm and "v_exp_f32" in asm
    assert re.search(r"ds_write_b32|ds_write2_b32", asm) and re.search(r"ds_read", asm)
    assert 8 * 4 <= ck.metadata["shared"] <= 64 * 1024


@needs_linker
@pytest.mark.parametrize("arch", ARCHS)
def test_code_objects(arch: str) -> None:
    for ck in (_compile(add_kernel, ADD_SIG, {"BLOCK": 1024}, arch),
               _compile(softmax_rows, {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32", "stride": "i32"},
                        {"BM": 2, "BN": 1024}, arch, num_warps=8)):
        _check_code_object(ck, arch)


@jit
def print_kernel(a_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    tl.device_print("a", tl.load(a_ptr + r))


@jit
def asm_kernel(x_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r)
    y = tl.inline_asm_elementwise("v_mov_b32 $0, $1", "=v,v", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(x_ptr + r, y)


@jit
def exp64_kernel(x_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    tl.store(x_ptr + r, tl.exp(tl.load(x_ptr + r)))


@pytest.mark.parametrize(("kernel", "sig", "consts", "what", "line"), [
    (print_kernel, {"a_ptr": "*fp32"}, {"BLOCK": 64}, "tl.device_print", 'tl.device_print("a", tl.load(a_ptr + r))'),
    (asm_kernel, {"x_ptr": "*i32"}, {"BLOCK": 64}, "tl.inline_asm_elementwise", "tl.inline_asm_elementwise("),
    (exp64_kernel, {"x_ptr": "*fp64"}, {"BLOCK": 64}, "tl.exp on float64", "tl.exp(tl.load(x_ptr + r))"),
])
def test_unsupported_ops_are_located_errors(kernel: Any, sig: dict[str, str], consts: dict[str, Any], what: str,
                                            line: str) -> None:
    with pytest.raises(E.UnsupportedError) as info:
        _compile(kernel, sig, consts, "gfx950")
    msg = str(info.value)
    assert what in msg and "amd:gfx950" in msg and line in msg and "^" in msg
    assert info.value.loc is not None and info.value.loc.file == __file__


def test_debug_mode_is_refused() -> None:
    with pytest.raises(E.UnsupportedError, match="debug mode"):
        _compile(add_kernel, ADD_SIG, {"BLOCK": 256}, "gfx942", debug=True)


def test_without_a_linker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The assembly is still the result; the missing code object is a warning, and loading names
    what to install."""
    from compiler.backends.amd import toolchain

    monkeypatch.setattr(toolchain, "find_linker", lambda: None)
    monkeypatch.setenv("ANVIL_CACHE", "0")
    ck = _compile(add_kernel, ADD_SIG, {"BLOCK": 128}, "gfx942")
    assert "hsaco" not in ck.asm and "global_store_dword" in ck.asm["amdgcn"]
    assert any("ziglang" in w for w in ck.metadata["warnings"])
    with pytest.raises(E.LaunchError, match="ziglang"):
        ck.backend.load(ck.artifacts)


@needs_linker
def test_launch_without_a_hip_runtime_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler.backends.amd import hip

    monkeypatch.setattr(hip, "_api", None)
    monkeypatch.setattr(hip, "find_hip_runtime", lambda: None)
    ck = _compile(add_kernel, ADD_SIG, {"BLOCK": 128}, "gfx942")
    with pytest.raises(E.LaunchError, match="no HIP runtime found: .*ROCm"):
        ck.backend.launcher(ck).launch((1, 1, 1), [])


_SECOND_PROCESS = """
import json, sys
from compiler.runtime import compiled, stages
from tests.compiler.test_amd_backend import add_kernel, ADD_SIG

def no_stage(*args, **kwargs):
    raise AssertionError("a stage ran: the kernel was compiled again instead of loaded from the disk cache")

stages.run_stages = no_stage
compiled._build = no_stage
ck = add_kernel.compile(ADD_SIG, {"BLOCK": 256}, target="amd:gfx950")
print(json.dumps({"compile_ms": ck.metadata["compile_ms"], "amdgcn": ck.asm["amdgcn"],
                  "hsaco": ck.asm["hsaco"].hex() if "hsaco" in ck.asm else None, "n_regs": ck.metadata["n_regs"],
                  "kernel": ck.artifacts.metadata["kernel"]}))
"""


def test_a_cached_kernel_loads_in_a_new_process_without_a_stage(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler.runtime import compiled

    monkeypatch.setenv("ANVIL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ANVIL_CACHE", "1")
    monkeypatch.setattr(compiled, "_MEMORY", {})
    ck = add_kernel.compile(ADD_SIG, {"BLOCK": 256}, target="amd:gfx950")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _SECOND_PROCESS], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "cache_load_ms" in got["compile_ms"] and "frontend_ms" not in got["compile_ms"]
    assert got["amdgcn"] == ck.asm["amdgcn"] and got["n_regs"] == ck.metadata["n_regs"]
    assert got["kernel"] == ck.artifacts.metadata["kernel"]
    assert got["hsaco"] == (ck.asm["hsaco"].hex() if "hsaco" in ck.asm else None)
