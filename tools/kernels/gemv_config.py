"""The tuning knobs of the W4A16 GEMV (tools/kernels/w4a16.py's awq_gemv) as one value object.

A GemvConfig holds what the caller chooses; None means "awq_gemv picks for the call" (the
choice depends on x, the weights' layout and the GPU). Each field is checked on its own when the
config is made, so a wrong value fails where it is written; the checks that depend on the call
(a tile that must divide the group size, a knob that only one layout takes) stay in awq_gemv.
docs/quantization.md describes the modes and the layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["GEMV_MODES", "GemvConfig"]

# The arithmetic of awq_gemv: fp32 on CUDA cores ("f32", "f32-exact"), bf16 pairs on CUDA cores
# ("bf16x2", "bf16x2-sub"), bf16 tensor cores ("mma", "mma-sub"), int8 tensor cores ("mma-int8").
GEMV_MODES = ("f32", "f32-exact", "bf16x2", "bf16x2-sub", "mma", "mma-sub", "mma-int8")

_WARPS = (1, 2, 4, 8, 16)
_BLOCK_M = (1, 2, 4, 8, 16)


def _pow2(v: int) -> bool:
    return v >= 1 and v & (v - 1) == 0


@dataclass(frozen=True)
class GemvConfig:
    """How awq_gemv computes y = x @ W~^T; every default is awq_gemv's own choice.

    mode: the arithmetic, one of GEMV_MODES (None: "mma-int8" or "mma" for awq_gemv_pack's
        layouts, else awq_gemv_mode(x): "mma" for bf16 x on an NVIDIA GPU, "f32-exact" for fp32 x,
        "f32" otherwise).
    block_n: output columns per program, a power of two >= 8 (None: 64 * num_warps for the
        tensor-core modes, 512 on a GPU and 64 on the CPU for the others).
    block_k: rows of K spread over the threads of a step (CUDA-core modes), a power of two.
    unroll: rows held by each thread per step (CUDA-core modes: the step is block_k * unroll
        rows) or 16-row chunks per step (tensor-core modes: 16 * unroll rows), a power of two.
    split_k: programs sharing K, >= 1 (None: enough programs for the GPU's SMs, 1 on the CPU).
    num_warps: warps per program, 1, 2, 4, 8 or 16 (None: 8 for awq_gemv_pack's blocks, else 4).
    ahead: steps of weights loaded before the current one is computed, 1 or 2 (tensor-core
        modes; None: 1, or 2 for the packed layout with up to 8 rows per program).
    stages: 0 to 8. The tensor-core kernel of AutoAWQ's layout streams one group per step
        through a pipeline that deep (1 to 8); awq_gemv_pack's blocks take it as the ring slots per
        warp filled by bulk copies (0: plain loads; None: 1 where the GPU has bulk copies).
    block_m: rows of x per program at most, 1, 2, 4, 8 or 16 (tensor-core modes).
    maxnreg: registers per thread at most, 1 to 255 (tensor-core modes on a GPU; None: ptxas's
        choice, or 128 for the packed layout's kernel).
    cluster: sum the K splits of awq_gemv_pack's layout in a thread block cluster (sm_90+; None:
        where the H200 measured a gain).
    evict_first: load the packed layout's weight words with the L2 policy evict_first (None:
        where one program row covers every row of x).
    warp_split: the warps of a program share the K of one octet (packed layouts; None: with the
        blocks layout).
    """

    mode: str | None = None
    block_n: int | None = None
    block_k: int = 8
    unroll: int = 4
    split_k: int | None = None
    num_warps: int | None = None
    ahead: int | None = None
    stages: int | None = None
    block_m: int = 16
    maxnreg: int | None = None
    cluster: bool | None = None
    evict_first: bool | None = None
    warp_split: bool | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            want_bool = f.name in ("cluster", "evict_first", "warp_split")
            if v is None:
                if f.name in ("block_k", "unroll", "block_m"):
                    raise ValueError(f"GemvConfig.{f.name} must be an int, got None")
                continue
            if f.name == "mode":
                if v not in GEMV_MODES:
                    raise ValueError(f"GemvConfig.mode must be None or one of {', '.join(GEMV_MODES)}, got {v!r}")
            elif want_bool:
                if not isinstance(v, bool):
                    raise ValueError(f"GemvConfig.{f.name} must be True, False or None, got {v!r}")
            elif not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"GemvConfig.{f.name} must be an int, got {type(v).__name__} {v!r}")
        self._check_ranges()

    def _check_ranges(self) -> None:
        def bad(name: str, what: str) -> ValueError:
            return ValueError(f"GemvConfig.{name} must be {what}, got {getattr(self, name)!r}")

        if self.block_n is not None and not (self.block_n >= 8 and _pow2(self.block_n)):
            raise bad("block_n", "None or a power of two and a multiple of 8")
        if not _pow2(self.block_k):
            raise bad("block_k", "a power of two")
        if not _pow2(self.unroll):
            raise bad("unroll", "a power of two")
        if self.split_k is not None and self.split_k < 1:
            raise bad("split_k", "None or at least 1")
        if self.num_warps is not None and self.num_warps not in _WARPS:
            raise bad("num_warps", "None, 1, 2, 4, 8 or 16")
        if self.ahead not in (None, 1, 2):
            raise bad("ahead", "None, 1 or 2")
        if self.stages is not None and not 0 <= self.stages <= 8:
            raise bad("stages", "None or 0 to 8")
        if self.block_m not in _BLOCK_M:
            raise bad("block_m", "1, 2, 4, 8 or 16")
        if self.maxnreg is not None and not 1 <= self.maxnreg <= 255:
            raise bad("maxnreg", "None or 1 to 255")
