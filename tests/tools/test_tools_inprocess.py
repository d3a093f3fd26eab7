"""The tool functions as plain Python, running jobs in this process (no MCP, no workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from compiler.backends.nvidia.toolchain import find_ptxas
from server.demo import VECTOR_ADD
from tools.bench import benchmark
from tools.compile import compile_kernel, read_artifact
from tools.errors import ToolInputError
from tools.executor import gpu_available
from tools.launch import launch_kernel
from tools.limits import Limits
from tools.models import BenchmarkRequest, CompileRequest, LaunchRequest
from tools.runtime import Runtime

N = 1000
ARGS: dict[str, Any] = {
    "x_ptr": {"shape": [N]},
    "y_ptr": {"shape": [N]},
    "out_ptr": {"shape": [N], "init": "empty"},
    "n": N,
}


def run(coro_fn: Any, *args: Any) -> Any:
    return anyio.run(coro_fn, *args)


@pytest.fixture(scope="module")
def rt() -> Runtime:
    return Runtime(limits=Limits(max_grid_programs=4096))


def test_compile_is_cached_by_content(rt: Runtime) -> None:
    req = CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, artifacts=["tir"], artifact_lines=3)
    first = run(compile_kernel, rt, req)
    again = run(compile_kernel, rt, req)
    assert first.kernel_id == again.kernel_id and again.cached and not first.cached
    assert first.signature == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    assert first.diagnostics[0].severity == "note" and "assumed" in first.diagnostics[0].message
    page = first.artifacts["tir"]
    assert page.start_line == 1 and page.end_line == 3 and "add_kernel" in page.text
    if page.total_lines > 3:
        assert page.next_page and "start_line=4" in page.next_page
        nxt = run(read_artifact, rt, first.kernel_id, "tir", 4, 3)
        assert nxt.start_line == 4
    with pytest.raises(ToolInputError, match=r"start_line=100000 is past the end of 'tir', which has \d+ line"):
        run(read_artifact, rt, first.kernel_id, "tir", 100000, 3)
    other = run(compile_kernel, rt, CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 128}))
    assert other.kernel_id != first.kernel_id


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
def test_a_block_size_not_annotated_constexpr_is_named_as_such(rt: Runtime) -> None:
    source = VECTOR_ADD.replace("BLOCK: tl.constexpr", "BLOCK")
    assert source != VECTOR_ADD
    with pytest.raises(ToolInputError, match=r"annotate it `BLOCK: tl.constexpr` in the kernel; else pass it in args"):
        run(compile_kernel, rt, CompileRequest(source=source, constexprs={"BLOCK": 256}))


def test_compile_for_the_gpu_with_a_register_cap(rt: Runtime) -> None:
    """maxnreg reaches the PTX (and the kernel_id); out of range it is refused before compiling."""
    req = CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, target="cuda:sm_90a", artifacts=["ptx"],
                         artifact_lines=10**5)
    free = run(compile_kernel, rt, req)
    capped = run(compile_kernel, rt, req.model_copy(update={"maxnreg": 32}))
    assert capped.kernel_id != free.kernel_id
    assert ".maxnreg 32" in capped.artifacts["ptx"].text and ".maxnreg" not in free.artifacts["ptx"].text
    assert capped.resources.registers is not None and capped.resources.registers <= 32
    with pytest.raises(ValidationError, match="greater than or equal to 24"):
        CompileRequest(source=VECTOR_ADD, maxnreg=8)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
def test_compile_for_the_gpu_in_clusters(rt: Runtime) -> None:
    """cluster_dims reaches the PTX (and the kernel_id); a bad shape is refused before compiling."""
    req = CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, target="cuda:sm_90a", artifacts=["ptx"],
                         artifact_lines=10**5)
    plain = run(compile_kernel, rt, req)
    clustered = run(compile_kernel, rt, req.model_copy(update={"cluster_dims": [2, 1, 1]}))
    assert clustered.kernel_id != plain.kernel_id
    assert ".reqnctapercluster 2, 1, 1" in clustered.artifacts["ptx"].text
    for bad in ([], [1, 1, 1, 1], [0], [16]):
        with pytest.raises(ValidationError):
            CompileRequest(source=VECTOR_ADD, cluster_dims=bad)


def test_launch_in_clusters_checks_the_grid(rt: Runtime) -> None:
    """On the CPU the programs run as usual; the grid must still be a multiple of cluster_dims."""
    req = LaunchRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"], args=ARGS,
                        reference={"out_ptr": "x_ptr + y_ptr"}, target="cpu", cluster_dims=[2])
    result = run(launch_kernel, rt, req)
    assert result.passed and result.grid == [4]
    with pytest.raises(ToolInputError, match=r"grid \(4, 1, 1\) is not a multiple of cluster_dims \(8, 1, 1\)"):
        run(launch_kernel, rt, req.model_copy(update={"cluster_dims": [8]}))


def test_launch_checks_against_reference(rt: Runtime) -> None:
    req = LaunchRequest(
        source=VECTOR_ADD,
        constexprs={"BLOCK": 256},
        grid=["cdiv(n, BLOCK)"],
        args=ARGS,
        reference={"out_ptr": "x_ptr + y_ptr"},
    )
    result = run(launch_kernel, rt, req)
    assert result.passed and result.grid == [4]
    assert result.outputs["out_ptr"].unwritten_count == 0
    assert result.checks["out_ptr"].max_abs_error == 0


def test_launch_reports_unwritten_and_mismatch(rt: Runtime) -> None:
    req = LaunchRequest(
        source=VECTOR_ADD,
        constexprs={"BLOCK": 256},
        grid=[2],
        args=ARGS,
        reference={"out_ptr": "x_ptr + y_ptr"},
    )
    result = run(launch_kernel, rt, req)
    assert result.passed is False
    assert result.outputs["out_ptr"].unwritten_count == N - 512
    check = result.checks["out_ptr"]
    assert check.mismatched == N - 512 and check.first_mismatch and check.first_mismatch.index == [512]
    assert "FAILED" in result.summary and "never written" in result.summary
    assert "hint: the grid [2] and the block sizes (BLOCK=256) may not cover every element" in result.summary


def test_launch_by_id_with_other_dtype_recompiles(rt: Runtime) -> None:
    compiled = run(compile_kernel, rt, CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}))
    args16 = {name: ({**v, "dtype": "float16"} if isinstance(v, dict) else v) for name, v in ARGS.items()}
    req = LaunchRequest(
        kernel_id=compiled.kernel_id,
        grid=["cdiv(n, BLOCK)"],
        args=args16,
        reference={"out_ptr": "x_ptr + y_ptr"},
    )
    result = run(launch_kernel, rt, req)
    assert result.passed and result.kernel_id != compiled.kernel_id
    assert result.outputs["out_ptr"].dtype == "float16"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"args": {**ARGS, "bogus": 1}}, "'bogus' is not a parameter"),
        ({"args": {**{k: v for k, v in ARGS.items() if k != "x_ptr"}, "x": ARGS["x_ptr"]}},
         "'x' is not a parameter (did you mean 'x_ptr'?)"),
        ({"args": {**{k: v for k, v in ARGS.items() if k != "y_ptr"}, "y_pt": ARGS["y_ptr"]}},
         "'y_pt' is not a parameter (did you mean 'y_ptr'?)"),
        ({"args": {k: v for k, v in ARGS.items() if k != "n"}}, "missing 'n' (i32)"),
        ({"args": {**ARGS, "BLOCK": 4}}, "'BLOCK' is a tl.constexpr parameter"),
        ({"args": {**ARGS, "n": {"shape": [1]}}, "signature": {"n": "i32"}}, "'n' is a scalar (i32)"),
        ({"args": {**ARGS, "x_ptr": 3}, "signature": {"x_ptr": "*fp32"}}, "'x_ptr' is a pointer"),
        (
            {"args": {**ARGS, "x_ptr": {"shape": [N], "dtype": "fp16"}}, "signature": {"x_ptr": "*fp32"}},
            "dtype float16",
        ),
        ({"args": {**ARGS, "n": 1 << 40}, "signature": {"n": "i32"}}, "does not fit its type i32"),
        ({"reference": {"n": "x_ptr"}}, "not a tensor argument"),
        ({"reference": {"out_ptr": "out_ptr * 2"}}, "has init 'empty'"),
        ({"reference": {"out_ptr": "x_ptr.__class__"}}, "attribute '__class__' is not allowed"),
        ({"reference": {"out_ptr": "x_ptr[:10]"}}, "has shape [10] but out_ptr has shape [1000]"),
        ({"reference": {"out_ptr": "(x_ptr + y_ptr).sum()"}}, "is a single value (a 0-d tensor"),
        ({"grid": ["cdiv(n, BLOCK) * 100000"]}, "the limit is 4096"),
        ({"kernel_id": "k0000"}, "pass either kernel_id or source"),
    ],
)
def test_launch_errors(rt: Runtime, change: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "source": VECTOR_ADD,
        "constexprs": {"BLOCK": 256},
        "grid": ["cdiv(n, BLOCK)"],
        "args": ARGS,
        "reference": {"out_ptr": "x_ptr + y_ptr"},
    } | change
    with pytest.raises(ToolInputError) as info:
        run(launch_kernel, rt, LaunchRequest.model_validate(fields))
    assert message in str(info.value)


@pytest.mark.skipif(gpu_available(), reason="the machine has a GPU")
def test_launch_on_a_gpu_target_without_a_gpu_says_so(rt: Runtime) -> None:
    req = LaunchRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"], args=ARGS,
                        target="cuda")
    with pytest.raises(ToolInputError, match="needs a GPU, and this machine has none") as info:
        run(launch_kernel, rt, req)
    assert "compile_kernel still compiles" in str(info.value)


def test_unknown_kernel_id(rt: Runtime) -> None:
    with pytest.raises(ToolInputError, match="unknown kernel_id 'k123'"):
        run(launch_kernel, rt, LaunchRequest(kernel_id="k123", grid=[1], args=ARGS))


def test_compile_errors(rt: Runtime) -> None:
    broken = VECTOR_ADD.replace("x + y", "x + undefined_name")
    with pytest.raises(ToolInputError) as info:
        run(compile_kernel, rt, CompileRequest(source=broken, constexprs={"BLOCK": 256}))
    diag = info.value.data["diagnostics"][0]
    assert diag["line"] == 12 and diag["column"] and "undefined_name" in diag["source_line"]
    assert "^" in str(info.value)
    with pytest.raises(ToolInputError, match="no value for tl.constexpr parameter"):
        run(compile_kernel, rt, CompileRequest(source=VECTOR_ADD))
    with pytest.raises(ToolInputError, match="not a parameter"):
        run(compile_kernel, rt, CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 2, "WIDTH": 3}))
    small = Runtime(limits=Limits(max_source_bytes=100))
    with pytest.raises(ToolInputError, match="the limit is 100"):
        run(compile_kernel, small, CompileRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}))


def test_benchmark_configs_and_baseline(rt: Runtime) -> None:
    req = BenchmarkRequest(
        source=VECTOR_ADD,
        constexprs={"BLOCK": 256},
        grid=["cdiv(n, BLOCK)"],
        args=ARGS,
        reference={"out_ptr": "x_ptr + y_ptr"},
        baseline="x_ptr + y_ptr",
        configs=[{"constexprs": {"BLOCK": 128}}, {"constexprs": {"BLOCK": 512}}],
        warmup_ms=2,
        rep_ms=10,
        input_sets=2,
    )
    result = run(benchmark, rt, req)
    assert len(result.results) == 2 and result.best in (0, 1)
    for config in result.results:
        assert config.timing and config.timing.n >= 2 and config.passed
        assert config.timing.p10_us <= config.timing.median_us <= config.timing.p90_us
        assert config.gbps and config.gbps > 0
    assert result.baseline and result.speedup and result.passed
    assert result.bytes == 3 * N * 4 and "median" in result.summary and "flushed" in result.method


def _sized(n: int) -> dict[str, Any]:
    return {"x_ptr": {"shape": [n]}, "y_ptr": {"shape": [n]}, "out_ptr": {"shape": [n], "init": "empty"}, "n": n}


def test_variants_check_more_sizes_in_one_call(rt: Runtime) -> None:
    req = LaunchRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"], args=_sized(N),
                        reference={"out_ptr": "x_ptr + y_ptr"}, variants=[_sized(1), _sized(4097), _sized(256)])
    result = run(launch_kernel, rt, req)
    assert result.passed is True and [v.passed for v in result.variants] == [True, True, True]
    assert [v.grid for v in result.variants] == [[1], [17], [1]]  # the grid evaluated for each set
    assert "variants: 3/3 passed" in result.summary
    unchecked = run(launch_kernel, rt, req.model_copy(update={"reference": None}))
    assert unchecked.passed is None and "variants: 3 launched (no reference to check them against)" in \
        unchecked.summary


def test_a_failing_variant_fails_the_call_and_is_named(rt: Runtime) -> None:
    """A fixed grid of 2 programs of 256 covers 512 elements, not 1000: the variant fails, the call says so."""
    req = LaunchRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, grid=[2], args=_sized(512),
                        reference={"out_ptr": "x_ptr + y_ptr"}, variants=[_sized(300), _sized(N)])
    result = run(launch_kernel, rt, req)
    assert [v.passed for v in result.variants] == [True, False] and result.passed is False
    assert "variants: 1/2 passed; variants[1] (x_ptr shape [1000], y_ptr shape [1000], out_ptr shape [1000], " \
           "n=1000): add_kernel" in result.summary


def test_a_variant_naming_an_unknown_argument_is_refused(rt: Runtime) -> None:
    req = LaunchRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"], args=_sized(N),
                        variants=[{"m": 3}])
    with pytest.raises(ToolInputError, match=r"variants\[0\] names 'm', which args does not"):
        run(launch_kernel, rt, req)
    bad_shape = LaunchRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"], args=_sized(N),
                              reference={"out_ptr": "x_ptr + y_ptr"}, variants=[{"x_ptr": {"shape": [7]}}])
    with pytest.raises(ToolInputError, match=r"variants\[0\] \(x_ptr shape \[7\]\): "):
        run(launch_kernel, rt, bad_shape)
    with pytest.raises(ToolInputError, match="variants is launch_kernel's"):
        run(benchmark, rt, BenchmarkRequest(source=VECTOR_ADD, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"],
                                            args=_sized(N), variants=[_sized(8)]))
    with pytest.raises(ValidationError):
        LaunchRequest(source=VECTOR_ADD, grid=[1], args=_sized(N), variants=[_sized(8)] * 9)


def test_float_parameters_are_assumed_by_their_names() -> None:
    """With no signature, sm_scale, eps and dropout_p are assumed fp32 (not i32), pointers *fp32, others i32."""
    from tools.arg_kinds import assumed_type as _assumed_type

    assert [_assumed_type(n) for n in ("sm_scale", "eps", "dropout_p", "softcap", "x_ptr", "n_cols", "stride_m",
                                       "seed", "BLOCK_ROWS")] == ["fp32"] * 4 + ["*fp32"] + ["i32"] * 4
    src = VECTOR_ADD.replace("x_ptr, y_ptr, out_ptr, n,", "x_ptr, y_ptr, out_ptr, n, sm_scale,").replace(
        "x + y", "(x + y) * sm_scale")
    assert src != VECTOR_ADD
    result = run(compile_kernel, Runtime(), CompileRequest(source=src, constexprs={"BLOCK": 256}))
    assert result.signature["sm_scale"] == "fp32" and "sm_scale: fp32" in result.diagnostics[0].message


def test_a_string_constexpr_is_accepted_and_bounded(rt: Runtime) -> None:
    """Triton kernels take strings as constexprs (the matmul example's ACTIVATION)."""
    source = (Path(__file__).resolve().parents[2] / "examples" / "matmul.py").read_text()
    consts: dict[str, Any] = {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
    plain = run(compile_kernel, rt, CompileRequest(source=source, kernel_name="matmul_kernel",
                                                   constexprs={**consts, "ACTIVATION": ""}, target="cpu"))
    leaky = run(compile_kernel, rt, CompileRequest(source=source, kernel_name="matmul_kernel",
                                                   constexprs={**consts, "ACTIVATION": "leaky_relu"}, target="cpu"))
    assert plain.kernel_id != leaky.kernel_id and leaky.constexprs["ACTIVATION"] == "leaky_relu"
    with pytest.raises(ValidationError, match="at most 128 characters"):
        CompileRequest(source=source, constexprs={**consts, "ACTIVATION": "x" * 129})


def test_a_bare_string_reference_says_how_to_key_it() -> None:
    for model in (LaunchRequest, BenchmarkRequest):
        with pytest.raises(ValidationError, match=r"reference is a dict from each output argument to its expression, "
                                                  r"e.g. \{'out_ptr': 'x_ptr \+ y_ptr'\}"):
            model(source=VECTOR_ADD, grid=[1], args=ARGS, reference="x_ptr + y_ptr")


def test_one_compilation_has_one_kernel_id_however_its_types_were_given(rt: Runtime) -> None:
    """compile_kernel with assumed types, launch_kernel with the types its args imply, and an explicit
    signature of the same types name the same kernel: one id, one entry in list_kernels."""
    source = VECTOR_ADD.replace("add_kernel", "same_id_kernel")
    compiled = run(compile_kernel, rt, CompileRequest(source=source, constexprs={"BLOCK": 256}))
    launched = run(launch_kernel, rt, LaunchRequest(source=source, constexprs={"BLOCK": 256}, grid=["cdiv(n, BLOCK)"],
                                                    args=ARGS, reference={"out_ptr": "x_ptr + y_ptr"}))
    explicit = run(compile_kernel, rt, CompileRequest(source=source, kernel_name="same_id_kernel",
                                                      constexprs={"BLOCK": 256}, signature=compiled.signature))
    assert launched.passed and compiled.kernel_id == launched.kernel_id == explicit.kernel_id
    listed = run(list_kernels_async, rt, "same_id_kernel")
    assert [k.kernel_id for k in listed.kernels] == [compiled.kernel_id]
    other = run(compile_kernel, rt, CompileRequest(source=source, constexprs={"BLOCK": 256},
                                                   signature={"x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16"}))
    assert other.kernel_id != compiled.kernel_id


async def list_kernels_async(rt: Runtime, name: str) -> Any:
    from tools.compile import list_kernels

    return list_kernels(rt, name)
