"""W4A16 launchers: y = x @ W~^T for AutoAWQ int4 weights (tools/kernels/int4.py) and bf16/fp16/fp32 x.

awq_gemv (small batches, decoding) picks between the DSL kernels of int4.py (CUDA cores) and the
tensor-core kernel of int4_mma.py; awq_gemm takes larger batches. awq_gemv_pack reorders qweight
once for the tensor-core kernel's 16-byte loads, or with qzeros and scales into contiguous blocks
that Hopper streams into shared memory by bulk copies (int4_packed.py).

A call's work that depends only on shapes and options (checks, tile and split choice, grid, the
kernel's constexprs, the bound launcher) is done once per distinct call and kept (_PLANS): a warm
call allocates y, reads the stream's scratch buffers and launches. The split-K scratch (fp32
partials and the tile counters, which the last program of each tile sets back to zero) is kept
per device and stream: launches on one stream run in order, so each finds it free and the
counters at zero; another stream (or a CUDA graph being captured) gets its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from compiler import cdiv
from compiler.runtime.cuda import current_stream

from .gemv_config import GEMV_MODES, GemvConfig
from .int4 import _check_awq, awq_gemm_kernel, awq_gemv_kernel, splitk_reduce_kernel
from .int4_i8 import permute_block_words
from .int4_mma import awq_gemv_mma_kernel
from .int4_packed import awq_gemv_packed_kernel, block_words, ring_bytes

__all__ = ["awq_gemv", "awq_gemv_pack", "awq_gemm", "awq_gemv_split", "awq_gemv_mode", "GEMV_MODES", "GemvConfig"]

_DEFAULT = GemvConfig()


def awq_gemv_pack(qweight: torch.Tensor, qzeros: torch.Tensor | None = None,
                  scales: torch.Tensor | None = None) -> torch.Tensor:
    """AutoAWQ's qweight [K, N/8] in the layout of awq_gemv's packed kernel (int4_packed.py): int32
    [K/16, ceil(N/64), 32, 4], element (c, o, l, s) the word R_s of lane l = 4 gid + tig for word
    column 8o + gid (zero past N) and rows r = 16c + 4tig + 0..3 (words w0..w3): R0 = the low
    halves of w0 (low) and w1 (high), R1 their high halves, R2 and R3 the same of w2 and w3. A
    lane's 4 words of a chunk are one 16-byte load, a warp reads 512 contiguous bytes, and the
    mma's A fragments come out of them with one logic op per two weights. qzeros and scales stay
    as they are. Pack once when the weights are loaded, as inference engines repack AWQ for their
    kernels.

    With qzeros and scales (fp16), the blocks layout: int32 [ceil(N/64), K/G, G/16 * 128 + 40],
    one contiguous block per octet o and group g: the group's chunks (chunk-major, 512 bytes each),
    a lane's 4 words of a chunk those above with their bytes permuted (int4_i8.permute_block_words:
    P0..P3, each a word column's 4 rows of 2 columns, a byte per row: the int8 mma's A operand as
    it lies; the bf16 arithmetic permutes them back), then the scales of columns 64o .. 64o + 63
    (32 words of fp16 pairs), the 8 zeros words of word columns 8o .. 8o + 7 (scales and zeros zero
    past N). awq_gemv streams a block per group and warp (bulk copies into shared memory on
    Hopper)."""
    if qweight.dim() != 2 or qweight.dtype != torch.int32:
        raise ValueError(f"qweight must be AutoAWQ's int32 [K, N/8], got {qweight.dtype} {list(qweight.shape)}")
    K, N8 = qweight.shape
    if K % 16:
        raise ValueError(f"K={K} must be a multiple of 16")
    octets = cdiv(N8, 8)
    w = torch.nn.functional.pad(qweight, (0, octets * 8 - N8)).to(torch.int64) & 0xFFFFFFFF
    # row 16c + 4 tig + s, column 8o + gid -> (c, o, gid, tig, s)
    w = w.view(K // 16, 4, 4, octets, 8).permute(0, 3, 4, 1, 2)
    lo, hi = w & 0xFFFF, w >> 16
    r = torch.stack([lo[..., 0] | lo[..., 1] << 16, hi[..., 0] | hi[..., 1] << 16,
                     lo[..., 2] | lo[..., 3] << 16, hi[..., 2] | hi[..., 3] << 16], dim=-1)
    r = torch.where(r >= 1 << 31, r - (1 << 32), r).to(torch.int32)
    if qzeros is None and scales is None:
        return r.reshape(K // 16, octets, 32, 4).contiguous()
    if qzeros is None or scales is None:
        raise ValueError("the blocks layout takes both qzeros and scales (or neither, for the 4-D layout)")
    if scales.dtype != torch.float16 or scales.dim() != 2 or scales.shape[1] != N8 * 8:
        raise ValueError(f"scales must be AutoAWQ's fp16 [K/G, N] with N = {N8 * 8}, got {scales.dtype} "
                         f"{list(scales.shape)}")
    NG = scales.shape[0]
    if qzeros.dtype != torch.int32 or tuple(qzeros.shape) != (NG, N8) or NG == 0 or K % NG or (K // NG) % 16:
        raise ValueError(f"qzeros must be AutoAWQ's int32 [K/G, N/8] = {[NG, N8]} with the group size a multiple "
                         f"of 16, got {qzeros.dtype} {list(qzeros.shape)}")
    gu = K // NG // 16
    words = permute_block_words(r).view(NG, gu, octets, 128).permute(2, 0, 1, 3).reshape(octets, NG, gu * 128)
    sc = torch.nn.functional.pad(scales, (0, octets * 64 - N8 * 8)).contiguous().view(torch.int32)
    zz = torch.nn.functional.pad(qzeros, (0, octets * 8 - N8))
    return torch.cat([words, sc.view(NG, octets, 32).permute(1, 0, 2), zz.view(NG, octets, 8).permute(1, 0, 2)],
                     dim=2).contiguous()


def _check_gemm(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor,
                scales: torch.Tensor | None = None) -> tuple[int, int, int, int]:
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D [M, K], got shape {list(x.shape)}")
    M, K = x.shape
    if qweight.dim() == 3 and scales is not None:  # awq_gemv_pack's blocks; N from the scales
        N, NG = scales.shape[1], qzeros.shape[0]
        want = [cdiv(N, 64), NG, block_words(K // max(NG, 1))]
        if list(qweight.shape) != want or NG == 0 or K % NG:
            raise ValueError(f"qweight of shape {list(qweight.shape)} is not awq_gemv_pack's blocks for x with K={K} "
                             f"and these scales: expected {want}")
    elif qweight.dim() == 4 and scales is not None:  # awq_gemv_pack's layout; N from the scales
        N = scales.shape[1]
        if qweight.shape[0] * 16 != K or qweight.shape[1] != cdiv(N, 64) or qweight.shape[2:] != (32, 4):
            raise ValueError(f"packed qweight of shape {list(qweight.shape)} does not fit x with K={K} and "
                             f"{N} output columns: expected {[K // 16, cdiv(N, 64), 32, 4]} (awq_gemv_pack)")
        if qzeros.shape[1] * 8 != N:
            raise ValueError(f"qzeros has {qzeros.shape[1] * 8} columns, the scales {N}")
    elif qweight.dim() != 2:
        raise ValueError(f"qweight must be AutoAWQ's [K, N/8] or awq_gemv_pack's 3-D or 4-D layout, got shape "
                         f"{list(qweight.shape)}")
    else:
        if qweight.shape[0] != K:
            raise ValueError(f"x has K={K} but qweight has {qweight.shape[0]} rows")
        N = qweight.shape[1] * 8
    group_size = K // qzeros.shape[0]
    _check_awq(N, K, group_size)
    if x.stride(1) != 1:
        raise ValueError("x must be contiguous along K")
    return M, N, K, group_size


_SM_COUNT: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


_SCRATCH: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}


def _scratch(x: torch.Tensor, partials: int, counters: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp32 partials, int32 counters at zero) of x's device and current stream, grown as needed
    (see the module docstring)."""
    cuda = x.is_cuda
    key = (x.get_device(), current_stream() if cuda else 0)
    got = _SCRATCH.get(key)
    if got is None or got[0].numel() < partials or got[1].numel() < counters:
        ws = torch.empty(max(partials, 1 << 16, got[0].numel() if got else 0), dtype=torch.float32, device=x.device)
        counts = torch.zeros(max(counters, 4096, got[1].numel() if got else 0), dtype=torch.int32, device=x.device)
        got = _SCRATCH[key] = (ws, counts)
    return got


