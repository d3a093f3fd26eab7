"""Request and result of generate_kernel (pydantic v2; field descriptions become the tool's schema)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, field_serializer, field_validator

from tools.models import BenchmarkResult, CompileResult, LaunchResult, Target, Tolerance, check_target
from tools.specs import ArgValue, Scalar, TensorSpec

_SPEC_DEFAULTS = {name: field.default for name, field in TensorSpec.model_fields.items()}

Expression = Annotated[
    str,
    Field(
        description="What to compute, in the reference language (torch.*, F.*, tensor methods, operators; never "
        "executed as Python) over the args' names: one expression, e.g. 'torch.softmax(x * scale + mask, dim=-1)', "
        "or assignments separated by ';' or newlines, e.g. 'h = x @ w + b; y = F.gelu(h)'. The last statement's "
        "value is the output (a bare last expression is called 'out')."
    ),
]
GenerateArgs = Annotated[
    dict[str, ArgValue],
    Field(
        description="The inputs by name: a tensor spec {'shape': [4096, 1024], 'dtype': 'bfloat16'} (init as in "
        "launch_kernel; default randn) or a number. Numbers become scalar parameters of the kernel. Outputs are "
        "made by the tool: do not list them."
    ),
]
OutputNames = Annotated[
    list[str] | None,
    Field(description="Assigned names to write as outputs (at most 4); default: the last statement's value."),
]
KernelNameParam = Annotated[
    str | None,
    Field(description="Name of the generated @triton.jit function; default: from the expression, e.g. "
          "'softmax_kernel'."),
]
Check = Annotated[
    bool | None,
    Field(description="Launch once and compare with the expression itself (on the target's device). Default: when "
          "that device is present (so a cuda:sm_90a target on a machine without a GPU is compiled only)."),
]
Benchmark = Annotated[
    bool, Field(description="Also time the kernel against torch evaluating the expression (needs the check).")
]
BenchRepMs = Annotated[float, Field(gt=0, le=2000, description="Measured time of the benchmark, per side.")]


class GenerateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expression: Expression
    args: GenerateArgs
    outputs: OutputNames = None
    kernel_name: KernelNameParam = None
    target: Target = "auto"
    check: Check = None
    benchmark: Benchmark = False
    rep_ms: BenchRepMs = 50.0
    atol: Tolerance = None
    rtol: Tolerance = None

    @field_validator("target")
    @classmethod
    def _check_target(cls, value: str) -> str:
        return check_target(value)


class GeneratedLaunch(BaseModel):
    """Everything launch_kernel and benchmark need to run the generated kernel again."""

    kernel_id: Annotated[str, Field(description="The compiled kernel (its constexprs and options included).")]
    grid: Annotated[list[int | str], Field(description="Programs per axis, as expressions over the args.")]
    args: Annotated[
        dict[str, ArgValue],
        Field(description="Every runtime parameter: the input specs, the outputs (init 'empty'), the sizes and "
              "strides. Change shapes here and the sizes with them to run other shapes."),
    ]
    reference: Annotated[dict[str, str], Field(description="Each output's expression over the parameter names.")]
    constexprs: Annotated[dict[str, Scalar], Field(description="The block sizes it was compiled with.")]
    num_warps: Annotated[int | None, Field(description="Warps per program it was compiled with (GPU targets).")] = None
    num_stages: Annotated[int | None, Field(description="Pipelining stages it was compiled with (GPU targets).")] = None

    @field_serializer("args", mode="wrap")
    def _compact_specs(
        self, args: dict[str, ArgValue], handler: SerializerFunctionWrapHandler
    ) -> dict[str, ArgValue]:
        """Tensor specs without the fields left at their defaults (seed, low, high, value, mean, std)."""
        out = handler(args)
        for name, spec in out.items():
            if isinstance(spec, dict):
                out[name] = {k: v for k, v in spec.items() if k in ("shape", "dtype", "init") or v != _SPEC_DEFAULTS[k]}
        return out


class GenerateResult(BaseModel):
    kernel_id: Annotated[str, Field(description="Handle for launch_kernel/benchmark/read_artifact.")]
    kernel_name: Annotated[str, Field(description="The @jit function generated (its name in source).")]
    target: Annotated[str, Field(description="The resolved target.")]
    template: Annotated[
        Literal["pointwise", "rows", "matmul"],
        Field(description="The kernel's shape: 'pointwise' (BLOCK elements a program), 'rows' (ROWS whole rows a "
              "program, reductions over the last dim in registers) or 'matmul' (a BLOCK_M x BLOCK_N tile a "
              "program, a K loop of tl.dot, the elementwise epilogue fused)."),
    ]
    ops: Annotated[list[str], Field(description="The fused operations, in order.")]
    source: Annotated[str, Field(description="The kernel's source text: edit it and pass it to compile_kernel or "
                                 "launch_kernel (with launch's constexprs) as source.")]
    launch: Annotated[GeneratedLaunch, Field(description="The arguments to run it again with launch_kernel or "
                                             "benchmark as they are; for an edited source, pass them with "
                                             "source=<the edit> in place of kernel_id.")]
    compile: Annotated[CompileResult, Field(description="What compile_kernel reported for it.")]
    check: Annotated[LaunchResult | None, Field(description="The checked launch (null when not launched).")] = None
    benchmark: Annotated[BenchmarkResult | None, Field(description="The timing against torch (when asked).")] = None
    passed: Annotated[bool | None, Field(description="The check passed; null when not launched.")] = None
    notes: Annotated[list[str], Field(description="What to know before editing: parameters, limits, precision.")] = []
    summary: Annotated[str, Field(description="One line saying what happened, for a person or a model to read first.")]
