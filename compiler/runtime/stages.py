"""The one loop from Tile IR to binary, for every target.

`run_stages` runs stages in order (the target-independent Tile IR passes of compiler/passes, then a
backend's, then its lowering stages), keeps each stage's output in the context under the stage's
name (the printed Tile IR after each Tile IR pass), adds each stage's time to `compile_ms`, and,
when `ANVIL_VERIFY_IR=1`, verifies the Tile IR after each Tile IR stage, naming the stage that
broke it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .. import knobs, passes
from ..backends.contract import TILE_IR_PREFIX, Stage, StageContext
from ..ir.printer import print_function
from ..ir.verifier import VerificationError, verify

__all__ = ["run_stages", "tile_ir_passes", "StageVerificationError"]


class StageVerificationError(VerificationError):
    """The Tile IR broke an invariant after a stage (a compiler bug): says which stage."""


def tile_ir_passes() -> list[Stage]:
    """The target-independent Tile IR passes (compiler/passes: PIPELINE, read at each compile) as stages."""
    def stage(p: object) -> Stage:
        def run(ctx: StageContext) -> None:
            p(ctx.fn)  # type: ignore[operator]
            return None

        return Stage("tir." + getattr(p, "__name__", "pass"), run, tile_ir=True, timing="passes_ms")

    return [stage(p) for p in passes.PIPELINE]


def check(ctx: StageContext, after: str) -> None:
    """Verify `ctx.fn`; a failure names the kernel and the stage after which it was found."""
    try:
        verify(ctx.fn)
    except VerificationError as e:
        raise StageVerificationError(f"invalid Tile IR in kernel {ctx.name} after {after}: {e}") from None


def run_stages(ctx: StageContext, stages: Sequence[Stage]) -> None:
    """Run `stages` in order on `ctx` (see the module's docstring)."""
    verifying = knobs.verify_ir()
    last_tir = next((v for k, v in reversed(ctx.outputs.items()) if k.startswith(TILE_IR_PREFIX)), None)
    for stage in stages:
        t0 = time.perf_counter()
        out = stage.run(ctx)
        if stage.tile_ir:
            if verifying:
                check(ctx, f"stage {stage.name}")
            # its printed Tile IR: the stage's own (annotated, e.g. with layouts) or the plain one
            out = out if isinstance(out, str) else print_function(ctx.fn)
            if out == last_tir:  # a pass that changed nothing: the same string, held once
                out = last_tir
            last_tir = out
        if stage.timing is not None:
            ctx.timings[stage.timing] = ctx.timings.get(stage.timing, 0.0) + (time.perf_counter() - t0) * 1e3
        ctx.outputs[stage.name] = out
