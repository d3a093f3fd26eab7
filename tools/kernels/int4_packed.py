# mypy: disable-error-code="operator, attr-defined, index, arg-type"
# (the @jit kernels are DSL compiled by Anvil, not Python that mypy can type)
"""W4A16 GEMV on tensor cores from awq_gemv_pack's layout, with the zero points folded out of the
inner loop.

Per 16-row chunk c of K a lane l = 4 gid + tig of the mma (m16n8k16, bf16 in, fp32 sums) needs
the 8 columns of word column 8o + gid at 4 rows. The chunk's K order is permuted (mma K index
2tig + e + 8h is row 16c + 4tig + 2h + e), the same for the weights (A) and x (B), so a lane's
rows are 16c + 4tig .. + 3 and its x pairs two adjacent words. awq_gemv_pack stores those 4 rows
as 4 words ready for the A fragments: R0 holds the low halves of rows 0 and 1 (the even columns,
nibble j = column 2j), R1 their high halves (the odd columns), R2 and R3 the same for rows 2 and
3. Fragment register i of mma j is nibble j of both halves of R_i as it lies, masked: a bf16x2
of subnormals q 2^-133 (16 q 2^-133 for j odd), which the tensor cores multiply and sum exactly;
x is scaled by 2^48 (see fold_chunk_ptx): no zero point and one logic op per register in the
loop, the mma sums q x 2^-85. A fifth mma per chunk multiplies a row of 2^-133 into x: X = the
sum of x over the group on the same scale. Once per group, column c's total gets s (d - z X) = s
sum of (q - z) x 2^-85 (d / 16 for j odd; the products exact, the sums fp32: the folded zero costs
an error of about 2^-24 z sum |x| per group, far under the bf16 result's rounding), and the totals
are scaled by 2^85 at the end. The scaled x overflows for |x| >= 2^80 and the products go
subnormal (fewer bits) for |x| < 2^-41: far outside any activation's range.

    qweight [K / 16, O, 32, 4]: element (c, o, l, s) is R_s of lane l, octet o (word columns 8o
    .. 8o + 7) and chunk c; O = ceil(N / 64)

Warp w of a program reads octet pid_n NW + w (the last octet for warps past the end: their
columns are not stored); one loop step per group, all its loads at the top: a chunk's 4 words in
one 16-byte load, its x pairs in one 8-byte load, the group's zeros word and 4 scale words in a
4- and a 16-byte load. EMULATE runs the same data flow with DSL ops on the CPU backend (the
codes as q, the mma as the sum over the lanes of the fragment it describes). With one row of x
(and no cluster) the 4 lanes of a word column hold the same sums, so each finishes one mma's 2
columns (their zero points and scales, 2 totals per lane to sum and store) in place of all 8.

With WK the warps of a program share one octet's K and sum their totals in shared memory
(warp_sum_ptx). awq_gemv_pack's blocks put an octet's group (its words, then its 64 scales and 8
zeros words) in one contiguous block; on Hopper each warp streams its blocks through a ring of
shared-memory slots that lane 0 refills with bulk copies (ring_*_ptx: mbarriers, cp.async.bulk),
the ring in the program's shared memory (tl.extra.cuda.shared_memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import compiler.language as tl
from compiler import jit
from compiler.language.extra.cuda import shared_memory

from .int4_i8 import I8_X_BYTES, _i8_cut, _i8_fold, _i8_sums, _i8_total, _r_words
from .int4_mma import _MMA, _f16_lanes, _finish, _lanes_f32, _last_split_sums, _load_words, _mma_emulated

__all__ = ["awq_gemv_packed_kernel", "fold_chunk_ptx"]



def fold_chunk_ptx(nb: int = 1) -> str:
    """PTX of one chunk of one lane: the 4 words R0..R3, 16 rows of K, 4 mma per B tile of 8 rows
    of x (`nb` tiles share the weights) and one more per tile for the sum of x.

    The nibbles of j even are masked in place: q 2^-133, a bf16 subnormal; those of j odd one
    nibble up: 16 q 2^-133 (bits 0-7 of a bf16 are b 2^-133 for any byte b, the smallest normal
    being 128 2^-133). The tensor cores take subnormal operands and sums exactly, so the codes go
    to the mma as they are (one logic op per register, one shift per word for j = 2, 3); x is
    scaled by 2^48 (one bf16x2 multiply per register of x), so that the products, q x 2^-85 (16 q
    x 2^-85 for j odd), are normal fp32 for |x| >= 2^-41, and exact for |x| < 2^80.

    Operands (W = 20 nb): $0..$16nb-1 the sums out (tile t, column c = 2j + h, D column 2tig + i
    at 16t + 4j + 2h + i), $16nb..$W-1 the sums of x (tile t, D register r at 16nb + 4t + r);
    $W..$W+3 the words R0..R3; B tile t's fragment (x pairs) at $W+4+2t, +1; the A of the sums
    of x at $W+4+2nb (bf16x2 2^-133: the sums of x come out on the codes' scale, 2^-85); the
    bf16x2 scale of x (2^48); then the sums in, as the sums out."""
    w = 20 * nb
    bx, one = w + 4, w + 4 + 2 * nb
    cx, cin = one + 1, one + 2
    lines = [".reg .b32 fs<4>, fa<4>, fx<4>;"]
    for j in range(4):
        for i in range(4):
            src = f"${w + i}"
            if j == 2:
                lines.append(f"shr.u32 fs{i}, {src}, 8;")
            if j >= 2:
                src = f"fs{i}"
            mask = "0x000F000F" if j % 2 == 0 else "0x00F000F0"
            lines.append(f"and.b32 fa{i}, {src}, {mask};")
        if j == 0:  # (after the first codes: placed first, ptxas spilled in the 4-warp 4-D kernel)
            lines += [f"mul.rn.bf16x2 fx{r}, ${bx + r}, ${cx};" for r in range(2 * nb)]
        for t in range(nb):
            d = ", ".join(f"${16 * t + 4 * j + r}" for r in range(4))
            c = ", ".join(f"${cin + 16 * t + 4 * j + r}" for r in range(4))
            lines.append(f"{_MMA} {{{d}}}, {{fa0, fa1, fa2, fa3}}, {{fx{2 * t}, fx{2 * t + 1}}}, {{{c}}};")
    for t in range(nb):
        d = ", ".join(f"${16 * nb + 4 * t + r}" for r in range(4))
        c = ", ".join(f"${cin + 16 * nb + 4 * t + r}" for r in range(4))
        o = f"${one}"
        lines.append(f"{_MMA} {{{d}}}, {{{o}, {o}, {o}, {o}}}, {{fx{2 * t}, fx{2 * t + 1}}}, {{{c}}};")
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


def cluster_sum_ptx(ranks: int, threads: int, values: int) -> str:
    """PTX summing `values` fp32 per thread over the `ranks` programs of a thread block cluster
    (the K splits of one tile): each thread writes its values into its slot of a buffer in rank
    0's shared memory (distributed shared memory), the cluster barrier (release / acquire) orders
    those stores before rank 0 reads them, and rank 0's threads sum their slots in rank order. The
    other ranks come out with their own values plus unwritten slots: only rank 0 stores.
    Operands: $0..$values-1 the sums out, then the values in. The barrier's phase before it (every
    program of the cluster has started, so its shared memory may be written) is the arrive of
    CLUSTER_ARRIVE at the kernel's start, waited for here."""
    if values % 4 or not 2 <= ranks <= 8:
        raise ValueError(f"values must be a multiple of 4 and ranks 2 to 8, got {values} and {ranks}")
    slot = 4 * values  # bytes per thread and rank
    lines = [f".shared .align 16 .b8 csum[{ranks * threads * slot}];", ".reg .b32 ct<4>;", ".reg .f32 cf<4>;",
             "barrier.cluster.wait.aligned;", "mov.u32 ct0, %tid.x;", "mov.u32 ct1, %cluster_ctarank;",
             f"mad.lo.u32 ct2, ct1, {threads}, ct0;", f"mul.lo.u32 ct2, ct2, {slot};", "mov.u32 ct3, csum;",
             "add.u32 ct2, ct2, ct3;", "mapa.shared::cluster.u32 ct2, ct2, 0;"]
    for q in range(values // 4):
        regs = ", ".join(f"${values + 4 * q + r}" for r in range(4))
        lines.append(f"st.shared::cluster.v4.f32 [ct2+{16 * q}], {{{regs}}};")
    lines += ["barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire.aligned;",
              f"mul.lo.u32 ct0, ct0, {slot};", "add.u32 ct0, ct0, ct3;"]
    for q in range(values // 4):
        lines.append(f"ld.shared.v4.f32 {{{', '.join(f'${4 * q + r}' for r in range(4))}}}, [ct0+{16 * q}];")
        for rank in range(1, ranks):
            lines.append(f"ld.shared.v4.f32 {{cf0, cf1, cf2, cf3}}, [ct0+{rank * threads * slot + 16 * q}];")
            lines += [f"add.f32 ${4 * q + r}, ${4 * q + r}, cf{r};" for r in range(4)]
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


# the cluster barrier's arrive at the kernel's start (see cluster_sum_ptx); its operand passes through
CLUSTER_ARRIVE = "barrier.cluster.arrive.relaxed.aligned;\n\tmov.b32 $0, $1;"


class _Ptx(dict):  # type: ignore[type-arg]
    """PTX text of `build` by its arguments (one, or a tuple of them), made when a kernel first asks."""

    def __init__(self, build: Callable[..., str]) -> None:
        super().__init__()
        self.build = build

    def __missing__(self, key: Any) -> str:
        text = self[key] = self.build(*key) if isinstance(key, tuple) else self.build(key)
        return text


_PTX = {nb: fold_chunk_ptx(nb) for nb in (1, 2)}
_CSUM = _Ptx(cluster_sum_ptx)
# the constraints of cluster_sum_ptx: the 8 totals stored with one row of x per program, 16 with 2-8
_CCONS = {v: ",".join(["=f"] * v + ["f"] * v) for v in (8, 16)}
_CONS = {nb: ",".join(["=f"] * (20 * nb) + ["r"] * (6 + 2 * nb) + ["f"] * (20 * nb)) for nb in (1, 2)}


@jit
def _slots(t, sl, S: tl.constexpr):
    """The S slots of a [NW, 8, 4, S] tile (slots in the thread's registers), each [NW, 8, 4, 1]."""
    out = ()
    for s in tl.static_range(S):
        out = out + (tl.sum(tl.where(sl == s, t, 0), axis=3, keep_dims=True),)
    return out


@jit
def _chunk_emulated(r0, r1, r2, r3, b0, b1, d, dx, tig):
    """The chunk's 5 mma with DSL ops: (16 sums, 4 sums of x) of one B tile."""
    x0, x1 = _lanes_f32(b0)
    x2, x3 = _lanes_f32(b1)
    rs = (r0, r1, r2, r3)
    out = ()
    for j in tl.static_range(4):
        for h in tl.static_range(2):  # h = 0: column 2j (A row gid, R0 / R2); 1: column 2j+1 (row gid + 8, R1 / R3)
            va = (rs[h] >> (4 * j)) & 0x000F000F  # rows 0 / 1 of the lane (K 2tig, 2tig + 1)
            vb = (rs[2 + h] >> (4 * j)) & 0x000F000F  # rows 2 / 3 (K 2tig + 8, 2tig + 9)
            a0 = (va & 0xFFFF).to(tl.float32)
            a1 = (va >> 16).to(tl.float32)
            a2 = (vb & 0xFFFF).to(tl.float32)
            a3 = (vb >> 16).to(tl.float32)
            for i in tl.static_range(2):
                out = out + (d[4 * j + 2 * h + i] + _mma_emulated(a0, a1, x0, x1, tig, i)
                             + _mma_emulated(a2, a3, x2, x3, tig, i),)
    ones = x0 * 0.0 + 1.0
    s0 = _mma_emulated(ones, ones, x0, x1, tig, 0) + _mma_emulated(ones, ones, x2, x3, tig, 0)
    s1 = _mma_emulated(ones, ones, x0, x1, tig, 1) + _mma_emulated(ones, ones, x2, x3, tig, 1)
    return out, (dx[0] + s0, dx[1] + s1, dx[2] + s0, dx[3] + s1)


@jit
def _chunk(r0, r1, r2, r3, bx, d, dx, ones, cx, tig, NB: tl.constexpr, EMULATE: tl.constexpr):
    """d (16 NB sums) and dx (4 NB sums of x) plus one chunk; bx: the B fragments, 2 per tile."""
    if EMULATE:
        d0, dx0 = _chunk_emulated(r0, r1, r2, r3, bx[0], bx[1], d[:16], dx[:4], tig)
        if NB == 2:
            d1, dx1 = _chunk_emulated(r0, r1, r2, r3, bx[2], bx[3], d[16:], dx[4:], tig)
            return d0 + d1, dx0 + dx1
        return d0, dx0
    res = tl.inline_asm_elementwise(_PTX[NB], _CONS[NB], (r0, r1, r2, r3) + bx + (ones, cx) + d + dx,
                                    dtype=(tl.float32,) * (20 * NB), is_pure=True, pack=1)
    return res[:16 * NB], res[16 * NB:]


@jit
def _group_loads(pw, px0, px1, qzeros_ptr, scales_ptr, g, g0, gcol, g_ok, sl4, sl2, N8: tl.constexpr,
                 G: tl.constexpr, O: tl.constexpr, NB: tl.constexpr, EVEN_N: tl.constexpr, EVICT: tl.constexpr,
                 BW: tl.constexpr = 0):
    """Group g's words (chunk u's R0..R3 at 4u..4u+3), x pairs (chunk u's two at 2u, 2u + 1; B tile
    1's after tile 0's), zeros word and scale words (fp16 pairs of columns 2p, 2p + 1) of the thread.
    BW > 0 (awq_gemv_pack's blocks of BW words): pw, qzeros_ptr and scales_ptr point into the
    octet's first block (the thread's words, zeros word and first scale word)."""
    GU: tl.constexpr = G // 16
    w = ()
    for u in tl.static_range(GU):
        if BW:
            wp = pw + (g * BW + u * 128)
        else:
            wp = pw + ((g - g0) * GU + u) * (O * 128)
        w = w + _slots(tl.load(wp, eviction_policy=EVICT), sl4, 4)
    x = _x_loads(px0, px1, g, sl2, G, NB)
    if BW:
        zw = tl.load(qzeros_ptr + g * BW)
        sw = _slots(tl.load(scales_ptr + (g * BW) + sl4), sl4, 4)
    else:
        zw = _load_words(qzeros_ptr + g * N8 + gcol, g_ok, EVEN_N)
        sw = _slots(_load_words(scales_ptr + (g * (N8 * 4) + gcol * 4) + sl4, g_ok, EVEN_N), sl4, 4)
    return w, x, zw, sw


@jit
def _x_loads(px0, px1, g, sl2, G: tl.constexpr, NB: tl.constexpr):
    """Group g's x pairs of the thread (chunk u's two at 2u, 2u + 1; B tile 1's after tile 0's)."""
    GU: tl.constexpr = G // 16
    x = ()
    for u in tl.static_range(GU):
        x = x + _slots(tl.load(px0 + (g * (G // 2) + 8 * u)), sl2, 2)
    if NB == 2:
        for u in tl.static_range(GU):
            x = x + _slots(tl.load(px1 + (g * (G // 2) + 8 * u)), sl2, 2)
    return x


@jit
def _group_total(t, w, x, zw, sw, zf, ones, cx, lc, tig, GU: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr,
                 EMULATE: tl.constexpr, LS: tl.constexpr = 0):
    """The totals t (16t' + 8i + c: tile t', D column 2tig + i, column c) plus a group's: column c =
    2p + h gets s (d - z X), d its sum of q x, X the sum of x of the D column (both times 2^-85 on
    the GPU, where d of p odd carries 16 more). LS (one row of x, no cluster): t holds the lane's two
    columns 2 tig + h of its word column (the 4 lanes of a gid hold the same sums, each finishes
    one mma's); sw is the lane's scale word (word tig) alone and lc the lane's constants
    (_lane_consts)."""
    d = (zf,) * (16 * NB)
    dx = (zf,) * (4 * NB)
    for u in tl.static_range(GU):
        if NB == 2:
            bx = (x[2 * u], x[2 * u + 1], x[2 * GU + 2 * u], x[2 * GU + 2 * u + 1])
        else:
            bx = (x[2 * u], x[2 * u + 1])
        d, dx = _chunk(w[4 * u], w[4 * u + 1], w[4 * u + 2], w[4 * u + 3], bx, d, dx, ones, cx, tig, NB,
                       EMULATE)
    if LS:
        zsh, zmask, smul, odd, high = lc
        fl = _f16_lanes(sw[0])
        out = ()
        for h in tl.static_range(2):  # column 2 tig + h: mma tig's D row gid + 8h (d 4 tig + 2h)
            dh = tl.where(high, tl.where(odd, d[12 + 2 * h], d[8 + 2 * h]), tl.where(odd, d[4 + 2 * h], d[2 * h]))
            zz = ((zw >> (zsh + 16 * h)) & zmask).to(tl.float32)
            out = out + (t[h] + (fl[h] * smul) * (dh - zz * dx[0]),)
        return out
    fs = (_f16_lanes(sw[0]), _f16_lanes(sw[1]), _f16_lanes(sw[2]), _f16_lanes(sw[3]))
    out = ()
    for k in tl.static_range(16 * NB):
        tt = k // 16
        i = (k // 8) % 2
        c = k % 8
        if MB > 1 or i == 0:  # D column 2tig + 1 only matters with more than one row of x per tile
            p = c // 2
            h = c % 2
            if EMULATE or p % 2 == 0:
                zz = ((zw >> (4 * (4 * h + p))) & 0xF).to(tl.float32)  # AWQ's nibble of column c
                sc = fs[p][h]
            else:  # on the GPU the sums of j = p odd are 16 q x: 16 z, s / 16
                zz = ((zw >> (4 * (4 * h + p) - 4)) & 0xF0).to(tl.float32)
                sc = fs[p][h] * 0.0625
            out = out + (t[k] + sc * (d[16 * tt + 4 * p + 2 * h + i] - zz * dx[4 * tt + i]),)
        else:
            out = out + (t[k],)
    return out


@jit
def _lane_consts(tig, EMULATE: tl.constexpr):
    """The constants of _group_total's LS for lane tig, whose columns 2 tig + h come from mma j =
    tig: the zeros word's shift (nibble 4h + tig; on the GPU for tig odd one nibble lower, 16 z),
    its mask, the scale's factor (on the GPU 1 / 16 for tig odd: those sums carry 16 q x), tig odd,
    tig >= 2."""
    odd = (tig & 1) == 1
    if EMULATE:  # the emulated mma sums q x for every j
        return (4 * tig, tig * 0 + 0xF, (tig * 0).to(tl.float32) + 1.0, odd, tig >= 2)
    return (4 * tig - 4 * (tig & 1), tl.where(odd, 0xF0, 0xF), tl.where(odd, 0.0625, 1.0), odd, tig >= 2)


@jit
def _pick_scale(sw, lc):
    """The lane's scale word (word tig of the 4) as a 1-tuple (see _group_total's LS)."""
    odd = lc[3]
    return (tl.where(lc[4], tl.where(odd, sw[3], sw[2]), tl.where(odd, sw[1], sw[0])),)


@jit
def awq_gemv_packed_kernel(x_ptr, qweight_ptr, qzeros_ptr, scales_ptr, y_ptr, M, N, K, stride_xm, stride_ym, NG,
                           stride_ys, ws_ptr, count_ptr, N8: tl.constexpr, G: tl.constexpr,
                           NW: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr, EVEN_N: tl.constexpr,
                           EMULATE: tl.constexpr, SB: tl.constexpr, AHEAD: tl.constexpr = 1,
                           CLUSTER: tl.constexpr = 0, EVICT: tl.constexpr = "", WK: tl.constexpr = 0,
                           KEVEN: tl.constexpr = 1, BW: tl.constexpr = 0, STAGES: tl.constexpr = 0,
                           I8: tl.constexpr = 0):
    """y[m, n] for rows m of x in [m0, m0 + MB); program (m0 / MB, n tile of NW octets, K split),
    as awq_gemv_mma_kernel (split K: the last program of a tile sums the partials) with qweight in
    awq_gemv_pack's layout; split s of S takes groups [s NG / S, (s + 1) NG / S). x and the scales
    are read as int32 (bf16 / fp16 pairs; stride_xm in pairs; the kernel casts the pointers). One
    loop step per group; AHEAD = 2: the next group's loads are issued before this group is
    computed (its words wait in registers, about 55 more per thread), the last group computed after
    the loop. EVICT: the weight words' eviction_policy ("evict_first" where no other program reads
    them: the L2 then replaces the words it has delivered before other lines, such as the dirty
    lines of earlier kernels, whose write-back would share the memory bus with the words).

    CLUSTER > 0 (NB = 1, SB = 0, launched with cluster_dims (1, 1, CLUSTER) and CLUSTER splits):
    the splits of a tile are one thread block cluster and sum their totals in split 0's shared
    memory (cluster_sum_ptx), which stores them: no partials in global memory, no counter.

    WK = 1: the NW warps of a program share the K of one octet in place of reading NW octets (its
    split's groups dealt round-robin: warp w takes the w-th, the (w + NW)-th, ...) and sum their
    totals through shared memory at the end; KEVEN: every split's group count is a multiple of NW
    (else a warp's steps past its split load its last group again and scale it by zero).

    BW > 0 (WK = 1): qweight is awq_gemv_pack's blocks ([O, NG, BW] words: per octet and group the
    chunks' words, then the octet's 64 scales and 8 zeros words; qzeros and scales are not read).
    STAGES >= 1 (there, on the GPU): each warp streams its blocks through a ring of STAGES slots of
    shared memory, filled by bulk copies (the TMA) that lane 0 issues, each slot refilled as soon as
    the warp has read it: STAGES blocks in flight while one is computed, none held in registers.

    I8 (one row of x, no cluster, G = 128; on the GPU with STAGES >= 1): the int8 arithmetic of
    int4_i8.py in place of the bf16 mma (its totals carry no 2^-85)."""
    x_ptr = x_ptr.to(tl.pointer_type(tl.int32))  # bf16 pairs (no view needed on the host)
    scales_ptr = scales_ptr.to(tl.pointer_type(tl.int32))  # fp16 pairs
    m0 = tl.program_id(0) * MB
    pid_n = tl.program_id(1)
    pid_s = tl.program_id(2)
    GU: tl.constexpr = G // 16
    O: tl.constexpr = (N8 + 7) // 8
    TB: tl.constexpr = MB if NB == 1 else 8  # rows of x per B tile
    LS: tl.constexpr = 1 if MB == 1 and CLUSTER == 0 else 0  # see _group_total
    NT: tl.constexpr = 2 if LS else 16 * NB  # totals per thread
    full = tl.zeros((NW, 8, 4, 1), dtype=tl.int32)
    gid = tl.arange(0, 8)[None, :, None, None] + full
    tig = tl.arange(0, 4)[None, None, :, None] + full
    wid = tl.arange(0, NW)[:, None, None, None]
    if WK:
        gcol = pid_n * 8 + gid
    else:
        gcol = pid_n * (NW * 8) + wid * 8 + gid
    g_ok = gcol < N8
    n_split = tl.num_programs(2)
    g0 = pid_s * NG // n_split  # the splits' group counts differ by at most one
    g1 = (pid_s + 1) * NG // n_split
    if CLUSTER > 0:  # this program has started (the cluster's shared memory is written at the end)
        full = tl.inline_asm_elementwise(CLUSTER_ARRIVE, "=r,r", [full], dtype=tl.int32, is_pure=False, pack=1)
    if WK:
        octet = tl.minimum(pid_n + wid * 0, O - 1)
    else:
        octet = tl.minimum(pid_n * NW + wid, O - 1)
    sl4 = tl.arange(0, 4)[None, None, None, :]
    sl2 = tl.arange(0, 2)[None, None, None, :]
    if BW:  # the octet's first block: the thread's words, its scale words, its zeros word
        ob = octet * NG * BW
        pw = qweight_ptr + (ob + (gid * 4 + tig) * 4 + sl4)
        scales_ptr = qweight_ptr + (ob + GU * 128 + gid * 4)
        qzeros_ptr = qweight_ptr + (ob + GU * 128 + 32 + gid)
    else:
        pw = qweight_ptr + ((octet * 32 + gid * 4 + tig) * 4 + sl4 + g0 * (GU * O * 128))
    # x pairs at rows 4tig .. 4tig + 3 of a chunk, of row 8t + gid mod TB of x for B tile t (rows
    # past M read a valid row and are not stored)
    px0 = x_ptr + (tl.minimum(m0 + gid % TB, M - 1) * stride_xm + 2 * tig + sl2)
    px1 = x_ptr + (tl.minimum(m0 + 8 + gid % TB, M - 1) * stride_xm + 2 * tig + sl2)
    # the A of the sums of x: bf16x2 2^-133 on the GPU, where the codes come out as q 2^-133, else 1
    ones = tl.full((NW, 8, 4, 1), 0x3F803F80 if EMULATE else 0x00010001, dtype=tl.int32)
    cx = tl.full((NW, 8, 4, 1), 0x57805780, dtype=tl.int32)  # bf16x2 2^48: the scale of x (fold_chunk_ptx)
    zf = tl.zeros((NW, 8, 4, 1), dtype=tl.float32)
    if LS:
        lc = _lane_consts(tig, EMULATE)
    else:
        lc = (zf,)
    t = (zf,) * NT
    if STAGES >= 1 and not EMULATE:
        if I8:  # the lane's 4 values of a group: pairs 2 lane, 2 lane + 1 of the row
            px0 = x_ptr + (m0 * stride_xm + 2 * (gid * 4 + tig) + sl2)
        t = _ring_totals(t, qweight_ptr + ob, px0, px1, g0, g1, wid, gid, tig, sl2, ones, cx, lc, zf, G, NW, MB,
                         NB, STAGES, BW, EVICT, KEVEN, LS, I8)
    else:  # WK: warp w takes every NW-th group from g0 + w; else a warp takes them all
        if WK:
            gw = g0 + wid
        else:
            gw = g0
        t = _stream_totals(t, pw, px0, px1, qzeros_ptr, scales_ptr, g0, g1, gw, gcol, g_ok, sl4, sl2, ones,
                           cx, lc, tig, zf, N8, G, O, NW if WK else 1, MB, NB, EVEN_N, EVICT, AHEAD,
                           KEVEN if WK else 1, EMULATE, BW, LS, I8)
    if WK:  # the warps' totals summed (each warp then holds them all)
        t = _sum_over_warps(t, gid, MB, NB, NW, EMULATE, LS)
        g_ok = g_ok & (wid == 0)
    if not EMULATE and not I8:  # the totals carry 2^-85
        t2 = ()
        for k in tl.static_range(NT):
            t2 = t2 + (t[k] * 3.8685626227668134e25,)  # 2^85
        t = t2
    if CLUSTER > 0:
        t = _cluster_sums(t, MB, CLUSTER, 32 * NW)
        g_ok = g_ok & (pid_s == 0)
    WPT: tl.constexpr = 8 if WK else NW * 8  # words per tile
    if LS:  # the lane's two columns
        dst = y_ptr if SB == 0 else ws_ptr + pid_s * stride_ys
        for h in tl.static_range(2):
            tl.store(dst + m0 * stride_ym + gcol * 8 + 2 * tig + h, t[h].to(dst.dtype.element_ty), mask=g_ok)
        if SB > 0:
            _last_split_sums(y_ptr, ws_ptr, count_ptr, m0, pid_n, M, N, stride_ym, stride_ys, MB, WPT, SB)
    else:
        _finish(t, y_ptr, ws_ptr, count_ptr, m0, pid_n, pid_s, M, N, stride_ym, stride_ys, g_ok, gcol, tig, MB, NB,
                WPT, SB)


@jit
def _cluster_sums(t, MB: tl.constexpr, RANKS: tl.constexpr, THREADS: tl.constexpr):
    """The 16 totals t (one B tile) summed over the cluster's splits (valid in split 0); with one
    row of x only the 8 of D column 2tig are stored, the others pass through."""
    NV: tl.constexpr = 8 if MB == 1 else 16
    used = ()
    for k in tl.static_range(16):
        if MB > 1 or k < 8:
            used = used + (t[k],)
    sums = tl.inline_asm_elementwise(_CSUM[(RANKS, THREADS, NV)], _CCONS[NV], used, dtype=(tl.float32,) * NV,
                                     is_pure=False, pack=1)
    if MB == 1:
        return sums + t[8:]
    return sums


@jit
def _stream_totals(t, pw, px0, px1, qzeros_ptr, scales_ptr, g0, g1, gw, gcol, g_ok, sl4, sl2, ones, cx, lc,
                   tig, zf, N8: tl.constexpr, G: tl.constexpr, O: tl.constexpr, NW: tl.constexpr,
                   MB: tl.constexpr, NB: tl.constexpr, EVEN_N: tl.constexpr, EVICT: tl.constexpr,
                   AHEAD: tl.constexpr, KEVEN: tl.constexpr, EMULATE: tl.constexpr, BW: tl.constexpr,
                   LS: tl.constexpr = 0, I8: tl.constexpr = 0):
    """t plus the totals of the thread's groups gw, gw + NW, ... below g1, one group per step;
    AHEAD = 2: the next step's loads are issued before this one is computed (the last step's
    compute after the loop)."""
    GU: tl.constexpr = G // 16
    steps = (g1 - g0 + NW - 1) // NW
    if AHEAD == 2:
        w, x, zw, sw = _warp_group_loads(pw, px0, px1, qzeros_ptr, scales_ptr, gw, g0, g1, gcol, g_ok, sl4, sl2, N8, G,
                                         O, NB, EVEN_N, EVICT, KEVEN, BW)
        for i in range(1, steps):
            wn, xn, zn, sn = _warp_group_loads(pw, px0, px1, qzeros_ptr, scales_ptr, gw + i * NW, g0, g1, gcol, g_ok,
                                               sl4, sl2, N8, G, O, NB, EVEN_N, EVICT, KEVEN, BW)
            t = _stream_total(t, w, x, zw, sw, zf, ones, cx, lc, tig, GU, MB, NB, EMULATE, LS, I8, BW)
            w = wn
            x = xn
            zw = zn
            sw = sn
        t = _stream_total(t, w, x, zw, sw, zf, ones, cx, lc, tig, GU, MB, NB, EMULATE, LS, I8, BW)
    else:
        for i in range(0, steps):
            w, x, zw, sw = _warp_group_loads(pw, px0, px1, qzeros_ptr, scales_ptr, gw + i * NW, g0, g1, gcol, g_ok,
                                             sl4, sl2, N8, G, O, NB, EVEN_N, EVICT, KEVEN, BW)
            t = _stream_total(t, w, x, zw, sw, zf, ones, cx, lc, tig, GU, MB, NB, EMULATE, LS, I8, BW)
    return t


@jit
def _stream_total(t, w, x, zw, sw, zf, ones, cx, lc, tig, GU: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr,
                  EMULATE: tl.constexpr, LS: tl.constexpr, I8: tl.constexpr = 0, BW: tl.constexpr = 0):
    """_group_total of a group's loads (its 4 scale words: LS takes the lane's; BW: the blocks' words
    brought back to R0..R3); I8 (the CPU's emulation of the int8 arithmetic): _i8_total."""
    if BW:
        w = _r_words(w, EMULATE)
    if LS:
        sw = _pick_scale(sw, lc)
    if I8:
        return _i8_total(t, w, x, zw, sw, lc, tig)
    return _group_total(t, w, x, zw, sw, zf, ones, cx, lc, tig, GU, MB, NB, EMULATE, LS)


@jit
def _warp_group_loads(pw, px0, px1, qzeros_ptr, scales_ptr, g, g0, g1, gcol, g_ok, sl4, sl2, N8: tl.constexpr,
                      G: tl.constexpr, O: tl.constexpr, NB: tl.constexpr, EVEN_N: tl.constexpr, EVICT: tl.constexpr,
                      KEVEN: tl.constexpr, BW: tl.constexpr):
    """_group_loads of group g; past the split (not KEVEN) the last group's, its scales zero."""
    w, x, zw, sw = _group_loads(pw, px0, px1, qzeros_ptr, scales_ptr, _clamp(g, g1 - 1, KEVEN), g0, gcol, g_ok, sl4,
                                sl2, N8, G, O, NB, EVEN_N, EVICT, BW)
    if not KEVEN:
        sw = _zero_past(sw, g < g1)
    return w, x, zw, sw


@jit
def _clamp(g, g_last, KEVEN: tl.constexpr):
    if KEVEN:
        return g
    return tl.minimum(g, g_last)


@jit
def _zero_past(sw, ok):
    """A group's scale words, zero where `ok` is false (a step past the warp's last group)."""
    out = ()
    for s in tl.static_range(len(sw)):
        out = out + (tl.where(ok, sw[s], 0),)
    return out


@jit
def _sum_over_warps(t, gid, MB: tl.constexpr, NB: tl.constexpr, NW: tl.constexpr, EMULATE: tl.constexpr,
                    LS: tl.constexpr = 0):
    """The totals t (the ones stored, see _finish) summed over the warps in warp order, each warp
    then holding them all: on the GPU through the program's shared memory with one barrier
    (warp_sum_ptx), else tl.sum over axis 0."""
    V: tl.constexpr = 2 if LS else 8 if MB == 1 else 16 * NB
    if EMULATE:
        out = ()
        for k in tl.static_range(len(t)):
            if k < V:
                out = out + (tl.sum(t[k], axis=0, keep_dims=True),)
            else:
                out = out + (t[k],)
        return out
    base = shared_memory(NW * 128 * V) + gid * 0
    sums = tl.inline_asm_elementwise(_WSUM[(NW, V)], _WSUM_CONS[V], (base,) + t[:V], dtype=(tl.float32,) * V,
                                     is_pure=False, pack=1)
    return sums + t[V:]


def warp_sum_ptx(nw: int, values: int) -> str:
    """PTX summing `values` fp32 per thread over the `nw` warps of a program, in warp order, each
    thread getting the sums of its lane: every thread writes its values into its warp's part of a
    shared-memory buffer ($values: its address; 4v bytes per lane and row of v = 4 values, or of 2
    where `values` is 2: conflict-free), one barrier, then each thread reads its lane's values of
    every warp. Operands: $0..$values-1 the sums out, then the buffer and the values in."""
    if values % 4 and values != 2:
        raise ValueError(f"values must be 2 or a multiple of 4, got {values}")
    v = min(values, 4)
    rows, row, vec = values // v, 128 * v, f".v{v}"
    wf = ", ".join(f"wf{r}" for r in range(v))
    lines = [".reg .b32 ws<3>;", ".reg .f32 wf<4>;", "mov.u32 ws0, %tid.x;", "and.b32 ws1, ws0, 31;",
             "shr.u32 ws2, ws0, 5;", f"mad.lo.u32 ws2, ws2, {rows * row}, ${values};",
             f"mad.lo.u32 ws2, ws1, {4 * v}, ws2;"]
    for q in range(rows):
        regs = ", ".join(f"${values + 1 + v * q + r}" for r in range(v))
        lines.append(f"st.shared{vec}.f32 [ws2+{row * q}], {{{regs}}};")
    lines += ["bar.sync 0;", f"mad.lo.u32 ws1, ws1, {4 * v}, ${values};"]
    for q in range(rows):
        lines.append(f"ld.shared{vec}.f32 {{{', '.join(f'${v * q + r}' for r in range(v))}}}, [ws1+{row * q}];")
        for w in range(1, nw):
            lines.append(f"ld.shared{vec}.f32 {{{wf}}}, [ws1+{w * rows * row + row * q}];")
            lines += [f"add.f32 ${v * q + r}, ${v * q + r}, wf{r};" for r in range(v)]
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


_WSUM = _Ptx(warp_sum_ptx)
_WSUM_CONS = _Ptx(lambda v: ",".join(["=f"] * v + ["r"] + ["f"] * v))


def ring_setup_ptx(stages: int, slot: int, nw: int) -> str:
    """PTX that places a warp's ring of `stages` slots of `slot` bytes and one mbarrier per slot in
    the program's shared memory ($2: its address; the `nw` warps' rings, then their mbarriers),
    lane 0 of each warp initializing its mbarriers (arrival count 1: its own expect_tx). $0, $1
    out: the warp's first slot and first mbarrier."""
    lines = [".reg .b32 q<3>;", ".reg .pred p;", "mov.u32 q0, %tid.x;", "shr.u32 q1, q0, 5;", "and.b32 q2, q0, 31;",
             "setp.eq.u32 p, q2, 0;", f"mad.lo.u32 $0, q1, {stages * slot}, $2;",
             f"add.u32 q2, $2, {nw * stages * slot};", f"mad.lo.u32 $1, q1, {stages * 8}, q2;"]
    lines += [f"@p mbarrier.init.shared::cta.b64 [$1+{8 * k}], 1;" for k in range(stages)]
    lines += ["fence.mbarrier_init.release.cluster;", "bar.warp.sync -1;"]
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


def block_words(group_size: int) -> int:
    """Words of one block of awq_gemv_pack's blocks layout: the group's chunks (128 words each),
    the octet's 64 fp16 scales (32 words) and its 8 zeros words."""
    return group_size // 16 * 128 + 40


def ring_bytes(stages: int, slot: int, nw: int) -> int:
    """Shared memory of the `nw` warps' rings and mbarriers (ring_setup_ptx)."""
    return nw * stages * (slot + 8)


def ring_issue_ptx(slot: int, evict: str) -> str:
    """PTX of one bulk copy (the TMA) of `slot` bytes from global memory into a slot, issued by lane
    0 where $4 is nonzero, after the warp's reads of the slot (bar.warp.sync, then the proxy fence
    that orders them before the copy's writes). Operands: $0 out (= $4); $1 the slot, $2 its
    mbarrier, $3 the global address, $4 whether to copy, $5 a value computed from the slot's
    contents (this asm waits for it)."""
    hint = ".L2::cache_hint" if evict else ""
    lines = [".reg .pred p;", ".reg .b32 q;", ".reg .b64 pol;", "mov.u32 q, %laneid;", "setp.eq.u32 p, q, 0;",
             "setp.ne.and.u32 p, $4, 0, p;", "bar.warp.sync -1;", "fence.proxy.async.shared::cta;"]
    if evict:
        lines.append(f"createpolicy.fractional.L2::{evict}.b64 pol, 1.0;")
    lines += [f"@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [$2], {slot};",
              f"@p cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes{hint} [$1], [$3], {slot}, [$2]"
              + (", pol;" if evict else ";"), "mov.b32 $0, $4;"]
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


def ring_read_ptx(gu: int, scales: int = 4) -> str:
    """PTX that waits for a slot's copy (its mbarrier's phase of parity $P, where $V is nonzero) and
    reads a thread's part of the block: $0..$4gu-1 the chunks' words (16 bytes per lane and chunk,
    512 per chunk), then the `scales` scale words (4, or 1: the lane's) and the zeros word. Inputs
    after the outputs: the thread's words, scale words and zeros word (shared addresses), the
    mbarrier, P and V."""
    n = 4 * gu + scales + 1
    wa, sa, za, bar, par, valid = (f"${n + k}" for k in range(6))
    lines = [".reg .pred p;", f"setp.ne.u32 p, {valid}, 0;", "@!p bra SKIP;", "WAIT:",
             f"mbarrier.try_wait.parity.shared::cta.b64 p, [{bar}], {par};", "@!p bra WAIT;", "SKIP:"]
    for u in range(gu):
        regs = ", ".join(f"${4 * u + r}" for r in range(4))
        lines.append(f"ld.shared.v4.b32 {{{regs}}}, [{wa}+{512 * u}];")
    if scales == 4:
        lines.append(f"ld.shared.v4.b32 {{${4 * gu}, ${4 * gu + 1}, ${4 * gu + 2}, ${4 * gu + 3}}}, [{sa}];")
    else:
        lines.append(f"ld.shared.b32 ${4 * gu}, [{sa}];")
    lines.append(f"ld.shared.b32 ${n - 1}, [{za}];")
    return "{\n\t" + "\n\t".join(lines) + "\n\t}"


_RING_SETUP = _Ptx(ring_setup_ptx)
_RING_ISSUE = _Ptx(ring_issue_ptx)
_RING_READ = _Ptx(ring_read_ptx)
_RING_READ_CONS = _Ptx(lambda gu, scales: ",".join(["=r"] * (4 * gu + scales + 1) + ["r"] * 6))


@jit
def _ring_totals(t, blocks, px0, px1, g0, g1, wid, gid, tig, sl2, ones, cx, lc, zf, G: tl.constexpr,
                 NW: tl.constexpr, MB: tl.constexpr, NB: tl.constexpr, S: tl.constexpr, BW: tl.constexpr,
                 EVICT: tl.constexpr, KEVEN: tl.constexpr, LS: tl.constexpr = 0, I8: tl.constexpr = 0):
    """The totals of warp w over its groups g0 + w, g0 + w + NW, ... below g1 (as
    _stream_totals), each group's block brought into the warp's ring of S slots by a bulk copy
    (`blocks`: the octet's first block). A slot is refilled as soon as the warp has read it: S
    blocks in flight while one is computed. I8: the int8 arithmetic (int4_i8.py), x read as the
    lane's 4 values of each group (px0: the lane's first pair of the row) and cut in the warp's
    area of shared memory."""
    GU: tl.constexpr = G // 16
    SLOT: tl.constexpr = BW * 4
    NS: tl.constexpr = 1 if LS else 4  # scale words read (LS: the lane's)
    base = shared_memory(NW * S * (SLOT + 8)) + gid * 0  # ring_bytes
    ring, bars = tl.inline_asm_elementwise(_RING_SETUP[(S, SLOT, NW)], "=r,=r,r", [base], is_pure=False,
                                           pack=1, dtype=(tl.int32, tl.int32))
    n = (g1 - g0 + NW - 1 - wid) // NW  # this warp's groups
    steps = (g1 - g0 + NW - 1) // NW
    lane = gid * 4 + tig
    if I8:  # the warp's area of cut x; x loaded a step ahead, cut while the block is in flight
        xs = shared_memory(NW * I8_X_BYTES) + wid * I8_X_BYTES + gid * 0
        xn = _slots(tl.load(px0 + tl.minimum(g0 + wid, g1 - 1) * (G // 2)), sl2, 2)
    for k in tl.static_range(S):
        src = blocks + (g0 + wid + k * NW) * BW
        tl.inline_asm_elementwise(_RING_ISSUE[(SLOT, EVICT)], "=r,r,r,l,r,r",
                                  [ring + k * SLOT, bars + 8 * k, src, (n > k).to(tl.int32), gid], is_pure=False,
                                  pack=1, dtype=tl.int32)
    for i in range(0, steps):
        k = i % S
        slot = ring + k * SLOT
        valid = i < n
        g = g0 + wid + i * NW
        if I8:
            X, fs = _i8_cut(xn, xs)
        else:  # issued before the wait
            x = _x_loads(px0, px1, tl.minimum(g, g1 - 1), sl2, G, NB)
        out = tl.inline_asm_elementwise(_RING_READ[(GU, NS)], _RING_READ_CONS[(GU, NS)],
                                        [slot + lane * 16, slot + (GU * 512 + 16 * gid + 4 * tig * LS),
                                         slot + (GU * 512 + 128 + 4 * gid), bars + 8 * k, (i // S) % 2 + gid * 0,
                                         valid.to(tl.int32)],
                                        is_pure=False, pack=1, dtype=(tl.int32,) * (4 * GU + NS + 1))
        w = out[:4 * GU]
        sw = out[4 * GU:4 * GU + NS]
        zw = out[4 * GU + NS]
        src = blocks + (g + S * NW) * BW  # (the asm waits for the slot's last word in a register)
        tl.inline_asm_elementwise(_RING_ISSUE[(SLOT, EVICT)], "=r,r,r,l,r,r",
                                  [slot, bars + 8 * k, src, (i + S < n).to(tl.int32), zw],
                                  is_pure=False, pack=1, dtype=tl.int32)
        if not KEVEN:
            sw = _zero_past(sw, valid)
        if I8:
            xn = _slots(tl.load(px0 + tl.minimum(g + NW, g1 - 1) * (G // 2)), sl2, 2)
            t = _i8_fold(t, _i8_sums(w, xs), X, fs, zw, sw, lc)
        else:
            t = _group_total(t, _r_words(w, False), x, zw, sw, zf, ones, cx, lc, tig, GU, MB, NB, False, LS)
    return t
