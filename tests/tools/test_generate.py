"""generate_kernel as plain Python (jobs in this process): expressions -> fused kernels that pass
their check against the expression itself, on shapes that are not multiples of the blocks."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import torch

from compiler.backends.nvidia.toolchain import find_ptxas
from tools.compile import read_artifact
from tools.errors import ToolInputError
from tools.generate import GenerateRequest, GenerateResult, generate_kernel
from tools.launch import launch_kernel
from tools.limits import Limits
from tools.models import LaunchRequest
from tools.runtime import Runtime


@pytest.fixture(scope="module")
def rt() -> Runtime:
    return Runtime(limits=Limits(max_grid_programs=1 << 16))


def gen(rt: Runtime, expression: str, args: dict[str, Any], **kw: Any) -> GenerateResult:
    return anyio.run(generate_kernel, rt, GenerateRequest(expression=expression, args=args, **kw))


def t(*shape: int, dtype: str = "float32", **kw: Any) -> dict[str, Any]:
    return {"shape": list(shape), "dtype": dtype, **kw}


# The done-when list of the tool: each benchmarked against torch, every output written and checked.
DONE_WHEN = {
    "softmax": ("torch.softmax(x * scale + mask, dim=-1)", {"x": t(37, 300), "mask": t(300), "scale": 0.125}, "rows"),
    "layer_norm": ("F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)", {"x": t(33, 257), "w": t(257), "b": t(257)},
                   "rows"),
    "rms_norm": ("F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)",
                 {"x": t(19, 520, dtype="bfloat16"), "w": t(520, dtype="bfloat16")}, "rows"),
    "gelu_mul": ("F.gelu(x) * y", {"x": t(1000, 3), "y": t(1000, 3)}, "pointwise"),
    "log_softmax": ("torch.log_softmax(x, dim=-1)", {"x": t(17, 1000)}, "rows"),
    "matmul_gelu": ("h = x @ w + b; y = F.gelu(h)", {"x": t(100, 70), "w": t(70, 90), "b": t(90)}, "matmul"),
    "row_l2": ("torch.sqrt(((x - y) ** 2).sum(-1))", {"x": t(100, 70), "y": t(100, 70)}, "rows"),
}


@pytest.mark.parametrize("case", sorted(DONE_WHEN))
def test_done_when_kernels_pass_and_are_benchmarked(rt: Runtime, case: str) -> None:
    expression, args, template = DONE_WHEN[case]
    result = gen(rt, expression, args, benchmark=True, rep_ms=5)
    assert result.template == template and result.passed is True, result.summary
    assert result.check is not None
    for stats in result.check.outputs.values():
        assert stats.unwritten_count == 0 and stats.nan_count == 0
    assert result.benchmark is not None and result.benchmark.passed is True
    best = result.benchmark.results[0]
    assert best.timing is not None and best.timing.n >= 3 and result.benchmark.baseline is not None
    assert "PASSED" in result.summary and result.kernel_id == result.launch.kernel_id
    # the source is ordinary kernel text with named parameters and block constexprs
    header = next(line for line in result.source.splitlines() if line.startswith("def "))
    assert header.startswith(f"def {result.kernel_name}(") and ": tl.constexpr" in header
    for name in args:
        if isinstance(args[name], dict):
            assert f"{name}_ptr" in header


def test_the_kernel_runs_other_shapes_with_its_sizes_changed(rt: Runtime) -> None:
    """Sizes and strides are parameters: the generated kernel_id launches on a new shape."""
    result = gen(rt, "torch.softmax(x, dim=-1)", {"x": t(10, 100)})
    args = dict(result.launch.args)
    args.update({"x_ptr": t(23, 77), "out_ptr": t(23, 77, init="empty"), "R": 23, "C": 77, "x_stride0": 77})
    relaunch = anyio.run(launch_kernel, rt, LaunchRequest(kernel_id=result.kernel_id, grid=result.launch.grid,
                                                           args=args, reference=result.launch.reference))
    assert relaunch.passed and relaunch.outputs["out_ptr"].unwritten_count == 0


EXPRESSIONS = [
    ("x.softmax(-1, dtype=torch.float32)", {"x": t(9, 33, dtype="float16")}),
    ("torch.softmax(x, dim=-1)", {"x": t(3, 5, 130, dtype="bfloat16")}),
    ("mu = x.mean(-1, keepdim=True); xc = x - mu; var = (xc * xc).mean(-1, keepdim=True); "
     "y = xc * torch.rsqrt(var + eps) * w + b", {"x": t(31, 96), "w": t(96), "b": t(96), "eps": 1e-5}),
    ("torch.logsumexp(x, dim=-1)", {"x": t(12, 200)}),
    ("x.var(-1, keepdim=True) + x.std(dim=-1, correction=0, keepdim=True)", {"x": t(21, 45)}),
    ("F.normalize(x, dim=-1)", {"x": t(21, 45)}),
    ("torch.linalg.vector_norm(x, ord=1, dim=-1) + x.norm(p=float('inf'), dim=-1)", {"x": t(21, 45)}),
    ("x / x.sum(-1)[:, None]", {"x": t(21, 45, init="rand", low=0.5, high=1.0)}),
    ("x - x.amax(-1).unsqueeze(-1)", {"x": t(21, 45)}),
    ("torch.max(x, dim=-1).values - x.min(-1)[0]", {"x": t(21, 45)}),
    ("(x * s).sum(-1, keepdim=True) * g", {"x": t(21, 45), "s": t(45), "g": t(21, 1)}),
    ("x.sum(-1) * g", {"x": t(21, 45), "g": t(21)}),
    ("F.softplus(x) + F.leaky_relu(x, 0.2) + F.silu(x) + torch.clamp(x, -0.5, 0.5)", {"x": t(1001)}),
    ("F.mish(x) + F.hardswish(x) + F.elu(x) + F.logsigmoid(x) + F.softsign(x)", {"x": t(1001)}),
    ("torch.where(m, x, -y) + x.masked_fill(m, 0.0)", {"x": t(7, 9), "y": t(9), "m": t(7, 9, dtype="bool",
                                                                                    init="randint")}),
    ("(x.t() + y) * 2 ** p", {"x": t(13, 11), "y": t(11, 13), "p": 3}),
    ("torch.exp(x - 1) ** 3 + torch.log1p(x.abs()) + torch.erfc(x) + torch.log10(x.abs() + 1)", {"x": t(3, 4, 5)}),
    ("x + y.expand(4, 6, 7)", {"x": t(4, 6, 7), "y": t(6, 1)}),
    ("(x > 0).float() * x.half().to(torch.float32)", {"x": t(300)}),
    ("torch.add(x, y, alpha=2) - torch.sub(x, y, alpha=0.5) + torch.addcmul(x, x, y, value=0.5)",
     {"x": t(77), "y": t(77)}),
    ("torch.addcdiv(x, x, y.abs() + 1) + torch.lerp(x, y, 0.25)", {"x": t(77), "y": t(77)}),
    ("x.reshape(7, 11).t().unsqueeze(0) * y.view(1, 11, 7) + z.flatten(0, 1)", {"x": t(77), "y": t(77),
                                                                                 "z": t(1, 11, 1, 7)}),
    ("F.gelu(F.linear(x, w, b), approximate='tanh')", {"x": t(2, 9, 40), "w": t(33, 40), "b": t(33)}),
    ("torch.addmm(b, x, w.t()) * r", {"x": t(70, 20), "w": t(50, 20), "b": t(50), "r": t(70, 50)}),
    ("torch.relu(x @ w)", {"x": t(50, 31, dtype="bfloat16"), "w": t(31, 17, dtype="bfloat16")}),
]


@pytest.mark.parametrize(("expression", "args"), EXPRESSIONS, ids=[e for e, _ in EXPRESSIONS])
def test_expressions(rt: Runtime, expression: str, args: dict[str, Any]) -> None:
    result = gen(rt, expression, args)
    assert result.passed is True, (result.summary, result.source)
    assert result.check is not None
    assert all(s.unwritten_count == 0 for s in result.check.outputs.values())


def test_several_outputs(rt: Runtime) -> None:
    result = gen(rt, "mu = x.mean(-1, keepdim=True); xc = x - mu; rstd = torch.rsqrt((xc * xc).mean(-1, keepdim=True)"
                 " + 1e-5); y = xc * rstd", {"x": t(29, 77)}, outputs=["y", "mu", "rstd"])
    assert result.passed is True
    assert set(result.launch.reference) == {"y_ptr", "mu_ptr", "rstd_ptr"}
    assert result.launch.args["mu_ptr"].shape == [29, 1]  # type: ignore[union-attr]


def test_names_that_the_kernel_uses_itself_are_renamed(rt: Runtime) -> None:
    result = gen(rt, "torch.softmax(x + mask * C, dim=-1)", {"x": t(5, 40), "mask": t(40), "C": 2.0})
    assert result.passed is True
    assert "C_1" in result.launch.args and "mask_ptr" in result.launch.args
    assert result.launch.reference == {"out_ptr": "torch.softmax(x_ptr + mask_ptr * C_1, dim=-1)"}


def test_names_like_the_kernels_own_get_a_prefix(rt: Runtime) -> None:
    """v1, x0, out2: the names the emitter gives its own values; the arguments' parameters take another."""
    result = gen(rt, "out2 = x0 * v1 + float_", {"x0": t(50), "v1": t(50), "float_": 2.0})
    assert result.passed is True
    assert set(result.launch.args) == {"a_x0_ptr", "a_v1_ptr", "a_out2_ptr", "float_", "n"}
    assert result.launch.reference == {"a_out2_ptr": "a_x0_ptr * a_v1_ptr + float_"}


