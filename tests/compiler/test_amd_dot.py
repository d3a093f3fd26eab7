"""tl.dot on the AMD backend (device-free): the MFMA fragment layouts against the instruction's
documented lane and register mapping, the instruction chosen per architecture and input type,
and the assembly (v_mfma, LDS-staged operands, no scratch, LDS within 64 KiB)."""

from __future__ import annotations

import itertools
import re

import pytest

import compiler.language as tl
from compiler import jit
from compiler.backends.amd.mfma import accumulator_layout, choose, operand_layout, wave_grid
from compiler.ir import types as T
from compiler.layouts import LANE, REGISTER, WARP
from tests.compiler.test_amd_backend import ARCHS, _check_common


def mfma_d(lane: int, v: int) -> tuple[int, int]:
    """The element of a 16x16 MFMA block that register v of `lane` holds (the ISA's mapping)."""
    return 4 * (lane // 16) + v, lane % 16


def mfma_a(lane: int, v: int, kpl: int) -> tuple[int, int]:
    return lane % 16, kpl * (lane // 16) + v


def mfma_b(lane: int, v: int, kpl: int) -> tuple[int, int]:
    return kpl * (lane // 16) + v, lane % 16


def _all(layout: object) -> list[tuple[int, int, int]]:
    return list(itertools.product(range(layout.in_dim_size(REGISTER)), range(layout.in_dim_size(LANE)),  # type: ignore[attr-defined]
                                  range(layout.in_dim_size(WARP))))  # type: ignore[attr-defined]


def test_one_instruction_matches_the_isa() -> None:
    d = accumulator_layout((16, 16), 1)
    assert d.in_dim_size(REGISTER) == 4 and d.in_dim_size(LANE) == 64
    for lane in range(64):
        for v in range(4):
            assert tuple(d.apply({REGISTER: v, LANE: lane, WARP: 0})) == mfma_d(lane, v)
    for kpl in (4, 8, 16, 32):  # 32: gfx950's 16x16x128 f8f6f4
        a = operand_layout(0, (16, 4 * kpl), 1, (16, 16), kpl)
        b = operand_layout(1, (4 * kpl, 16), 1, (16, 16), kpl)
        for lane in range(64):
            for v in range(kpl):
                assert tuple(a.apply({REGISTER: v, LANE: lane, WARP: 0})) == mfma_a(lane, v, kpl)
                assert tuple(b.apply({REGISTER: v, LANE: lane, WARP: 0})) == mfma_b(lane, v, kpl)


@pytest.mark.parametrize(("shape", "warps"), [((16, 16), 1), ((64, 64), 4), ((32, 64), 2), ((128, 32), 8),
                                              ((64, 128), 16), ((16, 32), 4)])
def test_accumulator_covers_the_tile_once_per_wave_group(shape: tuple[int, int], warps: int) -> None:
    """Every element of the tile is held exactly once by each group of waves that does not repeat
    another's (a bijection when the tile has a block for every wave), and wave w's elements lie
    in block row w % wm, block column w // wm, its repetitions N first."""
    lay = accumulator_layout(shape, warps)
    wm, wn = wave_grid(shape, warps)
    copies = warps // (wm * wn)
    reps_n = shape[1] // (16 * wn)
    seen: dict[tuple[int, int], int] = {}
    for r, lane, w in _all(lay):
        m, n = lay.apply({REGISTER: r, LANE: lane, WARP: w})
        seen[(m, n)] = seen.get((m, n), 0) + 1
        rep = r >> 2
        i, j = rep // reps_n, rep % reps_n
        bm, bn = mfma_d(lane, r & 3)
        assert (m, n) == (16 * ((w % wm) + wm * i) + bm, 16 * (((w // wm) % wn) + wn * j) + bn)
    assert len(seen) == shape[0] * shape[1] and set(seen.values()) == {copies}


def test_operands_are_the_accumulators_rows_and_columns() -> None:
    """A wave's A fragment rows are its accumulator rows, its B columns its accumulator columns
    (for every K position the operand layouts hold)."""
    shape, warps, kpl, k = (64, 128), 8, 4, 32
    acc = accumulator_layout(shape, warps)
    a = operand_layout(0, (shape[0], k), warps, shape, kpl)
    b = operand_layout(1, (k, shape[1]), warps, shape, kpl)
    for w in range(warps):
        rows = {acc.apply({REGISTER: r, LANE: lane, WARP: w})[0] for r in range(acc.in_dim_size(REGISTER))
                for lane in range(64)}
        cols = {acc.apply({REGISTER: r, LANE: lane, WARP: w})[1] for r in range(acc.in_dim_size(REGISTER))
                for lane in range(64)}
        a_el = {tuple(a.apply({REGISTER: r, LANE: lane, WARP: w})) for r in range(a.in_dim_size(REGISTER))
                for lane in range(64)}
        b_el = {tuple(b.apply({REGISTER: r, LANE: lane, WARP: w})) for r in range(b.in_dim_size(REGISTER))
                for lane in range(64)}
        assert a_el == {(m, kk) for m in rows for kk in range(k)}
        assert b_el == {(kk, n) for n in cols for kk in range(k)}


def test_instruction_choice() -> None:
    f16, bf16, f32, i8, i32 = T.fp16, T.bf16, T.fp32, T.i8, T.i32
    assert choose("gfx942", f16, f16, f32, (64, 64), 64).intrinsic == "f32.16x16x16f16"  # type: ignore[union-attr]
    assert choose("gfx950", f16, f16, f32, (64, 64), 64).intrinsic == "f32.16x16x32.f16"  # type: ignore[union-attr]
    assert choose("gfx950", f16, f16, f32, (64, 64), 16).intrinsic == "f32.16x16x16f16"  # type: ignore[union-attr]
    assert choose("gfx942", bf16, bf16, f32, (16, 16), 16).intrinsic == "f32.16x16x16bf16.1k"  # type: ignore[union-attr]
    assert choose("gfx942", i8, i8, i32, (32, 32), 32).intrinsic == "i32.16x16x32.i8"  # type: ignore[union-attr]
    assert choose("gfx950", i8, i8, i32, (32, 32), 64).intrinsic == "i32.16x16x64.i8"  # type: ignore[union-attr]
    # the FMA path: fp32 inputs, an fp16 accumulator, mixed inputs, blocks smaller than 16, short K
    assert choose("gfx942", f32, f32, f32, (64, 64), 64) is None
    assert choose("gfx942", f16, f16, f16, (64, 64), 64) is None
    assert choose("gfx942", f16, bf16, f32, (64, 64), 64) is None
    assert choose("gfx942", f16, f16, f32, (8, 64), 64) is None
    assert choose("gfx942", f16, f16, f32, (64, 64), 8) is None


@jit
def mm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32 if a_ptr.dtype.element_ty != tl.int8 else tl.int32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


_INSTR = {("gfx942", "fp16"): "v_mfma_f32_16x16x16_f16", ("gfx950", "fp16"): "v_mfma_f32_16x16x32_f16",
          ("gfx942", "bf16"): "v_mfma_f32_16x16x16_bf16", ("gfx950", "bf16"): "v_mfma_f32_16x16x32_bf16",
          ("gfx942", "i8"): "v_mfma_i32_16x16x32_i8", ("gfx950", "i8"): "v_mfma_i32_16x16x64_i8"}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ty", ["fp16", "bf16", "i8"])
@pytest.mark.parametrize(("bm", "bn", "bk", "warps"), [(64, 64, 64, 4), (32, 64, 32, 2), (128, 128, 64, 8)])
def test_mfma_dot(arch: str, ty: str, bm: int, bn: int, bk: int, warps: int) -> None:
    acc = "i32" if ty == "i8" else "fp32"
    if ty == "i8" and bk < 64:
        bk = 64
    ck = mm.compile({"a_ptr": f"*{ty}", "b_ptr": f"*{ty}", "c_ptr": f"*{acc}", "K": "i32"},
                    {"BM": bm, "BN": bn, "BK": bk}, target=f"amd:{arch}", num_warps=warps)
    asm = _check_common(ck, arch)
    instr = _INSTR[arch, ty]
    assert set(re.findall(r"v_mfma_\w+", asm)) == {instr}
    # each wave: one instruction per 16x16 block of its share of the tile and K step of the instruction
    k_i = int(re.search(r"16x16x(\d+)", instr).group(1))  # type: ignore[union-attr]
    wm, wn = wave_grid((bm, bn), warps)
    assert asm.count(instr) == (bm // 16 // wm) * (bn // 16 // wn) * (bk // k_i)
    # fragments come from LDS as 8- or 16-byte reads
    assert re.search(r"ds_read_b64|ds_read_b128|ds_read2_b64", asm)
    # A and B, each row padded by 16 bytes
    size = 1 if ty == "i8" else 2
    assert ck.metadata["shared"] >= (bm + bn) * (bk * size + 16)
    assert ck.metadata["shared"] <= 64 * 1024


@pytest.mark.parametrize("arch", ARCHS)
def test_fp32_dot_uses_fma(arch: str) -> None:
    """No tf32 MFMA in the slice: fp32 dots are fp32 fused multiply-adds."""
    ck = mm.compile({"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", "K": "i32"}, {"BM": 32, "BN": 32, "BK": 16},
                    target=f"amd:{arch}", num_warps=4)
    asm = _check_common(ck, arch)
    assert "v_mfma" not in asm and re.search(r"v_fmac_f32|v_fma_f32|v_pk_fma_f32", asm)
    assert "ds_read" in asm and ck.metadata["shared"] <= 64 * 1024


def test_loop_carried_accumulator_stays_in_mfma_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the accumulator started in the MFMA layout, the K loop's only LDS round trips are the
    operands' staging; starting it in the default layout would move it through LDS every
    iteration (more barriers inside the loop)."""
    import compiler.backends.amd.dot as dot
    from compiler.runtime import compiled

    monkeypatch.setenv("ANVIL_CACHE", "0")

    def loop_barriers() -> int:
        monkeypatch.setattr(compiled, "_MEMORY", {})
        ck = mm.compile({"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
                        {"BM": 64, "BN": 64, "BK": 32}, target="amd:gfx942", num_warps=4)
        llir = ck.asm["llir"]
        return llir[llir.index("\nfor:"):llir.index("\nfor.end:")].count("@llvm.amdgcn.s.barrier")

    with_plan = loop_barriers()
    monkeypatch.setattr(dot, "plan", lambda lw: None)
    # without the plan: the accumulator into and out of the MFMA layout, two barriers each way
    assert loop_barriers() == with_plan + 4


@jit
def bmm(a_ptr, b_ptr, c_ptr, B: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    e = tl.arange(0, B)[:, None, None]
    rm = tl.arange(0, BM)[None, :, None]
    rn = tl.arange(0, BN)[None, None, :]
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + e * BM * BK + rm * BK + rk[None, None, :])
    b = tl.load(b_ptr + e * BK * BN + rk[None, :, None] * BN + rn)
    tl.store(c_ptr + e * BM * BN + rm * BN + rn, tl.dot(a, b))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("ty", ["fp32", "fp16"])
def test_batched_dot_uses_fma_per_batch_entry(arch: str, ty: str) -> None:
    """A [2, 16, 32] x [2, 32, 16] dot: both operands staged in LDS with the batch entries stacked
    (A as 2 * 16 rows, B as 2 * 16 columns, each padded by 16 bytes), then fused multiply-adds."""
    acc = "fp32" if ty == "fp32" else "fp16"
    ck = bmm.compile({"a_ptr": f"*{ty}", "b_ptr": f"*{ty}", "c_ptr": f"*{acc}"},
                     {"B": 2, "BM": 16, "BN": 16, "BK": 32}, target=f"amd:{arch}")
    asm = _check_common(ck, arch)
    assert "v_mfma" not in asm and re.search(r"v_(fma|fmac|pk_fma|fma_mix)_f32", asm)
    size = 2 if ty == "fp16" else 4
    kp = 32 + 16 // size
    assert ck.metadata["shared"] >= 2 * (2 * 16 * kp * size)
