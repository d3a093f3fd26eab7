"""The tensor-core W4A16 GEMVs (tools/kernels/int4_mma.py, int4_packed.py), device-free.

1. The chunk's inline PTX is run for the 32 lanes of a warp by a small interpreter of the
   instructions it uses; the mma fragments come from the backend's tested mma.sync layouts
   (compiler.layouts). The sums must be those of the dequantized weights times x.
2. The tile the kernel builds has lane = 4 gid + tig, as the chunk assumes.
3. The kernel compiles for sm_90a (ptxas) with few instructions per weight, no spills and no
   shared memory in its inner loop.
4. The same for the packed layout's kernel (int4_packed.py) and its chunk.
"""

from __future__ import annotations

import itertools
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from compiler.backends.nvidia.tiles import blocked_for
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.layouts import LANE, REGISTER, WARP
from compiler.layouts.distributed import mma_v2_accumulator, mma_v2_operand
from tools.kernels.int4 import AWQ_ORDER, awq_shift
from tools.kernels.int4_mma import awq_gemv_mma_kernel, mma_chunk_ptx
from tools.kernels.int4_packed import awq_gemv_packed_kernel, cluster_sum_ptx, fold_chunk_ptx, ring_bytes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ptx_loops import loop_spans  # noqa: E402

Regs = dict[str, np.ndarray]


def _bf16(bits: np.ndarray) -> np.ndarray:
    """16-bit patterns -> float64 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _to_bf16(v: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bit patterns, round to nearest even (the values here are exact)."""
    t = torch.from_numpy(v.astype(np.float32)).to(torch.bfloat16).view(torch.int16).numpy()
    return t.astype(np.uint32) & 0xFFFF


