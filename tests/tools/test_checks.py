"""Output stats and reference checks: computed on the tensor's device, only scalars to the host, and
equal to a plain float64 evaluation of the same rules on random data with NaN, infinities, poison and
mismatches sprinkled in."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from tools.checks import (
    compare,
    compare_fast_vector,
    compare_full_vector,
    default_tolerance,
    stats_fast_vector,
    stats_full_vector,
    tensor_stats,
)
from tools.specs import DTYPES
from tools.tensors import poison_, poison_mask

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def test_the_device_side_runs_on_the_meta_device() -> None:
    """The vectors are built without reading one element: a meta tensor (which has no data) goes through,
    and what comes back is a handful of scalars."""
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        x = torch.empty(1 << 24, dtype=dtype, device="meta")
        assert stats_fast_vector(x).shape == (4,) and stats_fast_vector(x).device.type == "meta"
        assert stats_full_vector(x, poison_mask(x)).shape == (6,)
        w = torch.empty(1 << 24, dtype=torch.float32, device="meta")
        assert compare_fast_vector(x.float(), w, 1e-4, 1e-4).shape == (3,)
        bad, summary = compare_full_vector(x.float(), w, 1e-4, 1e-4)
        assert summary.shape == (4,) and bad.shape == x.shape
    ints = torch.empty(1 << 20, dtype=torch.int64, device="meta")
    assert stats_fast_vector(ints).shape == (4,) and compare_full_vector(ints, ints, 0, 0)[1].shape == (4,)


class _HostReads(torch.utils._python_dispatch.TorchDispatchMode):
    """Records every tensor that crosses to the host (copies to the CPU, item())."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = str(func)
        if "_local_scalar_dense" in name:
            self.sizes.append(args[0].numel())
        if ("_to_copy" in name or "copy_" in name) and isinstance(args[0], torch.Tensor):
            source = args[0] if "_to_copy" in name else args[1]
            target = kwargs.get("device") if "_to_copy" in name else args[0].device
            if source.device.type != "cpu" and target is not None and torch.device(target).type == "cpu":
                self.sizes.append(source.numel())
        return func(*args, **kwargs)


@pytest.mark.parametrize("device", DEVICES)
def test_only_scalars_reach_the_host(device: str) -> None:
    n = 1 << 20
    out = torch.randn(n, device=device)
    want = out + 1e-6
    with _HostReads() as reads:
        stats = tensor_stats(out, poisoned=True)
        check = compare(out, want, reference="r")
    assert stats.unwritten_count == 0 and check.passed
    assert all(size <= 16 for size in reads.sizes), reads.sizes


def _reference_compare(out: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> tuple[int, float,
                                                                                                     float, int]:
    """The rules in float64, elementwise, as plainly as they can be written."""
    got, want = out.double().reshape(-1).tolist(), torch.broadcast_to(expected, out.shape).double().reshape(-1).tolist()
    bad, max_abs, max_rel, first = 0, 0.0, 0.0, -1
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        finite = math.isfinite(g) and math.isfinite(w)
        d = abs(g - w) if finite else 0.0
        ok = g == w or (math.isnan(g) and math.isnan(w)) or (finite and d <= atol + rtol * abs(w))
        if not ok:
            bad += 1
            first = i if first < 0 else first
        max_abs = max(max_abs, d)
        if finite and d > 0:
            max_rel = max(max_rel, d / max(abs(w), 2.2250738585072014e-308))
    return bad, max_abs, max_rel, first


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("seed", range(4))
def test_compare_matches_the_plain_rules(dtype: str, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    torch_dtype = DTYPES[dtype].torch_dtype
    n = int(torch.randint(1, 700, (1,), generator=gen))
    want = torch.randn(n, generator=gen, dtype=torch.float64)
    atol, rtol = default_tolerance(torch_dtype)
    got = (want + torch.randn(n, generator=gen, dtype=torch.float64) * atol / 4).to(torch_dtype)
    if seed >= 1:  # some far off, NaN, infinities and poison on either side
        picks = torch.randint(0, n, (6,), generator=gen).tolist()
        got[picks[0]] += 3.0
        got[picks[1]] = float("nan")
        want[picks[2]] = float("inf")
        got[picks[3]] = float("-inf")
        want[picks[4]] = float("nan")
        poison_(got[picks[5]:picks[5] + 1])
    if seed == 3:  # NaN against NaN and the same infinity on both sides are matches
        got[0], want[0] = float("nan"), float("nan")
        if n > 1:
            got[1], want[1] = float("inf"), float("inf")
    check = compare(got, want, reference="r")
    narrow = compare(got, want.to(torch.float32), reference="r")  # float32 on both sides: compared in float32
    assert narrow.mismatched == _reference_compare(got, want.to(torch.float32), atol, rtol)[0] or dtype == "float64"
    bad, max_abs, max_rel, first = _reference_compare(got, want, atol, rtol)
    assert check.mismatched == bad and check.passed == (bad == 0)
    assert check.max_abs_error == pytest.approx(max_abs, rel=1e-6, abs=1e-12)
    assert (check.max_rel_error or math.inf) == pytest.approx(max_rel or math.inf, rel=1e-5)
    if bad:
        assert check.first_mismatch is not None and check.first_mismatch.index == [first]


def test_compare_integers_broadcasts_and_exactness() -> None:
    got = torch.tensor([[1, 2, 3], [4, 5, 7]], dtype=torch.int32)
    check = compare(got, torch.tensor([1, 2, 3]).repeat(2, 1) + torch.tensor([[0], [3]]), reference="r")
    assert check.mismatched == 1 and check.first_mismatch is not None and check.first_mismatch.index == [1, 2]
    assert check.max_abs_error == 1.0
    assert compare(torch.full((4, 5), 2.0), torch.tensor(2.0), reference="r").passed
    assert compare(torch.full((4, 5), 2.0), 2, reference="r").passed
    assert not compare(torch.ones(3, dtype=torch.int64), torch.tensor([1.0, 1.5, 1.0]), reference="r").passed
    big = torch.tensor([2**62 + 1], dtype=torch.int64)
    assert not compare(big, torch.tensor([2**62], dtype=torch.int64), reference="r").passed


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64", "int32", "int8", "uint8", "bool"])
def test_stats_match_the_plain_rules(dtype: str) -> None:
    gen = torch.Generator().manual_seed(7)
    spec = DTYPES[dtype]
    n = 333
    if spec.is_float:
        t = torch.randn(n, generator=gen).to(spec.torch_dtype)
        t[5], t[9], t[11] = float("nan"), float("inf"), float("-inf")
        t[20:27] = 0.0
        t[30] = -0.0
    else:
        t = torch.randint(0, 2 if dtype == "bool" else 100, (n,), generator=gen).to(spec.torch_dtype)
    poison_(t[100:117])
    stats = tensor_stats(t, poisoned=True)
    values = t.double().tolist()
    finite = [v for v in values if math.isfinite(v)]
    assert stats.nan_count == sum(math.isnan(v) for v in values)
    assert stats.inf_count == sum(math.isinf(v) for v in values)
    assert stats.zero_count == sum(v == 0 for v in values) and stats.zero_count >= (8 if spec.is_float else 1)
    assert stats.unwritten_count == (0 if dtype == "bool" else 17)
    assert stats.min == min(finite) and stats.max == max(finite)
    assert stats.mean == pytest.approx(sum(finite) / len(finite), rel=1e-9)
    clean = tensor_stats(t[:100], poisoned=True)
    assert clean.unwritten_count == 0 and clean.nan_count == (1 if spec.is_float else 0)
