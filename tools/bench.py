"""benchmark: time a kernel (and its config variants, and a torch baseline) on harness-owned inputs.

Conditions of every measurement are reported in ``method``. The harness builds the inputs
itself, in ``input_sets`` copies at distinct addresses used in rotation; outputs are restored
(re-poisoned) before every run; with ``cache="cold"`` the last-level cache is flushed before
every run by writing a buffer twice its size; warm-up is by time. Times are per run: on the
CPU the wall clock around the synchronous launch, on a GPU CUDA events. Median, p10 and p90
are reported, never a bare mean. After timing, the outputs of the last timed run of every
input set are checked against the reference.

This module is the calling process's part (it checks the request and plans the configs,
tools/bench_configs.py, or searches them, tools/autotune.py); the timing itself is the
"benchmark" job in the device worker (tools/bench_job.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.autotune import autotune
from tools.bench_configs import run_configs
from tools.errors import ToolInputError
from tools.executor import Progress, noop_progress
from tools.models import BenchConfig, BenchmarkRequest, BenchmarkResult

if TYPE_CHECKING:
    from tools.runtime import Runtime


async def benchmark(rt: Runtime, req: BenchmarkRequest, progress: Progress | None = None) -> BenchmarkResult:
    """The benchmark tool: the configs given, or with ``autotune`` a search of them (tools/autotune.py)."""
    progress = progress or noop_progress
    limits = rt.limits
    if req.variants:
        raise ToolInputError("variants is launch_kernel's: benchmark times one argument set. Check the other sizes "
                             "with launch_kernel(variants=[...]), then benchmark the size that matters.")
    per_config_ms = req.warmup_ms + req.rep_ms
    if per_config_ms > limits.benchmark_time_s * 1e3:
        raise ToolInputError(
            f"warmup_ms + rep_ms = {per_config_ms:.0f} ms per config; the limit is {limits.benchmark_time_s * 1e3:.0f}."
        )
    if req.autotune:
        return await autotune(rt, req, progress)
    return await run_configs(rt, req, req.configs or [BenchConfig()], progress)
