# mypy: disable-error-code="operator, attr-defined, index, arg-type, misc, assignment"
# (the @jit kernels are DSL compiled by Anvil, not Python that mypy can type)
"""What bounds the W4A16 GEMV: the bandwidth of reading the packed weights alone, with the access
pattern of the tensor-core GEMV (tools/kernels/int4_mma.py: 4-byte words of 4 rows per lane,
V words per lane) and with whole rows in 16-byte vectors, beside torch reading the same bytes and
torch's bf16 GEMV. Medians with L2 flushed before every call. hint: plain loads (0), or the words
through ld.global.nc with an L2 prefetch of 256 (1) or 128 bytes (2), or with an L2 evict-first
policy (3). Each table twice: L2 flushed by writing 256 MiB (the lines a call evicts are dirty) and
by reading them.

    python benchmarks/probes/quant_ceiling.py
"""

from __future__ import annotations

import itertools
import sys
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from quant_probe import median_ms  # noqa: E402 - same directory: timing with L2 flushed

import compiler.language as tl  # noqa: E402
from compiler import jit  # noqa: E402


@jit
def _word(p, HINT: tl.constexpr):
    if HINT == 1:  # the L2 fetches the whole 256-byte block around the word
        return tl.inline_asm_elementwise("ld.global.nc.L1::no_allocate.L2::256B.b32 $0, [$1];", "=r,l", [p],
                                         dtype=tl.int32, is_pure=False, pack=1)
    if HINT == 2:
        return tl.inline_asm_elementwise("ld.global.nc.L1::no_allocate.L2::128B.b32 $0, [$1];", "=r,l", [p],
                                         dtype=tl.int32, is_pure=False, pack=1)
    if HINT == 3:  # L2 evict-first: streamed words replace each other, not what L2 held before
        return tl.inline_asm_elementwise(
            "{ .reg .b64 pol; createpolicy.fractional.L2::evict_first.b64 pol, 1.0; "
            "ld.global.L1::no_allocate.L2::cache_hint.b32 $0, [$1], pol; }", "=r,l", [p],
            dtype=tl.int32, is_pure=False, pack=1)
    return tl.load(p)


