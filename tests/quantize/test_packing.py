"""The packing orders and test vectors of docs/quantization.md, and fp8 casts bit for bit against torch."""

from __future__ import annotations

import pytest
import torch

from tools.kernels.fp4 import E2M1_VALUES, fp4_dequantize, mxfp4_quantize, nvfp4_quantize
from tools.kernels.fp8 import FP8_MAX, fp8_cast, fp8_dequantize, fp8_quantize
from tools.kernels.int4 import AWQ_ORDER, awq_dequantize, awq_quantize_pack, awq_shift, awq_unpack

FP8 = [torch.float8_e4m3fn, torch.float8_e5m2]


def test_awq_shift_order() -> None:
    assert [awq_shift(AWQ_ORDER[i]) for i in range(8)] == [4 * i for i in range(8)]
    assert [awq_shift(j) // 4 for j in range(8)] == [0, 4, 1, 5, 2, 6, 3, 7]


def test_awq_test_vector_through_the_kernel() -> None:
    # Rows 0..7 hold the codes in column 0; columns 1 and 2 pin each group's range to [0, 15],
    # so that scale = 1 and zero = 0 and the codes are the values themselves.
    cols = [7, 8, 12, 15, 0, 2, 13, 15]
    w = torch.zeros(8, 128)
    w[:, 0] = torch.tensor(cols, dtype=torch.float32)
    w[:, 2] = 15.0
    qweight, qzeros, scales = awq_quantize_pack(w, 128)
    assert qweight[0, 0].item() & 0xFFFFFFFF == 0xF2F8D0C7
    assert torch.equal(scales.float(), torch.ones(1, 8))
    assert torch.equal(qzeros, torch.zeros(1, 1, dtype=torch.int32))
    assert awq_unpack(qweight)[0].tolist() == cols


def test_awq_unpack_inverts_the_spec_packing() -> None:
    codes = torch.randint(0, 16, (5, 24), dtype=torch.int32)
    packed = torch.zeros(5, 3, dtype=torch.int64)
    for j in range(8):
        packed |= codes[:, j::8].long() << awq_shift(j)
    packed = ((packed + 2**31) % 2**32 - 2**31).to(torch.int32)
    assert torch.equal(awq_unpack(packed).int(), codes)


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_vectors(dtype: torch.dtype) -> None:
    x = torch.tensor([[464.0, 465.0, 2.0**-10, 2.0**-9, -1e9, 448.0, 0.0, -0.0]])
    got = fp8_cast(x, dtype).view(torch.uint8)[0].tolist()
    if dtype == torch.float8_e4m3fn:
        assert got[:4] == [0x7E, 0x7E, 0x00, 0x01]  # docs/quantization.md#fp8
    m = FP8_MAX[dtype]
    assert got == x.clamp(-m, m).to(dtype).view(torch.uint8)[0].tolist()


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_cast_bit_for_bit_with_torch(dtype: torch.dtype) -> None:
    m = FP8_MAX[dtype]
    x = torch.cat([torch.randn(40, 67) * s for s in (1e-6, 1e-3, 1.0, 30.0, m / 2, 4 * m)])
    bits = torch.randint(0, 2**31 - 1, (10, 67), dtype=torch.int32)  # arbitrary finite fp32 patterns
    y = bits.view(torch.float32)
    x = torch.cat([x, torch.where(torch.isfinite(y), y, 0.0)])
    ref = x.clamp(-m, m).to(dtype).view(torch.uint8)
    assert torch.equal(fp8_cast(x, dtype).view(torch.uint8), ref)
    codes = torch.arange(256, dtype=torch.uint8).view(dtype).reshape(16, 16)
    got, want = fp8_dequantize(codes, torch.ones(())), codes.float()
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(), want.nan_to_num())


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("scheme", ["tensor", "channel", "group", "block"])
def test_fp8_quantize_matches_torch(dtype: torch.dtype, scheme: str) -> None:
    m = FP8_MAX[dtype]
    R, C = 150, 200  # ragged against the 128-wide blocks
    x = torch.randn(R, C) * 3
    x[7] *= 100
    x[20] = 0.0  # a zero row: scale 1
    q, s = fp8_quantize(x, dtype, scheme)
    pad = torch.nn.functional.pad(x, (0, 256 - C, 0, 256 - R))
    if scheme == "tensor":
        sref = x.abs().amax() / m
        full = sref
    elif scheme == "channel":
        amax = x.abs().amax(1, keepdim=True)
        sref = torch.where(amax > 0, amax / m, 1.0)
        full = sref
    elif scheme == "group":
        amax = pad[:R].reshape(R, 2, 128).abs().amax(-1)
        sref = torch.where(amax > 0, amax / m, 1.0)
        full = sref.repeat_interleave(128, 1)[:, :C]
    else:
        amax = pad.reshape(2, 128, 2, 128).abs().amax((1, 3))
        sref = amax / m
        full = sref.repeat_interleave(128, 0).repeat_interleave(128, 1)[:R, :C]
    assert torch.equal(s.reshape(sref.shape), sref)
    qref = (x / full).clamp(-m, m).to(dtype)
    assert torch.equal(q.view(torch.uint8), qref.view(torch.uint8))
    assert torch.equal(fp8_dequantize(q, s), qref.float() * full)


