"""The Blackwell targets (sm_100a, sm_103a, sm_120a) compile and assemble with ptxas, no GPU needed:
every example kernel, the op kernels and the benchmark kernels, each compiled once per target
(nv_target_cases.py), with the ISA that matters checked: no wgmma (sm_90a only), mma.sync for
`tl.dot` (the fp8 forms for fp8 dots) or tcgen05 where its planner takes the dot (sm_100a and
sm_103a), the PTX ISA version each target needs, no spills in the hot kernels (ptxas's report), a
cubin for that SM. These targets are compiled only; sm_90a is the one verified on hardware
(docs/targets.md)."""

from __future__ import annotations

import functools
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

import compiler
from compiler.backends.nvidia.toolchain import PtxasError, assemble_with_ptxas, find_ptxas
from compiler.backends.nvidia_targets import NV_TARGETS, arch_number, describe_targets, nv_target

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nv_target_cases  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

BLACKWELL = ["sm_100a", "sm_103a", "sm_120a"]
CASES = nv_target_cases.all_cases()
FP8_MMA = {"fp8e4nv": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
           "fp8e5": "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"}


@functools.cache
def _compiled(name: str, arch: str) -> Any:
    fn, sig, consts, warps, stages, tags = CASES[name]
    return fn.compile(sig, consts, target=f"cuda:{arch}", num_warps=warps, num_stages=stages, debug="debug" in tags)


def _cubin_sm(cubin: bytes) -> int:
    """The SM a cubin is for: bits 8-15 of the ELF header's e_flags (ptxas 13.0 writes 0x5a for
    sm_90a, 0x64 for sm_100a, 0x67 for sm_103a, 0x78 for sm_120a)."""
    assert cubin[:4] == b"\x7fELF" and cubin[4] == 2  # a 64-bit ELF
    return int(struct.unpack_from("<I", cubin, 0x30)[0] >> 8 & 0xFF)


@pytest.mark.parametrize("arch", BLACKWELL)
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_compiles_and_assembles(name: str, arch: str) -> None:
    ck = _compiled(name, arch)
    ptx: str = ck.asm["ptx"]
    target = nv_target(arch)
    assert f".target {arch}" in ptx and f".version {target.ptx[0]}.{target.ptx[1]}" in ptx
    assert _cubin_sm(ck.asm["cubin"]) == target.number
    assert "wgmma" not in ptx  # Hopper's MMA does not exist past sm_90a
    tags = CASES[name][-1]
    if not target.tcgen05:
        assert "tcgen05" not in ptx  # consumer Blackwell has no tcgen05
    if "dot" in tags:
        # the dots tcgen05's planner takes (128-row tiles, not int8) use it on sm_100a/sm_103a
        # (test_nv_tcgen05.py); every other dot is mma.sync
        assert ("mma.sync.aligned" in ptx and "ldmatrix.sync.aligned" in ptx) or \
            (target.tcgen05 and "tcgen05.mma.cta_group::1.kind::" in ptx and "mma.sync" not in ptx)
    if "hot" in tags:
        assert ck.metadata["n_spills"] == 0, f"{name} spills {ck.metadata['n_spills']} bytes on {arch}"
    assert ck.metadata["n_regs"]


@pytest.mark.parametrize("arch", BLACKWELL)
@pytest.mark.parametrize("dtype", sorted(FP8_MMA))
def test_fp8_dot_uses_the_fp8_mma_form(dtype: str, arch: str) -> None:
    """An fp8 dot is the m16n8k32 fp8 mma.sync on sm_120a (its tensor cores take these forms, as
    Ada's and Hopper's do): 128 x 128 tile on 8 warps of 64 x 32, k64 = two k32 steps -> 4 x 4 x 2;
    tcgen05's f8f6f4 kind on sm_100a/sm_103a. Never an upcast to fp16."""
    ptx = _compiled(f"gemm_{dtype}", arch).asm["ptx"]
    if nv_target(arch).tcgen05:  # tcgen05 takes it there: kind::f8f6f4, two k32 steps
        assert ptx.count("tcgen05.mma.cta_group::1.kind::f8f6f4") == 2 and "mma.sync" not in ptx
    else:
        assert ptx.count(FP8_MMA[dtype]) == 32
    assert "cvt.rn.f16x2.e4m3x2" not in ptx and "cvt.rn.f16x2.e5m2x2" not in ptx  # no upcast to fp16


