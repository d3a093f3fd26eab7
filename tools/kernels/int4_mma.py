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


def mma_chunk_ptx(subnormal: bool, nb: int = 1) -> str:
    """PTX of one chunk of one lane: 4 slot words of a word column, 16 rows of K, 4 mma per B tile
    of 8 rows of x (`nb` tiles share the dequantized weights).

    Operands (W = 16 nb): $0..$W-1 the sums out (tile t, column c, D column 2tig + i at
    16t + 2c + i); $W..$W+3 the slot words; then B tile t's fragment (x pairs) at $W+4+2t, +1;
    then column c's zero pair (8); the bf16x2 constants 2^120 and 2^116 (used when `subnormal`);
    then the sums in, as the sums out. For nb = 1: words $16..$19, B $20, $21, zeros $22..$29,
    constants $30, $31, sums in $32..$47."""
    w = 16 * nb
    bx, zz = w + 4, w + 4 + 2 * nb
    cc, cin = zz + 8, zz + 10
    lines = [".reg .b32 awp<4>, awa<4>;",
             f"prmt.b32 awp0, ${w}, ${w + 1}, 0x5410;", f"prmt.b32 awp1, ${w}, ${w + 1}, 0x7632;",
             f"prmt.b32 awp2, ${w + 2}, ${w + 3}, 0x5410;", f"prmt.b32 awp3, ${w + 2}, ${w + 3}, 0x7632;"]
    for j in range(4):
        for i in range(4):  # a0 = column 2j (P, slots 0/1), a1 = column 2j+1 (Q), a2 / a3 at slots 2/3
            z = f"${zz + 2 * j + i % 2}"
            if subnormal:
                if j == 2:
                    lines.append(f"shr.u32 awp{i}, awp{i}, 8;")
                mask = "0x000F000F" if j % 2 == 0 else "0x00F000F0"
                lines += [f"and.b32 awa{i}, awp{i}, {mask};",
                          f"fma.rn.bf16x2 awa{i}, awa{i}, ${cc + j % 2}, {z};"]
            else:
                if j > 0:
                    lines.append(f"shr.u32 awp{i}, awp{i}, 4;")
                lines += [f"lop3.b32 awa{i}, awp{i}, 0x000F000F, 0x43004300, 0xEA;",
                          f"sub.rn.bf16x2 awa{i}, awa{i}, {z};"]
        for t in range(nb):
            d = ", ".join(f"${16 * t + 4 * j + i}" for i in range(4))
            c = ", ".join(f"${cin + 16 * t + 4 * j + i}" for i in range(4))
            lines.append(f"{_MMA} {{{d}}}, {{awa0, awa1, awa2, awa3}}, {{${bx + 2 * t}, ${bx + 2 * t + 1}}}, {{{c}}};")
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


