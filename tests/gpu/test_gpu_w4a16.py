"""W4A16 AWQ GEMV/GEMM (tools/kernels/int4.py, the tensor-core kernels of int4_mma.py and
int4_packed.py, their int8 arithmetic in int4_i8.py) on the GPU: against float64 and the CPU
backend, batch 1 to 16, ragged N, every K split (the last program of each tile sums the partials:
the counters must come back to zero and the result must not depend on which program arrives
last), outputs poisoned."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial

import pytest
import torch

from tools.kernels import w4a16
from tools.kernels.int4 import awq_dequantize, awq_quantize_pack
from tools.kernels.w4a16 import GemvConfig, awq_gemv

pytestmark = pytest.mark.gpu


def _rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref).norm() / ref.norm())


_CPU: dict[tuple[int, int, int, float], torch.Tensor] = {}


def _cpu_result(N: int, K: int, M: int, *args: torch.Tensor) -> torch.Tensor:
    """The CPU backend's result for one case's inputs (one small tile: one compile per M), kept
    per shape and x (the tests of a shape draw x with and without an offset)."""
    key = (N, K, M, float(args[0].float().sum()))
    if key not in _CPU:
        _CPU[key] = awq_gemv(*args, GemvConfig(mode="mma", block_n=64, num_warps=1, unroll=4))
    return _CPU[key]


@pytest.mark.parametrize(("N", "K", "M"), [(200, 512, 1), (1000, 1024, 3), (4096, 2048, 1), (648, 512, 16),
                                           (2048, 4096, 9)])
@pytest.mark.parametrize("mode", ["mma", "mma-sub"])
@pytest.mark.parametrize("cfg", [(4, 1, 4, 1, None), (2, 4, 2, 1, None), (4, 2, 2, 2, None), (1, 1, 4, 2, None),
                                 (4, 1, 8, 1, 3), (2, 2, 8, 1, 4), (1, 1, 8, 1, 2), (2, 4, 8, 1, 3), (4, 4, 8, 1, 1)])
def test_w4a16_gpu_against_float64_and_cpu(N: int, K: int, M: int, mode: str,
                                           cfg: tuple[int, int, int, int, int | None],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """cfg: (warps, words per thread, unroll, ahead, stages); stages not None: streamed groups."""
    nw, v, u, ahead, stages = cfg
    g = torch.Generator().manual_seed(N * K + M)  # the same inputs for every mode and tile
    w = torch.randn(N, K, generator=g) * 0.05
    qw, qz, sc = awq_quantize_pack(w, 128)
    wd = awq_dequantize(qw, qz, sc).double()
    x = (torch.randn(M, K, generator=g) * 2).to(torch.bfloat16)
    ref = x.double() @ wd.t()
    cpu = _cpu_result(N, K, M, x, qw, qz, sc) if N * K * M <= 1 << 22 else None  # the CPU's emulated mma is slow
    _poison(monkeypatch)
    dev = [t.cuda() for t in (x, qw, qz, sc)]
    if v == 4 and (N // 8) % 4:
        with pytest.raises(ValueError, match="needs N a multiple of 32"):
            awq_gemv(*dev, GemvConfig(mode=mode, block_n=64 * nw * v, num_warps=nw, unroll=u))
        return
    for split in (1, 2, 3, K // 128):
        cfg = GemvConfig(mode=mode, block_n=64 * nw * v, num_warps=nw, unroll=u, split_k=split, ahead=ahead,
                         stages=stages)
        _check_splits(partial(awq_gemv, *dev, cfg), ref, cpu)
    _check_counters()


@pytest.mark.parametrize(("N", "K", "M"), [(200, 512, 1), (1000, 1024, 3), (4096, 2048, 1), (648, 512, 16),
                                           (2048, 4096, 9), (520, 1024, 8)])
@pytest.mark.parametrize(("nw", "ahead", "block_m"), [(4, None, 16), (8, None, 16), (1, None, 8), (2, 1, 16),
                                                      (4, 2, 8)])
def test_w4a16_packed_gpu_against_float64_and_cpu(N: int, K: int, M: int, nw: int, ahead: int | None, block_m: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """awq_gemv_pack's layout (int4_packed.py: zero points folded, groups balanced over the splits,
    the next group's loads ahead), x with an offset (the folded zero subtracts z times the sum of x)."""
    ref, cpu, dev = _offset_case(N, K, M, N * K + M, monkeypatch)
    dev[1] = w4a16.awq_gemv_pack(dev[1])
    for split in (1, 2, 3, 5, K // 128):
        cfg = GemvConfig(num_warps=nw, split_k=split, ahead=ahead, block_m=block_m)
        _check_splits(partial(awq_gemv, *dev, cfg), ref, cpu)
        # the words' L2 policy (the default where one program row covers x) changes no sum
        assert torch.equal(awq_gemv(*dev, replace(cfg, evict_first=True)),
                           awq_gemv(*dev, replace(cfg, evict_first=False)))
    _check_counters()


@pytest.mark.parametrize(("N", "K", "M"), [(200, 512, 1), (1000, 1024, 3), (4096, 2048, 1), (520, 1024, 8)])
@pytest.mark.parametrize(("nw", "ahead"), [(1, None), (8, None), (2, 1)])
def test_w4a16_packed_cluster_sums_match(N: int, K: int, M: int, nw: int, ahead: int | None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """cluster=True: a tile's K splits (2-8) are one thread block cluster and sum in split 0's
    shared memory; the same results as the global partials' sums (both in split order)."""
    g = torch.Generator().manual_seed(N * K + M + 1)
    w = torch.randn(N, K, generator=g) * 0.05
    qw, qz, sc = awq_quantize_pack(w, 128)
    wd = awq_dequantize(qw, qz, sc).double()
    x = (torch.randn(M, K, generator=g) * 2 + 3).to(torch.bfloat16)
    ref = x.double() @ wd.t()
    _poison(monkeypatch)
    dev = [t.cuda() for t in (x, qw, qz, sc)]
    dev[1] = w4a16.awq_gemv_pack(dev[1])
    for split in (2, 3, 5, 8):
        cfg = GemvConfig(num_warps=nw, split_k=split, ahead=ahead, block_m=8)
        clustered = partial(awq_gemv, *dev, replace(cfg, cluster=True))
        _check_splits(clustered, ref, None)
        assert torch.equal(clustered(), awq_gemv(*dev, replace(cfg, cluster=False)))
        assert torch.equal(clustered(), awq_gemv(*dev, cfg))  # the default: clusters or not, the same sums
    with pytest.raises(ValueError, match="2 to 8 programs"):
        awq_gemv(*dev, GemvConfig(num_warps=nw, split_k=1, cluster=True))


def _offset_case(N: int, K: int, M: int, seed: int, monkeypatch: pytest.MonkeyPatch
                 ) -> tuple[torch.Tensor, torch.Tensor | None, list[torch.Tensor]]:
    """A case with an offset in x (the folded zero subtracts z times the sum of x): float64 and CPU
    results (small cases), outputs poisoned, and x, qweight, qzeros, scales on the GPU."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(N, K, generator=g) * 0.05
    qw, qz, sc = awq_quantize_pack(w, 128)
    wd = awq_dequantize(qw, qz, sc).double()
    x = (torch.randn(M, K, generator=g) * 2 + 3).to(torch.bfloat16)
    cpu = _cpu_result(N, K, M, x, qw, qz, sc) if N * K * M <= 1 << 22 else None
    _poison(monkeypatch)
    return x.double() @ wd.t(), cpu, [t.cuda() for t in (x, qw, qz, sc)]


def _poison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs (torch.empty in w4a16) and the split-K partials (the scratch is kept per stream) NaN."""
    real_empty = torch.empty

    def poisoned(*shape: object, **kw: object) -> torch.Tensor:
        t = real_empty(*shape, **kw)  # type: ignore[call-overload]
        if t.is_floating_point():
            t.fill_(float("nan"))
        return t

    monkeypatch.setattr(w4a16.torch, "empty", poisoned)
    monkeypatch.setattr(w4a16, "_SCRATCH", {})


def _check_splits(run: Callable[[], torch.Tensor], ref: torch.Tensor, cpu: torch.Tensor | None) -> None:
    y = run()
    for _ in range(3):  # the counters are back at zero: the same sums again
        assert torch.equal(y, run())
    assert not torch.isnan(y).any()
    assert _rel(y.cpu(), ref) < 1e-2
    if cpu is not None:
        assert _rel(y.cpu(), cpu.double()) < 1e-2


def _check_counters() -> None:
    for _, counts in w4a16._SCRATCH.values():
        if counts.is_cuda:
            assert int(counts.abs().sum()) == 0


@pytest.mark.parametrize(("N", "K", "M"), [(200, 512, 1), (1000, 1024, 3), (4096, 2048, 1), (520, 1024, 8),
                                           (648, 512, 16)])
@pytest.mark.parametrize(("nw", "stages"), [(4, None), (8, 3), (2, 4), (1, 2), (4, 0), (8, 0)])
def test_w4a16_blocks_gpu_against_float64_and_cpu(N: int, K: int, M: int, nw: int, stages: int | None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """awq_gemv_pack's blocks (words, scales and zeros of an octet's group in one block; the warps
    of a program share K): streamed through each warp's ring of shared-memory slots by bulk copies
    (stages None: 1 slot, or 3, 4 and 2), or read by plain loads (stages=0). Splits of K whose group
    counts the warps do not divide (their last steps scale a group by zero), ragged N, 16 rows of x
    in one program; the same sums as the 4-D layout read by the same warps (warp_split) in the bf16
    arithmetic (the blocks' permuted words brought back)."""
    ref, cpu, dev = _offset_case(N, K, M, N * K + M + 2, monkeypatch)
    blocks = w4a16.awq_gemv_pack(dev[1], dev[2], dev[3])
    packed = w4a16.awq_gemv_pack(dev[1])
    bm = 16 if M > 8 else 8  # 16 rows: two 8-row B tiles share the weights
    for split in (1, 2, 3, K // 128):
        run = partial(awq_gemv, dev[0], blocks, dev[2], dev[3],
                      GemvConfig(num_warps=nw, split_k=split, stages=stages, block_m=bm, mode="mma"))
        _check_splits(run, ref, cpu)
        same = awq_gemv(dev[0], packed, dev[2], dev[3],
                        GemvConfig(num_warps=nw, split_k=split, block_m=bm, warp_split=True, ahead=1))
        assert torch.equal(run(), same)
    _check_counters()


@pytest.mark.parametrize(("N", "K", "nw", "split", "stages"), [(200, 512, 8, 1, None), (200, 512, 4, 3, 2),
                                                             (1000, 1024, 2, 2, None), (4096, 2048, 8, 1, None)])
def test_w4a16_int8_gpu_against_cpu_bits(N: int, K: int, nw: int, split: int, stages: int | None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Mode "mma-int8" (the blocks layout's batch-1 default for groups of 128): the GPU's sums are the
    CPU backend's bit for bit (the same integers, the same fp32 folds in the same order), within
    the cut's bound of float64 and repeatable (K splits: the counters come back to zero)."""
    g = torch.Generator().manual_seed(N + K + nw)
    qw, qz, sc = awq_quantize_pack(torch.randn(N, K, generator=g) * 0.05, 128)
    wd = awq_dequantize(qw, qz, sc).double()
    x = (torch.randn(1, K, generator=g) * 2 + 3).to(torch.bfloat16)
    x[0, 3] = 700.0  # a group whose small elements are cut
    blocks = w4a16.awq_gemv_pack(qw, qz, sc)
    cfg = GemvConfig(mode="mma-int8", num_warps=nw, split_k=split)
    cpu = awq_gemv(x, blocks, qz, sc, cfg) if N * K <= 1 << 20 else None
    _poison(monkeypatch)
    dev = [t.cuda() for t in (x, blocks, qz, sc)]
    run = partial(awq_gemv, *dev, GemvConfig(num_warps=nw, split_k=split, stages=stages))
    y = run()
    assert torch.equal(y, awq_gemv(*dev, GemvConfig(mode="mma-int8", num_warps=nw, split_k=split, stages=stages)))
    for _ in range(3):
        assert torch.equal(y, run())
    if cpu is not None:
        assert torch.equal(y.cpu(), cpu)
    xg = x.double().view(-1, 128)
    unit = (2.0 ** (torch.floor(torch.log2(xg.abs().amax(dim=1))) - 14)).repeat_interleave(128)
    ref = (x.double() @ wd.t())[0]
    bound = wd.abs() @ unit + ref.abs() * 2 ** -8 + (wd.abs() @ x.double().abs()[0]) * 2 ** -20
    assert ((y[0].cpu().double() - ref).abs() <= bound).all()
    _check_counters()


@pytest.mark.parametrize("scale", [2.0 ** 70, 2.0 ** -36, 1.0])
@pytest.mark.parametrize("M", [1, 16])
def test_w4a16_packed_x_far_from_one(scale: float, M: int) -> None:
    """The packed kernel scales x by 2^48 and takes the codes as subnormals (fold_chunk_ptx): x of
    magnitude 2^70 (no overflow) and 2^-36 (normal products) gives the float64 result; both layouts."""
    torch.manual_seed(7)
    N, K = 520, 1024
    qw, qz, sc = awq_quantize_pack(torch.randn(N, K, device="cuda") * 0.02, 128)
    x = (torch.randn(M, K, device="cuda") * scale).to(torch.bfloat16)
    ref = x.double() @ awq_dequantize(qw, qz, sc, torch.float32).double().t()
    for qweight in (w4a16.awq_gemv_pack(qw), w4a16.awq_gemv_pack(qw, qz, sc)):
        y = awq_gemv(x, qweight, qz, sc)
        assert torch.isfinite(y).all()
        assert _rel(y.double(), ref) < 1e-2
