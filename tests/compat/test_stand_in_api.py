"""Triton API that kernel libraries use through the `triton` stand-in, beyond the language itself.

Each case was found by running a public kernel library unchanged on the CPU backend. Kernels that
run are checked against torch on fresh random inputs whose sizes are not multiples of the block,
with outputs poisoned by NaN first.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import compiler
import compiler.language as tl
from compiler import jit
from compiler.backends.nvidia.toolchain import find_ptxas


def _nan(n: int) -> torch.Tensor:
    return torch.full((n,), float("nan"))


@jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=offs < n)


@jit
def _sum_into(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), 0))


# ---------------------------------------------------------------- Autotuner's full constructor
def test_autotuner_subclass_with_tritons_constructor_runs_the_hooks(triton_stand_in: Any) -> None:
    triton = triton_stand_in
    calls: list[tuple[str, Any]] = []

    class Recording(triton.runtime.Autotuner):  # as libraries subclass it
        def __init__(self, fn: Any, arg_names: list[str], configs: list[Any], key: list[str], reset_to_zero: Any,
                     restore_value: Any, pre_hook: Any = None, post_hook: Any = None, prune_configs_by: Any = None,
                     warmup: Any = None, rep: Any = None, use_cuda_graph: bool = False, do_bench: Any = None,
                     cache_results: bool = False) -> None:
            super().__init__(fn, arg_names, configs, key, reset_to_zero, restore_value, pre_hook=pre_hook,
                             post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                             use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)

    def pre(nargs: dict[str, Any], reset_only: bool = False) -> None:
        calls.append(("reset" if reset_only else "pre", nargs["BLOCK"]))

    def post(nargs: dict[str, Any], exception: BaseException | None) -> None:
        assert exception is None
        calls.append(("post", nargs["BLOCK"]))

    configs = [triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})]
    tuner = Recording(_scale, _scale.arg_names, configs, ["n"], None, None, pre_hook=pre, post_hook=post,
                      use_cuda_graph=True, cache_results=True)
    n = 1000 + int(torch.randint(1, 31, ()).item())
    x, y = torch.randn(n), _nan(n)
    tuner[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, n)
    torch.testing.assert_close(y, x * 2.0 + 1.0)
    assert {("pre", 32), ("post", 32), ("pre", 64), ("post", 64)} <= set(calls)
    pres = [c for c in calls if c[0] == "pre"]
    assert len(pres) == len([c for c in calls if c[0] == "post"])  # every run between its two hooks
    assert calls[-1] == ("reset", tuner.best_config.kwargs["BLOCK"])  # after tuning, as Triton calls it
    before = len(calls)
    tuner[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, n)  # tuned: the hooks are for benchmarking only
    assert len(calls) == before


def test_autotune_hooks_and_do_bench_reach_the_tuner(triton_stand_in: Any) -> None:
    triton = triton_stand_in
    seen: list[str] = []

    def bench(fn: Any, quantiles: Any) -> list[float]:
        fn()
        seen.append("bench")
        return [float(len(seen)), 0.0, 0.0]  # the first config timed is the fastest

    tuned = triton.autotune([triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 128})], key=["n"],
                            pre_hook=lambda nargs, reset_only=False: seen.append("pre"),
                            post_hook=lambda nargs, exception: seen.append("post"), do_bench=bench)(_scale)
    n = 300 + int(torch.randint(1, 15, ()).item())
    x, y = torch.randn(n), _nan(n)
    tuned[lambda m: (triton.cdiv(n, m["BLOCK"]),)](x, y, n)
    torch.testing.assert_close(y, x * 2.0 + 1.0)
    assert seen.count("bench") == 2 and seen.count("post") == 2 and seen.count("pre") == 3
    assert tuned.best_config.kwargs == {"BLOCK": 16}


def test_reset_to_zero_holds_for_the_launch_after_tuning() -> None:
    configs = [compiler.Config({"BLOCK": 32}), compiler.Config({"BLOCK": 64})]
    tuned = compiler.autotune(configs, key=["n"], reset_to_zero=["out_ptr"])(_sum_into)
    n = 1000 + int(torch.randint(1, 31, ()).item())
    x, out = torch.randn(n), torch.zeros(1)
    tuned[lambda m: (compiler.cdiv(n, m["BLOCK"]),)](x, out, n)
    torch.testing.assert_close(out[0], x.sum(), rtol=1e-5, atol=1e-4)  # the benchmarks' sums are gone


# ---------------------------------------------------------------- CompiledKernel attributes
def test_launched_kernel_has_tritons_attributes_on_the_cpu() -> None:
    n = 200 + int(torch.randint(1, 31, ()).item())
    x, y = torch.randn(n), _nan(n)
    ck = _scale[(compiler.cdiv(n, 64),)](x, y, n, BLOCK=64)
    torch.testing.assert_close(y, x * 2.0 + 1.0)
    assert (ck.n_regs, ck.n_spills, ck.shared) == (0, 0, 0)
    assert ck.name == "_scale" and ck.metadata.name == "_scale" and ck.metadata["num_warps"] == ck.metadata.num_warps
    assert "define" in ck.asm["llir"]
    with pytest.raises(AttributeError):
        ck.metadata.no_such_field  # noqa: B018


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found")
def test_cuda_kernel_attributes_come_from_ptxas() -> None:
    ck = _scale.compile({"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}, target="cuda:sm_90a")
    assert ck.n_regs == ck.metadata["n_regs"] > 0
    assert ck.n_spills == ck.metadata.n_spills == 0 and ck.shared == ck.metadata.shared
    assert ck.name == "_scale" and ".entry" in ck.asm["ptx"]


# ---------------------------------------------------------------- triton.language.standard._log2
def test_log2_of_a_power_of_two_on_the_host_and_in_kernels(triton_stand_in: Any) -> None:
    triton = triton_stand_in
    from triton.language.standard import _is_power_of_two, _log2

    assert [_log2(v) for v in (1, 2, 64, 1024)] == [0, 1, 6, 10]
    assert _log2(triton.language.constexpr(256)) == 8 and _is_power_of_two(64) and not _is_power_of_two(48)

    @jit
    def shift(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        LOG: tl.constexpr = _log2(BLOCK)
        tl.static_assert(_is_power_of_two(BLOCK))
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, x * LOG + (offs >> LOG).to(tl.float32), mask=offs < n)

    n = 500 + int(torch.randint(1, 63, ()).item())
    x, y = torch.randn(n), _nan(n)
    shift[(compiler.cdiv(n, 64),)](x, y, n, BLOCK=64)
    torch.testing.assert_close(y, x * 6 + (torch.arange(n) // 64).float())


# ---------------------------------------------------------------- tl.dot(a, b, trans_b=True)
@jit
def _dot_trans_b(a_ptr, b_ptr, c_ptr):
    offs = tl.arange(0, 16)
    a = tl.load(a_ptr + offs[:, None] * 16 + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * 16 + offs[None, :])
    tl.store(c_ptr + offs[:, None] * 16 + offs[None, :], tl.dot(a, b, trans_b=True))


def test_dot_trans_b_is_refused_with_the_rewrite() -> None:
    a, b, c = torch.randn(16, 16), torch.randn(16, 16), torch.empty(16, 16)
    with pytest.raises(compiler.ArgumentError) as info:
        _dot_trans_b[(1,)](a, b, c)
    err = info.value
    assert "trans_b" in err.message and err.hint == "transpose the operand instead: tl.dot(a, tl.trans(b))"
    assert err.lineno == _dot_trans_b.fn.__code__.co_firstlineno + 5 and "trans_b=True" in str(err)


# ---------------------------------------------------------------- dtype arguments read as constexprs
@jit
def _cast_to(x, dtype):
    return x.to(dtype.value)


@jit
def _cast_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, OUT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    wrapped = tl.constexpr(tl.float16)
    y = _cast_to(x, wrapped).to(tl.float32) + tl.zeros([BLOCK], dtype=wrapped).to(tl.float32)
    tl.store(y_ptr + offs, _cast_to(y, OUT), mask=offs < n)


def test_dtype_value_in_a_helper_as_triton_wraps_dtypes() -> None:
    n = 300 + int(torch.randint(1, 63, ()).item())
    x, y = torch.randn(n), _nan(n)
    _cast_kernel[(compiler.cdiv(n, 128),)](x, y, n, BLOCK=128, OUT=tl.float32)
    torch.testing.assert_close(y, x.half().float(), rtol=0, atol=0)


HEADER = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr, n):\n"


@pytest.mark.parametrize("body, words", [
    ("x = tl.float32.value.__class__", "'__class__'"),
    ("x = tl.float32.value.ir", "'ir'"),
    ("x = tl.constexpr(tl.float32).value.ir", "'ir'"),
    ("x = tl.float32.value.value.to", "'to'"),
    ("x = tl.float32.value.__dict__", "'__dict__'"),
    ("x = tl.standard._log2(4)", "'_log2'"),
])
def test_dtype_value_reaches_nothing_more(body: str, words: str) -> None:
    src = HEADER + f"    {body}\n"
    with pytest.raises(compiler.CompilationError) as info:
        compiler.compile_source(src, "k").compile({"x_ptr": "*fp32", "n": "i32"}, {}, target="cpu")
    assert words in str(info.value) and info.value.lineno == 6, str(info.value)


# ---------------------------------------------------------------- triton.language.core.CONSTEXPR_0
FLIP = """
import triton
import triton.language as tl