def test_a_number_argument_is_a_parameter(rt: Runtime) -> None:
    result = gen(rt, "x * alpha + 1", {"x": t(100), "alpha": 0.5})
    header = next(line for line in result.source.splitlines() if line.startswith("def "))
    assert "alpha" in header and "alpha" in result.launch.args and result.passed
    args = {**result.launch.args, "alpha": 3.0}
    relaunch = anyio.run(launch_kernel, rt, LaunchRequest(kernel_id=result.kernel_id, grid=result.launch.grid,
                                                           args=args, reference=result.launch.reference))
    assert relaunch.passed


@pytest.mark.parametrize(
    ("expression", "args", "message"),
    [
        ("torch.sort(x)", {"x": t(4, 4)}, "torch.sort cannot be fused"),
        ("x.sum(0)", {"x": t(4, 4)}, "reduce over the last dim only"),
        ("torch.softmax(x, dim=0)", {"x": t(4, 4)}, r"reduce its transpose, e\.g\. torch\.softmax\(x\.t\(\), dim=-1\)"),
        ("x.sum()", {"x": t(4, 4)}, r"reduce a flattened argument, e\.g\. x\.reshape\(1, -1\)\.sum\(-1\)"),
        ("torch.softmax(x @ w, dim=-1)", {"x": t(4, 4), "w": t(4, 4)}, "a matmul and a reduction"),
        ("(x * 2) @ w", {"x": t(4, 4), "w": t(4, 4)}, "must be an argument"),
        ("x - x.mean(-1)", {"x": t(6, 6)}, "keepdim=True"),
        ("x[:, 1:]", {"x": t(6, 6)}, "partial slices"),
        ("x + x.t()", {"x": t(6, 6)}, "read in two ways"),
        ("x.t().flatten()", {"x": t(6, 5)}, "makes a copy"),
        ("x.sum(-1, keepdim=True).sum(-1)", {"x": t(6, 6)}, "already one per row"),
        ("x * g.sum(-1, keepdim=True)", {"x": t(6, 5), "g": t(6, 1)}, "reduces a last dim of 1 values"),
        ("x + y", {"x": t(3), "y": t(4)}, "does not apply"),
        ("torch.softmax(x, dim=-1)", {"x": t(2, 20000)}, "at most 16384"),
        ("x // 2", {"x": t(6)}, "FloorDiv cannot be part"),
        ("x.sum(-1)", {"x": t(6, dtype="float8_e4m3fn", init="zeros")}, "cannot be computed"),
        ("y = x + 1; y = y * 2", {"x": t(6)}, "assigned twice"),
        ("x = x + 1", {"x": t(6)}, "is an argument"),
        ("x + 1", {"x": t(6)}, None),
    ],
)
def test_refusals_say_what_to_change(rt: Runtime, expression: str, args: dict[str, Any], message: str | None) -> None:
    if message is None:
        assert gen(rt, expression, args).passed
        return
    with pytest.raises(ToolInputError, match=message):
        gen(rt, expression, args)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
