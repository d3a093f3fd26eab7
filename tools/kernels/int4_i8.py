# mypy: disable-error-code="operator, attr-defined, index, arg-type"
# (the @jit kernels are DSL compiled by Anvil, not Python that mypy can type)
"""The int8 tensor-core arithmetic of the packed W4A16 kernel (int4_packed.py, mode "mma-int8"): one
row of x, groups of 128.

Per group, x is cut into 15-bit fixed point on the group's largest exponent E (x_int = rint(x
2^(13 - E)), |x_int| < 2^14: exact for every element within 2^-6 of the group's largest, else
within 2^(E - 14) of it) and split into two int8 parts, x_int = 256 hi + lo (hi in [-64, 64], lo
in [-128, 127]). The codes go to mma.sync m16n8k32 u8 x s8 (int32 sums, exact) as they lie in the
blocks of awq_gemv_pack, whose words are byte-permuted for it (permute_block_words: a word column's
4 rows of a chunk as the bytes of one word, the low nibbles one column, the high nibbles another,
16 q): one mask per 4 codes, an mma takes 16 columns (a pair per gid) of 32 rows. B's columns
alternate hi and lo, so every lane gets both sums of its rows, and lane tig keeps mma tig's:
columns 2 tig and 2 tig + 1 of its word column, the sums 16 times larger for tig odd, as in the
bf16 arithmetic's LS fold. A group's total of
column c is then s (S - z X) 2^(E - 13), S = sum of q x_int and X = sum of x_int, both exact
integers; the only roundings are x's cut and the fp32 fold (one fma per group and column).

Each warp cuts its group's x itself (4 values per lane, the warp's max and sum by redux; loaded a
group ahead and cut while the group's block is in flight) into a 256-byte area of shared memory
laid out as the B fragments, which the lanes read back after a warp barrier. The CPU backend
computes the same integers with DSL ops (lane-local products, summed over the lanes of a gid), so
the CPU and the GPU agree bit for bit.
"""

from __future__ import annotations

import torch

import compiler.language as tl
from compiler import jit

from .int4_mma import _f16_lanes, _lanes_f32

__all__ = ["int8_cut_ptx", "int8_mma_ptx", "I8_X_BYTES", "permute_block_words"]

I8_X_BYTES = 256  # shared memory per warp: a group's x parts as B fragments
_MMA8 = "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32"
_MAGIC = 12582912.0  # 1.5 2^23: adding and subtracting it rounds an fp32 below 2^22 to an integer (to nearest even)


