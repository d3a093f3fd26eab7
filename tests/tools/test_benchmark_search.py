"""benchmark's own config search (autotune=true) and its input sets fitted to the limits."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from server.demo import SOFTMAX, VECTOR_ADD
from tools.autotune import block_constexprs, block_round, launch_round
from tools.bench import benchmark
from tools.errors import ToolInputError
from tools.limits import Limits
from tools.models import BenchConfig, BenchmarkRequest
from tools.runtime import Runtime

N = 3000


def _request(**changes: Any) -> BenchmarkRequest:
    args = {"x_ptr": {"shape": [N]}, "y_ptr": {"shape": [N]}, "out_ptr": {"shape": [N], "init": "empty"}, "n": N}
    base: dict[str, Any] = {"source": VECTOR_ADD, "constexprs": {"BLOCK": 256}, "grid": ["cdiv(n, BLOCK)"],
                            "args": args, "reference": {"out_ptr": "x_ptr + y_ptr"}, "warmup_ms": 1, "rep_ms": 1}
    return BenchmarkRequest(**(base | changes))


def test_the_search_space() -> None:
    assert block_constexprs({"BLOCK_M": 64, "BLOCK_N": 32, "GROUP": 8, "TILE": 3, "EVEN": True}) == \
        {"BLOCK_M": 64, "BLOCK_N": 32}
    # the short and per-program names kernels use for their tiles
    assert block_constexprs({"BM": 64, "BN": 32, "BK": 16, "GROUP_M": 8}) == {"BM": 64, "BN": 32, "BK": 16}
    assert block_constexprs({"ROWS": 4, "BLOCK_D": 64, "WARPS": 4}) == {"ROWS": 4, "BLOCK_D": 64}
    assert block_constexprs({"ROWS_PER_PROGRAM": 2, "CHUNK": 32, "SUBROWS": 8, "BMX": 4}) == \
        {"ROWS_PER_PROGRAM": 2, "CHUNK": 32}
    one = block_round({"BLOCK": 256}, 16)
    assert one[0] == {"BLOCK": 256} and sorted(c["BLOCK"] for c in one) == [64, 128, 256, 512, 1024]
    two = block_round({"BLOCK_M": 64, "BLOCK_N": 64}, 16)  # 25 combinations do not fit: steps of 2
    assert len(two) == 9 and two[0] == {"BLOCK_M": 64, "BLOCK_N": 64}
    three = block_round({"A_BLOCK": 64, "B_BLOCK": 64, "C_BLOCK": 64}, 16)  # 27 do not fit either: one at a time
    assert len(three) <= 16 and three[0] == {"A_BLOCK": 64, "B_BLOCK": 64, "C_BLOCK": 64}
    assert all(sum(v != 64 for v in c.values()) <= 1 for c in three)
    small = block_round({"BLOCK": 16}, 16)
    assert small[0] == {"BLOCK": 16} and min(c["BLOCK"] for c in small) == 16
    warps = launch_round(BenchConfig(constexprs={"BLOCK": 128}), 16)
    assert len(warps) == 9 and {(c.num_warps, c.num_stages) for c in warps} >= {(4, 3), (8, 2)}


def test_autotune_searches_block_sizes_and_reports_every_config() -> None:
    rt = Runtime()
    result = anyio.run(benchmark, rt, _request(autotune=True, baseline="x_ptr + y_ptr"))
    blocks = [r.config.constexprs["BLOCK"] for r in result.results]
    assert sorted(blocks) == [64, 128, 256, 512, 1024] and blocks[0] == 256  # the given value first
    assert all(r.passed for r in result.results) and result.best is not None
    assert result.best_kernel_id == result.results[result.best].kernel_id
    fastest = min(result.results, key=lambda r: r.timing.median_us if r.timing else 1e9)
    assert result.results[result.best] is fastest or result.results[result.best] == fastest
    assert result.autotune and result.autotune[0].startswith("round 1 (block sizes): 5 configs, best BLOCK=")
    assert result.baseline is not None and result.speedup is not None and "autotune: 5 configs" in result.method
    assert f"best config #{result.best} (BLOCK={blocks[result.best]})" in result.summary


def test_autotune_never_picks_a_config_that_fails_its_check() -> None:
    """A row softmax needs BLOCK >= the row: the smaller blocks compute wrong sums and are reported, not picked."""
    rows, cols = 8, 200
    args = {"x_ptr": {"shape": [rows, cols]}, "y_ptr": {"shape": [rows, cols], "init": "empty"}, "n_cols": cols,
            "stride": cols}
    req = BenchmarkRequest(source=SOFTMAX, constexprs={"BLOCK": 256}, grid=[rows], args=args, warmup_ms=1, rep_ms=1,
                           reference={"y_ptr": "torch.softmax(x_ptr, dim=-1)"}, autotune=True)
    result = anyio.run(benchmark, Runtime(), req)
    by_block = {r.config.constexprs["BLOCK"]: r for r in result.results}
    assert by_block[64].passed is False and by_block[128].passed is False and by_block[256].passed is True
    assert result.best is not None and result.results[result.best].config.constexprs["BLOCK"] >= 256
    # the search's own candidates that fail are dropped, not the call's failure: the best one passed
    assert result.passed is True and "outputs PASSED (searched configs that failed the check, dropped: #" in \
        result.summary and "BLOCK=64" in result.summary, result.summary


def test_autotune_refusals() -> None:
    rt = Runtime()
    with pytest.raises(ToolInputError, match="not both"):
        anyio.run(benchmark, rt, _request(autotune=True, configs=[BenchConfig(constexprs={"BLOCK": 64})]))
    plain = VECTOR_ADD.replace("BLOCK", "WIDTH")
    with pytest.raises(ToolInputError, match="nothing to search"):
        anyio.run(benchmark, rt, _request(source=plain, constexprs={"WIDTH": 256}, grid=["cdiv(n, WIDTH)"],
                                          autotune=True))


def test_input_sets_are_fitted_to_the_limits() -> None:
    """3 tensors of 3000 elements: 9000 per set. With room for 30000 elements, 3 sets (4 copies, one for the
    outputs' restore copies) do not fit; 2 do. With room for less than two copies, the call is refused."""
    rt = Runtime(limits=Limits(max_call_elements=30_000))
    result = anyio.run(benchmark, rt, _request(input_sets=3))
    assert result.input_sets == 2 and "2 input set(s) (3 asked: fewer copies fit" in result.method
    assert result.results[0].passed is True
    with pytest.raises(ToolInputError, match="limit is 15000"):
        anyio.run(benchmark, Runtime(limits=Limits(max_call_elements=15_000)), _request(input_sets=3))
    launch_sized = Runtime(limits=Limits(max_call_elements=18_000))  # two copies exactly: one set
    assert anyio.run(benchmark, launch_sized, _request(input_sets=8)).input_sets == 1


def test_timed_runs_stop_when_flushes_outlast_the_kernel() -> None:
    """A flush (here a restore) that costs far more than the run must not keep the loop going until the
    call's deadline: once MIN_RUNS are in, the loop's wall clock is bounded by a few times rep_ms."""
    import time

    from tools.bench_job import MIN_RUNS, WALL_FACTOR, time_runs

    runs: list[float] = []
    start = time.perf_counter()
    times = time_runs(lambda s: runs.append(time.perf_counter()), [{}], lambda s: time.sleep(0.02), device="cpu",
                      warmup_ms=1, rep_ms=20, flush=None, deadline=start + 30)
    elapsed = time.perf_counter() - start
    assert len(times) >= MIN_RUNS and all(t >= 0 for t in times)
    # 10 runs of 20 ms restores are already past WALL_FACTOR * rep_ms: the loop stops at MIN_RUNS
    assert len(times) == MIN_RUNS and elapsed < MIN_RUNS * 0.02 + WALL_FACTOR * 0.02 + 1.0
    # a fast loop still runs until rep_ms of measured time
    fast = time_runs(lambda s: time.sleep(0.002), [{}], lambda s: None, device="cpu", warmup_ms=1, rep_ms=30,
                     flush=None, deadline=time.perf_counter() + 30)
    assert sum(fast) >= 30e3 and len(fast) >= MIN_RUNS


def test_the_summary_says_when_timings_are_noisy() -> None:
    """A spread past NOISY_PCT (another process on the device) is said in the one-line summary; a quiet run's
    summary says nothing of it."""
    from tools.bench_configs import NOISY_PCT, summarize

    def timing(median: float, noise: float) -> dict[str, Any]:
        return {"median_us": median, "p10_us": median, "p90_us": median * (1 + noise / 100), "min_us": median,
                "n": 10, "noise_pct": noise}

    config = {"config": {"constexprs": {"BLOCK": 256}}, "kernel_id": "k1", "gbps": 1.0, "passed": True}
    quiet = summarize("add_kernel", "cpu", [config | {"timing": timing(10.0, 5.0)}], timing(20.0, 8.0), {})
    assert quiet["speedup"] == 2.0 and "NOISY" not in quiet["summary"]
    loud = summarize("add_kernel", "cpu", [config | {"timing": timing(10.0, 5.0)}], timing(20.0, NOISY_PCT * 6),
                     {})
    assert f"NOISY (baseline {NOISY_PCT * 6:.0f}% spread)" in loud["summary"] and "rep_ms" in loud["summary"]
    # the speedup's range: the baseline's p10 over the kernel's p90 to its p90 over the kernel's p10
    high = 20.0 * (1 + NOISY_PCT * 6 / 100) / 10.0
    assert f"speedup could be anywhere from {20.0 / 10.5:.2f}x to {high:.2f}x" in loud["summary"]
    assert NOISY_PCT <= 30  # a spread of 70-100% (seen on a loaded machine) must be called noisy
    both = summarize("add_kernel", "cpu", [config | {"timing": timing(10.0, 250.0)}], None, {})
    assert "NOISY (kernel 250% spread)" in both["summary"]


def test_configs_and_the_baseline_are_timed_in_interleaved_rounds() -> None:
    """A change of the device's load during a call falls on every config and the baseline alike: each takes
    a turn per round. Each still gets at least MIN_RUNS runs, and each config's timed runs are checked
    against its own checked runs (not those of the config timed after it)."""
    from tools.bench_job import MIN_RUNS, ROUNDS

    seen: list[str] = []

    async def progress(done: float, total: float | None, message: str) -> None:
        seen.append(message)

    configs = [BenchConfig(constexprs={"BLOCK": 128}), BenchConfig(constexprs={"BLOCK": 512})]
    result = anyio.run(benchmark, Runtime(), _request(configs=configs, baseline="x_ptr + y_ptr"), progress)
    turns = [m for m in seen if "round" in m]
    expected = [f"{what}, round {r}/{ROUNDS}" for r in range(1, ROUNDS + 1)
                for what in ("config 1/2: timing add_kernel (BLOCK=128)", "config 2/2: timing add_kernel (BLOCK=512)",
                             "timing the baseline")]
    assert turns == expected, seen
    assert result.baseline is not None and result.baseline.n >= MIN_RUNS
    assert all(r.passed and r.timing is not None and r.timing.n >= MIN_RUNS and r.error is None
               for r in result.results), result.results


def test_a_baseline_that_returns_a_view_is_called_out() -> None:
    """`x.T` moves no data: its time says nothing about a kernel that writes the transpose."""
    src = VECTOR_ADD
    req = _request(source=src, baseline="x_ptr[::2]")
    result = anyio.run(benchmark, Runtime(), req)
    assert result.baseline is not None and result.baseline.note and "view of 'x_ptr'" in result.baseline.note
    assert "baseline: it returns a view of 'x_ptr'" in result.summary and ".contiguous()" in result.summary
    plain = anyio.run(benchmark, Runtime(), _request(baseline="x_ptr + y_ptr"))
    assert plain.baseline is not None and plain.baseline.note is None and "view" not in plain.summary


def test_baseline_setup_is_evaluated_once_and_untimed() -> None:
    """A baseline that needs a value the kernel's args do not hold (a causal mask) gets it from
    baseline_setup, built once per input set outside the timed runs."""
    setup = "keep = torch.arange(3000) % 2 == 0; zero = torch.zeros(3000)"
    req = _request(baseline="torch.where(keep, x_ptr + y_ptr, zero)", baseline_setup=setup)
    result = anyio.run(benchmark, Runtime(), req)
    assert result.baseline is not None and result.baseline.n >= 10 and result.speedup is not None
    with pytest.raises(ToolInputError, match="baseline: unknown name 'keep'"):
        anyio.run(benchmark, Runtime(), _request(baseline="torch.where(keep, x_ptr, y_ptr)"))
    with pytest.raises(ToolInputError, match="baseline_setup: .*statements are not supported"):
        anyio.run(benchmark, Runtime(), _request(baseline="x_ptr", baseline_setup="import os"))
    with pytest.raises(ToolInputError, match="give baseline too"):
        anyio.run(benchmark, Runtime(), _request(baseline_setup="k = x_ptr * 2"))
    with pytest.raises(ToolInputError, match="is an argument"):
        anyio.run(benchmark, Runtime(), _request(baseline="x_ptr", baseline_setup="x_ptr = y_ptr * 2"))
