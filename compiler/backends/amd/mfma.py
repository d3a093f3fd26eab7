"""The MFMA (matrix fused multiply-add) instructions the AMD backend's tl.dot uses, and the
linear layouts of their fragments (docs/layouts.md, "AMD MFMA layouts").

Only the 16x16 family is used: `v_mfma_f32_16x16x16_f16`, `v_mfma_f32_16x16x16_bf16` (LLVM's
`...bf16.1k`), `v_mfma_i32_16x16x32_i8` and the fp8 `v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8}` on
gfx942 and gfx950; on gfx950 also the double-K `v_mfma_f32_16x16x32_{f16,bf16}`,
`v_mfma_i32_16x16x64_i8` and `v_mfma_f32_16x16x128_f8f6f4` when the block's K allows. One
instruction multiplies a 16 x K_i block of A by a K_i x 16 block of B into a 16 x 16 block of the
fp32 (i32) accumulator, over the 64 lanes of a wavefront:

- A: lane l holds A[l % 16][kpl * (l // 16) + v], v < kpl (kpl = K_i / 4 consecutive elements);
- B: lane l holds B[kpl * (l // 16) + v][l % 16];
- D (and C): lane l, register v < 4 holds D[4 * (l // 16) + v][l % 16].

Over a program's tile the wavefronts are laid out `wm` along M by `wn` along N, one instruction
block each (wave w at block row w % wm, block column w // wm), and each wave repeats its block
`M / (16 wm)` times along M and `N / (16 wn)` along N (repetitions along N first). Waves beyond
what the tile needs hold copies (zero bases).

fp8 (`choose_fp8`). The fp8 instructions read their operands in the hardware's own encodings:
gfx942's are the FNUZ formats (Anvil's fp8e4b8 = float8_e4m3fnuz as "fp8", fp8e5b16 =
float8_e5m2fnuz as "bf8"), gfx950's the OCP ones under the same instruction names (fp8e4nv =
float8_e4m3fn, fp8e5 = float8_e5m2). A dot whose two inputs are each its target's own format uses
them directly, one instruction per 32 K (on gfx950 one `16x16x128_f8f6f4` per 128 K when K
allows: LLVM's `mfma.scale...f8f6f4` intrinsic with both scales 0, which it selects as the
unscaled instruction, whose scale the ISA fixes at 1.0). Any other pair of fp8 formats is
widened to fp16 in registers (dot.py `fp8_to_f16`) and runs on the fp16 instruction, because
that is exact: every finite value of the four formats is an fp16 value (e4m3fn reaches 448 and
2^-9, e5m2fnuz 57344 and 2^-17, all inside fp16's range and precision), the products of fp16
values are exact in the fp32 accumulation, and NaN, e5m2's infinities and the signed zeros keep
their meaning. Reinterpreting the bits of one family as the other would not be: the FNUZ and OCP
encodings of the same bits differ by a factor 2 (bias 8 vs 7, 16 vs 15), -0 is NaN in FNUZ,
e4m3fn's NaN codes are FNUZ's largest finite values and e5m2's infinities have no FNUZ
counterpart. The widened fragment is the same one LDS read of 8 fp8 values (4 when K is a
multiple of 16 only); gfx950 feeds it to one `16x16x32_f16`, gfx942 to two `16x16x16_f16`
(`parts`), each taking 4 of the lane's 8 values. Which K index an instruction assigns to which of
a lane's values does not matter as long as A and B agree, since A's and B's fragments are mirror
images (lane l % 16 the row of A or column of B, lane l // 16 and the register the K index): every
K index is used once, with A and B at the same position (the same holds for `16x16x128_f8f6f4`,
whose lanes hold 32 values). Only the summation order within an instruction changes, which the
hardware does not specify anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir import types as T
from ...layouts import LANE, REGISTER, WARP, LinearLayout

__all__ = ["Mfma", "choose", "choose_fp8", "NATIVE_FP8", "wave_grid", "accumulator_layout", "operand_layout"]

BLOCK = 16  # the M and N of every instruction used


@dataclass(frozen=True)
class Mfma:
    intrinsic: str  # after llvm.amdgcn.mfma.
    k: int  # K of one fragment: one LDS read per lane, `parts` instructions
    operand: str  # LLVM type text of one lane's A or B operand
    acc: str  # "float" or "i32": the accumulator's element
    args: tuple[int, ...] = (0, 0, 0)  # the immediates after the accumulator (cbsz, abid, blgp; or f8f6f4's)
    parts: int = 1  # instructions per fragment (an fp8 fragment widened for two 16x16x16 fp16 ones)
    widen: bool = False  # fp8 fragments widened to fp16 in registers

    @property
    def kpl(self) -> int:
        """Consecutive K elements a lane holds (reads from LDS as one fragment)."""
        return self.k // 4


_TABLE: dict[tuple[str, T.ScalarType, bool], Mfma] = {
    # (arch family, input type, double K) -> instruction
    ("any", T.fp16, False): Mfma("f32.16x16x16f16", 16, "<4 x half>", "float"),
    ("any", T.bf16, False): Mfma("f32.16x16x16bf16.1k", 16, "<4 x i16>", "float"),
    ("any", T.i8, False): Mfma("i32.16x16x32.i8", 32, "i64", "i32"),
    ("gfx950", T.fp16, True): Mfma("f32.16x16x32.f16", 32, "<8 x half>", "float"),
    ("gfx950", T.bf16, True): Mfma("f32.16x16x32.bf16", 32, "<8 x bfloat>", "float"),
    ("gfx950", T.i8, True): Mfma("i32.16x16x64.i8", 64, "<4 x i32>", "i32"),
}


def choose(arch: str, a: T.ElemType, b: T.ElemType, acc: T.ElemType, shape: tuple[int, int], k: int) -> Mfma | None:
    """The instruction for an (M, N) += (M, K) x (K, N) dot, or None (the FMA path): both inputs
    of one type (or both fp8, `choose_fp8`), an fp32 accumulator for fp16 / bf16 / fp8 and an i32
    one for int8, M and N multiples of 16 and K of the instruction's K."""
    if not isinstance(a, T.ScalarType) or not isinstance(b, T.ScalarType) or shape[0] % BLOCK or shape[1] % BLOCK:
        return None
    if a.is_fp8 and b.is_fp8:
        return choose_fp8(arch, a, b, acc, k)
    if a != b:
        return None
    if acc != (T.i32 if a == T.i8 else T.fp32):
        return None
    if arch == "gfx950":
        wide = _TABLE.get(("gfx950", a, True))
        if wide is not None and k % wide.k == 0:
            return wide
    base = _TABLE.get(("any", a, False))
    return base if base is not None and k % base.k == 0 else None


