"""benchmark(autotune=true): the server searches the configs itself.

Round 1 varies the block sizes: every constexpr whose name says it is one (BLOCK, TILE) and whose
value is a power of two, over a few powers of two around its value (all combinations when they
fit in one benchmark call's config limit, else fewer steps, else one constexpr at a time).
Round 2, on GPUs, varies num_warps and num_stages around the best of round 1. Each round is one
benchmark call; every config tried is in the result, and ``autotune`` says what each round did.
Configs that do not compile, exceed a limit or fail the reference check are reported and never
chosen.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any

from tools.bench_configs import describe_config, run_configs, summarize
from tools.device import describe_device, device_ceilings
from tools.errors import ToolInputError
from tools.executor import Progress
from tools.launch import resolve_kernel
from tools.models import BenchConfig, BenchmarkRequest, BenchmarkResult, ConfigResult

if TYPE_CHECKING:
    from tools.runtime import Runtime

MIN_BLOCK, MAX_BLOCK = 16, 8192
MAX_TILE_ELEMENTS = 1 << 16  # the product of any two block sizes of one config (a 2-D tile)
WARPS = (2, 4, 8)
STAGES = (2, 3, 4)


BLOCK_NAMES = "BLOCK or TILE in the name, BM/BN/BK/BD, ROWS, COLS or CHUNK as a word of it"
_BLOCK_NAME = re.compile(r"B[MNKD]|(?:\w*_)?(?:ROWS|COLS|CHUNK)(?:_\w*)?")


def block_constexprs(constexprs: dict[str, Any]) -> dict[str, int]:
    """The constexprs that name block sizes (see BLOCK_NAMES), powers of two (at most three)."""
    found = {name: int(v) for name, v in constexprs.items()
             if _is_block_name(name) and isinstance(v, int) and not isinstance(v, bool) and v >= 1 and v & (v - 1) == 0}
    return dict(list(found.items())[:3])


def _is_block_name(name: str) -> bool:
    upper = name.upper()
    return "BLOCK" in upper or "TILE" in upper or _BLOCK_NAME.fullmatch(upper) is not None


def _steps(value: int, factors: tuple[float, ...]) -> list[int]:
    out = sorted({int(value * f) for f in factors if MIN_BLOCK <= value * f <= MAX_BLOCK} | {value})
    return out


def block_round(blocks: dict[str, int], limit: int) -> list[dict[str, int]]:
    """Block-size combinations around ``blocks`` (the given values first), at most ``limit`` of them."""
    for factors in ((0.25, 0.5, 1, 2, 4), (0.5, 1, 2)):
        choices = {name: _steps(v, factors) for name, v in blocks.items()}
        combos = [dict(zip(choices, values, strict=True)) for values in itertools.product(*choices.values())]
        combos = [c for c in combos if _largest_tile(c) <= MAX_TILE_ELEMENTS or c == blocks]
        if len(combos) <= limit:
            return sorted(combos, key=lambda c: c != blocks)
    one_at_a_time = [dict(blocks)]  # too many combinations: each block size on its own
    for name, value in blocks.items():
        one_at_a_time += [blocks | {name: v} for v in _steps(value, (0.25, 0.5, 2, 4)) if v != value]
    return one_at_a_time[:limit]


def _largest_tile(blocks: dict[str, int]) -> int:
    values = sorted(blocks.values())
    return values[-1] * values[-2] if len(values) > 1 else values[0]


def launch_round(best: BenchConfig, limit: int) -> list[BenchConfig]:
    """num_warps x num_stages around the best config (GPU targets)."""
    configs = [best.model_copy(update={"num_warps": w, "num_stages": s}) for w in WARPS for s in STAGES]
    return configs[:limit]


async def autotune(rt: Runtime, req: BenchmarkRequest, progress: Progress) -> BenchmarkResult:
    """Search block sizes, then (GPU) warps and stages; return every config tried with the best marked."""
    if req.configs:
        raise ToolInputError("pass configs (a sweep you choose) or autotune=true (a search the server runs), not both.")
    base = await resolve_kernel(rt, req, progress)
    constexprs = dict(base.spec.constexprs)
    blocks = block_constexprs(constexprs)
    gpu = base.spec.target.startswith(("cuda", "amd"))
    if not blocks and not gpu:
        raise ToolInputError(
            f"autotune found nothing to search in {base.kernel_name}: no constexpr names a block size ({BLOCK_NAMES}; "
            "a power of two) and on the CPU num_warps and num_stages do not apply. Pass configs instead.")
    limit = rt.limits.max_benchmark_configs
    request = req.model_copy(update={"kernel_id": base.kernel_id, "source": None, "configs": None})
    results: list[ConfigResult] = []
    rounds: list[str] = []
    last: BenchmarkResult | None = None
    configs = [BenchConfig(constexprs=constexprs | c) for c in block_round(blocks, limit)] if blocks else []
    best_config = BenchConfig(constexprs=constexprs)
    for number, label in ((1, "block sizes"), (2, "num_warps x num_stages")):
        if number == 2:
            if not gpu:
                break
            configs = launch_round(best_config, limit)
        if not configs:
            continue
        await progress(number - 1, 2, f"autotune round {number}: {len(configs)} configs of {label}")
        last = await run_configs(rt, request, configs, progress, baseline=number == 2 or not gpu)
        results += last.results
        if last.best is None:
            rounds.append(f"round {number} ({label}): {len(configs)} configs, none passed")
            break
        winner = last.results[last.best]
        best_config = winner.config
        timing = f" at {winner.timing.median_us} us" if winner.timing else ""
        rounds.append(f"round {number} ({label}): {len(configs)} configs, best "
                      f"{describe_config(winner.config.model_dump())}{timing}")
    if last is None:
        raise ToolInputError("autotune had no config to try.")
    dumped = [r.model_dump() for r in results]
    ceilings = device_ceilings(await describe_device(rt, last.device))  # in memory since the first round
    picked = summarize(last.kernel_name, last.device, dumped, last.baseline.model_dump() if last.baseline else None,
                       ceilings, searched=True)
    method = f"autotune: {len(results)} configs in {len(rounds)} round(s); " + last.method
    return last.model_copy(update={"results": results, "autotune": rounds, "method": method, **picked})
