"""Benchmarking a list of configs of one kernel: every config compiled (in parallel), then all of
them timed in one call of the device's worker (the job in bench.py), and the summary of the
results. The benchmark tool runs the configs given; the search (autotune.py) runs one list per
round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from tools.device import describe_device, device_ceilings
from tools.errors import ToolInputError
from tools.executor import Progress
from tools.launch import plan_launch, resolve_kernel
from tools.models import BenchConfig, BenchmarkRequest, BenchmarkResult
from tools.reference_program import parse_reference_text, setup_names
from tools.specs import check_args_limits
from tools.store import KernelRecord

if TYPE_CHECKING:
    from tools.runtime import Runtime

__all__ = ["NOISY_PCT", "fit_input_sets", "run_configs", "describe_config", "summarize"]

NOISY_PCT = 30.0  # (p90 - p10) / median past this: the summary says the timings are rough


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
    if req.baseline_setup is not None and req.baseline is None:
        raise ToolInputError("baseline_setup is evaluated for the baseline: give baseline too.")
    if req.baseline is not None:
        names = list(req.args) + setup_names(req.baseline_setup, list(req.args), limits.max_reference_chars)
        parse_reference_text(req.baseline, names=names, label="baseline", max_chars=limits.max_reference_chars)
    ceilings = device_ceilings(await describe_device(rt, plan.device, progress))
    payload = plan.payload(rt) | {
        "ceilings": ceilings,
        "entries": entries,
        "baseline": req.baseline if baseline else None,
        "baseline_setup": req.baseline_setup if baseline else None,
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


def summarize(
    kernel_name: str, device: str, results: list[dict[str, Any]], baseline: dict[str, Any] | None,
    ceilings: dict[str, Any], searched: bool = False,
) -> dict[str, Any]:
    """best, best_kernel_id, speedup, passed and the one-line summary of a benchmark's results: TFLOP/s and the
    percentage of the measured matmul peak when flops was given, else GB/s and the percentage of the measured
    copy rate; the number of runs and their noise. `searched`: the configs are autotune's candidates, so one
    that fails the check (a block too small for a single-pass kernel) is dropped, not the call's failure:
    `passed` speaks for the best config."""
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
            summary += f"; NOISY ({', '.join(noisy)} spread): other work shares the device, so medians"
            if baseline is not None:
                low = baseline["p10_us"] / max(t["p90_us"], 1e-9)
                high = baseline["p90_us"] / max(t["p10_us"], 1e-9)
                summary += f" are rough and the speedup could be anywhere from {low:.2f}x to {high:.2f}x"
            else:
                summary += " are rough"
            summary += "; rerun when the device is quieter, or raise rep_ms"
        if baseline is not None and baseline.get("note"):
            summary += f"; baseline: {baseline['note']}"
        dropped = [i for i, r in enumerate(results) if r.get("passed") is False] if searched else []
        if searched and r.get("passed") is not None:
            checked = [r["passed"]]
        if checked:
            summary += ", outputs " + ("PASSED" if all(checked) else "FAILED in some configs")
        if dropped:
            listed_configs = "; ".join(f"#{i} {describe_config(results[i]['config'])}" for i in dropped[:6])
            summary += (f" (searched configs that failed the check, dropped: {listed_configs}"
                        f"{' ...' if len(dropped) > 6 else ''})")
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