def awq_gemv_split(n_tiles: int, n_groups: int, device: torch.device, programs_per_sm: int = 4) -> int:
    """Default K split of awq_gemv: enough programs for `programs_per_sm` per SM on a GPU (each
    split keeps >= 2 groups, so the per-group work and the partials stay small); 1 on the CPU."""
    if device.type != "cuda":
        return 1
    want = max(1, (programs_per_sm * _sm_count(device)) // max(1, n_tiles))
    return max(1, min(want, n_groups // 2))


def awq_gemv_mode(x: torch.Tensor) -> str:
    """awq_gemv's default arithmetic for x: tensor cores on an NVIDIA GPU for bf16 x; fp32 with
    every nibble exact for fp32 x; else fp32 with two nibbles per shift."""
    if x.dtype == torch.float32:
        return "f32-exact"
    if x.dtype == torch.bfloat16 and x.device.type == "cuda":
        return "mma"
    return "f32"


Run = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
_PLANS: dict[tuple[Any, ...], Run] = {}


def awq_gemv(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             config: GemvConfig | None = None) -> torch.Tensor:
    """y = x @ W~^T for x [M, K] with small M (batch 1 decoding); y has x's dtype.

    `config` (tools/kernels/gemv_config.py; None: GemvConfig(), every knob awq_gemv's choice)
    holds the tuning knobs, each documented there; this docstring says how they act together.

    qweight is AutoAWQ's [K, N/8] or awq_gemv_pack's layout of it, which runs its own tensor-core
    kernel (tools/kernels/int4_packed.py: mode "mma", 16-byte loads, the zero points folded out of
    the inner loop, one group per loop step and one word column per thread; block_n is 64 *
    num_warps, unroll and stages do not apply, ahead is 2 by default for up to 8 rows per program
    (block_m <= 8 or M <= 8), the next group's loads in flight while one is computed). There,
    cluster=True (an NVIDIA GPU of sm_90 or newer, 2-8 splits, up to 8 rows per program) launches
    the splits of a tile as one thread block cluster that sums them in shared memory, in place of
    the global partials and the last program's sum; None: where it pays on the H200 (0.3-1.2 us):
    one row of x, 2-4 splits of 2 or more warps (5 or more splits, 1-warp programs and more rows
    of x are slower in clusters). evict_first (that kernel): the weight words are loaded with the
    L2 policy evict_first, so that the lines the call streams through L2 are the first replaced
    and the data of other kernels stays (its dirty lines are not written back during the call);
    None: where one program row covers every row of x (up to 8 rows, or 16 with block_m=16), so
    that no other program reads the same words. warp_split=True (that kernel): the num_warps
    warps of a program share the K of one octet (64 columns; block_n 64) and sum their totals in
    shared memory at the end, in place of reading an octet each (None: with the blocks layout).

    qweight may also be awq_gemv_pack's blocks (awq_gemv_pack(qweight, qzeros, scales): each
    octet's group one contiguous block of words, scales and zeros), read with warp_split: each warp
    streams its groups' blocks through a ring of `stages` slots of shared memory by bulk copies
    (the TMA; an NVIDIA GPU of sm_90 or newer), a slot refilled as soon as the warp has read it
    (None: 1 slot there, plain loads elsewhere; 0: plain loads, as the 4-D layout's). num_warps:
    None is 8 for the blocks layout (the H200's best on 14336x4096; 4 is 1% faster on 28672x8192),
    else 4.

    mode (None: awq_gemv_mode(x)) picks the arithmetic:
    - "f32": every weight dequantized to fp32 (two nibbles per shift; about 8 fewer bits for
      16-bit x), "f32-exact": one shift per nibble, every nibble exact (for fp32 x);
    - "bf16x2" (bf16 x): two weights per integer op and per bf16x2 subtract and FMA, the products
      summed in bf16 over the `unroll` rows of a step, then in fp32; "bf16x2-sub": the codes as
      bf16 subnormals, one shift per four weights;
    - "mma" (bf16 x): the products on tensor cores (tools/kernels/int4_mma.py), summed in fp32,
      the weights dequantized exactly into the mma's registers (q - z via the bf16 magic 128);
      up to 16 rows of x per program; "mma-sub": the codes as bf16 subnormals, scaled back by one
      bf16x2 FMA, one shift per four weights;
    - "mma-int8" (awq_gemv_pack's blocks, one row of x, groups of 128; None picks it there on the
      CPU and on GPUs of sm_90 or newer, where the blocks stream by bulk copies): x cut per group
      into 15-bit fixed point on the group's largest exponent (exact within 2^-6 of it, else within
      half a unit of 2^(E - 13)), the products on the int8 tensor cores as exact integer sums
      (tools/kernels/int4_i8.py); the H200's fastest batch-1 GEMV (benchmarks/RESULTS.md).
    The bf16x2 and mma modes use inline PTX on NVIDIA GPUs and a DSL emulation on the CPU (the same
    bits as the GPU for "mma-int8").

    Tiles: block_n columns per program (None: 64 * num_warps for the mma modes, where a thread
    holds one word (8 columns) of 4 rows per 16-row chunk; else 512 on a GPU, where a thread holds
    4 words (32 columns) of a row and 8 threads share K with 4 warps, 64 on the CPU). Rows per loop
    step: 16 * unroll (mma modes), else block_k * unroll; the step must divide the group size.
    split_k programs share K; their fp32 partials are summed by the last program of each tile (mma
    modes) or by a second small kernel. stages (mma modes, AutoAWQ's layout): one group per loop
    step, all of its loads at the top of the step, through a pipeline that deep (2 or more: on
    NVIDIA, cp.async copies into shared memory, stages - 1 groups in flight; 1: none); unroll and
    ahead then do not apply. block_m (mma modes): 16: two 8-row mma tiles share the dequantized
    weights; 8: the programs of the two row blocks each dequantize them, with half the
    registers."""
    cfg = _DEFAULT if config is None else config
    key = (x.shape, x.stride(), x.storage_offset() & 1, x.dtype, x.device, qweight.shape, qzeros.shape,
           scales.shape, cfg)
    run = _PLANS.get(key)
    if run is None:
        run = _plan_gemv(x, qweight, qzeros, scales, cfg)
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        _PLANS[key] = run
    return run(x, qweight, qzeros, scales)

def _plan_gemv(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
               cfg: GemvConfig) -> Run:
    """awq_gemv's checks and choices for calls like this one; returns what runs such a call."""
    mode, block_n, block_k, unroll, num_warps = cfg.mode, cfg.block_n, cfg.block_k, cfg.unroll, cfg.num_warps
    split_k, ahead, stages, block_m, maxnreg = cfg.split_k, cfg.ahead, cfg.stages, cfg.block_m, cfg.maxnreg
    cluster, evict_first, warp_split = cfg.cluster, cfg.evict_first, cfg.warp_split
    M, N, K, G = _check_gemm(x, qweight, qzeros, scales)
    packed_w = qweight.dim() in (3, 4)
    blocks = qweight.dim() == 3
    ring = 0  # the blocks layout's ring slots per warp (0: plain loads)
    if num_warps is None:
        num_warps = 8 if blocks else 4
    if warp_split is None:
        warp_split = blocks
    if blocks and not warp_split:
        raise ValueError("qweight in awq_gemv_pack's blocks layout is read with warp_split=True (or None)")
    if evict_first and not packed_w:
        raise ValueError("evict_first=True applies to the kernel of awq_gemv_pack's layout: pack qweight first")
    if warp_split and not packed_w:
        raise ValueError("warp_split=True applies to the kernel of awq_gemv_pack's layout: pack qweight first")
    if blocks:
        ring = _ring_stages(x, stages, num_warps, G)
    if mode is None:
        # the blocks layout's batch 1 (groups of 128): the int8 arithmetic where it streams (benchmarks/RESULTS.md)
        int8 = _int8_refusal(x, blocks, M, G, ring, cluster) is None
        mode = ("mma-int8" if int8 else "mma") if packed_w else awq_gemv_mode(x)
    packed = mode.startswith("bf16x2")
    mma = mode.startswith("mma")
    if (packed or mma) and x.dtype != torch.bfloat16:
        raise ValueError(f"mode {mode!r} needs bf16 x, got {x.dtype}")
    if mode == "mma-int8":
        refusal = _int8_refusal(x, blocks, M, G, ring, cluster)
        if refusal:
            raise ValueError(refusal)
        cluster = False
    if packed_w:
        if mode not in ("mma", "mma-int8"):
            raise ValueError(f"qweight in awq_gemv_pack's layout runs its own tensor-core kernel: mode must be None, "
                             f"'mma' or 'mma-int8', got {mode!r}")
        tile_n = 64 if warp_split else 64 * num_warps
        if block_n not in (None, tile_n):
            what = "64 with warp_split" if warp_split else f"64 * num_warps = {tile_n}"
            raise ValueError(f"qweight in awq_gemv_pack's layout takes one word column per thread: block_n must be "
                             f"{what}, got {block_n}")
        block_n = tile_n
        if not blocks and stages not in (None, 1):
            raise ValueError(f"qweight in awq_gemv_pack's layout streams one group per step with the next one's loads "
                             f"issued ahead (ahead=2), not through stages: stages must be None or 1, got {stages}")
        stages = 1
    if block_n is None:
        block_n = 64 * num_warps if mma else 512 if x.device.type == "cuda" else 64
    if stages is not None and not 1 <= stages <= 8:
        raise ValueError(f"stages must be None or 1 to 8, got {stages}")
    if mma and stages is not None:
        unroll = G // 16  # one group per step
    if unroll & (unroll - 1):
        raise ValueError(f"unroll must be a power of two, got {unroll}")
    step = 16 * unroll if mma else block_k * unroll
    if G % step:
        what = "16 * unroll" if mma else "block_k * unroll"
        raise ValueError(f"{what} = {step} must divide the group size {G}")
    words = 64 if warp_split else 64 * num_warps  # mma: words of a program per word of a thread
    if mma and block_n % words:
        raise ValueError(f"mode {mode!r} needs block_n a multiple of 64 * num_warps = {words}, got {block_n}")
    N8, NG = N // 8, K // G
    bn8 = block_n // 8
    if mma and block_n // words >= 4 and N8 % 4:
        # the mma asm assumes gid and tig on the lane bits and the V words in registers; an
        # inline asm op gets the canonical layout of its shape, whose vector width comes from the
        # loads of that shape: with rows of N/8 words not a multiple of 4, the words of rows 2tig
        # may not be 16-byte vectors, lanes then take half of V and the sums are wrong (seen on
        # the H200: every column of N=200 or 1000). With 2 words per thread they are 8-byte ones.
        raise ValueError(f"mode {mode!r} with block_n = {block_n} (4 words per thread) needs N a multiple of 32, "
                         f"got N = {N}: use block_n <= {2 * words}")
    n_tiles = cdiv(N8, bn8)
    if split_k is None:  # a program per octet and SM at least where the warps share K
        split = awq_gemv_split(n_tiles, NG, x.device, 1 if warp_split else 4)
    else:
        split = max(1, min(split_k, NG))
    per = cdiv(NG, split)
    if not packed_w:  # the packed kernel balances the groups over the splits itself
        split = cdiv(NG, per)
    if mma:
        return _plan_mma(x, M, N, K, G, NG, N8, bn8, n_tiles, split, per, mode, block_n, words, num_warps, unroll,
                         ahead, stages, block_m, 1 if packed_w else 0, maxnreg, cluster, evict_first, warp_split,
                         ring, block_words(G) if blocks else 0)
    if cluster:  # None: no
        raise ValueError(f"cluster=True sums the K splits of awq_gemv_pack's layout in a thread block cluster; mode "
                         f"{mode!r} does not take it")
    y_shape, dtype, device, cuda = (M, N), x.dtype, x.device, x.device.type == "cuda"
    magic = 0x43004300 if packed else 0x41800000
    launch = awq_gemv_kernel[(n_tiles, split, M)]
    consts = dict(G=G, BLOCK_K=block_k, BLOCK_N=block_n, UNROLL=unroll, EXACT=mode == "f32-exact",
                  EVEN_N=N8 % bn8 == 0, PACKED=packed, SUBNORMAL=mode == "bf16x2-sub", ASM=packed and cuda,
                  num_warps=num_warps)
    reduce = splitk_reduce_kernel[(cdiv(M * N, 1024),)]

    def run(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        y = torch.empty(y_shape, dtype=dtype, device=device)
        out = y if split == 1 else _scratch(x, split * M * N, 0)[0]
        launch(x, qweight, qzeros, scales.view(torch.int32), out, M, N, K, x.stride(0), N, N8, NG, per, M * N, magic,
               **consts)
        if split > 1:
            reduce(out, y, M * N, split, BLOCK=1024, num_warps=4)
        return y

    return run


def _plan_mma(x: torch.Tensor, M: int, N: int, K: int, G: int, NG: int, N8: int, bn8: int, n_tiles: int, split: int,
              per: int, mode: str, block_n: int, words: int, num_warps: int, unroll: int, ahead: int | None,
              stages: int | None, block_m: int, packed_w: int, maxnreg: int | None,
              cluster: bool | None = None, evict_first: bool | None = None, warp_split: bool = False,
              ring: int = 0, bw: int = 0) -> Run:
    # rows of x per program: the B columns of the mma, two 8-row tiles sharing the dequantized
    # weights for 9-16 rows
    mb = min(block_m, 1 << (M - 1).bit_length())
    copy_x = x.stride(0) % 2 or x.storage_offset() % 2  # read as int32 pairs
    sxm = (K if copy_x else x.stride(0)) // 2
    grid = (cdiv(M, mb), n_tiles, split)
    # the partials are summed by the last program of each tile, SB splits per load (at most
    # 32 values per thread)
    sb = 0 if split == 1 else min(1 << (split - 1).bit_length(), max(1, 16 // (mb * (block_n // words))))
    nb, cuda = 2 if mb > 8 else 1, x.device.type == "cuda"
    if cluster is None:  # where the H200 measured a gain (benchmarks/notes/NOTES-gpu.md, session 9)
        cluster = (bool(packed_w) and cuda and mb == 1 and 2 <= split <= 4 and num_warps >= 2
                   and torch.cuda.get_device_capability(x.device) >= (9, 0))
    if cluster:
        _check_cluster(x, packed_w, split, nb, split * 32 * num_warps * 4 * (8 if mb == 1 else 16))
        sb = 0
    common: dict[str, Any] = dict(N8=N8, G=G, NW=num_warps, MB=mb, NB=nb, EVEN_N=N8 % bn8 == 0, EMULATE=not cuda,
                                  SB=sb, num_warps=num_warps)
    if packed_w:
        launch = awq_gemv_packed_kernel[grid]
        if ahead is None:
            ahead = 2 if nb == 1 else 1  # 16 rows: the weights are already in registers twice
        if evict_first is None:  # the words are read once where one program row covers x
            # (benchmarks/notes/NOTES-gpu.md, session 10)
            evict_first = grid[0] == 1
        consts = dict(common, AHEAD=ahead, EVICT="evict_first" if evict_first else "", WK=int(warp_split),
                      KEVEN=int(NG % split == 0 and NG // split % num_warps == 0), BW=bw, STAGES=ring,
                      I8=int(mode == "mma-int8"))
        if cluster:
            consts.update(CLUSTER=split, cluster_dims=(1, 1, split))
        if maxnreg is None:  # at most 128 registers: two programs of 8 warps (or 16 warps) per SM (and with
            maxnreg = 128  # ptxas's own choice, 72, the 4-D layout's split-K sum spilled at 2-4 warps)
    else:
        launch = awq_gemv_mma_kernel[grid]
        consts = dict(common, V=block_n // words, U=unroll, SUBNORMAL=mode == "mma-sub", AHEAD=ahead or 1,
                      STAGES=stages or 0)
    if maxnreg is not None and cuda:
        consts["maxnreg"] = maxnreg
    y_shape, dtype, device = (M, N), x.dtype, x.device
    args = () if packed_w else (per,)

    def run(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        if copy_x:
            x = x.contiguous()
        y = torch.empty(y_shape, dtype=dtype, device=device)
        ws, counts = (y, y) if split == 1 or cluster else _scratch(x, split * M * N, grid[0] * grid[1])
        launch(x, qweight, qzeros, scales, y, M, N, K, sxm, N, NG, *args, M * N,
               ws, counts, **consts)
        return y

    return run


RING_SMEM = 112 * 1024  # shared memory of the rings: two programs fit on an SM


def _ring_stages(x: torch.Tensor, stages: int | None, num_warps: int, G: int) -> int:
    """Slots per warp of the blocks layout's ring (0: plain loads): stages 0 asks for plain loads,
    1 or more for a ring that deep (an NVIDIA GPU of sm_90 or newer), None: 1 where there is one
    (the H200's best: more blocks in flight make the L2 write back more of other kernels' lines)."""
    slot = block_words(G) * 4
    hopper = x.device.type == "cuda" and torch.cuda.get_device_capability(x.device) >= (9, 0)
    if stages is None:
        return 1 if hopper and ring_bytes(1, slot, num_warps) <= RING_SMEM else 0
    if stages == 0 or x.device.type != "cuda":
        return 0
    if not hopper:
        raise ValueError(f"stages={stages} streams the blocks with bulk copies, which need an NVIDIA GPU of sm_90 or "
                         f"newer: use stages=0")
    if ring_bytes(stages, slot, num_warps) > RING_SMEM:
        raise ValueError(f"a ring of {stages} slots of {slot} bytes for each of {num_warps} warps does not fit "
                         f"{RING_SMEM} bytes of shared memory: use fewer stages or warps")
    return stages


def _int8_refusal(x: torch.Tensor, blocks: bool, M: int, G: int, ring: int, cluster: bool | None) -> str | None:
    """Why mode "mma-int8" does not take this call (None: it does): it takes awq_gemv_pack's blocks,
    one row of x, groups of 128, no cluster, and on a GPU the blocks' ring (sm_90 or newer)."""
    if not blocks:
        return "mode 'mma-int8' reads awq_gemv_pack's blocks: pack with awq_gemv_pack(qweight, qzeros, scales)"
    if M != 1 or G != 128:
        return f"mode 'mma-int8' takes one row of x and groups of 128, got {M} rows and groups of {G}: use mode 'mma'"
    if cluster:
        return "mode 'mma-int8' sums K splits through global memory: cluster must be None or False"
    if x.device.type == "cuda" and not ring:
        return ("mode 'mma-int8' on a GPU streams the blocks through shared memory by bulk copies (an NVIDIA GPU of "
                "sm_90 or newer, stages >= 1): use mode 'mma'")
    return None


def _check_cluster(x: torch.Tensor, packed_w: int, split: int, nb: int, smem: int) -> None:
    """cluster=True needs the packed kernel, 2-8 splits, one B tile, the splits' totals (`smem`
    bytes) in one program's shared memory and an sm_90+ GPU."""
    if not packed_w:
        raise ValueError("cluster=True sums the K splits of awq_gemv_pack's layout: pack qweight first")
    if not 2 <= split <= 8:
        raise ValueError(f"cluster=True puts a tile's K splits in one cluster of 2 to 8 programs, got split_k={split}")
    if nb != 1:
        raise ValueError("cluster=True takes up to 8 rows of x per program: use block_m <= 8")
    if smem > 192 << 10:
        raise ValueError(f"cluster=True would gather {smem >> 10} KiB of totals in one program's shared memory "
                         "(at most 192): use fewer warps or splits")
    if x.device.type != "cuda" or torch.cuda.get_device_capability(x.device) < (9, 0):
        raise ValueError(f"cluster=True needs an NVIDIA GPU of sm_90 or newer (thread block clusters), x is on "
                         f"{x.device}")


def awq_gemm(x: torch.Tensor, qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor,
             block_m: int = 16, block_n: int = 64, block_k: int = 64, *, mma_rows: int = 32) -> torch.Tensor:
    """Y = X @ W~^T for X [M, K] fp16/bf16 (batch 16-256); Y has X's dtype.

    bf16 X of at most `mma_rows` rows on an NVIDIA GPU goes to awq_gemv's tensor-core kernel
    (mode "mma": the weights are dequantized once per 8 rows of X, straight into the mma's
    registers); otherwise each [block_k, block_n] weight tile is dequantized, then tl.dot (which
    reads AutoAWQ's layout, not awq_gemv_pack's)."""
    M, N, K, G = _check_gemm(x, qweight, qzeros, scales)
    if mma_rows >= M and x.dtype == torch.bfloat16 and x.device.type == "cuda":
        return awq_gemv(x, qweight, qzeros, scales, GemvConfig(mode="mma"))
    if qweight.dim() in (3, 4):
        raise ValueError(f"awq_gemm reads qweight in awq_gemv_pack's layout only for bf16 x of at most mma_rows = "
                         f"{mma_rows} rows on an NVIDIA GPU (x: {x.dtype}, {M} rows, {x.device.type}): pass "
                         "AutoAWQ's qweight")
    bk = min(block_k, G)
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    grid = (cdiv(M, block_m), cdiv(N, block_n))
    awq_gemm_kernel[grid](x, qweight, qzeros, scales, y, M, N, K, x.stride(0), y.stride(0), G=G,
                          BLOCK_M=block_m, BLOCK_K=bk, BLOCK_N=block_n)
    return y