def int8_cut_ptx() -> str:
    """PTX that cuts a group's x for one lane (see the module docstring) into the warp's 256-byte area
    of shared memory. Operands: $0 out: X, $1 out: 2^(E - 13) as fp32 bits (NaN where x holds an inf
    or a NaN); in: $2, $3 x at rows 4 lane .. 4 lane + 3 of the group (bf16 pairs), $4 the area: for
    K block u (chunks 2u, 2u + 1), part p (0 hi, 1 lo) and tig t, 8 bytes at 64u + 32p + 8t: the parts
    of rows 16 (2u) + 4t .. + 3, then of 16 (2u + 1) + 4t .. + 3 (B fragment registers b0, b1). The
    area is written after a warp barrier (the last group's fragments have been read) and is read
    after another (int8_mma_ptx)."""
    xa, xb, xs = "$2", "$3", "$4"
    lines = [".reg .b32 l, e<4>, v<4>, i<4>, h<4>, o<4>, q<7>;", ".reg .f32 f<5>;", ".reg .pred pn;",
             "mov.u32 l, %laneid;"]
    # the group's largest exponent field (clamped so that 2^(E - 13) is a normal fp32)
    for k, (src, sh) in enumerate(((xa, 7), (xa, 23), (xb, 7), (xb, 23))):
        lines += [f"shr.u32 e{k}, {src}, {sh};", f"and.b32 e{k}, e{k}, 255;"]
    lines += ["max.u32 e0, e0, e1;", "max.u32 e2, e2, e3;", "max.u32 e0, e0, e2;",
              "redux.sync.max.u32 e0, e0, 0xffffffff;", "max.u32 e0, e0, 14;", "setp.eq.u32 pn, e0, 255;",
              "mov.u32 e1, 267;", "sub.u32 e1, e1, e0;", "shl.b32 e1, e1, 23;", "mov.b32 f4, e1;",
              "sub.u32 e2, e0, 13;", "shl.b32 e2, e2, 23;", "selp.b32 $1, 0x7FC00000, e2, pn;",
              f"shl.b32 v0, {xa}, 16;", f"and.b32 v1, {xa}, 0xFFFF0000;", f"shl.b32 v2, {xb}, 16;",
              f"and.b32 v3, {xb}, 0xFFFF0000;"]
    for k in range(4):
        lines += [f"mov.b32 f{k}, v{k};", f"mul.rn.f32 f{k}, f{k}, f4;", f"cvt.rni.s32.f32 i{k}, f{k};",
                  f"add.s32 h{k}, i{k}, 128;", f"shr.s32 h{k}, h{k}, 8;", f"shl.b32 o{k}, h{k}, 8;",
                  f"sub.s32 o{k}, i{k}, o{k};"]
    lines += ["add.s32 q0, i0, i1;", "add.s32 q0, q0, i2;", "add.s32 q0, q0, i3;",
              "redux.sync.add.s32 $0, q0, 0xffffffff;",
              # bytes of the 4 rows: hi word and lo word
              "prmt.b32 q0, h0, h1, 0x0040;", "prmt.b32 q1, h2, h3, 0x0040;", "prmt.b32 q2, q0, q1, 0x5410;",
              "prmt.b32 q0, o0, o1, 0x0040;", "prmt.b32 q1, o2, o3, 0x0040;", "prmt.b32 q3, q0, q1, 0x5410;",
              # lane l holds rows 4l .. 4l + 3: chunk c = l / 4, t = l % 4; K block u = l / 8, c % 2
              "shr.u32 q4, l, 3;", "shl.b32 q4, q4, 6;", "and.b32 q5, l, 3;", "shl.b32 q5, q5, 3;",
              "add.u32 q4, q4, q5;", "shr.u32 q6, l, 2;", "and.b32 q6, q6, 1;", "shl.b32 q6, q6, 2;",
              "add.u32 q4, q4, q6;", f"add.u32 q4, q4, {xs};",
              "bar.warp.sync -1;", "st.shared.b32 [q4], q2;", "st.shared.b32 [q4+32], q3;"]
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


def int8_mma_ptx() -> str:
    """PTX of a group's 16 mma for one lane (see the module docstring). Operands: $0, $1 out: S (int32)
    of columns 2 tig, 2 tig + 1 of the lane's word column (16 S for tig odd); in: $2..$33 the group's
    words (chunk u's P0..P3 at 4u .. 4u + 3: awq_gemv_pack's blocks), $34 the warp's area of x
    (int8_cut_ptx), read after a warp barrier."""
    w = [f"${2 + i}" for i in range(32)]
    xs = "$34"
    lines = [".reg .b32 l, q<2>, bx<8>, a<4>, z, d<4>, sa, sb;", ".reg .b32 c<16>;", ".reg .pred p1, p2;",
             "mov.u32 l, %laneid;", "bar.warp.sync -1;",
             # this lane's B: part gid % 2 (B column n = gid: hi for n even), tig
             "shr.u32 q0, l, 2;", "and.b32 q0, q0, 1;", "shl.b32 q0, q0, 5;", "and.b32 q1, l, 3;",
             "shl.b32 q1, q1, 3;", "add.u32 q0, q0, q1;", f"add.u32 q0, q0, {xs};"]
    lines += [f"ld.shared.v2.b32 {{bx{2 * u}, bx{2 * u + 1}}}, [q0+{64 * u}];" for u in range(4)]
    lines.append("mov.b32 z, 0;")
    for u in range(4):
        # P0..P3 of chunks 2u (A registers 0, 1) and 2u + 1 (2, 3): rows 0-3 as bytes of columns (0, 2),
        # (4, 6), (1, 3), (5, 7)
        pa, pb = w[8 * u:8 * u + 4], w[8 * u + 4:8 * u + 8]
        for j in range(4):  # mma j: columns 2j (A row gid) and 2j + 1 (row gid + 8)
            m = "0x0F0F0F0F" if j % 2 == 0 else "0xF0F0F0F0"
            s0, s1 = (0, 2) if j < 2 else (1, 3)
            lines += [f"and.b32 a0, {pa[s0]}, {m};", f"and.b32 a1, {pa[s1]}, {m};", f"and.b32 a2, {pb[s0]}, {m};",
                      f"and.b32 a3, {pb[s1]}, {m};"]
            acc = ", ".join(f"c{4 * j + r}" for r in range(4))
            cin = "z, z, z, z" if u == 0 else acc
            lines.append(f"{_MMA8} {{{acc}}}, {{a0, a1, a2, a3}}, {{bx{2 * u}, bx{2 * u + 1}}}, {{{cin}}};")
    # lane tig keeps mma tig's: D (row gid: column 2 tig; row gid + 8: 2 tig + 1), B columns hi, lo
    lines += ["and.b32 q0, l, 1;", "setp.ne.u32 p1, q0, 0;", "and.b32 q0, l, 2;", "setp.ne.u32 p2, q0, 0;"]
    for r in range(4):
        lines += [f"selp.b32 sa, c{4 + r}, c{r}, p1;", f"selp.b32 sb, c{12 + r}, c{8 + r}, p1;",
                  f"selp.b32 d{r}, sb, sa, p2;"]
    lines += ["mad.lo.s32 $0, d0, 256, d1;", "mad.lo.s32 $1, d2, 256, d3;"]
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


