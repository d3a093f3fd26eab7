"""Autotuning does not wait for a config that takes far longer to compile than the others."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from compiler import errors
from compiler.runtime.autotune import Config, precompile


def test_a_straggler_is_left_out_and_the_others_kept() -> None:
    release = threading.Event()
    configs = [Config({"B": b}) for b in (1, 2, 3, 4, 5)]

    def compile_one(cfg: Config) -> Any:
        if cfg.kwargs["B"] == 4:
            release.wait(30)  # the straggler
            return "late"
        time.sleep(0.01)
        return f"kernel {cfg.kwargs['B']}"

    t = time.perf_counter()
    results = precompile(configs, compile_one, min_s=0.3, factor=5.0)
    elapsed = time.perf_counter() - t
    release.set()
    assert elapsed < 5
    assert [c for c, _ in results] == configs
    got = dict((c.kwargs["B"], k) for c, k in results)
    assert got[1] == "kernel 1" and got[5] == "kernel 5"
    assert isinstance(got[4], errors.ResourceError) and "still compiling after" in str(got[4])


def test_errors_are_verdicts_and_bugs_are_raised() -> None:
    configs = [Config({"B": b}) for b in (1, 2)]

    def refuse(cfg: Config) -> Any:
        if cfg.kwargs["B"] == 2:
            raise errors.ShapeError("B=2 is refused")
        return "ok"

    results = precompile(configs, refuse)
    assert results[0][1] == "ok" and isinstance(results[1][1], errors.ShapeError)

    def bug(cfg: Config) -> Any:
        raise KeyError("a bug")

    with pytest.raises(KeyError, match="a bug"):
        precompile(configs, bug)


def test_with_one_worker_a_straggler_does_not_hold_back_the_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    release = threading.Event()
    configs = [Config({"B": b}) for b in (1, 2, 3, 4)]

    def compile_one(cfg: Config) -> Any:
        if cfg.kwargs["B"] == 2:
            release.wait(30)
        return cfg.kwargs["B"]

    results = precompile(configs, compile_one, min_s=0.3, factor=5.0)
    release.set()
    assert [k for _, k in results][2:] == [3, 4]
    assert isinstance(results[1][1], errors.ResourceError)
