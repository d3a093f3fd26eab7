"""benchmark's job in the device worker: time every config (and the baseline) on harness-owned inputs.

The calling process checks the request and plans the configs (tools/bench.py); what arrives here is
their payload. See tools/bench.py for the conditions of every measurement.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from tools.bench_configs import describe_config, summarize
from tools.checks import compare
from tools.device_job import measure_ceilings
from tools.errors import ToolInputError
from tools.executor import Report, WorkerState
from tools.launch_job import (
    build_args,
    evaluate_references,
    get_kernel,
    is_device_fault,
    launch_once,
    reference_size_limits,
)
from tools.reference import check_sizes, evaluate, evaluate_setup
from tools.reference_program import parse_reference_text

MAX_REPS = 10_000
MIN_RUNS = 10  # timed runs per config at least, whatever rep_ms says (within the call's time limit)
# The timed loop's wall clock (flushes and restores included) may run this many times rep_ms once
# MIN_RUNS are in: on a CPU, flushing a last-level cache of hundreds of MB costs far more than a small
# kernel's run, and counting only the runs would keep the loop going until the call's deadline.
WALL_FACTOR = 3.0
ROUNDS = 3  # timing rounds when there is more than one thing to time (configs, the baseline)



def _llc_bytes() -> int:
    """Size of the largest CPU cache (from sysfs), 32 MiB if unknown."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or (32 << 20)


def _flush_buffer(device: str) -> torch.Tensor:
    if device.startswith("cuda"):
        return torch.empty(256 << 20, dtype=torch.int8, device=device)
    return torch.empty(min(max(2 * _llc_bytes(), 8 << 20), 512 << 20), dtype=torch.int8)


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))]


def time_runs(
    fn: Callable[[dict[str, Any]], Any],
    sets: list[dict[str, Any]],
    restore: Callable[[dict[str, Any]], None],
    *,
    device: str,
    warmup_ms: float,
    rep_ms: float,
    flush: torch.Tensor | None,
    deadline: float,
    least: int = MIN_RUNS,
) -> list[float]:
    """Per-run times in microseconds: warm-up by time (every set at least once), then timed runs for rep_ms
    and at least ``least`` of them (every set at least once; past ``deadline``, no more than that). Once
    ``least`` are in, the loop also stops when its wall clock reaches WALL_FACTOR * rep_ms."""
    gpu = device.startswith("cuda")
    end_warmup = time.perf_counter() + warmup_ms / 1e3
    runs = 0
    while runs < len(sets) or time.perf_counter() < end_warmup:
        restore(sets[runs % len(sets)])
        fn(sets[runs % len(sets)])
        runs += 1
    if gpu:
        torch.cuda.synchronize()
    times: list[float] = []
    least = max(least, len(sets))
    with _no_collections():
        wall_end = time.perf_counter() + WALL_FACTOR * rep_ms / 1e3
        measured = 0.0
        while (measured < rep_ms * 1e3 or len(times) < least) and len(times) < MAX_REPS:
            now = time.perf_counter()
            if (now > deadline and len(times) >= len(sets)) or (now > wall_end and len(times) >= least):
                break
            current = sets[len(times) % len(sets)]
            restore(current)
            if flush is not None:
                flush.zero_()
            if gpu:
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                fn(current)
                stop.record()
                stop.synchronize()
                us = start.elapsed_time(stop) * 1e3
            else:
                t0 = time.perf_counter_ns()
                fn(current)
                us = (time.perf_counter_ns() - t0) / 1e3
            times.append(us)
            measured += us
    return times


