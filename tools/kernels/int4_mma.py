# mypy: disable-error-code="operator, attr-defined, index, arg-type"
# (the @jit kernels are DSL compiled by Anvil, not Python that mypy can type)
"""W4A16 AWQ GEMV with the dot products on tensor cores (mma.sync m16n8k16, bf16 in, fp32 sums).

The packed weights are turned, with integer ops in registers, into exactly the A fragments of
`mma.sync.m16n8k16.row.col`; x is the B operand. In that instruction lane L = 4 gid + tig holds
A rows gid and gid + 8 at K columns 2tig, 2tig+1, 2tig+8, 2tig+9, B column gid at the same K
rows, and D[gid or gid + 8][2tig or 2tig + 1]. So for one 16-row chunk of K a lane loads the
words of its word column at those 4 rows ("slots"), and one mma per column pair (2j, 2j+1) of
the word puts column 2j in A row gid and column 2j+1 in A row gid + 8. B column n is row n mod MB
of the program's MB rows of x, so D column 2tig + i holds batch row (2tig + i) mod MB.

    weight tile [U * 4, NW, 8, 4, V]: element (4u + s, w, gid, tig, v) is row 16u + 2tig + (s & 1)
    + 8 (s >> 1) and word column (8w + gid) V + v of the program's tile; x (int32 view, bf16
    pairs) [U * 2, NW, 8, 4, V]: element (2u + h) is the pair at rows 16u + 2tig + 8h, + 1

Both are in the canonical blocked layout of their shape (V words per thread along the fast dim,
tig and gid on the lanes, warps on dim 1, chunks and slots in registers), so every op here is
elementwise and no data moves between threads. Per chunk and word (32 weights of a thread):

    4 prmt:   slot words (0, 1) -> P (nibbles 0..3 = columns 0, 2, 4, 6 of both; row 2tig in the
              low half) and Q (nibbles 4..7 = columns 1, 3, 5, 7); slots (2, 3) likewise
    16 and (+ 4 shifts): nibble j of P / Q as two bf16 lanes: the subnormals q 2^-133 (j even) or
              q 2^-129 (j odd); 16 fma.bf16x2: times 2^120 / 2^116, minus z 2^-13: (q - z) 2^-13,
              exact and normal
    4 mma:    D += A B, exact products summed in fp32

Not SUBNORMAL: the code goes under the exponent of 128 (lop3 with the magic 0x4300, one shift per
pair) and a bf16x2 subtraction of 128 + z gives q - z. Per group the sums are scaled into fp32
totals. EMULATE runs the same data flow with DSL ops (prmt and masks as integer ops, the mma as
the sum over the lanes of the fragment it describes), so the CPU backend tests every index.
"""

from __future__ import annotations

import compiler.language as tl
from compiler import jit

__all__ = ["awq_gemv_mma_kernel", "mma_chunk_ptx"]

_MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"


def mma_chunk_ptx(subnormal: bool) -> str:
    """PTX of one chunk of one lane: 4 slot words of a word column, 16 rows of K, 4 mma.

    Operands: $0..$15 the sums out (column c, D column 2tig + i at 2c + i); $16..$19 the slot
    words; $20, $21 the B fragment (x pairs); $22..$29 column c's zero pair; $30, $31 the bf16x2
    constants 2^120 and 2^116 (used when `subnormal`); $32..$47 the sums in."""
    lines = [".reg .b32 awp<4>, awa<4>;",
             "prmt.b32 awp0, $16, $17, 0x5410;", "prmt.b32 awp1, $16, $17, 0x7632;",
             "prmt.b32 awp2, $18, $19, 0x5410;", "prmt.b32 awp3, $18, $19, 0x7632;"]
    for j in range(4):
        for i in range(4):  # a0 = column 2j (P, slots 0/1), a1 = column 2j+1 (Q), a2 / a3 at slots 2/3
            z = f"${22 + 2 * j + i % 2}"
            if subnormal:
                if j == 2:
                    lines.append(f"shr.u32 awp{i}, awp{i}, 8;")
                mask = "0x000F000F" if j % 2 == 0 else "0x00F000F0"
                lines += [f"and.b32 awa{i}, awp{i}, {mask};",
                          f"fma.rn.bf16x2 awa{i}, awa{i}, ${30 + j % 2}, {z};"]
            else:
                if j > 0:
                    lines.append(f"shr.u32 awp{i}, awp{i}, 4;")
                lines += [f"lop3.b32 awa{i}, awp{i}, 0x000F000F, 0x43004300, 0xEA;",
                          f"sub.rn.bf16x2 awa{i}, awa{i}, {z};"]
        d = ", ".join(f"${4 * j + i}" for i in range(4))
        c = ", ".join(f"${32 + 4 * j + i}" for i in range(4))
        lines.append(f"{_MMA} {{{d}}}, {{awa0, awa1, awa2, awa3}}, {{$20, $21}}, {{{c}}};")
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


