"""The low-precision GEMV/GEMM kernels on the CPU backend against float64 references, on small
and ragged shapes."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from tools.kernels.fp4 import fp4_dequantize, fp4_gemv, mxfp4_quantize, nvfp4_quantize
from tools.kernels.fp8 import fp8_dequantize, fp8_gemm, fp8_quantize
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack
from tools.kernels.w4a16 import GemvConfig, awq_gemm, awq_gemv, awq_gemv_pack


def _rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize(("N", "K", "G"), [(72, 256, 128), (8, 128, 128), (200, 192, 64)])
def test_awq_gemv(N: int, K: int, G: int) -> None:
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, G)
    wd = awq_dequantize(qw, qz, sc).double()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(1, K).to(dtype)
        y = awq_gemv(x, qw, qz, sc)
        assert y.dtype == dtype and y.shape == (1, N)
        tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
        assert _rel(y, x.double() @ wd.t()) < tol


@pytest.mark.parametrize(("N", "K", "G", "opts"), [
    (200, 512, 128, {"split_k": 3, "block_n": 64, "block_k": 8, "unroll": 2}),   # ragged N, uneven split
    (136, 256, 64, {"split_k": 4, "block_n": 32, "block_k": 4, "unroll": 4}),    # 1 group per split
    (256, 384, 128, {"split_k": 1, "block_n": 128, "block_k": 16, "unroll": 2}),  # N a multiple of the tile
])
def test_awq_gemv_configs(N: int, K: int, G: int, opts: dict[str, Any]) -> None:
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, G)
    wd = awq_dequantize(qw, qz, sc).double()
    x = torch.randn(3, K, dtype=torch.bfloat16)
    ref = x.double() @ wd.t()
    for mode in ("f32", "f32-exact"):
        y = awq_gemv(x, qw, qz, sc, GemvConfig(mode=mode, **opts))
        assert y.shape == (3, N) and _rel(y, ref) < 1e-2
    x32 = x.float()
    assert _rel(awq_gemv(x32, qw, qz, sc, GemvConfig(**opts)), ref) < 1e-5  # fp32: every nibble at full precision
    assert _rel(awq_gemv(x32, qw, qz, sc, GemvConfig(mode="f32", **opts)), ref) < 1e-4


@pytest.mark.parametrize("mode", ["bf16x2", "bf16x2-sub"])
@pytest.mark.parametrize(("N", "K", "G", "opts"), [
    (200, 512, 128, {"split_k": 3, "block_n": 64, "block_k": 8, "unroll": 2}),  # ragged N, uneven split
    (256, 256, 64, {"split_k": 1, "block_n": 128, "block_k": 4, "unroll": 8}),  # 8 rows per bf16 partial
])
def test_awq_gemv_bf16_pairs(mode: str, N: int, K: int, G: int, opts: dict[str, Any]) -> None:
    """The packed bf16 arithmetic (emulated on the CPU, the same rounding points as the PTX): the
    products of a step summed in bf16, then in fp32."""
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, G)
    wd = awq_dequantize(qw, qz, sc).double()
    x = torch.randn(2, K, dtype=torch.bfloat16) * 3
    ref = x.double() @ wd.t()
    y = awq_gemv(x, qw, qz, sc, GemvConfig(mode=mode, **opts))
    assert y.shape == (2, N) and y.dtype == torch.bfloat16
    assert _rel(y, ref) < 1e-2
    with pytest.raises(ValueError, match="needs bf16 x"):
        awq_gemv(x.float(), qw, qz, sc, GemvConfig(mode=mode, **opts))


@pytest.mark.parametrize(("N", "K", "G", "M", "opts"), [
    (200, 256, 64, 3, {"split_k": 3, "block_n": 64, "num_warps": 1, "unroll": 1}),  # ragged N, 4 rows per program
    (64, 128, 128, 1, {"block_n": 64, "num_warps": 1, "unroll": 2}),  # 2 chunks per step
    (200, 256, 64, 16, {"split_k": 2, "block_n": 64, "num_warps": 1, "unroll": 1}),  # two B tiles of 8 rows
    (128, 256, 128, 13, {"block_n": 64, "num_warps": 1, "unroll": 2}),  # two tiles, the second ragged
    (64, 128, 128, 35, {"block_n": 64, "num_warps": 1, "unroll": 1}),  # three programs along M
    (200, 512, 128, 1, {"split_k": 3, "block_n": 64, "num_warps": 1, "unroll": 2, "ahead": 2}),  # 2 steps ahead
    (64, 256, 128, 2, {"block_n": 64, "num_warps": 1, "unroll": 4, "ahead": 2}),  # ahead across groups
])
def test_awq_gemv_mma(N: int, K: int, G: int, M: int, opts: dict[str, Any]) -> None:
    """The tensor-core kernel's data flow on the CPU (its mma and bit tricks emulated with DSL
    ops; tests/quantize/test_gemv_mma_ptx.py checks the PTX itself)."""
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, G)
    wd = awq_dequantize(qw, qz, sc).double()
    x = torch.randn(M, K, dtype=torch.bfloat16) * 3
    y = awq_gemv(x, qw, qz, sc, GemvConfig(mode="mma", **opts))
    assert y.shape == (M, N) and y.dtype == torch.bfloat16
    assert _rel(y, x.double() @ wd.t()) < 1e-2
    with pytest.raises(ValueError, match="needs bf16 x"):
        awq_gemv(x.half(), qw, qz, sc, GemvConfig(mode="mma", **opts))
    with pytest.raises(ValueError, match="64 \\* num_warps"):
        awq_gemv(x, qw, qz, sc, GemvConfig(mode="mma", block_n=32, num_warps=1))
    if (N // 8) % 4:
        with pytest.raises(ValueError, match="needs N a multiple of 32"):
            awq_gemv(x, qw, qz, sc, GemvConfig(mode="mma", block_n=256, num_warps=1))


@pytest.mark.parametrize(("N", "K", "M", "opts"), [
    (200, 96, 3, {"split_k": 2, "block_n": 64, "num_warps": 1, "stages": 3}),  # ragged N, split K, 4 rows
    (64, 64, 1, {"block_n": 128, "num_warps": 1, "stages": 1}),  # 2 words per thread
])
def test_awq_gemv_mma_streamed(N: int, K: int, M: int, opts: dict[str, Any]) -> None:
    """The streamed kernel (one group of 32 rows per loop step, its loads at the top: the same on
    the CPU whatever the depth) against float64."""
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, 32)
    wd = awq_dequantize(qw, qz, sc).double()
    x = torch.randn(M, K, dtype=torch.bfloat16) * 3
    y = awq_gemv(x, qw, qz, sc, GemvConfig(mode="mma", **opts))
    assert y.shape == (M, N) and _rel(y, x.double() @ wd.t()) < 1e-2


@pytest.mark.parametrize(("N", "K"), [(200, 64), (64, 32)])
def test_awq_gemv_pack_layout(N: int, K: int) -> None:
    """Every word of the packed layout is the one its definition names: R_s of lane 4 gid + tig
    from the words w0..w3 of word column 8o + gid at rows 16c + 4tig + 0..3 (zero past N)."""
    qw = torch.randint(-2**31, 2**31 - 1, (K, N // 8), dtype=torch.int32)
    p = awq_gemv_pack(qw)
    assert p.shape == (K // 16, -(-N // 64), 32, 4) and p.is_contiguous() and p.dtype == torch.int32
    for c, o, lane in itertools.product(range(K // 16), range(p.shape[1]), range(32)):
        col = 8 * o + lane // 4
        w = [int(qw[16 * c + 4 * (lane % 4) + k, col]) & 0xFFFFFFFF if col < N // 8 else 0 for k in range(4)]
        want = [(w[0] & 0xFFFF) | (w[1] & 0xFFFF) << 16, w[0] >> 16 | (w[1] >> 16) << 16,
                (w[2] & 0xFFFF) | (w[3] & 0xFFFF) << 16, w[2] >> 16 | (w[3] >> 16) << 16]
        assert [int(v) & 0xFFFFFFFF for v in p[c, o, lane]] == want


@pytest.mark.parametrize(("N", "K", "M", "G", "opts"), [
    (72, 96, 3, 32, {"split_k": 2, "num_warps": 4}),  # 2 octets for 4 warps: two read the last one; 3 groups
    (64, 32, 1, 16, {"split_k": 2, "num_warps": 1, "ahead": 2}),  # groups of one chunk
    (64, 48, 2, 16, {"split_k": 2, "num_warps": 1, "evict_first": True}),  # splits of 1 and 2 groups
])
def test_awq_gemv_packed_weights(N: int, K: int, M: int, G: int, opts: dict[str, Any]) -> None:
    """awq_gemv on awq_gemv_pack's layout (the packed kernel: zero points folded out of the loop,
    groups balanced over the splits) against float64, with a large offset in x (the folded zero
    subtracts z times the sum of x)."""
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, G)
    wd = awq_dequantize(qw, qz, sc).double()
    x = (torch.randn(M, K) * 3 + 20).to(torch.bfloat16)
    y = awq_gemv(x, awq_gemv_pack(qw), qz, sc, GemvConfig(**opts))
    assert y.shape == (M, N) and y.dtype == torch.bfloat16 and _rel(y, x.double() @ wd.t()) < 1e-2


def test_awq_gemv_packed_weights_errors() -> None:
    qw, qz, sc = awq_quantize_pack(torch.randn(64, 64), 32)
    x = torch.randn(1, 64, dtype=torch.bfloat16)
    for mode in ("f32", "mma-sub"):
        with pytest.raises(ValueError, match="mode must be None, 'mma' or 'mma-int8'"):
            awq_gemv(x, awq_gemv_pack(qw), qz, sc, GemvConfig(mode=mode))
    with pytest.raises(ValueError, match="stages must be None or 1"):
        awq_gemv(x, awq_gemv_pack(qw), qz, sc, GemvConfig(stages=2))
    with pytest.raises(ValueError, match="block_n must be 64 \\* num_warps"):
        awq_gemv(x, awq_gemv_pack(qw), qz, sc, GemvConfig(mode="mma", block_n=512))
    with pytest.raises(ValueError, match="cluster=True needs an NVIDIA GPU of sm_90"):
        awq_gemv(x, awq_gemv_pack(qw), qz, sc, GemvConfig(split_k=2, cluster=True))
    q16, z16, s16 = awq_quantize_pack(torch.randn(64, 128), 16)
    with pytest.raises(ValueError, match="256 KiB of totals"):  # 8 splits x 512 threads x 16 totals
        awq_gemv(torch.randn(2, 128, dtype=torch.bfloat16), awq_gemv_pack(q16), z16, s16,
                 GemvConfig(num_warps=16, split_k=8, block_m=8, cluster=True))
    with pytest.raises(ValueError, match="pack qweight first"):
        awq_gemv(x, qw, qz, sc, GemvConfig(mode="mma", unroll=2, split_k=2, cluster=True))
    with pytest.raises(ValueError, match="does not take it"):
        awq_gemv(x, qw, qz, sc, GemvConfig(mode="f32", split_k=2, cluster=True))
    for mode in ("mma", "f32"):
        with pytest.raises(ValueError, match="evict_first=True applies to the kernel of awq_gemv_pack's layout"):
            awq_gemv(x, qw, qz, sc, GemvConfig(mode=mode, unroll=2, evict_first=True))
    with pytest.raises(ValueError, match="awq_gemm reads qweight in awq_gemv_pack's layout only"):
        awq_gemm(x, awq_gemv_pack(qw), qz, sc)
    with pytest.raises(ValueError, match="does not fit x"):
        awq_gemv(torch.randn(1, 32, dtype=torch.bfloat16), awq_gemv_pack(qw), qz[:1], sc[:1], GemvConfig(mode="mma"))


def test_awq_gemv_rejects_a_step_that_does_not_divide_the_group() -> None:
    qw, qz, sc = awq_quantize_pack(torch.randn(16, 128), 64)
    with pytest.raises(ValueError, match="must divide the group size"):
        awq_gemv(torch.randn(1, 128), qw, qz, sc, GemvConfig(block_k=32, unroll=4))
    with pytest.raises(ValueError, match="stages must be None or 1 to 8"):
        awq_gemv(torch.randn(1, 128).bfloat16(), qw, qz, sc, GemvConfig(mode="mma", stages=0))


@pytest.mark.parametrize(("M", "N", "K"), [(16, 64, 128), (19, 72, 256), (33, 136, 384)])
def test_awq_gemm(M: int, N: int, K: int) -> None:
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, 128)
    wd = awq_dequantize(qw, qz, sc).double()
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(M, K).to(dtype)
        y = awq_gemm(x, qw, qz, sc, block_m=16, block_n=32)
        tol = 2e-3 if dtype == torch.float16 else 1e-2
        assert _rel(y, x.double() @ wd.t()) < tol


@pytest.mark.parametrize(("M", "N", "K"), [(1, 200, 300), (37, 130, 260), (64, 128, 256)])
@pytest.mark.parametrize("scheme", ["tensor", "row", "block"])
def test_fp8_gemm(M: int, N: int, K: int, scheme: str) -> None:
    a = torch.randn(M, K)
    b = torch.randn(N, K) * 0.1
    if scheme == "block":  # DeepSeek-V3: activations in 1x128 groups, weights in 128x128 blocks
        qa, sa = fp8_quantize(a, scheme="group")
        qb, sb = fp8_quantize(b, scheme="block")
    else:
        qa, sa = fp8_quantize(a, scheme=scheme)
        qb, sb = fp8_quantize(b, scheme=scheme)
    ref = fp8_dequantize(qa, sa).double() @ fp8_dequantize(qb, sb).double().t()
    assert _rel(fp8_gemm(qa, qb, sa, sb, out_dtype=torch.float32), ref) < 1e-5
    assert _rel(fp8_gemm(qa, qb, sa, sb), ref) < 1e-2  # bf16 output


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
@pytest.mark.parametrize(("M", "N", "K"), [(1, 45, 96), (3, 64, 256)])
def test_fp4_gemv(fmt: str, M: int, N: int, K: int) -> None:
    w = torch.randn(N, K) * 0.05
    if fmt == "nvfp4":
        packed, scales, g = nvfp4_quantize(w)
    else:
        (packed, scales), g = mxfp4_quantize(w), None
    wd = fp4_dequantize(packed, scales, g)
    x = torch.randn(M, K, dtype=torch.bfloat16)
    ref = x.double() @ wd.to(torch.bfloat16).double().t()  # weights dequantized to bf16
    y = fp4_gemv(x, packed, scales, g)
    assert y.dtype == torch.bfloat16 and _rel(y, ref) < 1e-2
    y32 = fp4_gemv(x.float(), packed, scales, g)
    assert _rel(y32, ref) < 1e-5


def test_launchers_reject_bad_shapes() -> None:
    with pytest.raises(ValueError, match="multiple of 8"):
        awq_quantize_pack(torch.randn(12, 128))
    with pytest.raises(ValueError, match="group_size"):
        awq_quantize_pack(torch.randn(16, 192), 128)
    with pytest.raises(ValueError, match="block size"):
        nvfp4_quantize(torch.randn(4, 40))
    q, s = fp8_quantize(torch.randn(8, 16))
    with pytest.raises(ValueError, match="K mismatch"):
        fp8_gemm(q, fp8_quantize(torch.randn(8, 32))[0], s, s)


@pytest.mark.parametrize(("N", "K", "G"), [(200, 64, 32), (64, 128, 64)])
def test_awq_gemv_pack_blocks_layout(N: int, K: int, G: int) -> None:
    """awq_gemv_pack(qweight, qzeros, scales): block (o, g) is the 4-D layout's words of the group's
    chunks with their bytes permuted (P0 = bytes 0, 2 of R0 then of R2; P1 = bytes 1, 3; P2, P3 the
    same of R1, R3), then the fp16 scales of columns 64o .. 64o + 63 and the zeros words of word
    columns 8o .. 8o + 7 (zero past N)."""
    qw = torch.randint(-2**31, 2**31 - 1, (K, N // 8), dtype=torch.int32)
    qz = torch.randint(-2**31, 2**31 - 1, (K // G, N // 8), dtype=torch.int32)
    sc = torch.rand(K // G, N).half() + 0.5
    words, b = awq_gemv_pack(qw), awq_gemv_pack(qw, qz, sc)
    gu, octets = G // 16, -(-N // 64)
    assert b.shape == (octets, K // G, gu * 128 + 40) and b.is_contiguous() and b.dtype == torch.int32
    for o, g in itertools.product(range(octets), range(K // G)):
        r = words[g * gu:(g + 1) * gu, o].to(torch.int64) & 0xFFFFFFFF  # [chunk, lane, R0..R3]
        got = b[o, g, :gu * 128].to(torch.int64).view(gu, 32, 4) & 0xFFFFFFFF
        for s, (a, c, i) in enumerate(((0, 2, 0), (0, 2, 1), (1, 3, 0), (1, 3, 1))):
            want = sum(((r[..., src] >> (8 * i + 16 * half)) & 255) << (8 * (2 * k + half))
                       for k, src in enumerate((a, c)) for half in (0, 1))
            assert torch.equal(got[..., s], want)
        cols = [sc[g, c] if c < N else torch.tensor(0.0, dtype=torch.float16) for c in range(64 * o, 64 * o + 64)]
        assert torch.equal(b[o, g, gu * 128:gu * 128 + 32].view(torch.float16), torch.stack(cols))
        zeros = [int(qz[g, c]) if c < N // 8 else 0 for c in range(8 * o, 8 * o + 8)]
        assert b[o, g, gu * 128 + 32:].tolist() == zeros
    with pytest.raises(ValueError, match="both qzeros and scales"):
        awq_gemv_pack(qw, qz)
    with pytest.raises(ValueError, match="scales must be AutoAWQ's fp16"):
        awq_gemv_pack(qw, qz, sc.float())


@pytest.mark.parametrize(("N", "K", "G", "M", "opts", "same"), [
    (72, 96, 32, 1, {"split_k": 1, "num_warps": 4}, False),  # 3 groups for 4 warps: one scales its only step by zero
    (136, 160, 32, 1, {"split_k": 2, "num_warps": 2, "ahead": 2}, True),  # splits of 2 and 3 groups, ragged N
    (136, 256, 32, 16, {"split_k": 1, "num_warps": 4}, True),  # 16 rows: two B tiles share the weights
    (72, 96, 32, 3, {"split_k": 2, "num_warps": 2}, False),  # 3 rows in a 4-row tile
])
def test_awq_gemv_blocks_and_warp_split(N: int, K: int, G: int, M: int, opts: dict[str, Any], same: bool) -> None:
    """The warps of a program sharing K (warp_split, and the blocks layout, which reads that way):
    against float64 with an offset in x, and (same) the same sums from both layouts; one row of
    x (each lane finishing 2 columns) and several (every lane all 8)."""
    w = torch.randn(N, K) * 0.05
    qw, qz, sc = awq_quantize_pack(w, G)
    wd = awq_dequantize(qw, qz, sc).double()
    x = (torch.randn(M, K) * 3 + 20).to(torch.bfloat16)
    y = awq_gemv(x, awq_gemv_pack(qw, qz, sc), qz, sc, GemvConfig(**opts))
    assert y.shape == (M, N) and y.dtype == torch.bfloat16 and _rel(y, x.double() @ wd.t()) < 1e-2
    if same:
        assert torch.equal(y, awq_gemv(x, awq_gemv_pack(qw), qz, sc, GemvConfig(warp_split=True, **opts)))


def test_awq_gemv_blocks_errors() -> None:
    qw, qz, sc = awq_quantize_pack(torch.randn(64, 64), 32)
    x = torch.randn(1, 64, dtype=torch.bfloat16)
    b = awq_gemv_pack(qw, qz, sc)
    with pytest.raises(ValueError, match="read with warp_split=True"):
        awq_gemv(x, b, qz, sc, GemvConfig(warp_split=False))
    with pytest.raises(ValueError, match="block_n must be 64 with warp_split"):
        awq_gemv(x, b, qz, sc, GemvConfig(block_n=128))
    with pytest.raises(ValueError, match="is not awq_gemv_pack's blocks"):
        awq_gemv(torch.randn(1, 32, dtype=torch.bfloat16), b, qz[:1], sc[:1])
    with pytest.raises(ValueError, match="warp_split=True applies to the kernel of awq_gemv_pack's layout"):
        awq_gemv(x, qw, qz, sc, GemvConfig(mode="mma", unroll=2, warp_split=True))
    with pytest.raises(ValueError, match="awq_gemm reads qweight in awq_gemv_pack's layout only"):
        awq_gemm(x, b, qz, sc)
