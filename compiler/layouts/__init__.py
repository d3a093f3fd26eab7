"""Linear layouts over GF(2) for the GPU lowering (see docs/layouts.md).

- `linear`: the `LinearLayout` value type and its algebra;
- `distributed`: blocked, slice, mma.sync, wgmma and tcgen05 register layouts;
- `shared`: unswizzled, swizzled and NVMMA shared-memory layouts;
- `swizzle`: the bank model and the conflict-free swizzle choice;
- `convert`: conversion planning (no-op, register permutation, shuffles, shared memory);
- `reduce`: reduction and scan planning;
- `scan`: the recursive doubling of scans over a layout's bits, for every GPU backend;
- `coalesce`: blocked layouts for coalesced global accesses;
- `shape`: join, split, cat, reshape and sort as layout changes.
"""

from .coalesce import (
    MemoryAccess,
    coalesced_encoding,
    coalesced_layout,
    elements_per_thread,
    global_vector_width,
)
from .convert import (
    BarrierKind,
    ConversionKind,
    ConversionPlan,
    RegisterCompression,
    SharedAccess,
    SharedMemoryTransfer,
    ShuffleRound,
    WarpShuffle,
    WordShuffle,
    plan_conversion,
)
from .distributed import (
    BlockedEncoding,
    blocked_layout,
    fill_blocked,
    mma_v2_accumulator,
    mma_v2_operand,
    slice_layout,
    tcgen05_accumulator,
    wgmma_accumulator,
)
from .linear import BLOCK, LANE, OFFSET, REGISTER, WARP, Basis, LinearLayout, Vectorisation, dim_names
from .reduce import ReductionPlan, ScanPlan, WarpRound, plan_reduction, plan_scan
from .shared import NvmmaSwizzle, nvmma_shared, nvmma_swizzle, swizzled_shared, unswizzled_shared
from .swizzle import conflict_ways, count_wavefronts, optimal_swizzle

__all__ = [
    "BLOCK",
    "LANE",
    "OFFSET",
    "REGISTER",
    "WARP",
    "BarrierKind",
    "Basis",
    "BlockedEncoding",
    "ConversionKind",
    "ConversionPlan",
    "LinearLayout",
    "MemoryAccess",
    "NvmmaSwizzle",
    "ReductionPlan",
    "RegisterCompression",
    "ScanPlan",
    "SharedAccess",
    "SharedMemoryTransfer",
    "ShuffleRound",
    "Vectorisation",
    "WarpRound",
    "WarpShuffle",
    "WordShuffle",
    "blocked_layout",
    "coalesced_encoding",
    "coalesced_layout",
    "conflict_ways",
    "count_wavefronts",
    "dim_names",
    "fill_blocked",
    "elements_per_thread",
    "global_vector_width",
    "mma_v2_accumulator",
    "mma_v2_operand",
    "nvmma_shared",
    "nvmma_swizzle",
    "optimal_swizzle",
    "plan_conversion",
    "plan_reduction",
    "plan_scan",
    "slice_layout",
    "swizzled_shared",
    "unswizzled_shared",
    "tcgen05_accumulator",
    "wgmma_accumulator",
]
