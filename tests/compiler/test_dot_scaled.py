"""tl.dot_scaled beyond the CPU results (tests/differential/test_diff_dot_scaled.py has those):
the decomposition compiles for NVIDIA (sm_80, sm_90a, sm_100a; assembled by ptxas) and AMD
(gfx942) onto each target's ordinary 16-bit tensor-core dot, and every misuse is a located error
that says what to pass instead."""

from __future__ import annotations

import re
from typing import Any

import pytest

import compiler
import compiler.language as tl
from compiler import errors as E
from compiler import jit
from compiler.backends.amd.toolchain import find_linker
from compiler.backends.nvidia.toolchain import find_ptxas


@jit
def scaled_mm(a_ptr, sa_ptr, b_ptr, sb_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
              FA: tl.constexpr, FB: tl.constexpr):
    AK: tl.constexpr = K // 2 if FA == "e2m1" else K
    BK: tl.constexpr = K // 2 if FB == "e2m1" else K
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rs = tl.arange(0, K // 32)
    a = tl.load(a_ptr + rm[:, None] * AK + tl.arange(0, AK)[None, :])
    b = tl.load(b_ptr + tl.arange(0, BK)[:, None] * N + rn[None, :])
    sa = tl.load(sa_ptr + rm[:, None] * (K // 32) + rs[None, :])
    sb = tl.load(sb_ptr + rn[:, None] * (K // 32) + rs[None, :])
    tl.store(o_ptr + rm[:, None] * N + rn[None, :], tl.dot_scaled(a, sa, FA, b, sb, FB))


def _compile(target: str, fa: str, fb: str, m: int = 64, n: int = 64, k: int = 64, warps: int = 4) -> Any:
    ptr = {"bf16": "*bf16", "fp16": "*fp16"}
    sig = {"a_ptr": ptr.get(fa, "*u8"), "sa_ptr": "*u8", "b_ptr": ptr.get(fb, "*u8"), "sb_ptr": "*u8",
           "o_ptr": "*fp32"}
    return scaled_mm.compile(sig, {"M": m, "N": n, "K": k, "FA": fa, "FB": fb}, target=target, num_warps=warps)


PAIRS = [("e2m1", "e2m1"), ("e4m3", "e5m2"), ("e2m1", "bf16"), ("fp16", "e2m1")]
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
needs_linker = pytest.mark.skipif(find_linker() is None, reason="no ld.lld (ROCm, PATH, or pip install ziglang)")


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize(("fa", "fb"), PAIRS)
def test_compiles_for_nvidia(arch: str, fa: str, fb: str) -> None:
    """The operands reach the 16-bit tensor-core dot of the target (wgmma on sm_90a, mma.sync
    elsewhere for a 64 x 64 tile), in bf16 or, with an fp16 side, fp16; ptxas assembles it."""
    ck = _compile(f"cuda:{arch}", fa, fb)
    ptx = ck.asm["ptx"]
    t = "f16" if "fp16" in (fa, fb) else "bf16"
    if arch == "sm_90a":
        assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.{t}\.{t}", ptx)
    else:
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32" in ptx
    assert ck.asm["cubin"][:4] == b"\x7fELF"


@needs_ptxas
def test_sm100a_takes_tcgen05_for_a_128_row_tile() -> None:
    """A 128 x 128 dot_scaled tile on sm_100a is tcgen05's kind::f16, as a bf16 tl.dot of that size."""
    ptx = _compile("cuda:sm_100a", "e2m1", "e4m3", m=128, n=128, k=64, warps=4).asm["ptx"]
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx and "mma.sync" not in ptx


@needs_linker
@pytest.mark.parametrize(("fa", "fb"), PAIRS)
def test_compiles_for_amd(fa: str, fb: str) -> None:
    ck = _compile("amd:gfx942", fa, fb)
    t = "f16" if "fp16" in (fa, fb) else "bf16"
    assert set(re.findall(r"v_mfma_\w+", ck.asm["amdgcn"])) == {f"v_mfma_f32_16x16x16_{t}"}
    assert ck.asm["hsaco"][:4] == b"\x7fELF"


# ---------------------------------------------------------------------------------- misuse
BAD = """import triton
import triton.language as tl


@triton.jit
def k(a_ptr, b_ptr, s_ptr, o_ptr):
    r16 = tl.arange(0, 16)
    r32 = tl.arange(0, 32)
    a = tl.load(a_ptr + r16[:, None] * 32 + r32[None, :])
    b = tl.load(b_ptr + r32[:, None] * 16 + r16[None, :])
    s = tl.load(s_ptr + r16[:, None] + tl.arange(0, 1)[None, :])
    c = {call}
    tl.store(o_ptr + r16[:, None] * 16 + r16[None, :], c)
"""
CALL_LINE = 12
SIG = {"a_ptr": "*u8", "b_ptr": "*u8", "s_ptr": "*u8", "o_ptr": "*fp32"}

MISUSE = [
    # (the call, the error class, what the message says, what the hint says)
    ('tl.dot_scaled(a, s, "e3m2", b, None, "e4m3")', E.ArgumentError, "lhs_format='e3m2' is not supported",
     "'e2m1': fp4"),
    ('tl.dot_scaled(a, s, "e4m3", b, None, "mxfp4")', E.ArgumentError, "rhs_format='mxfp4'", "did you mean 'e2m1'"),
    ('tl.dot_scaled(a, s, "E4M3", b, None, "e4m3")', E.ArgumentError, "lhs_format='E4M3'", "did you mean 'e4m3'"),
    ("tl.dot_scaled(a, s, a, b, None, 'e4m3')", E.ArgumentError, "lhs_format=<Tensor>", "compile-time string"),
    ('tl.dot_scaled(a, s, "e2m1", b, None, "e4m3")', E.ShapeError, "operands hold different K", "K // 2"),
    ('tl.dot_scaled(a.to(tl.float16, bitcast=False), s, "e2m1", b, None, "e4m3")', E.DtypeError,
     "lhs in format 'e2m1' must be tl.uint8, got fp16", "pass lhs_format='fp16'"),
    ('tl.dot_scaled(a.to(tl.int8, bitcast=True), s, "e4m3", b, None, "e4m3")', E.DtypeError,
     "must be tl.float8e4nv or tl.uint8, got i8", "x.to(tl.uint8, bitcast=True)"),
    ('tl.dot_scaled(a, s, "e4m3", b, tl.trans(s), "e4m3")', E.ShapeError,
     "rhs_scale must have shape [N, K // 32] = [16, 1]", "do not transpose"),
    ('tl.dot_scaled(a, s.to(tl.int8, bitcast=True), "e4m3", b, None, "e4m3")', E.DtypeError,
     "lhs_scale must be uint8 (e8m0), got i8", "bitcast"),
    ('tl.dot_scaled(a, s.to(tl.float8e4nv, bitcast=True), "e4m3", b, None, "e4m3")', E.DtypeError,
     "lhs_scale must be uint8 (e8m0)", "nvfp4"),
    ('tl.dot_scaled(a, 3, "e4m3", b, None, "e4m3")', E.ArgumentError, "lhs_scale must be a uint8 tile", "None"),
    ('tl.dot_scaled(a, s, "e4m3", b, None, "e4m3", lhs_k_pack=False)', E.ArgumentError,
     "lhs_k_pack=False needs format 'e2m1'", "only fp4"),
    ('tl.dot_scaled(a, s, "e4m3", b, None, "e4m3", fast_math=r16 > 0)', E.ConstexprError,
     "fast_math must be a compile-time bool", "fast_math=True"),
    ('tl.dot_scaled(a, s, "e4m3", b, None, "e4m3", out_dtype=tl.float16)', E.DtypeError,
     "out_dtype must be tl.float32", ".to("),
    ('tl.dot_scaled(a, s, "e4m3", b, None, "e4m3", tl.zeros((16, 16), tl.float16))', E.DtypeError,
     "acc must be float32", "tl.float32"),
    ('tl.dot_scaled(a, s, "e4m3", b, None, "e4m3", tl.zeros((16, 32), tl.float32))', E.ShapeError,
     "acc must have the result's shape [16, 16]", "tl.zeros"),
    ('tl.dot_scaled(a, None, "e4m3", tl.load(b_ptr + r16), None, "e4m3")', E.ShapeError,
     "rhs must be a 2-D tile", ""),
]


@pytest.mark.parametrize(("call", "cls", "says", "hint"), MISUSE, ids=[str(i) for i in range(len(MISUSE))])
def test_misuse_is_a_located_actionable_error(call: str, cls: type, says: str, hint: str) -> None:
    src = BAD.format(call=call)
    with pytest.raises(cls) as info:
        compiler.compile_source(src, kernel="k").compile(SIG, {}, target="cpu")
    err = info.value
    assert err.lineno == CALL_LINE, str(err)
    assert says in err.message, err.message
    assert hint in err.hint, err.hint


def test_scales_need_k_in_groups_of_32() -> None:
    src = BAD.replace("r32 = tl.arange(0, 32)", "r32 = tl.arange(0, 16)").format(
        call='tl.dot_scaled(a, s, "e4m3", b, None, "e4m3")')
    with pytest.raises(E.ShapeError, match=r"lhs_scale needs K to be a multiple of 32, got K=16"):
        compiler.compile_source(src, kernel="k").compile(SIG, {}, target="cpu")


def test_constexpr_wrapped_arguments_are_their_values() -> None:
    """tl.constexpr(...) around a format, a None scale or a flag is the value it holds:
    the byte 0x38 is 1.0 in e4m3 and 0.5 in e5m2, so each element is 32 products of 0.5."""
    import torch

    src = BAD.format(call='tl.dot_scaled(tl.trans(b), tl.constexpr(None), tl.constexpr("e4m3"), b, None, "e5m2", '
                          'fast_math=tl.constexpr(True))')
    fn = compiler.compile_source(src, kernel="k")
    a, s = torch.zeros(16, 32, dtype=torch.uint8), torch.zeros(16, dtype=torch.uint8)
    b, o = torch.full((32, 16), 0x38, dtype=torch.uint8), torch.empty(16, 16)
    fn[(1,)](a, b, s, o)
    assert torch.equal(o, torch.full((16, 16), 16.0))
