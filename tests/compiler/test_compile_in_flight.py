"""A compile already under way for a key is waited for, not repeated (compiled.compile_kernel)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import torch

import compiler
from compiler import errors
from compiler.runtime import compiled

SRC = '''
import triton
import triton.language as tl

@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
'''


def _slow_counting(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[str]:
    calls: list[str] = []
    real = compiled._build

    def build(*args: Any, **kwargs: Any) -> Any:
        calls.append(threading.current_thread().name)
        time.sleep(0.3)  # long enough for the other thread to arrive while this one compiles
        if fail and len(calls) == 1:
            raise errors.CompilationError("first compile failed on purpose")
        return real(*args, **kwargs)
    monkeypatch.setattr(compiled, "_build", build)
    return calls


def _both(kernel: Any) -> tuple[list[Any], list[BaseException]]:
    x, y = torch.randn(100), torch.empty(100)
    results: list[Any] = []
    errs: list[BaseException] = []

    def go() -> None:
        try:
            results.append(kernel.warmup(x, y, 100, BLOCK=64, grid=(2,)))
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errs.append(e)
    threads = [threading.Thread(target=go, name=f"t{i}") for i in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    return results, errs


def test_the_second_thread_waits_for_the_first_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _slow_counting(monkeypatch)
    kernel = compiler.compile_source(SRC.replace("double", "double_a"), kernel="double_a")
    results, errs = _both(kernel)
    assert not errs and len(results) == 2 and results[0] is results[1]
    assert len(calls) == 1  # one compile, whichever thread got there first


def test_when_the_first_compile_fails_the_second_compiles_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _slow_counting(monkeypatch, fail=True)
    kernel = compiler.compile_source(SRC.replace("double", "double_b"), kernel="double_b")
    results, errs = _both(kernel)
    assert sorted(calls) == ["t0", "t1"]
    assert len(errs) == 1 and "on purpose" in str(errs[0]) and len(results) == 1
    y = torch.empty(100)
    x = torch.randn(100)
    kernel[(2,)](x, y, 100, BLOCK=64)
    torch.testing.assert_close(y, x * 2)