@pytest.mark.parametrize("arch", BLACKWELL)
def test_tensor_core_forms_of_each_dtype(arch: str) -> None:
    """fp16, bf16, tf32 (fp32 inputs) and int8 dots take their mma.sync forms on every target, except
    the 128 x 128 GEMMs on sm_100a/sm_103a, which take tcgen05 (kind::f16, kind::tf32) but for int8
    (kind::i8 is not lowered)."""
    forms = {"fp16": "m16n8k16.row.col.f32.f16.f16.f32", "bf16": "m16n8k16.row.col.f32.bf16.bf16.f32",
             "fp32": "m16n8k8.row.col.f32.tf32.tf32.f32", "i8": "m16n8k32.row.col.s32.s8.s8.s32"}
    for dtype, form in forms.items():
        ptx = _compiled(f"gemm_{dtype}", arch).asm["ptx"]
        if nv_target(arch).tcgen05 and dtype != "i8":
            kind = "tf32" if dtype == "fp32" else "f16"
            assert f"tcgen05.mma.cta_group::1.kind::{kind}" in ptx and "mma.sync" not in ptx, dtype
        else:
            assert f"mma.sync.aligned.{form}" in ptx, dtype


@pytest.mark.parametrize("arch", BLACKWELL)
def test_ptx_version_is_the_lowest_ptxas_accepts(arch: str) -> None:
    """The table's `.version` assembles, and the version below it does not (ptxas 13.0 knows which
    PTX ISA introduced each target): sm_100a 8.6, sm_120a 8.7, sm_103a 8.8."""
    ptx = _compiled("bench_add_kernel", arch).asm["ptx"]
    major, minor = nv_target(arch).ptx
    assemble_with_ptxas(ptx, arch)
    with pytest.raises(PtxasError, match="not supported|version"):
        assemble_with_ptxas(ptx.replace(f".version {major}.{minor}", f".version {major}.{minor - 1}"), arch)


def test_architectures_compare_by_number() -> None:
    assert "sm_100a" < "sm_90a"  # why names are never compared
    assert arch_number("sm_100a") > arch_number("sm_90a") and arch_number("sm_120a") > arch_number("sm_103a")
    assert [a for a, t in NV_TARGETS.items() if t.wgmma] == ["sm_90a"]
    assert all(t.fp8_mma for a, t in NV_TARGETS.items() if arch_number(a) >= 89)
    assert {a for a, t in NV_TARGETS.items() if t.verified_on} == {"sm_90a"}
    rows = {r["target"]: r for r in describe_targets()}
    assert rows["cuda:sm_90a"]["verified_on_hardware"] and rows["cuda:sm_90a"]["verified_on"] == "H200"
    assert not any(rows[f"cuda:{a}"]["verified_on_hardware"] for a in BLACKWELL)


@pytest.mark.parametrize("target", ["cuda:sm_110a", "cuda:sm_121a", "cuda:sm_75", "cuda:sm_100", "cuda:sm_9a"])
def test_an_architecture_outside_the_table_is_refused_before_llvm(target: str) -> None:
    """LLVM aborts the process on an architecture its PTX version cannot express (sm_110a needs 9.0):
    such targets are an ArgumentError naming the ones the backend compiles for."""
    fn, sig, consts, *_ = CASES["bench_add_kernel"]
    with pytest.raises(compiler.errors.ArgumentError, match=r"unknown CUDA architecture .*'cuda:sm_100a'"):
        fn.compile(sig, consts, target=target)


