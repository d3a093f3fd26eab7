"""Programs that wait for each other on the CPU backend (backends/cpu/waits.py, runtime/waiting.py).

A GPU runs the programs of a launch at the same time, so kernels may wait in a loop for memory
another program writes: a lock around a reduction, an owner that waits for the partial results of
later programs (stream-K's fix-up), a chain. The CPU backend runs such kernels' programs
concurrently; a wait no program can end is stopped with a DeadlockError naming the loop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

import compiler.language as tl
from compiler import cdiv, jit
from compiler.errors import DeadlockError


def finishes(launch: Callable[[], Any], seconds: float = 120.0) -> Any:
    """`launch()`'s result; a launch that hangs fails the test instead of the test run."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = launch()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the launch did not finish within {seconds} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def _line_of(code: str) -> int:
    """The line of this file where `code` first appears."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if code in line)


# ---------------------------------------------------------------- a lock around partial sums
@jit
def _locked_column_sums(x_ptr, dw_ptr, lock_ptr, M, N, stride, GROUP: tl.constexpr, BLOCK_N: tl.constexpr):
    """Each row adds x[row] into one of GROUP partial buffers (row % GROUP) under that buffer's lock;
    the second half of lock_ptr counts whether the buffer was written yet (as Triton's layer-norm
    backward does for dW and dB)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    g = row % GROUP
    lock = lock_ptr + g
    count = lock_ptr + GROUP + g
    dw = dw_ptr + g * N + cols
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    if tl.load(count) == 0:
        tl.atomic_xchg(count, 1)
    else:
        x += tl.load(dw, mask=mask)
    tl.store(dw, x, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(lock, 0)


@pytest.mark.parametrize("M,N", [(1, 7), (37, 100), (500, 33)])
def test_lock_protected_reduction(M: int, N: int) -> None:
    group = 8
    x = torch.randn(M, N)
    dw = torch.full((group, N), float("nan"))
    locks = torch.zeros(2 * group, dtype=torch.int32)
    ck = finishes(lambda: _locked_column_sums[(M,)](x, dw, locks, M, N, x.stride(0), GROUP=group,
                                                      BLOCK_N=triton_next_pow2(N)))
    assert ck.binary.waits
    used = min(M, group)
    expect = torch.stack([x[g::group].sum(0) for g in range(used)])
    torch.testing.assert_close(dw[:used], expect, rtol=1e-5, atol=1e-5)
    assert locks[:group].eq(0).all()


def triton_next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


# ---------------------------------------------------------------- split-K with an owner that waits (stream-K)
@jit
def _split_k_fixup(a_ptr, b_ptr, c_ptr, part_ptr, flag_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    tile = pid // SPLIT
    split = pid % SPLIT
    grid_n = tl.cdiv(N, BLOCK_N)
    rm = (tile // grid_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = (tile % grid_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_iters = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_iters, SPLIT)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(split * per_split, tl.minimum((split + 1) * per_split, k_iters)):
        rk = kk * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tile_offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    if split != 0:  # publish the partial tile, then raise this program's flag
        tl.store(part_ptr + pid * BLOCK_M * BLOCK_N + tile_offs, acc)
        tl.atomic_xchg(flag_ptr + pid, 1)
    else:  # the tile's owner waits for every later program of its tile
        for j in range(1, SPLIT):
            while tl.atomic_cas(flag_ptr + pid + j, 1, 1) != 1:
                pass
            acc += tl.load(part_ptr + (pid + j) * BLOCK_M * BLOCK_N + tile_offs)
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))


@pytest.mark.parametrize("M,N,K,split", [(16, 16, 64, 2), (37, 29, 130, 4), (70, 45, 300, 8)])
def test_owner_waits_for_later_programs(M: int, N: int, K: int, split: int) -> None:
    bm, bn, bk = 16, 16, 16
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.full((M, N), float("nan"))
    tiles = cdiv(M, bm) * cdiv(N, bn)
    part = torch.full((tiles * split, bm, bn), float("nan"))
    flags = torch.zeros(tiles * split, dtype=torch.int32)
    finishes(lambda: _split_k_fixup[(tiles * split,)](a, b, c, part, flags, M, N, K, *a.stride(), *b.stride(),
                                                        *c.stride(), SPLIT=split, BLOCK_M=bm, BLOCK_N=bn,
                                                        BLOCK_K=bk))
    torch.testing.assert_close(c, (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- a chain: every program waits for the next
@jit
def _reverse_running_sum(x_ptr, flag_ptr, out_ptr, n, POLL: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0))
    if pid + 1 < tl.num_programs(0):
        if POLL == "volatile":
            while tl.load(flag_ptr + pid + 1, volatile=True) == 0:
                pass
        else:  # an atomic that writes nothing: adding 0
            while tl.atomic_add(flag_ptr + pid + 1, 0) == 0:
                pass
        s += tl.load(out_ptr + pid + 1)
    tl.store(out_ptr + pid, s)
    tl.debug_barrier()
    tl.atomic_xchg(flag_ptr + pid, 1)


@pytest.mark.parametrize("programs", [1, 3, 40])
@pytest.mark.parametrize("poll", ["volatile", "atomic_add"])
def test_every_program_waits_for_a_later_one(programs: int, poll: str) -> None:
    block = 16
    n = programs * block - 5 if programs > 1 else 9
    x = torch.randn(n)
    flags = torch.zeros(programs, dtype=torch.int32)
    out = torch.full((programs,), float("nan"))
    finishes(lambda: _reverse_running_sum[(programs,)](x, flags, out, n, POLL=poll, BLOCK=block))
    padded = torch.zeros(programs * block)
    padded[:n] = x
    expect = padded.view(programs, block).sum(1).flip(0).cumsum(0).flip(0)
    torch.testing.assert_close(out, expect, rtol=1e-4, atol=1e-4)


def test_more_waiting_programs_than_may_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_CPU_CONCURRENT_PROGRAMS", "6")
    monkeypatch.setenv("ANVIL_CPU_WAIT_TIMEOUT", "0.3")
    flags = torch.zeros(20, dtype=torch.int32)
    out = torch.zeros(20)
    with pytest.raises(DeadlockError) as info:
        finishes(lambda: _reverse_running_sum[(20,)](torch.randn(320), flags, out, 320, POLL="volatile",
                                                      BLOCK=16))
    text = str(info.value)
    assert "have not started" in text and "at most 6 programs" in text, text
    assert "ANVIL_CPU_CONCURRENT_PROGRAMS" in text and "tl.load(flag_ptr + pid + 1, volatile=True)" in text, text
    assert info.value.info["line"] == _line_of("while tl.load(flag_ptr + pid + 1, volatile=True) == 0:")


# ---------------------------------------------------------------- a wait no program can end
@jit
def _never_released(lock_ptr, out_ptr):
    pid = tl.program_id(0)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(out_ptr + pid, pid + 1)


@jit
def _counted_once(lock_ptr, out_ptr):
    pid = tl.program_id(0)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    tl.store(out_ptr, tl.load(out_ptr) + pid + 1)
    tl.atomic_xchg(lock_ptr, 0)


@pytest.mark.parametrize("debug", [False, True])
def test_a_lock_never_released_is_a_located_error(monkeypatch: pytest.MonkeyPatch, debug: bool) -> None:
    monkeypatch.setenv("ANVIL_CPU_WAIT_TIMEOUT", "0.3")
    lock = torch.zeros(1, dtype=torch.int32)
    out = torch.zeros(6, dtype=torch.int32)
    start = time.monotonic()
    with pytest.raises(DeadlockError) as info:
        finishes(lambda: _never_released[(6,)](lock, out, debug=debug))
    assert time.monotonic() - start < 30
    text = str(info.value)
    assert "_never_released" in text and "no program is left to start" in text, text
    assert "while tl.atomic_cas(lock_ptr, 0, 1) == 1:" in text and "lock taken is released" in text, text
    assert info.value.info["line"] == _line_of("while tl.atomic_cas(lock_ptr, 0, 1) == 1:")
    assert int((out > 0).sum()) == 1  # the one program that took the lock ran to its end
    # the process is unharmed: the next launch of a waiting kernel runs
    lock.zero_()
    total = torch.zeros(1, dtype=torch.int32)
    finishes(lambda: _counted_once[(50,)](lock, total, debug=debug))
    assert total.item() == 50 * 51 // 2


# ---------------------------------------------------------------- loops with atomics that do not wait
@jit
def _work_stealing(x_ptr, y_ptr, counter_ptr, n_tiles, BLOCK: tl.constexpr):
    """A persistent loop: each iteration takes the next tile from a counter (an atomic that writes)."""
    while True:
        t = tl.atomic_add(counter_ptr, 1)
        if t >= n_tiles:
            break
        offs = t * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2.0 + 1.0)


def test_a_loop_whose_atomics_write_is_never_taken_for_a_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_CPU_WAIT_TIMEOUT", "0")  # any program counted as waiting would stop the launch
    tiles, block = 20000, 32
    x = torch.randn(tiles * block)
    y = torch.full_like(x, float("nan"))
    counter = torch.zeros(1, dtype=torch.int32)
    ck = finishes(lambda: _work_stealing[(1,)](x, y, counter, tiles, BLOCK=block))
    assert ck.binary.waits
    torch.testing.assert_close(y, x * 2.0 + 1.0)


@jit
def _plain_atomics(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    for i in range(4):
        tl.atomic_add(out_ptr + i, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))


def test_kernels_without_waiting_loops_keep_the_split_grid() -> None:
    x = torch.randn(1000)
    out = torch.zeros(4)
    ck = _plain_atomics[(cdiv(1000, 64),)](x, out, 1000, BLOCK=64)
    assert not ck.binary.waits
    torch.testing.assert_close(out, x.sum().expand(4), rtol=1e-4, atol=1e-4)