def _halves(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _bf16(v & 0xFFFF), _bf16(v >> 16)


def _pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return (_to_bf16(lo) | (_to_bf16(hi) << 16)).astype(np.uint32)


def _frag(layout: object, reg: int) -> list[tuple[int, int]]:
    """(row, col) of register `reg` of each of the 32 lanes."""
    return [tuple(layout.apply({REGISTER: reg, LANE: lane, WARP: 0})) for lane in range(32)]  # type: ignore[attr-defined]


A_LAYOUT = mma_v2_operand((16, 16), 0, (1, 1))
B_LAYOUT = mma_v2_operand((16, 8), 1, (1, 1))
D_LAYOUT = mma_v2_accumulator((16, 8), (1, 1))


def _mma(a: list[np.ndarray], b: list[np.ndarray], c: list[np.ndarray]) -> list[np.ndarray]:
    """m16n8k16 bf16 -> f32 over the warp: fragments as the backend's layouts place them."""
    am, bm = np.zeros((16, 16)), np.zeros((16, 8))
    for r in range(8):  # element r of a lane: half r % 2 of register r // 2
        vals = _halves(a[r // 2])[r % 2]
        for lane, (row, col) in enumerate(_frag(A_LAYOUT, r)):
            am[row, col] = vals[lane]
    for r in range(4):
        vals = _halves(b[r // 2])[r % 2]
        for lane, (row, col) in enumerate(_frag(B_LAYOUT, r)):
            bm[row, col] = vals[lane]
    d = am @ bm
    out = []
    for r in range(4):
        pos = _frag(D_LAYOUT, r)
        out.append(np.array([d[row, col] for row, col in pos]) + c[r])
    return out


def run_ptx(ptx: str, regs: Regs) -> Regs:
    """Interprets the chunk's PTX for 32 lanes; `regs` maps "$n" to a [32] array (uint32 for b32,
    float64 for f32) and receives the outputs."""
    regs = dict(regs)

    def val(tok: str) -> np.ndarray:
        tok = tok.strip()
        if tok in regs:
            return regs[tok]
        return np.full(32, int(tok, 0), dtype=np.uint32)

    def vec(tok: str) -> list[str]:
        return [t.strip() for t in tok.strip().strip("{}").split(",")]

    for stmt in ptx.replace("{\n", "\n").replace("\n\t}", "\n").split(";"):
        stmt = stmt.strip()
        if not stmt or stmt.startswith(".reg"):
            continue
        op, rest = stmt.split(None, 1)
        if op.startswith("mma."):
            groups = re.findall(r"\{[^}]*\}", rest)
            d, a, b, c = (vec(g) for g in groups)
            res = _mma([val(t) for t in a], [val(t) for t in b], [regs[t] for t in c])
            for name, v in zip(d, res, strict=True):
                regs[name] = v.astype(np.float32).astype(np.float64)
            continue
        args = [t.strip() for t in rest.split(",")]
        x = [val(t) for t in args[1:]]
        if op == "prmt.b32":
            sel = int(args[3], 0)
            src = [(x[0] >> (8 * i)) & 0xFF for i in range(4)] + [(x[1] >> (8 * i)) & 0xFF for i in range(4)]
            out = np.zeros(32, dtype=np.uint32)
            for i in range(4):
                out |= src[(sel >> (4 * i)) & 7] << (8 * i)
        elif op == "and.b32":
            out = x[0] & x[1]
        elif op == "shr.u32":
            out = x[0] >> x[1]
        elif op == "lop3.b32":
            lut = int(args[4], 0)
            out = np.zeros(32, dtype=np.uint32)
            for bit in range(32):
                idx = (((x[0] >> bit) & 1) << 2) | (((x[1] >> bit) & 1) << 1) | ((x[2] >> bit) & 1)
                out |= ((lut >> idx) & 1).astype(np.uint32) << bit
        elif op == "sub.rn.bf16x2":
            (al, ah), (bl, bh) = _halves(x[0]), _halves(x[1])
            out = _pack(al - bl, ah - bh)
        elif op == "mul.rn.bf16x2":
            (al, ah), (bl, bh) = _halves(x[0]), _halves(x[1])
            out = _pack(al * bl, ah * bh)
        elif op == "fma.rn.bf16x2":
            (al, ah), (bl, bh), (cl, ch) = _halves(x[0]), _halves(x[1]), _halves(x[2])
            out = _pack(al * bl + cl, ah * bh + ch)
        else:
            raise AssertionError(f"instruction not interpreted: {op}")
        regs[args[0]] = out.astype(np.uint32)
    return regs


def _awq_word(codes: np.ndarray) -> np.ndarray:
    """codes [..., 8] (column order) -> packed uint32 words [...]."""
    w = np.zeros(codes.shape[:-1], dtype=np.uint32)
    for j in range(8):
        w |= codes[..., j].astype(np.uint32) << awq_shift(j)
    return w


@pytest.mark.parametrize("subnormal", [True, False])
@pytest.mark.parametrize(("mb", "nb"), [(1, 1), (2, 1), (8, 1), (16, 2)])
def test_chunk_ptx_sums_dequantized_weights_times_x(subnormal: bool, mb: int, nb: int) -> None:
    rng = np.random.default_rng(0)
    q = rng.integers(0, 16, (16, 8, 8))  # [k row of the chunk, word column = gid, column j]
    z = rng.integers(0, 16, (8, 8))  # [word column, column j]
    xs = _bf16(_to_bf16(rng.standard_normal((mb, 16)) * 4))  # bf16 rows of x
    lane = np.arange(32)
    gid, tig = lane >> 2, lane & 3
    rows = [2 * tig, 2 * tig + 1, 2 * tig + 8, 2 * tig + 9]  # slots 0..3
    w = 16 * nb  # operands: sums out, slot words, B per tile, zeros, constants, sums in
    bx, zz = w + 4, w + 4 + 2 * nb
    regs: Regs = {}
    for s in range(4):
        regs[f"${w + s}"] = _awq_word(q[rows[s], gid])
    tb = min(mb, 8)  # rows of x per B tile
    for t in range(nb):
        xrow = xs[8 * t + gid % tb]  # B tile t, column gid: x row 8t + gid mod TB
        regs[f"${bx + 2 * t}"] = _pack(xrow[lane, 2 * tig], xrow[lane, 2 * tig + 1])
        regs[f"${bx + 2 * t + 1}"] = _pack(xrow[lane, 2 * tig + 8], xrow[lane, 2 * tig + 9])
    for c in range(8):  # column c's zero pair, as the kernel's _zero_pair builds it
        zc = z[gid, c].astype(np.uint32)
        half = _to_bf16(-zc.astype(np.float64) * 2.0 ** -13) if subnormal else (zc | 0x4300)
        regs[f"${zz + c}"] = (half | (half << 16)).astype(np.uint32)
    regs[f"${zz + 8}"] = np.full(32, 0x7B807B80, dtype=np.uint32)
    regs[f"${zz + 9}"] = np.full(32, 0x79807980, dtype=np.uint32)
    unit = 2.0 ** -13 if subnormal else 1.0  # the sums carry 2^-13 with subnormal codes
    acc = (rng.standard_normal((w, 32)) * unit).astype(np.float32).astype(np.float64)  # sums coming in
    for i in range(w):
        regs[f"${zz + 10 + i}"] = acc[i]
    out = run_ptx(mma_chunk_ptx(subnormal, nb), regs)
    for t in range(nb):
        for j in range(4):
            for h in range(2):
                col = 2 * j + h
                for i in range(2):
                    batch = 8 * t + (2 * tig + i) % tb
                    want = ((q[:, gid, col] - z[gid, col]) * xs[batch].T).sum(axis=0) * unit
                    k = 16 * t + 4 * j + 2 * h + i
                    got = out[f"${k}"] - acc[k]
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * unit)
    assert AWQ_ORDER == (0, 2, 4, 6, 1, 3, 5, 7)


@pytest.mark.parametrize(("nw", "v"), [(4, 1), (4, 2), (2, 4), (8, 1)])
def test_thread_tile_puts_lane_groups_on_gid(nw: int, v: int) -> None:
    """The per-thread tiles [NW, 8, 4, V] of the kernel: V words in registers, tig on lane bits 0-1,
    gid on lane bits 2-4, warps on dim 0 (what the chunk's fragments assume)."""
    layout = blocked_for((nw, 8, 4, v), v, nw)
    assert layout.bases(LANE) == ((0, 0, 1, 0), (0, 0, 2, 0), (0, 1, 0, 0), (0, 2, 0, 0), (0, 4, 0, 0))
    assert all(b[3] for b in layout.bases(REGISTER))
    assert sorted(b[0] for b in layout.bases(WARP)) == [1 << i for i in range(nw.bit_length() - 1)]


SIG = {"x_ptr": "*i32", "qweight_ptr": "*i32", "qzeros_ptr": "*i32", "scales_ptr": "*i32", "y_ptr": "*fp32",
       "M": "i32", "N": "i32:16", "K": "i32:16", "stride_xm": "i32:16", "stride_ym": "i32:16", "NG": "i32",
       "GROUPS_PER_SPLIT": "i32", "stride_ys": "i32:16", "ws_ptr": "*fp32", "count_ptr": "*i32"}


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
@pytest.mark.parametrize(("subnormal", "per_weight", "mb", "sb"),
                         [(True, 2.6, 1, 0), (False, 2.9, 1, 0), (True, 3.4, 16, 0), (True, 2.6, 1, 16)])
def test_mma_kernelinner_loop(subnormal: bool, per_weight: float, mb: int, sb: int) -> None:
    """NW=4, V=1, U=4: 128 weights per thread and step, 16 mma per 8 rows of x, one address per
    step and B tile (the loads take immediate offsets), no shared memory, no spills. 16 rows of x:
    the weights dequantized once for both tiles (per weight well under twice the one-tile cost).
    Split K (sb > 0): the same loop; after it, the program counts itself with one acq_rel atomic
    and the last one reads the partials through L2."""
    nb = 2 if mb > 8 else 1
    ck = awq_gemv_mma_kernel.compile(SIG, {"N8": 3584, "G": 128, "NW": 4, "V": 1, "U": 4, "MB": mb, "NB": nb,
                                           "EVEN_N": True, "SUBNORMAL": subnormal, "EMULATE": False, "SB": sb},
                                     target="cuda:sm_90a", num_warps=4)
    ptx = ck.asm["ptx"]
    if sb:
        assert len(re.findall(r"atom\.[a-z_.]*add\.u32", ptx)) == 1
        assert re.search(r"fence\.acq_rel|atom\.acq_rel", ptx)
    loop = min((span for span in loop_spans(ptx) if "mma.sync" in span), key=len)  # not the partials' sum
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16", loop)) == 16 * nb
    assert len(re.findall(r"ld\.global\.b32", loop)) == 16 + 8 * nb  # 16 words + 8 x pairs per tile
    assert len(re.findall(r"add\.s64", loop)) <= 3 + nb
    for bad in ("bar.sync", "st.shared", "ld.shared", "cvt.rn.f32"):
        assert bad not in loop, bad
    n = sum(1 for line in loop.splitlines() for part in line.replace("{", ";").replace("}", ";").split(";")
            if part.strip() and not part.strip().startswith(("$", "//", ".")) and not part.strip().startswith("%"))
    assert n / 128 <= per_weight
    assert ck.metadata["n_spills"] == 0


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
@pytest.mark.parametrize(("nw", "ahead", "evict"), [(4, 1, ""), (8, 1, ""), (1, 2, ""), (8, 2, ""),
                                                  (1, 2, "evict_first"), (4, 1, "evict_first")])
def test_packed_kernel_loads_16_bytes_per_chunk(nw: int, ahead: int, evict: str) -> None:
    """awq_gemv_pack's layout (int4_packed.py): per group a thread's 32 words come in 8 loads of 16
    bytes, its x pairs in 8 of 8 bytes, the scales in one of 16 and the zeros in one word; 5 mma
    per chunk; no shared or local memory, no spills within the 128 registers awq_gemv gives it.
    ahead=2: the last group is computed after the loop, which loads no group past the split.
    EVICT: the words (only) carry the L2 policy, made once outside the loop."""
    sig = {k: v for k, v in SIG.items() if k != "GROUPS_PER_SPLIT"}
    ck = awq_gemv_packed_kernel.compile(sig, {"N8": 3584, "G": 128, "NW": nw, "MB": 1, "NB": 1, "EVEN_N": True,
                                              "EMULATE": False, "SB": 16, "AHEAD": ahead, "EVICT": evict},
                                        target="cuda:sm_90a", num_warps=nw, maxnreg=128)
    ptx = ck.asm["ptx"]
    loop = min((span for span in loop_spans(ptx) if "mma.sync" in span), key=len)
    assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16", loop)) == 40
    words = r"ld\.global\.L1::evict_first\.L2::cache_hint\.v4\.b32" if evict else r"ld\.global(\.nc)?\.v4\.b32"
    per = 8 if evict else 9  # the words (plain: and the scales)
    assert len(re.findall(words, loop)) == per and len(re.findall(words, ptx)) == per * ahead
    if ahead == 2:  # the prologue's group, the loop's next one; the peeled group's 40 mma after the loop
        assert len(re.findall(r"mma\.sync\.aligned\.m16n8k16", ptx)) == 80
    if evict:
        assert ptx.count("createpolicy.fractional.L2::evict_first") == 1 and "createpolicy" not in loop
        assert len(re.findall(r"ld\.global\.v4\.b32", loop)) == 1  # the scales: no policy
    assert len(re.findall(r"ld\.global(\.nc)?(\.L1::evict_first\.L2::cache_hint)?\.v4\.b32", loop)) == 9
    assert len(re.findall(r"ld\.global(\.nc)?\.v2\.b32", loop)) == 8
    assert len(re.findall(r"ld\.global(\.nc)?\.b32", loop)) == 1
    assert len(re.findall(r"shr\.u32\s+fs", loop)) == 32  # one per word, for nibbles 2 and 3
    for bad in ("bar.sync", "st.shared", "ld.shared", "ld.local", "st.local"):
        assert bad not in loop, bad
    assert ck.metadata["n_spills"] == 0
    assert ".maxnreg 128" in ptx and ck.metadata["n_regs"] <= 128


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
@pytest.mark.parametrize(("nw", "mb", "ranks"), [(1, 1, 4), (8, 1, 8), (2, 8, 2)])
def test_packed_kernel_sums_its_splits_in_the_cluster(nw: int, mb: int, ranks: int) -> None:
    """CLUSTER: the K splits of a tile are a thread block cluster (`.reqnctapercluster`); the
    barrier's first arrive comes before the loop, the totals go to split 0's shared memory (one
    16-byte store per 4) and split 0 sums them: no atomics, no global partials."""
    sig = {k: v for k, v in SIG.items() if k != "GROUPS_PER_SPLIT"}
    ck = awq_gemv_packed_kernel.compile(sig, {"N8": 3584, "G": 128, "NW": nw, "MB": mb, "NB": 1, "EVEN_N": True,
                                              "EMULATE": False, "SB": 0, "AHEAD": 2, "CLUSTER": ranks},
                                        target="cuda:sm_90a", num_warps=nw, maxnreg=128,
                                        cluster_dims=(1, 1, ranks))
    ptx = ck.asm["ptx"]
    values = 8 if mb == 1 else 16
    assert f".reqnctapercluster 1, 1, {ranks}" in ptx
    first_mma = ptx.index("mma.sync")
    assert ptx.index("barrier.cluster.arrive.relaxed.aligned") < first_mma < ptx.index("barrier.cluster.wait.aligned")
    assert ptx.count("st.shared::cluster.v4.f32") == values // 4 and ptx.count("mapa.shared::cluster") == 1
    assert ptx.count("ld.shared.v4.f32") == ranks * values // 4
    assert "atom." not in ptx and ck.metadata["n_spills"] == 0
    assert ck.metadata["shared"] >= ranks * 32 * nw * values * 4  # the asm's static buffer is counted
    with pytest.raises(ValueError, match="ranks 2 to 8"):
        cluster_sum_ptx(9, 32, 8)


def _pack_words(w: list[np.ndarray]) -> list[np.ndarray]:
    """A lane's words of rows 0..3 -> R0..R3 (awq_gemv_pack)."""
    lo = [v & 0xFFFF for v in w]
    hi = [v >> 16 for v in w]
    return [(lo[0] | lo[1] << 16).astype(np.uint32), (hi[0] | hi[1] << 16).astype(np.uint32),
            (lo[2] | lo[3] << 16).astype(np.uint32), (hi[2] | hi[3] << 16).astype(np.uint32)]


@pytest.mark.parametrize(("mb", "nb"), [(1, 1), (2, 1), (8, 1), (16, 2)])
def test_fold_chunk_ptx_sums_codes_times_x(mb: int, nb: int) -> None:
    """The packed kernel's chunk for 32 lanes: each column's sum of q x 2^-85 over the chunk's 16
    rows (16 q x 2^-85 for the columns of j odd; the K order permuted the same for the words and x)
    and the sum of x 2^-85: the codes as bf16 subnormals, x scaled by 2^48."""
    rng = np.random.default_rng(1)
    q = rng.integers(0, 16, (16, 8, 8))  # [row of the chunk, word column = gid, column]
    xs = _bf16(_to_bf16(rng.standard_normal((mb, 16)) * 4))
    lane = np.arange(32)
    gid, tig = lane >> 2, lane & 3
    w = 20 * nb
    bx, one = w + 4, w + 4 + 2 * nb
    regs: Regs = {f"${w + i}": r for i, r in enumerate(_pack_words([_awq_word(q[4 * tig + s, gid]) for s in range(4)]))}
    tb = min(mb, 8)
    for t in range(nb):
        xrow = xs[8 * t + gid % tb]
        regs[f"${bx + 2 * t}"] = _pack(xrow[lane, 4 * tig], xrow[lane, 4 * tig + 1])
        regs[f"${bx + 2 * t + 1}"] = _pack(xrow[lane, 4 * tig + 2], xrow[lane, 4 * tig + 3])
    for k, c in enumerate((0x00010001, 0x57805780)):
        regs[f"${one + k}"] = np.full(32, c, dtype=np.uint32)
    unit = 2.0 ** -85
    acc = (rng.standard_normal((w, 32)) * unit).astype(np.float32).astype(np.float64)
    for i in range(w):
        regs[f"${one + 2 + i}"] = acc[i]
    out = run_ptx(fold_chunk_ptx(nb), regs)
    for t in range(nb):
        for i in range(2):
            batch = 8 * t + (2 * tig + i) % tb
            for j, h in itertools.product(range(4), range(2)):
                k = 16 * t + 4 * j + 2 * h + i
                want = (q[:, gid, 2 * j + h] * xs[batch].T).sum(axis=0) * unit * (16 if j % 2 else 1)
                np.testing.assert_allclose(out[f"${k}"] - acc[k], want, rtol=1e-5, atol=1e-6 * unit)
            for r in (i, i + 2):  # D rows gid and gid + 8: the same sums of x
                k = 16 * nb + 4 * t + r
                np.testing.assert_allclose(out[f"${k}"] - acc[k], xs[batch].sum(axis=1) * unit, rtol=1e-5,
                                           atol=1e-6 * unit)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
@pytest.mark.parametrize(("nw", "stages", "keven"), [(4, 1, 1), (8, 2, 1), (2, 3, 0)])
def test_packed_kernel_streams_blocks_through_a_ring(nw: int, stages: int, keven: int) -> None:
    """awq_gemv_pack's blocks with STAGES (the warps share K): per group a warp waits on its slot's
    mbarrier, reads the words (8 shared loads of 16 bytes), the lane's scale word and the zeros
    word from the slot, refills the slot with one bulk copy (issued by lane 0 after bar.warp.sync
    and the proxy fence, with the evict_first policy) before the group's 40 mma, and loads only x
    from global memory; the ring lies in the kernel's shared memory; no spills, no local memory."""
    sig = {k: v for k, v in SIG.items() if k != "GROUPS_PER_SPLIT"}
    ck = awq_gemv_packed_kernel.compile(sig, {"N8": 1792, "G": 128, "NW": nw, "MB": 1, "NB": 1, "EVEN_N": True,
                                              "EMULATE": False, "SB": 0, "AHEAD": 1, "EVICT": "evict_first", "WK": 1,
                                              "KEVEN": keven, "BW": 1064, "STAGES": stages},
                                        target="cuda:sm_90a", num_warps=nw)
    ptx = ck.asm["ptx"]
    loop = max(loop_spans(ptx), key=len)
    assert loop.count("mbarrier.try_wait.parity.shared::cta.b64") == 1
    assert len(re.findall(r"ld\.shared\.v4\.b32", loop)) == 8 and len(re.findall(r"ld\.shared\.b32", loop)) == 2
    bulk = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
    assert loop.count(bulk) == 1 and ptx.count(bulk) == stages + 1
    issue = loop.index(bulk)
    assert loop.index("ld.shared.b32") < loop.index("bar.warp.sync") < loop.index("fence.proxy.async") < issue
    assert issue < loop.index("mma.sync") and len(re.findall(r"mma\.sync\.aligned\.m16n8k16", loop)) == 40
    assert "createpolicy.fractional.L2::evict_first" in loop
    assert len(re.findall(r"ld\.global", loop)) == 8  # x: 8 pairs per group
    assert ptx.count("mbarrier.init.shared::cta.b64") == stages
    for bad in ("ld.local", "st.local", "bar.sync"):
        assert bad not in loop, bad
    # the warps' totals: the lane's 2 columns into shared memory, one barrier, every warp's read back
    assert ptx.count("bar.sync") == 1 and ptx.count("st.shared.v2.f32") == 1
    assert ptx.count("ld.shared.v2.f32") == nw
    assert ck.metadata["n_spills"] == 0 and ck.metadata["shared"] >= ring_bytes(stages, 4256, nw) + nw * 256
