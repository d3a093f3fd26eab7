"""benchmark: time a kernel (and its config variants, and a torch baseline) on harness-owned inputs.

Conditions of every measurement are reported in ``method``. The harness builds the inputs
itself, in ``input_sets`` copies at distinct addresses used in rotation; outputs are restored
(re-poisoned) before every run; with ``cache="cold"`` the last-level cache is flushed before
every run by writing a buffer twice its size; warm-up is by time. Times are per run: on the
CPU the wall clock around the synchronous launch, on a GPU CUDA events. Median, p10 and p90
are reported, never a bare mean. After timing, the outputs of the last timed run of every
input set are checked against the reference.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import torch

from tools.checks import compare
from tools.device import describe_device, device_ceilings, measure_ceilings
from tools.errors import ToolInputError
from tools.launch import (
    build_args,
    evaluate_references,
    get_kernel,
    is_device_fault,
    launch_once,
    plan_launch,
    reference_size_limits,
    resolve_kernel,
)
from tools.models import BenchConfig, BenchmarkRequest, BenchmarkResult
from tools.reference import check_sizes, evaluate, parse_reference
from tools.runtime import Progress, Report, Runtime, WorkerState, noop_progress
from tools.specs import check_args_limits
from tools.store import KernelRecord

MAX_REPS = 10_000
MIN_RUNS = 10  # timed runs per config at least, whatever rep_ms says (within the call's time limit)
# The timed loop's wall clock (flushes and restores included) may run this many times rep_ms once
# MIN_RUNS are in: on a CPU, flushing a last-level cache of hundreds of MB costs far more than a small
# kernel's run, and counting only the runs would keep the loop going until the call's deadline.
WALL_FACTOR = 3.0
NOISY_PCT = 100.0  # (p90 - p10) / median past this: the summary says the timings are rough


async def benchmark(rt: Runtime, req: BenchmarkRequest, progress: Progress | None = None) -> BenchmarkResult:
    """The benchmark tool: the configs given, or with ``autotune`` a search of them (tools/autotune.py)."""
    progress = progress or noop_progress
    limits = rt.limits
    per_config_ms = req.warmup_ms + req.rep_ms
    if per_config_ms > limits.benchmark_time_s * 1e3:
        raise ToolInputError(
            f"warmup_ms + rep_ms = {per_config_ms:.0f} ms per config; the limit is {limits.benchmark_time_s * 1e3:.0f}."
        )
    if req.autotune:
        from tools.autotune import autotune

        return await autotune(rt, req, progress)
    return await run_configs(rt, req, req.configs or [BenchConfig()], progress)


def fit_input_sets(rt: Runtime, req: BenchmarkRequest) -> int:
    """The input sets a benchmark uses: as many as asked for, fewer when that many copies of the tensors (plus
    one for the outputs' restore copies) would pass the per-call limits. Refused only when one set does."""
    sets = req.input_sets
    while sets > 1:
        try:
            check_args_limits(dict(req.args), rt.limits, copies=sets + 1)
            return sets
        except ToolInputError:
            sets -= 1
    check_args_limits(dict(req.args), rt.limits, copies=2)
    return 1


async def run_configs(
    rt: Runtime, req: BenchmarkRequest, configs: list[BenchConfig], progress: Progress, *, baseline: bool = True
) -> BenchmarkResult:
    """Compile every config (in parallel), then time them all in one call of the device's worker."""
    limits = rt.limits
    if len(configs) > limits.max_benchmark_configs:
        raise ToolInputError(f"{len(configs)} configs; the limit is {limits.max_benchmark_configs}.")
    input_sets = fit_input_sets(rt, req)
    base = await resolve_kernel(rt, req, progress)
    await progress(0, len(configs) + 1, f"compiling {len(configs)} config(s)")
    records: list[KernelRecord | ToolInputError] = [base] * len(configs)

    async def compile_config(i: int, cfg: BenchConfig) -> None:
        if cfg == BenchConfig():
            return
        variant = req.model_copy(
            update={"kernel_id": base.kernel_id, "source": None, "constexprs": cfg.constexprs,
                    "num_warps": cfg.num_warps, "num_stages": cfg.num_stages, "maxnreg": cfg.maxnreg,
                    "cluster_dims": cfg.cluster_dims}
        )  # fmt: skip
        try:
            records[i] = await resolve_kernel(rt, variant, None)
        except ToolInputError as exc:
            records[i] = exc

    async with anyio.create_task_group() as tg:
        for i, cfg in enumerate(configs):
            tg.start_soon(compile_config, i, cfg)
    entries: list[dict[str, Any]] = []
    plan = None
    for cfg, record in zip(configs, records, strict=True):
        if not isinstance(record, ToolInputError):
            try:
                config_plan = plan_launch(rt, req, record, copies=input_sets + 1)
            except ToolInputError as exc:  # e.g. a grid past the limit for this config's block size
                record = exc
        if isinstance(record, ToolInputError):
            entries.append({"config": cfg.model_dump(), "error": str(record)})
            continue
        plan = plan or config_plan
        entries.append({"config": cfg.model_dump(), "kernel": record.launch_info(), "grid": config_plan.grid})
    if plan is None:
        raise ToolInputError("no config compiled: " + "; ".join(e["error"] for e in entries))
    if req.baseline is not None:
        parse_reference(req.baseline, names=list(req.args), label="baseline", max_chars=limits.max_reference_chars)
    ceilings = device_ceilings(await describe_device(rt, plan.device, progress))
    payload = plan.payload(rt) | {
        "ceilings": ceilings,
        "entries": entries,
        "baseline": req.baseline if baseline else None,
        "bytes": req.bytes,
        "flops": req.flops,
        "warmup_ms": req.warmup_ms,
        "rep_ms": req.rep_ms,
        "cache": req.cache,
        "input_sets": input_sets,
        "input_sets_asked": req.input_sets,
    }
    out = await rt.executor.run(
        plan.device, "benchmark", payload, timeout=limits.benchmark_timeout_s, progress=progress
    )
    return BenchmarkResult.model_validate(out)


def describe_config(config: dict[str, Any]) -> str:
    """``BLOCK=256, num_warps=4`` for a BenchConfig dict; ``as given`` for the empty one."""
    parts = [f"{k}={v}" for k, v in (config.get("constexprs") or {}).items()]
    parts += [f"{k}={v}" for k, v in config.items() if k != "constexprs" and v is not None]
    return ", ".join(parts) or "as given"


# --- in the device worker ------------------------------------------------------------------------------


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
) -> list[float]:
    """Per-run times in microseconds: warm-up by time (every set at least once), then timed runs for rep_ms
    and at least MIN_RUNS of them (every set at least once; past ``deadline``, no more than that). Once
    MIN_RUNS are in, the loop also stops when its wall clock reaches WALL_FACTOR * rep_ms."""
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
    measured = 0.0
    wall_end = time.perf_counter() + WALL_FACTOR * rep_ms / 1e3
    least = max(MIN_RUNS, len(sets))
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
    deadline = time.perf_counter() + (payload["warmup_ms"] + payload["rep_ms"]) / 1e3 * 3 + 5
    results: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        result: dict[str, Any] = {"config": entry["config"]}
        results.append(result)
        if "error" in entry:
            result["error"] = entry["error"]
            continue
        kernel = entry["kernel"]
        result["kernel_id"] = kernel["kernel_id"]
        report(i + 1, steps, f"config {i + 1}/{len(entries)}: timing {kernel['kernel_name']} "
               f"({describe_config(entry['config'])})")
        try:
            jit, _ = get_kernel(state, kernel)
            checked_out: list[dict[str, torch.Tensor]] = []
            for current in sets:  # a checked run on every input set before any unchecked one
                restore(current)
                launch_once(jit, kernel, entry["grid"], current)
                checked_out.append({n: current[n].clone() for n in restored})
            # From here the kernel runs unchecked: nothing it reads is reported as a value (the checks
            # below use the checked runs' outputs), and the worker retires after this call.
            state.tainted = True
            run_once = functools.partial(launch_once, jit, kernel, entry["grid"], checked=False)
            times = time_runs(
                run_once,
                sets,
                restore,
                device=device,
                warmup_ms=payload["warmup_ms"],
                rep_ms=payload["rep_ms"],
                flush=flush,
                deadline=deadline,
            )
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
        timing = _timing(times)
        result["timing"] = timing
        seconds = timing["median_us"] / 1e6
        result["gbps"] = round(nbytes / seconds / 1e9, 3) if seconds > 0 else None
        if flops is not None and seconds > 0:
            result["tflops"] = round(flops / seconds / 1e12, 5)
            if ceilings.get("matmul_tflops"):
                result["pct_of_peak_flops"] = round(100 * result["tflops"] / ceilings["matmul_tflops"], 2)
        if result["gbps"] is not None and ceilings.get("copy_gbps"):
            result["pct_of_peak_bandwidth"] = round(100 * result["gbps"] / ceilings["copy_gbps"], 2)
        # the timed (unchecked) runs must have produced what the checked runs did; only whether they
        # did is reported, never their values
        differing = sorted({name for current, out in zip(sets, checked_out, strict=True) for name in restored
                            if not compare(current[name], out[name], reference="the checked run",
                                           atol=payload["atol"], rtol=payload["rtol"]).passed})
        if differing:
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
        deadline = time.perf_counter() + (payload["warmup_ms"] + payload["rep_ms"]) / 1e3 * 3 + 5
    baseline = None
    if payload["baseline"]:
        report(steps - 1, steps, "timing the baseline")
        ref = parse_reference(payload["baseline"], names=list(values), label="baseline")
        size_limits = reference_size_limits(payload)
        check_sizes(ref, values, **size_limits)  # once: every input set has the same shapes

        def run_baseline(current: dict[str, Any]) -> Any:
            with torch.no_grad():
                return evaluate(ref, current, sized=True, **size_limits)

        baseline = _timing(
            time_runs(run_baseline, sets, lambda s: None, device=device, warmup_ms=payload["warmup_ms"],
                      rep_ms=payload["rep_ms"], flush=flush, deadline=deadline)
        )  # fmt: skip
    return _result(payload, results, baseline, nbytes, flops, ceilings)


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
        f"(at least {MIN_RUNS} runs, and no more once the loop's wall clock, flushes included, reaches "
        f"{WALL_FACTOR:g}x that); {sets} input set(s){fitted} at distinct addresses in "
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


