"""Autotuning on CUDA: configs are compiled in parallel first and those that exceed the device's
shared memory or registers are dropped before timing (the compile side runs without a GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import compiler
from compiler import Config, errors
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.runtime.autotune import exceeds, precompile

SRC = (Path(__file__).resolve().parents[2] / "benchmarks" / "gemm_kernels.py").read_text()
SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32:16", "N": "i32:16", "K": "i32:16",
       "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"}
H200 = {"shared": 232448, "registers": 65536}


def test_exceeds_names_the_resource_and_both_amounts() -> None:
    assert exceeds({"shared": 1000, "n_regs": 128, "num_warps": 4}, H200) is None
    why = exceeds({"shared": 300000, "n_regs": 64, "num_warps": 4}, H200)
    assert why is not None and "300000 bytes of shared memory" in why and "232448" in why
    why = exceeds({"shared": 0, "n_regs": 255, "num_warps": 16}, H200)
    assert why is not None and "255 registers x 512 threads" in why and "65536" in why


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_configs_compile_in_parallel_and_big_ones_are_pruned() -> None:
    kernel = compiler.compile_source(SRC, kernel="matmul_kernel", filename="gemm_kernels_autotune.py")
    configs = [Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w)
               for bm, bn, bk, w in [(64, 64, 32, 4), (128, 128, 64, 8), (256, 256, 64, 8), (64, 64, 48, 4)]]

    def compile_one(cfg: Config) -> Any:
        consts = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "GROUP_M": 8, "ACTIVATION": "", **cfg.kwargs}
        return kernel.compile(SIG, consts, target="cuda:sm_90a", num_warps=cfg.num_warps)

    results = precompile(configs, compile_one)
    assert [c for c, _ in results] == configs
    *ok, bad = [k for _, k in results]
    assert isinstance(bad, errors.AnvilError)  # BLOCK_K=48: not a power of two; the others still compiled
    assert all(k.asm["cubin"][:4] == b"\x7fELF" for k in ok)
    small = {"shared": 48 * 1024, "registers": 65536}
    verdicts = [exceeds(k.metadata, small) for k in ok]
    assert verdicts[0] is None
    assert verdicts[2] is not None and "shared memory" in verdicts[2]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_a_config_past_the_target_s_shared_memory_is_pruned_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A config that needs more shared memory than a block of the target may have fails its
    compile with a ResourceError (Triton's OutOfResources): the tuner leaves it out and tunes the
    others, as Triton's autotuner does (liger-kernel's gemm_swiglu lists such configs)."""
    import sys

    import compiler.runtime.autotune as A

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from shared_memory_kernels import held_regions

    sig = {"x_ptr": "*i32", "y_ptr": "*i32", "sum_ptr": "*i32", "addr_ptr": "*i32"}
    configs = [Config({"A": 64 * 1024, "B": 48 * 1024}, num_warps=1),  # 112 KB: fits sm_90a's 227 KB
               Config({"A": 128 * 1024, "B": 128 * 1024}, num_warps=1)]  # 256 KB: does not

    def warmup(*args: Any, **kwargs: Any) -> Any:
        consts = {"A": kwargs["A"], "B": kwargs["B"], "NW": 1}
        return held_regions.compile(sig, consts, target="cuda:sm_90a", num_warps=kwargs["num_warps"])

    tuner = compiler.autotune(configs=configs, key=[])(held_regions)
    monkeypatch.setattr(tuner.fn, "warmup", warmup)
    monkeypatch.setattr(A, "device_limits", lambda device: H200)
    kept = tuner._precompiled(configs, (), {}, (1,), "cuda:0")
    assert kept == configs[:1]
    why = tuner.pruned[configs[1]]
    assert "needs 262144 bytes of shared memory per program; a block on sm_90a may have at most 232448" in why