@contextlib.contextmanager
def _no_collections() -> Iterator[None]:
    """No garbage collection inside a timed loop (as timeit): a collection of a worker holding torch
    and the compiler takes milliseconds, and it would land in whichever run allocated last."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _timing(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    median, p10, p90 = _quantile(ordered, 0.5), _quantile(ordered, 0.1), _quantile(ordered, 0.9)
    return {
        "median_us": round(median, 3),
        "p10_us": round(p10, 3),
        "p90_us": round(p90, 3),
        "min_us": round(ordered[0], 3),
        "n": len(ordered),
        "noise_pct": round(100 * (p90 - p10) / median, 2) if median > 0 else None,
    }


def _copy_set(values: dict[str, Any]) -> dict[str, Any]:
    return {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in values.items()}


def run_benchmark_job(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    """Time every config (and the baseline) on harness-owned inputs; return a BenchmarkResult dict."""
    device = payload["device"]
    entries = payload["entries"]
    steps = len(entries) + (1 if payload["baseline"] else 0) + 1
    report(0, steps, "building inputs")
    values = build_args(payload)
    expected = evaluate_references(payload, values)
    sets = [values] + [_copy_set(values) for _ in range(payload["input_sets"] - 1)]
    restored = [n for n in payload["outputs"] if isinstance(values.get(n), torch.Tensor)]
    initial = {n: values[n].clone() for n in restored}

    def restore(current: dict[str, Any]) -> None:
        for name in restored:
            current[name].copy_(initial[name])

    flush = _flush_buffer(device) if payload["cache"] == "cold" else None
    nbytes = payload["bytes"]
    if nbytes is None:
        nbytes = sum(v.nbytes for v in values.values() if isinstance(v, torch.Tensor))
    flops = payload["flops"]
    ceilings = payload.get("ceilings") or measure_ceilings(state)
    results: list[dict[str, Any]] = []
    runners: dict[int, Callable[[dict[str, Any]], Any]] = {}  # config index -> its unchecked run
    checked: dict[int, list[dict[str, torch.Tensor]]] = {}
    for i, entry in enumerate(entries):
        result: dict[str, Any] = {"config": entry["config"]}
        results.append(result)
        if "error" in entry:
            result["error"] = entry["error"]
            continue
        kernel = entry["kernel"]
        result["kernel_id"] = kernel["kernel_id"]
        report(i + 1, steps, f"config {i + 1}/{len(entries)}: checking {kernel['kernel_name']} "
               f"({describe_config(entry['config'])})")
        try:
            jit, _ = get_kernel(state, kernel)
            checked_out: list[dict[str, torch.Tensor]] = []
            for current in sets:  # a checked run on every input set before any unchecked one
                restore(current)
                launch_once(jit, kernel, entry["grid"], current)
                checked_out.append({n: current[n].clone() for n in restored})
        except ToolInputError as exc:
            if exc.data.get("error") in ("out_of_bounds", "device_assert"):
                raise  # a located fault of the kernel: the whole call reports it
            result["error"] = str(exc)
            continue
        except Exception as exc:
            if is_device_fault(exc):
                raise
            result["error"] = f"{type(exc).__name__}: {exc}"
            continue
        checked[i] = checked_out
        runners[i] = functools.partial(launch_once, jit, kernel, entry["grid"], checked=False)

    run_baseline: Callable[[dict[str, Any]], Any] | None = None
    baseline_sets = sets
    if payload["baseline"]:
        size_limits = reference_size_limits(payload)
        with torch.no_grad():  # the setup's values, once per input set, untimed
            baseline_sets = evaluate_setup(payload.get("baseline_setup"), sets, **size_limits)
        ref = parse_reference_text(payload["baseline"], names=list(baseline_sets[0]), label="baseline")
        check_sizes(ref, baseline_sets[0], **size_limits)  # once: every input set has the same shapes

        def run_baseline(current: dict[str, Any]) -> Any:
            with torch.no_grad():
                return evaluate(ref, current, sized=True, **size_limits)

    # Timing in rounds: every config and the baseline take a turn each round, so a change in the
    # device's load during the call falls on all of them alike rather than on whichever ran then.
    rounds = ROUNDS if len(runners) + (run_baseline is not None) > 1 else 1
    turns: list[int | None] = [*runners, *([None] if run_baseline is not None else [])]  # None: the baseline
    times: dict[int | None, list[float]] = {k: [] for k in turns}
    failed: set[int] = set()
    differing: dict[int, list[str]] = {}
    for r in range(rounds):
        for k in turns:
            if k in failed:
                continue
            what = "timing the baseline" if k is None else (
                f"config {k + 1}/{len(entries)}: timing {entries[k]['kernel']['kernel_name']} "
                f"({describe_config(entries[k]['config'])})")
            report(steps - 1 if k is None else k + 1, steps, what + (f", round {r + 1}/{rounds}" if rounds > 1 else ""))
            if k is not None:
                state.tainted = True  # unchecked from here: the worker retires after this call
            warmup = payload["warmup_ms"] if r == 0 else 0.0
            try:
                times[k] += time_runs(
                    run_baseline if k is None else runners[k],  # type: ignore[arg-type]
                    baseline_sets if k is None else sets,
                    (lambda s: None) if k is None else restore,
                    device=device,
                    warmup_ms=warmup,
                    rep_ms=payload["rep_ms"] / rounds,
                    flush=flush,
                    deadline=time.perf_counter() + (warmup + payload["rep_ms"] / rounds) / 1e3 * 3 + 5 / rounds,
                    least=max(1, -(-MIN_RUNS // rounds)),
                )
                if k is not None and r == rounds - 1:  # the sets hold this config's last outputs until the next turn
                    differing[k] = _differing(sets, checked[k], restored, payload)
            except ToolInputError as exc:
                if k is None or exc.data.get("error") in ("out_of_bounds", "device_assert"):
                    raise
                results[k]["error"] = str(exc)
                failed.add(k)
            except Exception as exc:
                if k is None or is_device_fault(exc):
                    raise
                results[k]["error"] = f"{type(exc).__name__}: {exc}"
                failed.add(k)

    for i in runners:
        if i not in failed:
            _record(results[i], _timing(times[i]), differing[i], checked[i], expected, payload, nbytes, flops,
                    ceilings)
    baseline = _timing(times[None]) if run_baseline is not None else None
    if baseline is not None and run_baseline is not None:
        view_of = _view_of_input(run_baseline(baseline_sets[0]), baseline_sets[0])
        if view_of:
            baseline["note"] = (
                f"it returns a view of '{view_of}' and moves no data, so its time is not comparable with a kernel "
                "that writes its output; end it with .contiguous() (or .clone()) to time the copy")
    return _result(payload, results, baseline, nbytes, flops, ceilings)


def _view_of_input(value: Any, inputs: dict[str, Any]) -> str | None:
    """The input whose memory the baseline's result (or one of its results) shares, if any."""
    results = value if isinstance(value, (tuple, list)) else [value]
    for out in results:
        if not isinstance(out, torch.Tensor) or out.numel() == 0:
            continue
        ptr = out.untyped_storage().data_ptr()
        for name, t in inputs.items():
            if isinstance(t, torch.Tensor) and t.numel() and t.untyped_storage().data_ptr() == ptr:
                return name
    return None