_PTX_SUB = mma_chunk_ptx(True)
_PTX_MAGIC = mma_chunk_ptx(False)
_CONS = ",".join(["=f"] * 16 + ["r"] * 16 + ["f"] * 16)


@jit
def _lanes_f32(v):
    """The two bf16 lanes of each int32 as fp32 (low, high): exact."""
    return (v << 16).to(tl.float32, bitcast=True), (v & -65536).to(tl.float32, bitcast=True)


@jit
def _mma_emulated(a_lo, a_hi, b_lo, b_hi, tig, I: tl.constexpr):
    """D column 2tig + I of an mma whose A row is this lane's group (gid) and whose B column n is
    held by the lanes of group n: sum over the 4 lanes t of a group of A(t) . B(lanes of group n,
    t), then column n = 2tig + I picked for this lane. A, B: 2 values (k pair) per lane."""
    a_lo3, a_hi3 = a_lo[:, :, None, :, :], a_hi[:, :, None, :, :]  # [NW, gid, 1, t, V]
    b_lo3, b_hi3 = b_lo[:, None, :, :, :], b_hi[:, None, :, :, :]  # [NW, 1, n, t, V]
    prod = tl.sum(a_lo3 * b_lo3 + a_hi3 * b_hi3, axis=3)  # [NW, gid, n, V]
    n = tl.arange(0, 8)[None, None, :, None, None]
    pick = (n == 2 * tig[:, :, None, :, :] + I).to(tl.float32)  # [NW, gid, n, tig, V]
    return tl.sum(prod[:, :, :, None, :] * pick, axis=2)


@jit
def _chunk_emulated(w0, w1, w2, w3, b0, b1, z0, z1, z2, z3, z4, z5, z6, z7, d, tig):
    """The chunk's 4 mma with DSL ops on integers (codes of odd j carry 16; zeros likewise)."""
    p0 = (w0 & 0xFFFF) | (w1 << 16)  # prmt 0x5410
    p1 = ((w0 >> 16) & 0xFFFF) | (w1 & -65536)  # prmt 0x7632
    p2 = (w2 & 0xFFFF) | (w3 << 16)
    p3 = ((w2 >> 16) & 0xFFFF) | (w3 & -65536)
    x0, x1 = _lanes_f32(b0)
    x2, x3 = _lanes_f32(b1)
    zs = (z0, z1, z2, z3, z4, z5, z6, z7)
    out = ()
    for j in tl.static_range(4):
        sh = 8 * (j // 2)
        mask = 0x000F000F << (4 * (j % 2))
        for h in tl.static_range(2):  # h = 0: column 2j (A row gid, from P); 1: column 2j+1 (row gid + 8, Q)
            z = zs[2 * j + h] & 0xFFFF
            va = ((p1 if h else p0) >> sh) & mask  # slots 0 / 1
            vb = ((p3 if h else p2) >> sh) & mask  # slots 2 / 3
            a0 = ((va & 0xFFFF) - z).to(tl.float32)
            a1 = (((va >> 16) & 0xFFFF) - z).to(tl.float32)
            a2 = ((vb & 0xFFFF) - z).to(tl.float32)
            a3 = (((vb >> 16) & 0xFFFF) - z).to(tl.float32)
            for i in tl.static_range(2):
                # K rows (2tig, 2tig+1) and (2tig+8, 2tig+9): two emulated half-mma sums
                s01 = _mma_emulated(a0, a1, x0, x1, tig, i)
                s23 = _mma_emulated(a2, a3, x2, x3, tig, i)
                out = out + (d[4 * j + 2 * h + i] + s01 + s23,)
    return out


@jit
def _chunk(w0, w1, w2, w3, b0, b1, z0, z1, z2, z3, z4, z5, z6, z7, d, c_even, c_odd, tig,
           SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr):
    """Adds one 16-row chunk into the 16 sums d (a tuple; 2c + i: column c, D column 2tig + i)."""
    if EMULATE:
        return _chunk_emulated(w0, w1, w2, w3, b0, b1, z0, z1, z2, z3, z4, z5, z6, z7, d, tig)
    args = [w0, w1, w2, w3, b0, b1, z0, z1, z2, z3, z4, z5, z6, z7, c_even, c_odd, d[0], d[1], d[2], d[3], d[4], d[5],
            d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15]]
    if SUBNORMAL:
        return tl.inline_asm_elementwise(_PTX_SUB, _CONS, args, dtype=(tl.float32,) * 16, is_pure=True, pack=1)
    return tl.inline_asm_elementwise(_PTX_MAGIC, _CONS, args, dtype=(tl.float32,) * 16, is_pure=True, pack=1)