_CUT = int8_cut_ptx()
_SUMS = int8_mma_ptx()


def permute_block_words(r: torch.Tensor) -> torch.Tensor:
    """The blocks layout's words P0..P3 from the 4-D layout's R0..R3 (int32 [..., 4]): P0 = bytes 0
    and 2 of R0, then bytes 0 and 2 of R2 (a word column's rows 0-3 of columns 0 and 2, a byte per
    row: the int8 mma's A register as it lies), P1 = bytes 1 and 3 of R0 and R2 (columns 4, 6), P2
    and P3 the same of R1 and R3 (columns 1, 3 and 5, 7)."""
    v = r.to(torch.int64) & 0xFFFFFFFF

    def pick(a: torch.Tensor, b: torch.Tensor, i: int) -> torch.Tensor:  # prmt 0x6420 (i = 0), 0x7531 (i = 1)
        return ((a >> 8 * i) & 255 | ((a >> 8 * i + 16) & 255) << 8 | ((b >> 8 * i) & 255) << 16
                | ((b >> 8 * i + 16) & 255) << 24)

    p = torch.stack([pick(v[..., 0], v[..., 2], 0), pick(v[..., 0], v[..., 2], 1), pick(v[..., 1], v[..., 3], 0),
                     pick(v[..., 1], v[..., 3], 1)], dim=-1)
    return torch.where(p >= 1 << 31, p - (1 << 32), p).to(torch.int32)


# R0..R3 of a chunk from the blocks layout's P0..P3 (awq_gemv_pack): byte permutes
_R_WORDS = ("prmt.b32 $0, $4, $5, 0x5140;\n\tprmt.b32 $1, $6, $7, 0x5140;\n\t"
            "prmt.b32 $2, $4, $5, 0x7362;\n\tprmt.b32 $3, $6, $7, 0x7362;")


