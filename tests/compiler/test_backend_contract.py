"""The backend contract: targets pick their backend in one registry, every backend's stages run in
one loop that keeps each stage's output, `asm["tir"]` is the Tile IR as lowered, the verifier
names the stage that broke the IR, and the disk cache serves CUDA kernels as well as CPU ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import compiler
import compiler.language as tl
from compiler import errors as E
from compiler import jit
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.backends.registry import backend_for, known_targets

ROOT = Path(__file__).resolve().parents[2]
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")


@jit
def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@jit
def mm_acc(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, BK: tl.constexpr):
    """c = c + a @ b for one BLOCK x BLOCK tile, through K in BK steps (row-major, contiguous)."""
    r = tl.arange(0, BLOCK)
    k = tl.arange(0, BK)
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + r[:, None] * K + (k0 + k)[None, :])
        b = tl.load(b_ptr + (k0 + k)[:, None] * BLOCK + r[None, :])
        acc = acc + tl.dot(a, b)
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], acc)


AXPY_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"}
MM_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32:16"}


def test_an_unknown_target_names_the_known_ones() -> None:
    with pytest.raises(E.ArgumentError) as info:
        axpy.compile(AXPY_SIG, {"BLOCK": 128}, target="rocm:gfx942")
    assert "'rocm:gfx942'" in str(info.value)
    assert all(repr(t) in str(info.value) for t in known_targets()) and "'cpu'" in str(info.value)
    with pytest.raises(E.ArgumentError, match="cuda:sm_<NN>"):
        axpy.compile(AXPY_SIG, {"BLOCK": 128}, target="cuda:volta")
    assert backend_for("cuda:sm_80") is backend_for("cuda") and backend_for("cpu").name == "cpu"


def test_cpu_stages_and_the_tile_ir_as_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_CACHE", "0")
    ck = mm_acc.compile(MM_SIG, {"BLOCK": 16, "BK": 16}, target="cpu")
    out = ck.artifacts.outputs
    assert list(out) == ["tir.fold", "tir.cse", "tir.dce", "tir.fold_dot_add", "llir", "obj"]
    # the CPU backend folds `acc + dot(a, b)` into the dot: the add is in the IR before, not after
    def tile_adds(tir: str) -> int:
        return sum(" = add " in line and "tile<16x16xfp32>" in line for line in tir.splitlines())

    assert tile_adds(out["tir.dce"]) == 1 and tile_adds(ck.asm["tir"]) == 0
    assert ck.asm["tir"] == out["tir.fold_dot_add"] and ck.asm["llir"] == out["llir"]
    a, b = torch.randn(16, 48).half(), torch.randn(48, 16).half()
    c = torch.zeros(16, 16)
    mm_acc[(1,)](a, b, c, 48, BLOCK=16, BK=16)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


@needs_ptxas
def test_cuda_stages_and_the_tile_ir_as_lowered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Tile IR of a CUDA kernel is the one lowered: after the loads feeding the dot became
    asynchronous copies (pipelining for wgmma on sm_90a), which earlier only the LLVM IR showed."""
    monkeypatch.setenv("ANVIL_CACHE", "0")
    monkeypatch.setenv("ANVIL_WGMMA", "1")
    monkeypatch.setenv("ANVIL_PIPELINE", "1")
    ck = mm_acc.compile(MM_SIG, {"BLOCK": 64, "BK": 32}, target="cuda:sm_90a", num_stages=3)
    out = ck.artifacts.outputs
    assert list(out) == ["tir.fold", "tir.cse", "tir.dce", "tir.mark_kmajor_b", "tir.pipeline_dot_loads",
                         "tir.prefetch_dot_operands", "tir.assign_layouts", "llir", "ptx", "cubin"]
    assert "async_copy" not in out["tir.dce"] and "async_copy" in ck.asm["tir"] and "async_wait" in ck.asm["tir"]
    # the last stage's IR is the prefetch pass's, each tile value annotated with its planned layout
    assert ck.asm["tir"] == out["tir.assign_layouts"]
    prefetched = out["tir.prefetch_dot_operands"]
    assert isinstance(prefetched, str) and "#L" not in prefetched
    assert re.sub(r" (#L\d+|shared)\b", "", ck.asm["tir"].split("func @", 1)[1]) == prefetched.split("func @", 1)[1]
    assert re.search(r"^#L0 = register=", ck.asm["tir"], re.M) and " shared" in ck.asm["tir"]
    assert "cp.async" in ck.asm["ptx"] and "wgmma" in ck.asm["ptx"] and ck.asm["cubin"][:4] == b"\x7fELF"
    assert type(ck) is compiler.CompiledKernel