@triton.jit
def flip(x_ptr, y_ptr, n, BLOCK: tl.constexpr, DESCENDING: tl.constexpr = tl.core.CONSTEXPR_0):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, -x if DESCENDING else x, mask=offs < n)
"""


def _flip_module(tmp_path: Any) -> Any:
    import importlib.util

    (tmp_path / "flip_kernel.py").write_text(FLIP)  # a module as libraries write them
    spec = importlib.util.spec_from_file_location("flip_kernel", tmp_path / "flip_kernel.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_constexpr_0_is_there_for_parameter_defaults(triton_stand_in: Any, tmp_path: Any) -> None:
    mod = _flip_module(tmp_path)  # the module imports: its signature reads tl.core.CONSTEXPR_0
    core = triton_stand_in.language.core
    assert core.CONSTEXPR_0 == 0 and isinstance(core.CONSTEXPR_0, triton_stand_in.language.constexpr)
    n = 200 + int(torch.randint(1, 31, ()).item())
    for descending in (0, 1):
        x, y = torch.randn(n), _nan(n)
        mod.flip[(compiler.cdiv(n, 64),)](x, y, n, BLOCK=64, DESCENDING=descending)
        torch.testing.assert_close(y, -x if descending else x)


def test_constexpr_0_default_is_used_when_the_argument_is_left_out(triton_stand_in: Any, tmp_path: Any) -> None:
    mod = _flip_module(tmp_path)
    n = 200 + int(torch.randint(1, 31, ()).item())
    x, y = torch.randn(n), _nan(n)
    mod.flip[(compiler.cdiv(n, 64),)](x, y, n, BLOCK=64)
    torch.testing.assert_close(y, x)
