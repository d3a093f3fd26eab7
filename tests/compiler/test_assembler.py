"""PTX -> cubin: the in-process libnvJitLink path gives a cubin and ptxas's report, like ptxas."""

from __future__ import annotations

from pathlib import Path

import pytest

import compiler
from compiler.backends.nvidia import jitlink, toolchain

SRC = (Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_kernels.py").read_text()
SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32:16"}


def _ptx() -> str:
    k = compiler.compile_source(SRC, kernel="add_kernel")
    return str(k.compile(SIG, {"BLOCK": 1024}, target="cuda:sm_90a").asm["ptx"])


@pytest.mark.skipif(toolchain.find_ptxas() is None, reason="ptxas not found")
def test_ptxas_binary_assembles() -> None:
    cubin, rep = toolchain.assemble_with_ptxas(_ptx(), "sm_90a")
    assert cubin[:4] == b"\x7fELF" and rep.registers > 0


def test_libnvjitlink_assembles_when_present() -> None:
    paths = jitlink._library_candidates()
    linker = None
    for p in paths:
        try:
            linker = jitlink.JitLinker(p)
            break
        except (OSError, AttributeError):
            continue
    if linker is None:
        pytest.skip("libnvJitLink not found")
    out = linker.assemble(_ptx(), "sm_90a")
    assert out is not None
    cubin, log = out
    assert cubin[:4] == b"\x7fELF"
    assert toolchain.parse_report(log).registers > 0
    assert linker.assemble("this is not ptx", "sm_90a") is None  # a failure falls back to ptxas


def test_assembler_never_waits_for_the_warm_up() -> None:
    # before the background load finishes, ready_linker() says "use ptxas" instead of blocking
    if not jitlink._ready.is_set():
        assert jitlink.ready_linker() is None
    jitlink._ready.wait(60)
    lk = jitlink.ready_linker()
    assert lk is None or lk.version[0] >= 12