@pytest.mark.parametrize("case", sorted(DONE_WHEN))
def test_done_when_kernels_compile_for_hopper(rt: Runtime, case: str) -> None:
    """On cuda:sm_90a the same kernels compile to PTX that ptxas assembles (no GPU here: not launched)."""
    expression, args, _ = DONE_WHEN[case]
    result = gen(rt, expression, args, target="cuda:sm_90a", check=False)
    assert result.check is None and result.passed is None and result.target == "cuda:sm_90a"
    assert result.compile.resources.registers and result.compile.resources.spills == 0
    ptx = anyio.run(read_artifact, rt, result.kernel_id, "ptx", 1, 100_000).text
    assert ".target sm_90a" in ptx
    if result.template == "matmul":
        assert result.launch.num_warps and result.launch.num_stages
    with pytest.raises(ToolInputError, match="benchmark needs"):
        gen(rt, expression, args, target="cuda:sm_90a", check=False, benchmark=True)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_matmul_epilogue_runs_on_hopper_tensor_cores(rt: Runtime, dtype: str) -> None:
    """A large bf16 (tf32 for float32) product with its epilogue compiles to wgmma, without spills."""
    args = {"x": t(512, 1024, dtype=dtype), "w": t(1024, 768, dtype=dtype), "b": t(768, dtype=dtype)}
    result = gen(rt, "F.gelu(x @ w + b)", args, target="cuda:sm_90a", check=False)
    assert result.launch.constexprs["BLOCK_K"] == (64 if dtype == "bfloat16" else 32)
    assert result.compile.resources.spills == 0
    assert "wgmma" in anyio.run(read_artifact, rt, result.kernel_id, "ptx", 1, 1_000_000).text