def summarize(
    kernel_name: str, device: str, results: list[dict[str, Any]], baseline: dict[str, Any] | None,
    ceilings: dict[str, Any],
) -> dict[str, Any]:
    """best, best_kernel_id, speedup, passed and the one-line summary of a benchmark's results: TFLOP/s and the
    percentage of the measured matmul peak when flops was given, else GB/s and the percentage of the measured
    copy rate; the number of runs and their noise."""
    timed = [(i, r) for i, r in enumerate(results) if r.get("timing") and r.get("passed") is not False]
    best = min(timed, key=lambda ir: ir[1]["timing"]["median_us"])[0] if timed else None
    speedup = None
    if best is not None and baseline is not None:
        speedup = round(baseline["median_us"] / max(results[best]["timing"]["median_us"], 1e-9), 3)
    checked = [r["passed"] for r in results if r.get("passed") is not None]
    if best is not None:
        r, t = results[best], results[best]["timing"]
        noise = f", noise {t['noise_pct']:.1f}%" if t.get("noise_pct") is not None else ""
        summary = (
            f"{kernel_name} on {device}: best config #{best} ({describe_config(r['config'])}) median "
            f"{t['median_us']:.1f} us (p10 {t['p10_us']:.1f}, p90 {t['p90_us']:.1f}, n={t['n']}{noise})"
        )
        if r.get("tflops") is not None:
            summary += f", {r['tflops']:.3g} TFLOP/s"
            if r.get("pct_of_peak_flops") is not None:
                summary += (f" = {r['pct_of_peak_flops']:.1f}% of the measured {ceilings.get('matmul_tflops')} "
                            f"TFLOP/s {ceilings.get('matmul_dtype')} matmul peak")
        elif r.get("gbps") is not None:
            summary += f", {r['gbps']:.1f} GB/s"
            if r.get("pct_of_peak_bandwidth") is not None:
                summary += (f" = {r['pct_of_peak_bandwidth']:.1f}% of the measured {ceilings.get('copy_gbps')} GB/s "
                            "copy rate")
        if speedup is not None:
            summary += f", {speedup:.2f}x vs baseline"
        noisy = [f"{what} {timing['noise_pct']:.0f}%" for what, timing in (("kernel", t), ("baseline", baseline))
                 if timing and (timing.get("noise_pct") or 0) > NOISY_PCT]
        if noisy:
            summary += (f"; NOISY ({', '.join(noisy)} spread): other work shares the device, so medians and the "
                        "speedup are rough; rerun, or raise rep_ms")
        if checked:
            summary += ", outputs " + ("PASSED" if all(checked) else "FAILED in some configs")
    else:
        errors = [r.get("error") or "outputs failed the reference check" for r in results]
        why = "; ".join(map(str, errors))[:500]
        summary = f"{kernel_name} on {device}: no config produced a passing timing ({why})"
    return {
        "best": best,
        "best_kernel_id": results[best]["kernel_id"] if best is not None else None,
        "speedup": speedup,
        "passed": all(checked) if checked else None,
        "summary": summary,
    }
