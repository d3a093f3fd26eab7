"""The NVIDIA backend's PTX assembles with ptxas for sm_80 and sm_90a (no GPU needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import compiler
from compiler.backends.nvidia.toolchain import find_ptxas

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")

SRC = (Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_kernels.py").read_text()

CASES = {
    "add_kernel": ({"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32:16"}, {"BLOCK": 1024}),
    "softmax_kernel": ({"out_ptr": "*fp16", "in_ptr": "*fp16", "in_stride": "i32:16", "out_stride": "i32:16",
                        "n_cols": "i32"}, {"BLOCK": 1024}),
    "layer_norm_fwd": ({"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16", "mean_ptr": "*fp32",
                        "rstd_ptr": "*fp32", "stride": "i32:16", "N": "i32:16", "eps": "fp32"}, {"BLOCK": 1024}),
    "rms_norm_fwd": ({"x_ptr": "*bf16", "y_ptr": "*bf16", "w_ptr": "*bf16", "stride": "i32:16", "N": "i32",
                      "eps": "fp32"}, {"BLOCK": 2048}),
    "cross_entropy_fwd": ({"logits_ptr": "*fp32", "target_ptr": "*i64", "loss_ptr": "*fp32", "stride": "i32:16",
                           "V": "i32:16"}, {"BLOCK": 1024}),
    "cumsum_rows": ({"x_ptr": "*fp32", "y_ptr": "*fp32", "stride": "i32", "N": "i32"}, {"BLOCK": 256}),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_assembles(name: str, arch: str) -> None:
    sig, constexprs = CASES[name]
    k = compiler.compile_source(SRC, kernel=name)
    ck = k.compile(sig, constexprs, target=f"cuda:{arch}", num_warps=4)
    ptx = ck.asm["ptx"]
    assert f".target {arch}" in ptx
    assert ck.asm["cubin"][:4] == b"\x7fELF"
    assert ck.metadata["n_regs"] and ck.metadata["n_spills"] == 0


def test_maxnreg_caps_the_registers() -> None:
    """The launch option maxnreg (as Triton's) becomes `.maxnreg`; ptxas keeps to it (spilling if it
    must), and it is part of the cache key. Out of range: a LaunchError."""
    k = compiler.compile_source(SRC, kernel="layer_norm_fwd")
    free = k.compile(*CASES["layer_norm_fwd"], target="cuda:sm_90a", num_warps=4)
    capped = k.compile(*CASES["layer_norm_fwd"], target="cuda:sm_90a", num_warps=4, maxnreg=24)
    assert ".maxnreg" not in free.asm["ptx"] and ".maxnreg 24" in capped.asm["ptx"]
    assert free.metadata["n_regs"] > 24 >= capped.metadata["n_regs"]
    for bad in (8, 300, 64.0, True):
        with pytest.raises(compiler.errors.LaunchError, match="maxnreg must be None or an int from 24 to 255"):
            k.compile(*CASES["layer_norm_fwd"], target="cuda:sm_90a", maxnreg=bad)


def test_cluster_dims_become_reqnctapercluster() -> None:
    """cluster_dims launches the programs in thread block clusters: `.reqnctapercluster` (sm_90 and
    newer; older targets are told so), part of the cache key."""
    k = compiler.compile_source(SRC, kernel="add_kernel")
    plain = k.compile(*CASES["add_kernel"], target="cuda:sm_90a")
    ck = k.compile(*CASES["add_kernel"], target="cuda:sm_90a", cluster_dims=(1, 2, 1))
    assert ".reqnctapercluster" not in plain.asm["ptx"] and ".reqnctapercluster 1, 2, 1" in ck.asm["ptx"]
    assert ck.asm["cubin"][:4] == b"\x7fELF" and ck.options.cluster_dims == (1, 2, 1)
    with pytest.raises(compiler.errors.UnsupportedError, match="needs sm_90 or newer"):
        k.compile(*CASES["add_kernel"], target="cuda:sm_80", cluster_dims=2)


def test_contiguous_aligned_accesses_are_128_bit() -> None:
    k = compiler.compile_source(SRC, kernel="add_kernel")
    ptx = k.compile(*CASES["add_kernel"], target="cuda:sm_90a").asm["ptx"]
    assert len(re.findall(r"ld\.global\.v4\.b32", ptx)) == 2 * 2  # x and y, 8 elements per thread
    assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 2
    assert "ld.global.b32" not in ptx


def test_unknown_alignment_falls_back_to_scalar_accesses() -> None:
    k = compiler.compile_source(SRC, kernel="add_kernel")
    sig = dict(CASES["add_kernel"][0], n="i32")  # n % 16 unknown: the mask may change inside a vector
    ptx = k.compile(sig, {"BLOCK": 1024}, target="cuda:sm_90a").asm["ptx"]
    assert "ld.global.v4" not in ptx and "ld.global.b32" in ptx


def test_reductions_use_warp_shuffles() -> None:
    k = compiler.compile_source(SRC, kernel="softmax_kernel")
    ptx = k.compile(*CASES["softmax_kernel"], target="cuda:sm_90a", num_warps=4).asm["ptx"]
    assert ptx.count("shfl.sync.bfly.b32") == 10  # max and sum: 5 butterfly rounds each
    assert "ex2.approx.f32" in ptx


MM = SRC + '''
@triton.jit
def mm(a_ptr, b_ptr, c_ptr):
    r = tl.arange(0, 32)
    a = tl.load(a_ptr + r[:, None] * 32 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 32 + r[None, :])
    tl.store(c_ptr + r[:, None] * 32 + r[None, :], tl.dot(a, b))

@triton.jit
def srt(x_ptr):
    r = tl.arange(0, 32)
    tl.store(x_ptr + r, tl.sort(tl.load(x_ptr + r)))
'''


@pytest.mark.parametrize("dtype,instr", [("fp32", "m16n8k8.row.col.f32.tf32"), ("fp16", "m16n8k16.row.col.f32.f16"),
                                         ("bf16", "m16n8k16.row.col.f32.bf16"), ("i8", "m16n8k32.row.col.s32.s8")])
def test_dot_on_tensor_cores_assembles(dtype: str, instr: str) -> None:
    k = compiler.compile_source(MM, kernel="mm")
    out = "i32" if dtype == "i8" else "fp32"
    ck = k.compile({"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{out}"}, {}, target="cuda:sm_90a")
    assert f"mma.sync.aligned.{instr}" in ck.asm["ptx"]
    assert ck.asm["cubin"][:4] == b"\x7fELF"


def test_gpu_only_gap_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from compiler.backends.nvidia.ops import LOWER

    monkeypatch.delitem(LOWER, "sort")  # every op has a lowering now: fake a gap
    k = compiler.compile_source(MM, kernel="srt")
    with pytest.raises(compiler.UnsupportedError, match="sort is not supported by the NVIDIA backend"):
        k.compile({"x_ptr": "*fp32"}, {}, target="cuda:sm_90a")