def test_float64_reference_agrees(rt: Runtime) -> None:
    """The check compares with torch at the output's dtype; against float64 the error stays small too."""
    result = gen(rt, "torch.log_softmax(x, dim=-1)", {"x": t(8, 50, seed=3)})
    assert result.check is not None and result.check.checks["out_ptr"].max_abs_error is not None
    assert result.check.checks["out_ptr"].max_abs_error < 1e-5
    x = torch.randn(8, 50, generator=torch.Generator().manual_seed(3)).double()
    assert result.check.outputs["out_ptr"].values[0] == pytest.approx(float(torch.log_softmax(x, -1)[0, 0]), abs=1e-5)


def test_every_fused_function_is_one_the_reference_language_allows() -> None:
    """A lowering the validator never lets through would be dead; the description lists them all."""
    from tools.generate.lowerings import LOWERINGS, supported_functions
    from tools.reference import BUILTINS, NAMESPACES, TENSOR_METHODS

    spaces = {"torch": "torch", "F": "F", "special": "torch.special", "linalg": "torch.linalg", "math": "math"}
    for key in LOWERINGS:
        space, _, name = key.partition(".")
        if space == "Tensor":
            assert name in TENSOR_METHODS, key
        elif space == "builtin":
            assert name in BUILTINS, key
        else:
            assert name in NAMESPACES[spaces[space]], key
    text = supported_functions()
    assert "F.{" in text and "layer_norm" in text and "tensor methods" in text


def test_the_catalog_the_server_describes_the_tool_with_lists_every_lowering() -> None:
    """The server describes generate_kernel from tools/generate/catalog.py, without loading the lowerings."""
    from tools.generate import catalog
    from tools.generate.lowerings import LOWERINGS, supported_functions
    from tools.generate.registry import lowering

    assert set(LOWERINGS) == catalog.FUSED_KEYS
    assert catalog.supported_functions() == supported_functions()
    with pytest.raises(ValueError, match="torch.frobnicate must be listed"):
        lowering("input", "torch.frobnicate")


def test_the_output_is_sized_before_anything_compiles(rt: Runtime) -> None:
    with pytest.raises(ToolInputError, match="limit per tensor"):
        gen(rt, "x + y", {"x": t(1 << 14, 1), "y": t(1, 1 << 14)})