@pytest.mark.parametrize("arch", BLACKWELL)
def test_clusters_on_blackwell(arch: str) -> None:
    """Thread block clusters stay on sm_100a/sm_103a/sm_120a (`.reqnctapercluster`, assembled);
    Ada has none."""
    fn, sig, consts, *_ = CASES["bench_add_kernel"]
    ck = fn.compile(sig, consts, target=f"cuda:{arch}", cluster_dims=(2, 1, 1))
    assert ".reqnctapercluster 2, 1, 1" in ck.asm["ptx"] and _cubin_sm(ck.asm["cubin"]) == arch_number(arch)
    with pytest.raises(compiler.errors.UnsupportedError, match="needs sm_90 or newer"):
        fn.compile(sig, consts, target="cuda:sm_89", cluster_dims=(2, 1, 1))


@pytest.mark.parametrize(("arch", "staged"), [("sm_100a", True), ("sm_103a", True), ("sm_120a", False)])
def test_consumer_blackwell_has_less_shared_memory_for_pipelines(arch: str, staged: bool) -> None:
    """A block gets 227 KB of shared memory on the datacenter parts, 99 KB on sm_120a; a loop's
    private copy slots take what is left after the scratch reserve (160 KB as on sm_90a, 32 KB):
    four 32 KB stages of a 64 x 128 fp32 tile fit on sm_100a/sm_103a, not even two on sm_120a, where
    the loads stay loads."""
    from stream_kernels import row_sums

    from compiler.backends.nvidia.async_copy import private_budget

    assert private_budget(arch) == (160 if staged else 32) * 1024
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32", "stride": "i32:16"}
    ck = row_sums.compile(sig, {"BM": 64, "BN": 128, "STAGES": 4, "MASKED": False}, target=f"cuda:{arch}", num_warps=8)
    assert ("cp.async.cg.shared.global" in ck.asm["ptx"]) is staged
    assert (ck.metadata["shared"] >= 4 * 64 * 128 * 4) is staged
    assert ck.metadata["shared"] <= nv_target(arch).max_shared_bytes


def test_loading_on_another_gpu_names_both_architectures(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver refuses a cubin for another architecture (CUDA_ERROR_NO_BINARY_FOR_GPU): the error
    names the kernel's target, the GPU's, and that the target is compile only."""
    from compiler.backends.nvidia import driver
    from compiler.backends.nvidia.backend import NvidiaBackend

    def refuse(*args: Any) -> Any:
        raise compiler.errors.LaunchError("loading kernel add_kernel failed: CUDA_ERROR_NO_BINARY_FOR_GPU")

    monkeypatch.setattr(driver, "load_cubin", refuse)
    monkeypatch.setattr(driver, "device_arch", lambda: "sm_90a")
    ck = _compiled("bench_add_kernel", "sm_100a")
    with pytest.raises(compiler.errors.LaunchError,
                       match=r"compiled for sm_100a \(Blackwell datacenter .*compile only, not verified on hardware\)"
                             r", which this GPU \(sm_90a\) cannot run; compile for 'cuda:sm_90a'"):
        NvidiaBackend().load(ck.artifacts)


def test_shared_memory_beyond_the_target_is_a_compile_error() -> None:
    """112 KB of tl.extra.cuda.shared_memory fits a block on sm_100a (227 KB), not on sm_120a
    (99 KB): an error when compiling, where nothing would ever launch it."""
    from shared_memory_kernels import held_regions

    sig = {"x_ptr": "*i32", "y_ptr": "*i32", "sum_ptr": "*i32", "addr_ptr": "*i32"}
    consts = {"A": 64 * 1024, "B": 48 * 1024, "NW": 1}
    ck = held_regions.compile(sig, consts, target="cuda:sm_100a", num_warps=1)
    assert ck.metadata["shared"] >= 112 * 1024
    with pytest.raises(compiler.errors.ResourceError, match=r"a block on sm_120a may have at most 101376 \(99 KB\)"):
        held_regions.compile(sig, consts, target="cuda:sm_120a", num_warps=1)