@jit
def _zero_pair(zw, C: tl.constexpr, SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr):
    """Column C's zero point in both 16-bit lanes, as the chunk subtracts it: -z 2^-13 (bf16) with
    SUBNORMAL, 128 + z (bf16) otherwise, the integer z (16z for odd j = C // 2) when emulating."""
    z = (zw >> (4 * ((C % 2) * 4 + C // 2))) & 0xF
    if EMULATE:
        if (C // 2) % 2 == 1:
            z = z << 4
    elif SUBNORMAL:  # the top half of fp32 -z 2^-13 is its bf16, exactly
        z = ((z.to(tl.float32) * -0.0001220703125).to(tl.int32, bitcast=True) >> 16) & 0xFFFF
    else:
        z = z | 0x4300
    return z | (z << 16)


@jit
def _f16_lanes(v):
    """The two fp16 lanes of each int32 of `v` as fp32 (low, high)."""
    return (v.to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32),
            (v >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32))


@jit
def _load_words(ptr, ok, EVEN_N: tl.constexpr):
    if EVEN_N:
        return tl.load(ptr)
    return tl.load(ptr, mask=ok, other=0)


@jit
def _load_step(pw, px, ok, N8: tl.constexpr, U: tl.constexpr, EVEN_N: tl.constexpr):
    """One step's slot words (4U tiles: chunk u, slot s at 4u + s) and x pairs (2U: chunk u, half h
    at 2u + h), each at a constant offset from the thread's pointers pw, px: the offsets become
    the loads' immediates."""
    w = ()
    for i in tl.static_range(4 * U):
        w = w + (_load_words(pw + ((i // 4) * 16 + (i % 2) + 8 * ((i // 2) % 2)) * N8, ok, EVEN_N),)
    x = ()
    for i in tl.static_range(2 * U):
        x = x + (tl.load(px + (i // 2) * 8 + (i % 2) * 4),)
    return w, x


@jit
def _add_scaled(t, f_pair, d, c: tl.constexpr, F: tl.constexpr):
    """t + scale * F * d for the two columns 2c, 2c+1 of a scale pair (t, d: column sums)."""
    f0, f1 = _f16_lanes(f_pair)
    return t[0] + f0 * F * d[4 * c], t[1] + f1 * F * d[4 * c + 2]


@jit
def awq_gemv_mma_kernel(x_ptr, qweight_ptr, qzeros_ptr, scales_ptr, y_ptr, M, N, K, stride_xm, stride_ym, NG,
                        GROUPS_PER_SPLIT, stride_ys, N8: tl.constexpr, G: tl.constexpr, NW: tl.constexpr,
                        V: tl.constexpr, U: tl.constexpr, MB: tl.constexpr, EVEN_N: tl.constexpr,
                        SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr):
    """y[m, n] (or split s's fp32 partial at y + s * stride_ys) for rows m of x in [m0, m0 + MB);
    program (m0 / MB, n tile of NW * 8 * V words, K split).
    `x_ptr` and `scales_ptr` are x and the scales viewed as int32 (bf16 / fp16 pairs; stride_xm
    in pairs). U chunks of 16 rows per step, loaded one step ahead; a group's zeros and scales one
    group ahead. G must be a multiple of 16 U; MB is 1, 2, 4 or 8. Runs with NW warps. N8 (words per
    row) is a compile-time constant, so that the rows of a step are immediate offsets."""
    m0 = tl.program_id(0) * MB  # the row blocks of one tile run side by side: its weights are read from L2
    pid_n = tl.program_id(1)
    pid_s = tl.program_id(2)
    STEP: tl.constexpr = 16 * U
    WPT: tl.constexpr = NW * 8 * V
    F: tl.constexpr = 8192.0 if SUBNORMAL and not EMULATE else 1.0  # the chunk's sums carry 2^-13
    FO: tl.constexpr = F * 0.0625 if EMULATE else F  # columns of odd j carry 16 more when emulating
    # per-thread tiles [NW, 8 gid, 4 tig, V]: the 4 lanes of a group share their word column
    full = tl.zeros((NW, 8, 4, V), dtype=tl.int32)
    gid = tl.arange(0, 8)[None, :, None, None] + full
    tig = tl.arange(0, 4)[None, None, :, None] + full
    gcol = pid_n * WPT + (tl.arange(0, NW)[:, None, None, None] * 8 + gid) * V + tl.arange(0, V)[None, None, None, :]
    g_ok = gcol < N8
    g0 = pid_s * GROUPS_PER_SPLIT
    g1 = tl.minimum(g0 + GROUPS_PER_SPLIT, NG)
    k_end = g1 * G
    # the thread's pointers: word column gcol at row 2tig of the step; x pair at row 2tig of
    # row gid mod MB of x (B column gid; rows past M read a valid row and are not stored)
    pw = qweight_ptr + g0 * G * N8 + (2 * tig * N8 + gcol)
    px = x_ptr + g0 * (G // 2) + (tl.minimum(m0 + gid % MB, M - 1) * stride_xm + tig)
    c_even = tl.full((NW, 8, 4, V), 0x7B807B80, dtype=tl.int32)  # bf16x2 2^120
    c_odd = tl.full((NW, 8, 4, V), 0x79807980, dtype=tl.int32)  # bf16x2 2^116
    wv, xv = _load_step(pw, px, g_ok, N8, U, EVEN_N)
    zw = _load_words(qzeros_ptr + g0 * N8 + gcol, g_ok, EVEN_N)
    sp = scales_ptr + gcol * 4
    sp0 = _load_words(sp + g0 * (N8 * 4), g_ok, EVEN_N)
    sp1 = _load_words(sp + g0 * (N8 * 4) + 1, g_ok, EVEN_N)
    sp2 = _load_words(sp + g0 * (N8 * 4) + 2, g_ok, EVEN_N)
    sp3 = _load_words(sp + g0 * (N8 * 4) + 3, g_ok, EVEN_N)
    zf = tl.zeros((NW, 8, 4, V), dtype=tl.float32)
    # totals: column c for D column 2tig (ta) and 2tig + 1 (tb)
    ta0, ta1, ta2, ta3, ta4, ta5, ta6, ta7 = zf, zf, zf, zf, zf, zf, zf, zf
    tb0, tb1, tb2, tb3, tb4, tb5, tb6, tb7 = zf, zf, zf, zf, zf, zf, zf, zf
    for g in range(g0, g1):
        z0 = _zero_pair(zw, 0, SUBNORMAL, EMULATE)
        z1 = _zero_pair(zw, 1, SUBNORMAL, EMULATE)
        z2 = _zero_pair(zw, 2, SUBNORMAL, EMULATE)
        z3 = _zero_pair(zw, 3, SUBNORMAL, EMULATE)
        z4 = _zero_pair(zw, 4, SUBNORMAL, EMULATE)
        z5 = _zero_pair(zw, 5, SUBNORMAL, EMULATE)
        z6 = _zero_pair(zw, 6, SUBNORMAL, EMULATE)
        z7 = _zero_pair(zw, 7, SUBNORMAL, EMULATE)
        f0, f1, f2, f3 = sp0, sp1, sp2, sp3
        gn = tl.minimum(g + 1, g1 - 1)  # the next group's zeros and scales go out now
        zw = _load_words(qzeros_ptr + gn * N8 + gcol, g_ok, EVEN_N)
        sp0 = _load_words(sp + gn * (N8 * 4), g_ok, EVEN_N)
        sp1 = _load_words(sp + gn * (N8 * 4) + 1, g_ok, EVEN_N)
        sp2 = _load_words(sp + gn * (N8 * 4) + 2, g_ok, EVEN_N)
        sp3 = _load_words(sp + gn * (N8 * 4) + 3, g_ok, EVEN_N)
        d = (zf, zf, zf, zf, zf, zf, zf, zf, zf, zf, zf, zf, zf, zf, zf, zf)
        for kk in range(0, G, STEP):
            # the next step (the last one of the split reloads itself: no load past the split)
            ahead = tl.where(g * G + kk + STEP < k_end, 1, 0)
            pw += ahead * (STEP * N8)
            px += ahead * (STEP // 2)
            wn, xn = _load_step(pw, px, g_ok, N8, U, EVEN_N)
            for u in tl.static_range(U):
                d = _chunk(wv[4 * u], wv[4 * u + 1], wv[4 * u + 2], wv[4 * u + 3], xv[2 * u], xv[2 * u + 1], z0, z1,
                           z2, z3, z4, z5, z6, z7, d, c_even, c_odd, tig, SUBNORMAL, EMULATE)
            wv = wn
            xv = xn
        # d[4j + 2h + i]: column 2j + h, D column 2tig + i; scale pair p: columns 2p, 2p + 1
        ta0, ta1 = _add_scaled((ta0, ta1), f0, d, 0, F)
        ta2, ta3 = _add_scaled((ta2, ta3), f1, d, 1, FO)
        ta4, ta5 = _add_scaled((ta4, ta5), f2, d, 2, F)
        ta6, ta7 = _add_scaled((ta6, ta7), f3, d, 3, FO)
        if MB > 1:
            db = (d[1], d[1], d[3], d[3], d[5], d[5], d[7], d[7], d[9], d[9], d[11], d[11], d[13], d[13], d[15],
                  d[15])
            tb0, tb1 = _add_scaled((tb0, tb1), f0, db, 0, F)
            tb2, tb3 = _add_scaled((tb2, tb3), f1, db, 1, FO)
            tb4, tb5 = _add_scaled((tb4, tb5), f2, db, 2, F)
            tb6, tb7 = _add_scaled((tb6, tb7), f3, db, 3, FO)
    ty = y_ptr.dtype.element_ty
    ya = y_ptr + pid_s * stride_ys + (m0 + 2 * tig) * stride_ym + gcol * 8
    ok_a = g_ok & (2 * tig < MB) & (m0 + 2 * tig < M)
    tl.store(ya + 0, ta0.to(ty), mask=ok_a)
    tl.store(ya + 1, ta1.to(ty), mask=ok_a)
    tl.store(ya + 2, ta2.to(ty), mask=ok_a)
    tl.store(ya + 3, ta3.to(ty), mask=ok_a)
    tl.store(ya + 4, ta4.to(ty), mask=ok_a)
    tl.store(ya + 5, ta5.to(ty), mask=ok_a)
    tl.store(ya + 6, ta6.to(ty), mask=ok_a)
    tl.store(ya + 7, ta7.to(ty), mask=ok_a)
    if MB > 1:
        yb = ya + stride_ym
        ok_b = g_ok & (2 * tig + 1 < MB) & (m0 + 2 * tig + 1 < M)
        tl.store(yb + 0, tb0.to(ty), mask=ok_b)
        tl.store(yb + 1, tb1.to(ty), mask=ok_b)
        tl.store(yb + 2, tb2.to(ty), mask=ok_b)
        tl.store(yb + 3, tb3.to(ty), mask=ok_b)
        tl.store(yb + 4, tb4.to(ty), mask=ok_b)
        tl.store(yb + 5, tb5.to(ty), mask=ok_b)
        tl.store(yb + 6, tb6.to(ty), mask=ok_b)
        tl.store(yb + 7, tb7.to(ty), mask=ok_b)