_PTX = {(sub, nb): mma_chunk_ptx(sub, nb) for sub in (False, True) for nb in (1, 2)}
_CONS = {nb: ",".join(["=f"] * (16 * nb) + ["r"] * (14 + 2 * nb) + ["f"] * (16 * nb)) for nb in (1, 2)}


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
def _chunk(w0, w1, w2, w3, bx, z0, z1, z2, z3, z4, z5, z6, z7, d, c_even, c_odd, tig, NB: tl.constexpr,
           SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr):
    """Adds one 16-row chunk into the 16 NB sums d (a tuple; 16t + 2c + i: B tile t, column c, D
    column 2tig + i); bx: the B fragments, 2 per tile."""
    if EMULATE:
        out = _chunk_emulated(w0, w1, w2, w3, bx[0], bx[1], z0, z1, z2, z3, z4, z5, z6, z7, d[:16], tig)
        if NB == 2:
            out = out + _chunk_emulated(w0, w1, w2, w3, bx[2], bx[3], z0, z1, z2, z3, z4, z5, z6, z7, d[16:], tig)
        return out
    args = (w0, w1, w2, w3) + bx + (z0, z1, z2, z3, z4, z5, z6, z7, c_even, c_odd) + d
    return tl.inline_asm_elementwise(_PTX[(SUBNORMAL, NB)], _CONS[NB], args, dtype=(tl.float32,) * (16 * NB),
                                     is_pure=True, pack=1)


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
def _load_step(pw, px0, px1, ok, N8: tl.constexpr, U: tl.constexpr, NB: tl.constexpr, EVEN_N: tl.constexpr):
    """One step's slot words (4U tiles: chunk u, slot s at 4u + s) and x pairs (2U per B tile:
    chunk u, half h at 2u + h; tile 1's after tile 0's), each at a constant offset from the
    thread's pointers pw, px0, px1: the offsets become the loads' immediates."""
    w = ()
    for i in tl.static_range(4 * U):
        w = w + (_load_words(pw + ((i // 4) * 16 + (i % 2) + 8 * ((i // 2) % 2)) * N8, ok, EVEN_N),)
    return w, _load_x(px0, px1, U, NB)


@jit
def _load_x(px0, px1, U: tl.constexpr, NB: tl.constexpr):
    """A step's x pairs: chunk u, half h at 2u + h; B tile 1's after tile 0's."""
    x = ()
    for i in tl.static_range(2 * U):
        x = x + (tl.load(px0 + (i // 2) * 8 + (i % 2) * 4),)
    if NB == 2:
        for i in tl.static_range(2 * U):
            x = x + (tl.load(px1 + (i // 2) * 8 + (i % 2) * 4),)
    return x


@jit
def _b_frags(x, u: tl.constexpr, U: tl.constexpr, NB: tl.constexpr):
    """Chunk u's B fragments of each tile (2 x pairs per tile) out of a step's x pairs."""
    if NB == 2:
        return (x[2 * u], x[2 * u + 1], x[2 * U + 2 * u], x[2 * U + 2 * u + 1])
    return (x[2 * u], x[2 * u + 1])


@jit
def _scale_group(t, d, f0, f1, f2, f3, F: tl.constexpr, FO: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr):
    """The totals t (16t' + 8i + c: tile t', D column 2tig + i, column c) plus the group's sums d
    (16t' + 4j + 2h + i: column 2j + h) times their scales (scale pair p: columns 2p, 2p + 1).
    D column 2tig + 1 only matters with more than one row of x per tile."""
    fs = (_f16_lanes(f0), _f16_lanes(f1), _f16_lanes(f2), _f16_lanes(f3))
    out = ()
    for k in tl.static_range(16 * NB):
        tt = k // 16
        i = (k // 8) % 2
        c = k % 8
        if MB > 1 or i == 0:
            p = c // 2
            h = c % 2
            f = fs[p][h]
            out = out + (t[k] + f * (F if p % 2 == 0 else FO) * d[16 * tt + 4 * p + 2 * h + i],)
        else:
            out = out + (t[k],)
    return out


@jit
def awq_gemv_mma_kernel(x_ptr, qweight_ptr, qzeros_ptr, scales_ptr, y_ptr, M, N, K, stride_xm, stride_ym, NG,
                        GROUPS_PER_SPLIT, stride_ys, ws_ptr, count_ptr, N8: tl.constexpr, G: tl.constexpr,
                        NW: tl.constexpr, V: tl.constexpr, U: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr,
                        EVEN_N: tl.constexpr, SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr, SB: tl.constexpr,
                        AHEAD: tl.constexpr = 1, STAGES: tl.constexpr = 0):
    """y[m, n] for rows m of x in [m0, m0 + MB); program (m0 / MB, n tile of NW * 8 * V words, K
    split). With more than one split (SB > 0), split s writes its fp32 partial at
    ws + s * stride_ys and counts itself in count_ptr[tile] (zero before the launch); the last of
    a tile's programs to arrive sums the partials in split order (SB at a time: the same total
    whichever arrives last) into y and sets the count back to zero.
    `x_ptr` and `scales_ptr` are x and the scales, read as int32 (bf16 / fp16 pairs; stride_xm in
    pairs; the kernel casts the pointers). U chunks of 16 rows per step, loaded AHEAD (1 or 2)
    steps ahead; a group's zeros and scales one group ahead. G must be a multiple of 16 U; MB is
    1, 2, 4, 8 (NB = 1 B tile) or 16 (NB = 2: the weights are dequantized once for both 8-row
    tiles of x). Runs with NW warps.
    N8 (words per row) is a compile-time constant, so that the rows of a step are immediate
    offsets.

    STAGES > 0 streams instead: one loop iteration per group (U = G / 16 chunks), every load of
    the iteration in the loop itself, and the loop pipelined STAGES deep (`tl.range(...,
    num_stages=STAGES)`: on NVIDIA each thread's loads go to its own part of shared memory through
    cp.async, STAGES - 1 groups ahead, holding no registers while in flight; 1: not pipelined)."""
    x_ptr = x_ptr.to(tl.pointer_type(tl.int32))  # bf16 pairs (no view needed on the host)
    scales_ptr = scales_ptr.to(tl.pointer_type(tl.int32))  # fp16 pairs
    m0 = tl.program_id(0) * MB  # the row blocks of one tile run side by side: its weights are read from L2
    pid_n = tl.program_id(1)
    pid_s = tl.program_id(2)
    WPT: tl.constexpr = NW * 8 * V
    TB: tl.constexpr = MB if NB == 1 else 8  # rows of x per B tile
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
    # row 8t + gid mod TB of x for B tile t (rows past M read a valid row and are not stored)
    pw = qweight_ptr + g0 * G * N8 + (2 * tig * N8 + gcol)
    px0 = x_ptr + g0 * (G // 2) + (tl.minimum(m0 + gid % TB, M - 1) * stride_xm + tig)
    px1 = x_ptr + g0 * (G // 2) + (tl.minimum(m0 + 8 + gid % TB, M - 1) * stride_xm + tig)
    c_even = tl.full((NW, 8, 4, V), 0x7B807B80, dtype=tl.int32)  # bf16x2 2^120
    c_odd = tl.full((NW, 8, 4, V), 0x79807980, dtype=tl.int32)  # bf16x2 2^116
    zf = tl.zeros((NW, 8, 4, V), dtype=tl.float32)
    t = (zf,) * (16 * NB)
    if STAGES > 0:
        GU: tl.constexpr = G // 16
        # x once per thread (not per word of it): [NW, 8, 4, 1], broadcast over V after the loads
        one = tl.zeros((NW, 8, 4, 1), dtype=tl.int32)
        gid1 = tl.arange(0, 8)[None, :, None, None] + one
        tig1 = tl.arange(0, 4)[None, None, :, None] + one
        qx0 = x_ptr + (tl.minimum(m0 + gid1 % TB, M - 1) * stride_xm + tig1)
        qx1 = x_ptr + (tl.minimum(m0 + 8 + gid1 % TB, M - 1) * stride_xm + tig1)
        for g in tl.range(g0, g1, num_stages=STAGES):
            wg, xs = _load_step(pw + (g - g0) * (G * N8), qx0 + g * (G // 2), qx1 + g * (G // 2), g_ok, N8, GU, NB,
                                EVEN_N)
            t = _group_total(t, wg, xs, qzeros_ptr, scales_ptr, g, gcol, g_ok, full, zf, c_even, c_odd, tig, N8, GU,
                             NB, MB, F, FO, EVEN_N, SUBNORMAL, EMULATE)
    else:
        t = _groups(pw, px0, px1, qzeros_ptr, scales_ptr, gcol, g_ok, g0, g1, k_end, c_even, c_odd, tig, t, N8, G,
                    NW, V, U, NB, MB, F, FO, EVEN_N, SUBNORMAL, EMULATE, AHEAD)
    _finish(t, y_ptr, ws_ptr, count_ptr, m0, pid_n, pid_s, M, N, stride_ym, stride_ys, g_ok, gcol, tig, MB, NB, WPT,
            SB)


@jit
def _group_total(t, wg, xs, qzeros_ptr, scales_ptr, g, gcol, g_ok, full, zf, c_even, c_odd, tig, N8: tl.constexpr,
                 GU: tl.constexpr, NB: tl.constexpr, MB: tl.constexpr, F: tl.constexpr, FO: tl.constexpr,
                 EVEN_N: tl.constexpr, SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr):
    """The totals t plus group g, whose slot words wg and x pairs xs (per thread) are loaded."""
    xg = ()
    for i in tl.static_range(len(xs)):
        xg = xg + (xs[i] + full,)
    zg, s0, s1, s2, s3 = _group_words(qzeros_ptr, scales_ptr, g, gcol, g_ok, N8, EVEN_N)
    z0, z1, z2, z3, z4, z5, z6, z7 = _zero_pairs(zg, SUBNORMAL, EMULATE)
    d = (zf,) * (16 * NB)
    for u in tl.static_range(GU):
        d = _chunk(wg[4 * u], wg[4 * u + 1], wg[4 * u + 2], wg[4 * u + 3], _b_frags(xg, u, GU, NB), z0, z1, z2, z3,
                   z4, z5, z6, z7, d, c_even, c_odd, tig, NB, SUBNORMAL, EMULATE)
    return _scale_group(t, d, s0, s1, s2, s3, F, FO, MB, NB)


@jit
def _group_words(qzeros_ptr, scales_ptr, g, gcol, g_ok, N8: tl.constexpr, EVEN_N: tl.constexpr):
    """Group g's zeros word and its 4 scale words (fp16 pairs) of the thread's word column."""
    sg = scales_ptr + (g * (N8 * 4) + gcol * 4)
    return (_load_words(qzeros_ptr + g * N8 + gcol, g_ok, EVEN_N), _load_words(sg, g_ok, EVEN_N),
            _load_words(sg + 1, g_ok, EVEN_N), _load_words(sg + 2, g_ok, EVEN_N), _load_words(sg + 3, g_ok, EVEN_N))


@jit
def _zero_pairs(zw, SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr):
    return (_zero_pair(zw, 0, SUBNORMAL, EMULATE), _zero_pair(zw, 1, SUBNORMAL, EMULATE),
            _zero_pair(zw, 2, SUBNORMAL, EMULATE), _zero_pair(zw, 3, SUBNORMAL, EMULATE),
            _zero_pair(zw, 4, SUBNORMAL, EMULATE), _zero_pair(zw, 5, SUBNORMAL, EMULATE),
            _zero_pair(zw, 6, SUBNORMAL, EMULATE), _zero_pair(zw, 7, SUBNORMAL, EMULATE))


@jit
def _groups(pw, px0, px1, qzeros_ptr, scales_ptr, gcol, g_ok, g0, g1, k_end, c_even, c_odd, tig, t, N8: tl.constexpr,
            G: tl.constexpr, NW: tl.constexpr, V: tl.constexpr, U: tl.constexpr, NB: tl.constexpr, MB: tl.constexpr,
            F: tl.constexpr, FO: tl.constexpr, EVEN_N: tl.constexpr, SUBNORMAL: tl.constexpr, EMULATE: tl.constexpr,
            AHEAD: tl.constexpr):
    """The totals t plus groups g0 .. g1-1, each step's weights loaded AHEAD steps before its use
    (registers), a group's zeros and scales one group ahead."""
    STEP: tl.constexpr = 16 * U
    zf = tl.zeros((NW, 8, 4, V), dtype=tl.float32)
    wv, xv = _load_step(pw, px0, px1, g_ok, N8, U, NB, EVEN_N)
    wm, xm = wv, xv
    if AHEAD == 2:  # the second step too: two steps in flight while one is computed
        first = tl.where(g0 * G + STEP < k_end, 1, 0)
        pw += first * (STEP * N8)
        px0 += first * (STEP // 2)
        px1 += first * (STEP // 2)
        wm, xm = _load_step(pw, px0, px1, g_ok, N8, U, NB, EVEN_N)
    zw, sp0, sp1, sp2, sp3 = _group_words(qzeros_ptr, scales_ptr, g0, gcol, g_ok, N8, EVEN_N)
    for g in range(g0, g1):
        z0, z1, z2, z3, z4, z5, z6, z7 = _zero_pairs(zw, SUBNORMAL, EMULATE)
        f0, f1, f2, f3 = sp0, sp1, sp2, sp3
        gn = tl.minimum(g + 1, g1 - 1)  # the next group's zeros and scales go out now
        zw, sp0, sp1, sp2, sp3 = _group_words(qzeros_ptr, scales_ptr, gn, gcol, g_ok, N8, EVEN_N)
        d = (zf,) * (16 * NB)
        for kk in range(0, G, STEP):
            # the next step (the last one of the split reloads itself: no load past the split)
            ahead = tl.where(g * G + kk + AHEAD * STEP < k_end, 1, 0)
            pw += ahead * (STEP * N8)
            px0 += ahead * (STEP // 2)
            px1 += ahead * (STEP // 2)
            wn, xn = _load_step(pw, px0, px1, g_ok, N8, U, NB, EVEN_N)
            for u in tl.static_range(U):
                d = _chunk(wv[4 * u], wv[4 * u + 1], wv[4 * u + 2], wv[4 * u + 3], _b_frags(xv, u, U, NB), z0, z1,
                           z2, z3, z4, z5, z6, z7, d, c_even, c_odd, tig, NB, SUBNORMAL, EMULATE)
            if AHEAD == 2:
                wv = wm
                xv = xm
                wm = wn
                xm = xn
            else:
                wv = wn
                xv = xn
        t = _scale_group(t, d, f0, f1, f2, f3, F, FO, MB, NB)
    return t


@jit
def _finish(t, y_ptr, ws_ptr, count_ptr, m0, pid_n, pid_s, M, N, stride_ym, stride_ys, g_ok, gcol, tig,
            MB: tl.constexpr, NB: tl.constexpr, WPT: tl.constexpr, SB: tl.constexpr):
    """Stores the totals t into y, or with split K (SB > 0) as this split's partial, the last
    program of the tile summing them."""
    dst = y_ptr if SB == 0 else ws_ptr + pid_s * stride_ys
    ty = dst.dtype.element_ty
    for k in tl.static_range(16 * NB):
        tt = k // 16
        i = (k // 8) % 2
        if MB > 1 or i == 0:
            row = m0 + 8 * tt + 2 * tig + i
            ok = g_ok & (8 * tt + 2 * tig + i < MB) & (row < M)
            tl.store(dst + row * stride_ym + gcol * 8 + k % 8, t[k].to(ty), mask=ok)
    if SB > 0:
        _last_split_sums(y_ptr, ws_ptr, count_ptr, m0, pid_n, M, N, stride_ym, stride_ys, MB, WPT, SB)


@jit
def _last_split_sums(y_ptr, ws_ptr, count_ptr, m0, pid_n, M, N, stride_ym, stride_ys, MB: tl.constexpr,
                     WPT: tl.constexpr, SB: tl.constexpr):
    """After this split's partial is stored: the last program of the tile to count itself sums the
    partials into y (and resets the tile's counter)."""
    tl.debug_barrier()  # every thread's partial is written before the program counts itself
    tile = tl.program_id(0) * tl.num_programs(1) + pid_n
    n_split = tl.num_programs(2)
    if tl.atomic_add(count_ptr + tile, 1, sem="acq_rel") == n_split - 1:
        _sum_partials(ws_ptr, y_ptr, m0, pid_n * (WPT * 8), M, N, stride_ys, stride_ym, n_split, MB, WPT * 8, SB)
        tl.store(count_ptr + tile, 0)


@jit
def _sum_partials(ws_ptr, y_ptr, m0, n0, M, N, stride_ys, stride_ym, n_split, MB: tl.constexpr, COLS: tl.constexpr,
                  SB: tl.constexpr):
    """y[m0:m0+MB, n0:n0+COLS] = the sum over s < n_split of the fp32 partials at ws + s stride_ys,
    SB splits per load (read through L2: other programs wrote them)."""
    rows = m0 + tl.arange(0, MB)[:, None]
    cols = n0 + tl.arange(0, COLS)[None, :]
    ok = (rows < M) & (cols < N)
    s = tl.arange(0, SB)[:, None, None]
    p = ws_ptr + (rows * stride_ym + cols)[None, :, :]
    acc = tl.zeros((MB, COLS), dtype=tl.float32)
    for s0 in range(0, n_split, SB):
        part = tl.load(p + (s0 + s) * stride_ys, mask=ok[None, :, :] & (s0 + s < n_split), other=0.0,
                       cache_modifier=".cg")
        acc += tl.sum(part, axis=0)
    tl.store(y_ptr + rows * stride_ym + cols, acc.to(y_ptr.dtype.element_ty), mask=ok)