def test_the_verifier_names_the_stage_that_broke_the_ir(monkeypatch: pytest.MonkeyPatch) -> None:
    import compiler.passes as passes
    from compiler.runtime.stages import StageVerificationError

    def drop_first_op(fn: Any) -> None:  # the function's first op, though later ops use its result
        fn.body.ops.pop(0)

    monkeypatch.setenv("ANVIL_CACHE", "0")
    monkeypatch.setenv("ANVIL_VERIFY_IR", "1")
    monkeypatch.setattr(passes, "PIPELINE", (*passes.PIPELINE, drop_first_op))
    with pytest.raises(StageVerificationError, match=r"axpy after stage tir\.drop_first_op"):
        axpy.compile(AXPY_SIG, {"BLOCK": 64}, target="cpu")


_SECOND_PROCESS = """
import json, sys, time
import compiler
from compiler.runtime import compiled, stages
from tests.compiler.test_backend_contract import axpy, AXPY_SIG

def no_stage(*args, **kwargs):
    raise AssertionError("a stage ran: the kernel was compiled again instead of loaded from the disk cache")

stages.run_stages = no_stage
compiled._build = no_stage
t0 = time.perf_counter()
ck = axpy.compile(AXPY_SIG, {"BLOCK": 256}, target=sys.argv[1])
ms = (time.perf_counter() - t0) * 1e3
print(json.dumps({"compile_ms": ck.metadata["compile_ms"], "wall_ms": ms, "tir": ck.asm["tir"],
                  "code": ck.asm["ptx"] if "ptx" in ck.asm else ck.asm["llir"],
                  "cubin": ck.asm["cubin"].hex() if "cubin" in ck.asm else None, "n_regs": ck.metadata["n_regs"],
                  "type": type(ck).__name__,
                  "tir_stages": {k: v for k, v in ck.artifacts.outputs.items() if k.startswith("tir.")}}))
"""


def _second_process(target: str, cache: Path) -> dict[str, Any]:
    env = {**os.environ, "ANVIL_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _SECOND_PROCESS, target], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.parametrize("target", ["cpu", pytest.param("cuda:sm_90a", marks=needs_ptxas)])
def test_a_cached_kernel_loads_in_a_new_process_without_a_stage(target: str, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANVIL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ANVIL_CACHE", "1")
    from compiler.runtime import compiled

    monkeypatch.setattr(compiled, "_MEMORY", {})
    ck = axpy.compile(AXPY_SIG, {"BLOCK": 256}, target=target)
    assert "cache_load_ms" not in ck.metadata["compile_ms"]
    assert (tmp_path / f"{ck.cache_key}.json").exists()
    got = _second_process(target, tmp_path)
    assert "cache_load_ms" in got["compile_ms"] and "frontend_ms" not in got["compile_ms"]
    assert got["type"] == "CompiledKernel" and got["tir"] == ck.asm["tir"]
    # the Tile IR after each pass, those of passes that changed nothing (stored once) included
    assert got["tir_stages"] == {k: v for k, v in ck.artifacts.outputs.items() if k.startswith("tir.")}
    assert len(set(got["tir_stages"].values())) < len(got["tir_stages"])
    if target == "cpu":
        assert got["code"] == ck.asm["llir"]
    else:
        assert got["code"] == ck.asm["ptx"] and bytes.fromhex(got["cubin"]) == ck.asm["cubin"]
        assert got["n_regs"] == ck.metadata["n_regs"]  # ptxas's count, cached: nothing loaded to ask the driver


@needs_ptxas
def test_a_fresh_cache_finds_a_cuda_kernel_and_launches_it_through_the_driver(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory cache forgotten, the kernel comes from disk, and its first launch loads the cached
    cubin (a stand-in for the driver here: tests/gpu/test_gpu_disk_cache.py runs it on a GPU)."""
    from compiler.backends.nvidia import driver
    from compiler.runtime import compiled

    monkeypatch.setenv("ANVIL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ANVIL_CACHE", "1")
    monkeypatch.setattr(compiled, "_MEMORY", {})
    first = axpy.compile(AXPY_SIG, {"BLOCK": 128}, target="cuda:sm_80", debug=True)
    monkeypatch.setattr(compiled, "_MEMORY", {})
    monkeypatch.setattr(compiled, "_build", lambda *a: pytest.fail("compiled again"))
    loaded: list[tuple[bytes, str]] = []

    class Loaded:
        registers = 7

    def load_cubin(cubin: bytes, symbol: str, *rest: Any) -> Any:
        loaded.append((cubin, symbol))
        return Loaded()

    monkeypatch.setattr(driver, "load_cubin", load_cubin)
    from compiler.backends.nvidia.debug import DEBUG_LOCS

    locs = DEBUG_LOCS.pop(first.binary.symbol)  # as in a process that never compiled it
    again = axpy.compile(AXPY_SIG, {"BLOCK": 128}, target="cuda:sm_80", debug=True)
    assert again is not first and "cache_load_ms" in again.metadata["compile_ms"]
    assert isinstance(again.function, Loaded) and loaded == [(first.asm["cubin"], first.binary.symbol)]
    assert [(loc.file, loc.line) for loc in DEBUG_LOCS[first.binary.symbol]] == [(loc.file, loc.line) for loc in locs]