# each architecture's fp8 formats of its fp8 instructions: Anvil type -> the instruction's name
NATIVE_FP8: dict[str, dict[str, str]] = {
    "gfx942": {"fp8e4b8": "fp8", "fp8e5b16": "bf8"},
    "gfx950": {"fp8e4nv": "fp8", "fp8e5": "bf8"},
}
_F8F6F4 = {"fp8": 0, "bf8": 1}  # the f8f6f4 instruction's format codes (cbsz for A, blgp for B)


def choose_fp8(arch: str, a: T.ScalarType, b: T.ScalarType, acc: T.ElemType, k: int) -> Mfma | None:
    """The instruction of an fp8 x fp8 dot with an fp32 accumulator (see the module's docstring):
    the fp8 instruction when both inputs are the architecture's own formats, else the fp16 one on
    operands widened in registers (also for native inputs whose K is a multiple of 16 only); None
    (the FMA path) when K is not a multiple of 16."""
    if acc != T.fp32:
        return None
    native = NATIVE_FP8.get(arch, {})
    na, nb = native.get(a.name), native.get(b.name)
    if na is not None and nb is not None:
        if arch == "gfx950" and k % 128 == 0:
            return Mfma("scale.f32.16x16x128.f8f6f4.v8i32.v8i32", 128, "<8 x i32>", "float",
                        args=(_F8F6F4[na], _F8F6F4[nb], 0, 0, 0, 0))
        if k % 32 == 0:
            return Mfma(f"f32.16x16x32.{na}.{nb}", 32, "i64", "float")
    if arch == "gfx950" and k % 32 == 0:
        return Mfma("f32.16x16x32.f16", 32, "<8 x half>", "float", widen=True)
    if k % 32 == 0:
        return Mfma("f32.16x16x16f16", 32, "<4 x half>", "float", parts=2, widen=True)
    return Mfma("f32.16x16x16f16", 16, "<4 x half>", "float", widen=True) if k % 16 == 0 else None