@jit
def _step(pw, N8: tl.constexpr, U: tl.constexpr, HINT: tl.constexpr):
    w = ()
    for i in tl.static_range(4 * U):
        w = w + (_word(pw + ((i // 4) * 16 + (i % 2) + 8 * ((i // 2) % 2)) * N8, HINT),)
    return w


@jit
def words_like_mma(w_ptr, out_ptr, K_PER, N8: tl.constexpr, NW: tl.constexpr, V: tl.constexpr, U: tl.constexpr,
                   HINT: tl.constexpr, AHEAD: tl.constexpr):
    """XOR of the words the GEMV's lanes load: word column (8 w + gid) V + v, rows 2 tig + {0, 1, 8, 9}
    of each 16-row chunk, U chunks per step; AHEAD: the next step's words loaded before this
    step's are used (the GEMV's structure) or not."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    full = tl.zeros((NW, 8, 4, V), dtype=tl.int32)
    gid = tl.arange(0, 8)[None, :, None, None] + full
    tig = tl.arange(0, 4)[None, None, :, None] + full
    gcol = pid_n * (NW * 8 * V) + (tl.arange(0, NW)[:, None, None, None] * 8 + gid) * V \
        + tl.arange(0, V)[None, None, None, :]
    pw = w_ptr + pid_s * K_PER * N8 + (2 * tig * N8 + gcol)
    acc = full
    cur = _step(pw, N8, U, HINT)
    for k in range(0, K_PER, 16 * U):
        if AHEAD:
            ahead = tl.where(k + 16 * U < K_PER, 16 * U * N8, 0)
            pw += ahead
            nxt = _step(pw, N8, U, HINT)
            for i in tl.static_range(4 * U):
                acc = acc ^ cur[i]
            cur = nxt
        else:
            for i in tl.static_range(4 * U):
                acc = acc ^ cur[i]
            pw += 16 * U * N8
            cur = _step(pw, N8, U, HINT)
    tl.store(out_ptr + gcol + tig * 0, acc, mask=tig == 0)


@jit
def rows_16b(w_ptr, out_ptr, K_PER, N8: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """XOR of [ROWS, COLS] word tiles walking down K: each thread 4 consecutive words (16 bytes)."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    r = tl.arange(0, ROWS)
    c = pid_n * COLS + tl.arange(0, COLS)
    p = w_ptr + pid_s * K_PER * N8 + r[:, None] * N8 + c[None, :]
    acc = tl.zeros((ROWS, COLS), dtype=tl.int32)
    for _ in range(0, K_PER, ROWS):
        acc = acc ^ tl.load(p)
        p += ROWS * N8
    tl.store(out_ptr + c, tl.xor_sum(acc, 0))


@jit
def packed_read(w_ptr, out_ptr, GPS, NW: tl.constexpr, O: tl.constexpr, EVICT: tl.constexpr = ""):
    """XOR of awq_gemv_pack's words as its kernel reads them (groups of 128 rows): warp w of program
    (n, s) reads octet n NW + w, 8 chunks of 512 contiguous bytes per group (one 16-byte vector per
    lane each), GPS groups from group s GPS."""
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    wv = tl.arange(0, NW)[:, None, None]
    lane = tl.arange(0, 32)[None, :, None]
    s = tl.arange(0, 4)[None, None, :]
    p = w_ptr + ((pid_n * NW + wv) * 128 + lane * 4 + s) + pid_s * GPS * (8 * O * 128)
    acc = tl.zeros((NW, 32, 4), dtype=tl.int32)
    for _ in range(0, GPS):
        for u in tl.static_range(8):
            acc = acc ^ tl.load(p + u * (O * 128), eviction_policy=EVICT)
        p += 8 * O * 128
    tl.store(out_ptr + ((pid_n * NW + wv) * 128 + lane * 4 + s), acc)


# words_like_mma: (NW, V, U, HINT, AHEAD); rows_16b: (ROWS, COLS, warps)
MMA_PATTERNS = [(4, 1, 4, 0, 1), (4, 1, 4, 3, 1), (4, 1, 8, 0, 1), (4, 1, 8, 3, 1), (2, 1, 4, 0, 1), (2, 1, 4, 3, 1),
                (4, 2, 4, 3, 1), (4, 4, 2, 3, 1), (4, 4, 2, 0, 1), (8, 1, 4, 3, 1)]
ROW_TILES = [(8, 256, 4), (16, 256, 4), (32, 128, 4), (16, 512, 8), (64, 64, 4)]
SPLITS = [2, 4, 8, 16]
REPS = 30


def main() -> None:
    flush = torch.zeros(256 << 20, dtype=torch.int8, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for clean, (n, k) in itertools.product((False, True), ((28672, 8192), (14336, 4096))):
        print(f"\nL2 flushed by {'reading' if clean else 'writing'} 256 MiB before each call", end="")
        timed = partial(median_ms, flush=flush, reps=REPS, clean=clean)
        n8 = n // 8
        qw = torch.randint(-2**31, 2**31 - 1, (k, n8), dtype=torch.int32, device="cuda")
        nbytes = qw.numel() * 4
        x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
        w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda")
        t_gemv = timed(partial(torch.nn.functional.linear, x, w))
        print(f"\n{n}x{k}: int4 weights {nbytes / 1e6:.1f} MB; torch bf16 GEMV {t_gemv * 1e3:.1f} us "
              f"({n * k * 2 / t_gemv / 1e6:.0f} GB/s); 3.0x needs {t_gemv / 3 * 1e3:.1f} us")
        out = torch.empty(n8 * 4, dtype=torch.int32, device="cuda")
        for nw, v, u, hint, ahead in MMA_PATTERNS:
            tiles = n8 // (nw * 8 * v)
            for split in SPLITS:
                if (k // split) % (16 * u) or not sms // 2 <= tiles * split <= 16 * sms:
                    continue
                launch = partial(words_like_mma[(tiles, split)], qw, out, k // split, N8=n8, NW=nw, V=v, U=u,
                                 HINT=hint, AHEAD=ahead, num_warps=nw)
                t = timed(launch)
                print(f"  mma pattern NW={nw} V={v} U={u} hint={hint} split={split:2}: {t * 1e3:6.1f} us "
                      f"{nbytes / t / 1e6:5.0f} GB/s")
        for rows, cols, nw in ROW_TILES:
            tiles = n8 // cols
            for split in SPLITS:
                if (k // split) % rows or not sms // 2 <= tiles * split <= 16 * sms:
                    continue
                launch = partial(rows_16b[(tiles, split)], qw, out, k // split, N8=n8, ROWS=rows, COLS=cols,
                                 num_warps=nw)
                t = timed(launch)
                print(f"  rows 16B {rows}x{cols} w{nw} split={split:2}: {t * 1e3:6.1f} us {nbytes / t / 1e6:5.0f} GB/s")


if __name__ == "__main__":
    main()