def _differing(
    sets: list[dict[str, Any]], checked_out: list[dict[str, torch.Tensor]], restored: list[str],
    payload: dict[str, Any],
) -> list[str]:
    """The outputs whose last timed run (what each input set holds now) differs from the checked run's:
    only whether they differ is reported, never their values."""
    return sorted({name for current, out in zip(sets, checked_out, strict=True) for name in restored
                   if not compare(current[name], out[name], reference="the checked run",
                                  atol=payload["atol"], rtol=payload["rtol"]).passed})


def _record(
    result: dict[str, Any], timing: dict[str, Any], differing: list[str],
    checked_out: list[dict[str, torch.Tensor]], expected: dict[str, Any],
    payload: dict[str, Any], nbytes: int, flops: int | None, ceilings: dict[str, Any],
) -> None:
    """Fill a config's result: its timing and rates, whether the timed runs reproduced the checked
    ones, and the reference checks of the checked runs."""
    result["timing"] = timing
    seconds = timing["median_us"] / 1e6
    result["gbps"] = round(nbytes / seconds / 1e9, 3) if seconds > 0 else None
    if flops is not None and seconds > 0:
        result["tflops"] = round(flops / seconds / 1e12, 5)
        if ceilings.get("matmul_tflops"):
            result["pct_of_peak_flops"] = round(100 * result["tflops"] / ceilings["matmul_tflops"], 2)
    if result["gbps"] is not None and ceilings.get("copy_gbps"):
        result["pct_of_peak_bandwidth"] = round(100 * result["gbps"] / ceilings["copy_gbps"], 2)
    if differing:  # the timed (unchecked) runs must have produced what the checked runs did
        result["error"] = (
            f"the timed runs' {', '.join(differing)} differ from the checked run's on the same inputs: the "
            "kernel's result depends on state earlier runs left (e.g. an atomic counter in an input) or on "
            "timing (a race); its timings are not comparable"
        )
        result["passed"] = False
    if expected:
        checks: dict[str, Any] = {}
        for name, value in expected.items():
            worst = None
            for out in checked_out:  # the checked run of each set
                check = compare(out[name], value, reference=payload["references"][name],
                                atol=payload["atol"], rtol=payload["rtol"])  # fmt: skip
                if worst is None or not check.passed:
                    worst = check
            assert worst is not None
            checks[name] = worst.model_dump()
        result["checks"] = checks
        result["passed"] = all(c["passed"] for c in checks.values()) and not differing


def _result(
    payload: dict[str, Any],
    results: list[dict[str, Any]],
    baseline: dict[str, Any] | None,
    nbytes: int,
    flops: int | None,
    ceilings: dict[str, Any],
) -> dict[str, Any]:
    device = payload["device"]
    timer = (
        "CUDA events around each launch" if device.startswith("cuda") else "wall clock around each synchronous launch"
    )
    cache = "last-level cache flushed before every run" if payload["cache"] == "cold" else "warm cache (no flush)"
    sets = payload["input_sets"]
    asked = payload.get("input_sets_asked", sets)
    fitted = f" ({asked} asked: fewer copies fit the per-call tensor limits)" if asked != sets else ""
    method = (
        f"{timer}; warm-up {payload['warmup_ms']:g} ms then {payload['rep_ms']:g} ms of timed runs per config "
        f"and for the baseline, taken in {ROUNDS} interleaved rounds when there are several (at least {MIN_RUNS} "
        f"runs each unless the call's time runs out, and no more once a loop's wall clock, flushes included, "
        f"reaches {WALL_FACTOR:g}x its share); {sets} input set(s){fitted} at distinct addresses in "
        f"rotation; outputs restored before every run; {cache}; median/p10/p90 over n runs, noise = (p90 - p10) / "
        f"median; peaks measured on this device: {ceilings.get('copy_gbps')} GB/s copy, "
        f"{ceilings.get('matmul_tflops')} TFLOP/s {ceilings.get('matmul_dtype')}"
    )
    kernel_name = next((e["kernel"]["kernel_name"] for e in payload["entries"] if "kernel" in e), "kernel")
    out = {
        "kernel_name": kernel_name,
        "target": payload["kernel"]["target"],
        "device": device,
        "method": method,
        "results": results,
        "baseline": baseline,
        "bytes": nbytes,
        "flops": flops,
        "input_sets": sets,
    }
    return out | summarize(kernel_name, device, results, baseline, ceilings)
