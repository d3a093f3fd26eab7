"""The runtime: specialization, caches (memory and disk), warmup, asm, autotune, heuristics, sources."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import compiler
import compiler.language as tl
from compiler import Config, autotune, cdiv, heuristics, jit, next_power_of_2


@jit
def scale(x_ptr, out_ptr, n, alpha, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs * stride, tl.load(x_ptr + offs * stride, mask=m) * alpha, mask=m)


@pytest.mark.parametrize("n", [1, 100, 1000, 4097])
def test_launch_with_grid_callable(n: int) -> None:
    x = torch.randn(n)
    out = torch.full_like(x, float("nan"))
    scale[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](x, out, n, 2.5, 1, BLOCK=256)
    torch.testing.assert_close(out, x * 2.5)


def test_int_equal_to_one_is_specialized_and_divisibility_recorded() -> None:
    x = torch.randn(64)
    out = torch.empty(64)
    k1 = scale[(1,)](x, out, 64, 1.0, 1, BLOCK=64)
    assert "%stride" not in k1.asm["tir"], "stride == 1 is baked in as a constant"
    assert "%n: i32 {divisibility=16}" in k1.asm["tir"]
    xs = torch.randn(128)
    y = torch.full((128,), float("nan"))
    k2 = scale[(1,)](xs, y, 64, 3.0, 2, BLOCK=64)
    assert k2 is not k1 and "%stride: i32" in k2.asm["tir"]
    torch.testing.assert_close(y[::2], xs[::2] * 3.0)
    assert y[1::2].isnan().all()


def test_warm_launch_reuses_the_compiled_kernel() -> None:
    x = torch.randn(300)
    out = torch.empty(300)
    a = scale[(1,)](x, out, 100, 1.5, 3, BLOCK=128)
    b = scale[(1,)](x, out, 100, 1.5, 3, BLOCK=128)
    assert a is b
    assert scale.warmup(x, out, 100, 1.5, 3, BLOCK=128, grid=(1,)) is a


def test_asm_artifacts() -> None:
    x = torch.randn(300)
    k = scale[(1,)](x, x, 100, 1.0, 3, BLOCK=128)
    assert k.asm["tir"].startswith("func @scale(")
    assert "define" in k.asm["llir"] and "anvil_scale" in k.asm["llir"]
    assert k.asm["asm"].strip()
    assert set(k.metadata["compile_ms"]) >= {"frontend_ms", "llvm_opt_ms", "total_ms"}


def test_disk_cache_survives_a_new_process(tmp_path: pytest.TempPathFactory) -> None:
    script = textwrap.dedent('''
        import time, torch
        import compiler.language as tl
        from compiler import jit

        @jit
        def inc(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

        x = torch.zeros(10)
        k = inc[(1,)](x, 10, BLOCK=16)
        assert x.eq(1).all()
        print(sorted(k.metadata["compile_ms"]))
    ''')
    path = tmp_path / "kern.py"  # type: ignore[operator]
    path.write_text(script)
    env = dict(os.environ, ANVIL_CACHE_DIR=str(tmp_path / "cache"))  # type: ignore[operator]
    first = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, check=True)
    second = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, check=True)
    assert "frontend_ms" in first.stdout
    assert "cache_load_ms" in second.stdout and "frontend_ms" not in second.stdout


@autotune(configs=[Config({"BLOCK": 64}, num_warps=2), Config({"BLOCK": 256}, num_warps=4)], key=["n"])
@jit
def tuned_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def test_autotune_picks_a_config_and_gives_correct_results() -> None:
    n = 3000
    x, y = torch.randn(n), torch.randn(n)
    out = torch.full_like(x, float("nan"))
    tuned_add[lambda m: (cdiv(n, m["BLOCK"]),)](x, y, out, n)
    torch.testing.assert_close(out, x + y)
    assert tuned_add.best_config is not None and tuned_add.best_config.kwargs["BLOCK"] in (64, 256)
    assert len(tuned_add.timings) == 2


def test_config_carries_the_launch_options_it_sets() -> None:
    c = Config({"BLOCK": 64}, num_warps=2, maxnreg=128, cluster_dims=(2, 1, 1))
    assert c.all_kwargs() == {"BLOCK": 64, "num_warps": 2, "num_stages": 3, "maxnreg": 128, "cluster_dims": (2, 1, 1)}
    assert repr(c) == "BLOCK: 64, num_warps: 2, num_stages: 3, maxnreg: 128, cluster_dims: (2, 1, 1)"
    assert Config({"BLOCK": 64}).all_kwargs() == {"BLOCK": 64, "num_warps": 4, "num_stages": 3}


@heuristics({"BLOCK": lambda args: next_power_of_2(args["n"])})
@jit
def whole_row_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))


@pytest.mark.parametrize("n", [3, 100, 1000])
def test_heuristics_compute_meta_parameters(n: int) -> None:
    x = torch.randn(n)
    out = torch.full((1,), float("nan"))
    whole_row_sum[(1,)](x, out, n)
    torch.testing.assert_close(out[0], x.sum(), rtol=1e-5, atol=1e-5)


def test_cdiv_and_next_power_of_2() -> None:
    assert cdiv(10, 4) == 3 and cdiv(8, 4) == 2
    assert [next_power_of_2(v) for v in (0, 1, 2, 3, 5, 1024, 1025)] == [1, 1, 2, 4, 8, 1024, 2048]


TEXT = '''
import math
import triton
import triton.language as tl

SCALE = 3
HALF: tl.constexpr = 0.5

@triton.jit
def _twice(v):
    return v * 2

@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, _twice(x) * SCALE + HALF + math.pi, mask=m)
'''


def test_compile_source_text_is_parsed_not_executed() -> None:
    k = compiler.compile_source(TEXT, kernel="kernel")
    x = torch.randn(300)
    out = torch.full_like(x, float("nan"))
    k[(cdiv(300, 128),)](x, out, 300, BLOCK=128)
    torch.testing.assert_close(out, x * 6 + 0.5 + 3.141592653589793)
    evil = "import os\nos.system('touch /tmp/anvil_pwned')\n" + TEXT
    compiler.compile_source(evil, kernel="kernel")
    assert not os.path.exists("/tmp/anvil_pwned")


def test_compile_for_signature_without_tensors() -> None:
    k = compiler.compile_source(TEXT, kernel="kernel")
    ck = k.compile({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    assert "tile<64xfp32>" in ck.asm["tir"]
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    with pytest.raises(compiler.errors.ArgumentError, match="unknown parameters of kernel: BLOK; its parameters"):
        k.compile(sig, {"BLOCK": 64, "BLOK": 32})  # a misspelt constexpr is not silently ignored
    with pytest.raises(compiler.errors.ArgumentError, match="signature names unknown parameters of kernel: m"):
        k.compile({**sig, "m": "i32"}, {"BLOCK": 64})


def test_real_triton_jit_function_is_compiled_by_anvil() -> None:
    triton = pytest.importorskip("triton")
    import triton.language as ttl

    @triton.jit
    def tk(x_ptr, out_ptr, n, BLOCK: ttl.constexpr):
        offs = ttl.program_id(0) * BLOCK + ttl.arange(0, BLOCK)
        m = offs < n
        x = ttl.load(x_ptr + offs, mask=m, other=0.0)
        ttl.store(out_ptr + offs, ttl.where(x > 0, x, 0.0) + ttl.sum(x, axis=0) * 0, mask=m)

    k = compiler.jit(tk)
    x = torch.randn(1000)
    out = torch.full_like(x, float("nan"))
    k[(cdiv(1000, 256),)](x, out, 1000, BLOCK=256)
    torch.testing.assert_close(out, torch.relu(x))