def _e2m1_reference(y: torch.Tensor) -> torch.Tensor:
    """Nearest e2m1 code, ties to the even code (docs/quantization.md#fp4-e2m1), by brute force over
    the 8 magnitudes."""
    values = torch.tensor(E2M1_VALUES, dtype=torch.float64)
    d = (y.double().abs()[..., None] - values).abs()  # exact for fp32 inputs
    tie_break = (torch.arange(8) % 2 == 0).double() * 1e-12  # prefer even codes among equals
    code = (d - tie_break).argmin(-1)
    return torch.where(y < 0, code | 8, code)


def _decode(code: torch.Tensor) -> torch.Tensor:
    v = torch.tensor(E2M1_VALUES)[code & 7]
    return torch.where(code & 8 != 0, -v, v)


def _nibbles(packed: torch.Tensor) -> torch.Tensor:
    p = packed.to(torch.int64)
    return torch.stack([p & 0xF, p >> 4], -1).reshape(p.shape[0], -1)  # even element in the low nibble


def test_e2m1_codes_and_ties() -> None:
    # One MXFP4 block whose amax is 4, so that its scale is 2^(floor(log2 4) - 2) = 1.
    vals = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0]
    x = torch.tensor([vals + [-v for v in vals]], dtype=torch.float32)
    x[0, 13:16] = torch.tensor([4.0, 3.0, 4.0])
    x[0, 29:32] = torch.tensor([-4.0, -3.0, -4.0])
    packed, scales = mxfp4_quantize(x)
    assert scales.tolist() == [[127]]
    codes = _nibbles(packed)[0]
    assert torch.equal(codes, _e2m1_reference(x[0]))
    # 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0, 3.5 -> 4.0: ties to the even code.
    assert codes[:13].tolist() == [0, 0, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 6]
    assert codes[17].item() == 8 | 0
    assert torch.equal(fp4_dequantize(packed, scales)[0], _decode(codes))


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4"])
def test_fp4_matches_spec_reference(fmt: str) -> None:
    N, K = 21, 96
    w = torch.randn(N, K) * 0.05
    w[2, :32] = 0.0  # an all-zero block
    w[4, 5] = 3.0  # an outlier
    if fmt == "nvfp4":
        packed, bs, g = nvfp4_quantize(w)
        gref = w.abs().amax() / (448 * 6)
        assert g.item() == gref.item()
        bref = (w.reshape(N, -1, 16).abs().amax(-1) / 6 / gref).clamp(2.0**-6, 448).to(torch.float8_e4m3fn)
        assert torch.equal(bs.view(torch.uint8), bref.view(torch.uint8))
        sv = bref.float() * gref
        codes = _e2m1_reference((w.reshape(N, -1, 16) / sv[..., None]).clamp(-6, 6)).reshape(N, K)
        deq = (_decode(codes).reshape(N, -1, 16) * bref.float()[..., None] * gref).reshape(N, K)
        assert torch.equal(_nibbles(packed), codes)
        assert torch.equal(fp4_dequantize(packed, bs, g), deq)
    else:
        packed, e8 = mxfp4_quantize(w)
        amax = w.reshape(N, -1, 32).abs().amax(-1)
        e = torch.where(amax > 0, (torch.floor(torch.log2(amax)) + 125).clamp(0, 254), 0.0).to(torch.int64)
        assert torch.equal(e8.to(torch.int64), e)
        sv = torch.exp2(e.double() - 127).float()
        codes = _e2m1_reference((w.reshape(N, -1, 32) / sv[..., None]).clamp(-6, 6)).reshape(N, K)
        assert torch.equal(_nibbles(packed), codes)
        deq = (_decode(codes).reshape(N, -1, 32) * sv[..., None]).reshape(N, K)
        assert torch.equal(fp4_dequantize(packed, e8), deq)


def test_autoawq_dequantization_formula_reproduces_ours() -> None:
    """AutoAWQ's dequantize_gemm, written from the spec: unpack, undo the order, (q - z) * s in fp16."""
    N, K, G = 48, 256, 128
    w = torch.randn(N, K) * 0.02
    qweight, qzeros, scales = awq_quantize_pack(w, G)

    def unpack(packed: torch.Tensor) -> torch.Tensor:
        shifts = torch.arange(0, 32, 4)
        nib = (packed[:, :, None] >> shifts[None, None, :]) & 0xF  # nibble i -> column AWQ_ORDER[i]
        cols = torch.empty_like(nib)
        cols[:, :, list(AWQ_ORDER)] = nib
        return cols.reshape(packed.shape[0], -1)

    iweight = unpack(qweight)  # [K, N]
    izeros = unpack(qzeros).repeat_interleave(G, dim=0)  # [K, N]
    s = scales.repeat_interleave(G, dim=0)  # fp16 [K, N]
    ref16 = ((iweight - izeros).to(torch.float16) * s).t()
    ref32 = ((iweight - izeros).float() * s.float()).t()
    assert torch.equal(awq_dequantize(qweight, qzeros, scales, torch.float16), ref16)
    assert torch.equal(awq_dequantize(qweight, qzeros, scales, torch.float32), ref32)