@jit
def _r_words(w, EMULATE: tl.constexpr):
    """The 4-D layout's words R0..R3 of each chunk (4u .. 4u + 3 of w) from the blocks layout's
    P0..P3 (P0 = bytes 0 and 2 of R0, then of R2; P1 bytes 1 and 3 of them; P2, P3 the same of R1
    and R3), for the bf16 arithmetic."""
    out = ()
    for u in tl.static_range(len(w) // 4):
        p0, p1, p2, p3 = w[4 * u], w[4 * u + 1], w[4 * u + 2], w[4 * u + 3]
        if EMULATE:
            out = out + (_bytes4(p0, p1, 0), _bytes4(p2, p3, 0), _bytes4(p0, p1, 2), _bytes4(p2, p3, 2))
        else:
            out = out + tl.inline_asm_elementwise(_R_WORDS, "=r,=r,=r,=r,r,r,r,r", [p0, p1, p2, p3], is_pure=True,
                                                  pack=1, dtype=(tl.int32,) * 4)
    return out


@jit
def _bytes4(a, b, i: tl.constexpr):
    """Bytes i of a, of b, i + 1 of a, of b (prmt 0x5140 for i = 0, 0x7362 for i = 2)."""
    return (((a >> (8 * i)) & 255) | (((b >> (8 * i)) & 255) << 8) | (((a >> (8 * i + 8)) & 255) << 16)
            | (((b >> (8 * i + 8)) & 255) << 24))


@jit
def _x_cut_emulated(x, tig):
    """The lane's 32 x values (rows 16u + 4 tig + s, from _x_loads' pairs) as x_int, the group's X and
    2^(E - 13) (the GPU's arithmetic: the max and the sum over the lanes of a gid)."""
    vals = ()
    eb = tig * 0
    for k in tl.static_range(len(x)):
        lo, hi = _lanes_f32(x[k])
        vals = vals + (lo, hi)
        eb = tl.maximum(eb, tl.maximum((x[k] >> 7) & 255, (x[k] >> 23) & 255))
    eb = tl.maximum(tl.max(eb, axis=2, keep_dims=True), 14)
    factor = ((267 - eb) << 23).to(tl.float32, bitcast=True)
    xi = ()
    total = tig * 0
    for k in tl.static_range(len(vals)):
        v = ((vals[k] * factor + _MAGIC) - _MAGIC).to(tl.int32)
        xi = xi + (v,)
        total = total + v
    fs = tl.where(eb == 255, 0x7FC00000, (eb - 13) << 23).to(tl.float32, bitcast=True)
    return xi, tl.sum(total, axis=2, keep_dims=True), fs


@jit
def _i8_sums_emulated(w, xi, tig, lc):
    """S of the lane's columns 2 tig + h (h = 0, 1): the sums of q x_int of its word column over
    the group, from the lane's rows and summed over the lanes of its gid."""
    odd = lc[3]
    high = lc[4]
    out = ()
    for h in tl.static_range(2):
        cols = ()
        for j in tl.static_range(4):  # column 2j + h: nibble j of each half of R_h (rows 0, 1), R_{2+h} (2, 3)
            acc = tig * 0
            for u in tl.static_range(len(w) // 4):
                for s in tl.static_range(4):
                    code = (w[4 * u + h + 2 * (s // 2)] >> (4 * j + 16 * (s % 2))) & 15
                    acc = acc + code * xi[4 * u + s]
            cols = cols + (tl.sum(acc, axis=2, keep_dims=True),)
        out = out + (tl.where(high, tl.where(odd, cols[3], cols[2]), tl.where(odd, cols[1], cols[0])),)
    return out


@jit
def _i8_cut(x, xs):
    """(X, 2^(E - 13)) of a group, its x (the lane's 4 values: two bf16 pairs) cut into the warp's
    area xs (GPU)."""
    out = tl.inline_asm_elementwise(_CUT, "=r,=r,r,r,r", [x[0], x[1], xs], is_pure=False, pack=1,
                                    dtype=(tl.int32, tl.int32))
    return out[0], out[1].to(tl.float32, bitcast=True)


@jit
def _i8_sums(w, xs):
    """S of the lane's two columns (GPU): the group's 16 mma on its words and the cut x in xs."""
    return tl.inline_asm_elementwise(_SUMS, ",".join(["=r"] * 2 + ["r"] * 33), list(w) + [xs], is_pure=False,
                                     pack=1, dtype=(tl.int32, tl.int32))


@jit
def _i8_fold(t, S, X, fs, zw, sw, lc):
    """t (the lane's two totals) plus a group's: s (S - z X) 2^(E - 13) per column, one fma each; sw:
    the lane's scale word; lc: _lane_consts."""
    zsh, zmask, smul, odd, high = lc
    fl = _f16_lanes(sw[0])
    res = ()
    for h in tl.static_range(2):
        zz = (zw >> (zsh + 16 * h)) & zmask
        res = res + (tl.fma((fl[h] * smul) * fs, (S[h] - zz * X).to(tl.float32), t[h]),)
    return res


@jit
def _i8_total(t, w, x, zw, sw, lc, tig):
    """t plus a group's on the CPU backend (x: _x_loads' pairs of the lane's rows)."""
    xi, X, fs = _x_cut_emulated(x, tig)
    return _i8_fold(t, _i8_sums_emulated(w, xi, tig, lc), X, fs, zw, sw, lc)
