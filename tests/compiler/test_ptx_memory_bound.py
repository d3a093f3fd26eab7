"""PTX/SASS properties the memory-bound benchmark kernels depend on (RMS norm, cross-entropy):
fused multiply-adds, hardware bf16 rounding, no duplicated warps, all loads of a tile in flight."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import compiler
from compiler.backends.nvidia.toolchain import find_ptxas

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

SRC = (Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_kernels.py").read_text()
CE_SIG = {"logits_ptr": "*fp32", "target_ptr": "*i64", "loss_ptr": "*fp32", "stride": "i32:16", "V": "i32:16"}
RMS_SIG = {"x_ptr": "*bf16", "y_ptr": "*bf16", "w_ptr": "*bf16", "stride": "i32:16", "N": "i32:16", "eps": "fp32"}


def _ce(block: int, warps: int, arch: str = "sm_90a") -> object:
    k = compiler.compile_source(SRC, kernel="cross_entropy_fwd")
    return k.compile(CE_SIG, {"BLOCK": block}, target=f"cuda:{arch}", num_warps=warps)


def _cuobjdump() -> str | None:
    ptxas = find_ptxas()
    cands = [shutil.which("cuobjdump")]
    if ptxas:
        cands.append(str(Path(ptxas).with_name("cuobjdump")))
    try:
        import triton

        cands.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"))
    except ImportError:  # triton is optional
        pass
    return next((c for c in cands if c and Path(c).is_file()), None)


def test_multiply_add_chains_fuse_into_fma() -> None:
    ptx = _ce(4096, 8).asm["ptx"]  # type: ignore[attr-defined]
    # s * exp(m - new_m) + exp(x - new_m): one fma per element (16 per thread), no .rn mul/add,
    # which would also keep ptxas from fusing them
    assert len(re.findall(r"fma\.rn\.f32", ptx)) >= 16
    assert not re.search(r"\b(add|sub|mul)\.rn\.f32", ptx)


def test_small_tile_on_many_warps_is_not_duplicated() -> None:
    # 1024 elements over 16 warps (512 threads): 2 per thread (8-byte loads), not 4 per thread on
    # 8 warps with the other 8 warps loading and computing the same elements again
    ptx = _ce(1024, 16).asm["ptx"]  # type: ignore[attr-defined]
    assert len(re.findall(r"ld\.global\.v2\.b32", ptx)) == 1
    assert "ld.global.v4" not in ptx
    ptx8 = _ce(1024, 8).asm["ptx"]  # type: ignore[attr-defined]
    assert len(re.findall(r"ld\.global\.v4\.b32", ptx8)) == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fp32_to_bf16_uses_the_hardware_conversion(arch: str) -> None:
    k = compiler.compile_source(SRC, kernel="rms_norm_fwd")
    ck = k.compile(RMS_SIG, {"BLOCK": 2048}, target=f"cuda:{arch}", num_warps=4)
    ptx = ck.asm["ptx"]
    assert ptx.count("cvt.rn.bf16.f32") == 16  # 2048 / 128 threads outputs per thread
    assert "32767" not in ptx  # no integer round-to-nearest-even sequence
    assert ck.metadata["n_spills"] == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_fp32_to_bf16_toward_zero_assembles(arch: str) -> None:
    src = SRC + '''
@triton.jit
def to_bf16(x_ptr, y_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(y_ptr + o, x.to(tl.bfloat16, fp_downcast_rounding="rtz"))
    tl.store(y_ptr + BLOCK + o, x.to(tl.bfloat16))
'''
    ck = compiler.compile_source(src, kernel="to_bf16").compile({"x_ptr": "*fp32", "y_ptr": "*bf16"}, {"BLOCK": 256},
                                                                target=f"cuda:{arch}", num_warps=4)
    ptx = ck.asm["ptx"]
    assert ptx.count("cvt.rz.bf16.f32") == 2 and ptx.count("cvt.rn.bf16.f32") == 2
    assert ck.asm["cubin"][:4] == b"\x7fELF"


def _ldg_groups(cubin: bytes) -> list[int]:
    """Sizes of runs of global loads in the SASS (loads fewer than 8 instructions apart)."""
    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found")
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.cubin"
        p.write_bytes(cubin)
        sass = subprocess.run([tool, "-sass", str(p)], capture_output=True, text=True, check=True).stdout
    groups: list[int] = []
    gap = 99
    for ins in re.findall(r"/\*[0-9a-f]{4}\*/\s+(.*?);", sass):
        if "LDG" in ins:
            if gap < 8:
                groups[-1] += 1
            else:
                groups.append(1)
            gap = 0
        else:
            gap += 1
    return groups


def test_cross_entropy_loop_keeps_all_its_loads_in_flight() -> None:
    # BLOCK 4096 on 8 warps: four 16-byte loads per thread per iteration. They must issue back to
    # back; with unfused .rn arithmetic ptxas had serialized them (one load in flight per warp).
    assert _ldg_groups(_ce(4096, 8).asm["cubin"])[0] == 4  # type: ignore[attr-defined]