def wave_grid(shape: tuple[int, int], num_warps: int) -> tuple[int, int]:
    """(wm, wn): waves along M, then along N, as many as the tile has 16 x 16 blocks."""
    wm = 1
    while wm * 2 <= num_warps and BLOCK * wm * 2 <= shape[0]:
        wm *= 2
    wn = 1
    while wm * wn * 2 <= num_warps and BLOCK * wn * 2 <= shape[1]:
        wn *= 2
    return wm, wn


def _bits(n: int) -> int:
    return n.bit_length() - 1


def accumulator_layout(shape: tuple[int, int], num_warps: int) -> LinearLayout:
    """The layout of the accumulator over the program (see the module's docstring)."""
    wm, wn = wave_grid(shape, num_warps)
    reps_m, reps_n = shape[0] // (BLOCK * wm), shape[1] // (BLOCK * wn)
    reg = [(1, 0), (2, 0)] + [(0, BLOCK * wn << i) for i in range(_bits(reps_n))] \
        + [(BLOCK * wm << i, 0) for i in range(_bits(reps_m))]
    lane = [(0, 1), (0, 2), (0, 4), (0, 8), (4, 0), (8, 0)]
    warp = [(BLOCK << i, 0) for i in range(_bits(wm))] + [(0, BLOCK << i) for i in range(_bits(wn))] \
        + [(0, 0)] * _bits(num_warps // (wm * wn))
    return LinearLayout.from_bases({REGISTER: reg, LANE: lane, WARP: warp}, {"dim0": shape[0], "dim1": shape[1]})


def operand_layout(operand: int, shape: tuple[int, int], num_warps: int, acc_shape: tuple[int, int],
                   kpl: int) -> LinearLayout:
    """The layout in which the waves hold A (`operand` 0, M x K) or B (1, K x N) for the dot whose
    accumulator is `acc_shape`: kpl consecutive K elements a lane, 4 lane groups along K, 16 lanes
    along M (N); the instruction's K blocks and the wave's repetitions as registers; waves along
    the other operand's dim hold copies. (The lowering reads these fragments from LDS; the
    layout describes what each lane holds, and the tests check it against the instruction.)"""
    wm, wn = wave_grid(acc_shape, num_warps)
    k_dim, o_dim = (1, 0) if operand == 0 else (0, 1)
    waves_o, reps_o = (wm, acc_shape[0] // (BLOCK * wm)) if operand == 0 else (wn, acc_shape[1] // (BLOCK * wn))
    k = shape[k_dim]

    def v(dim: int, x: int) -> tuple[int, int]:
        return (x, 0) if dim == 0 else (0, x)

    reg = [v(k_dim, 1 << i) for i in range(_bits(kpl))] \
        + [v(k_dim, 4 * kpl << i) for i in range(_bits(k // (4 * kpl)))] \
        + [v(o_dim, BLOCK * waves_o << i) for i in range(_bits(reps_o))]
    lane = [v(o_dim, 1 << i) for i in range(4)] + [v(k_dim, kpl), v(k_dim, 2 * kpl)]
    own = [v(o_dim, BLOCK << i) for i in range(_bits(waves_o))]
    other = [(0, 0)] * _bits(wn if operand == 0 else wm)
    warp = own + other if operand == 0 else other + own
    warp += [(0, 0)] * _bits(num_warps // (wm * wn))
    return LinearLayout.from_bases({REGISTER: reg, LANE: lane, WARP: warp}, {"dim0": shape[0], "dim1": shape[1]})
