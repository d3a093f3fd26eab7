"""Request and response models of the tools (pydantic v2).

Schemas come from the types: every field is ``Annotated[..., Field(description=...)]`` so that
MCP clients and agents see what each one means. The parameter aliases at the top are shared by
the request models and the server's tool signatures, so the two cannot drift apart. Units are
in field names (``_ms``, ``_us``, ``_bytes``, ``gbps``). Numbers that may be non-finite are
``None`` instead (JSON has no NaN).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tools.specs import ArgValue, Scalar

_TARGET_RE = re.compile(r"^(auto|cpu|cuda(:sm_\d+a?)?|amd(:gfx[0-9a-f]+)?)$")

# --- parameters shared by requests and tool signatures ------------------------------------------------

Source = Annotated[
    str | None,
    Field(description="Kernel source text: Triton-style Python with one or more @triton.jit / @jit functions."),
]
KernelName = Annotated[
    str | None,
    Field(description="Which @jit function of the source to use; needed only when it defines several."),
]
KernelId = Annotated[str | None, Field(description="A kernel_id returned by compile_kernel (instead of source).")]
Signature = Annotated[
    dict[str, str] | None,
    Field(
        description="Argument types in Triton's syntax, by parameter name, e.g. "
        "{'x_ptr': '*fp32', 'n': 'i32'}. Missing entries are inferred from launch args, "
        "or from names (...ptr -> *fp32, else i32) at compile time."
    ),
]
Constexprs = Annotated[
    dict[str, Scalar] | None,
    Field(description="Values of the tl.constexpr parameters, e.g. {'BLOCK': 1024}."),
]
Target = Annotated[
    str,
    Field(description="'auto' (a GPU if present, else the CPU), 'cpu', 'cuda', 'cuda:sm_90a', 'amd:gfx942'."),
]
NumWarps = Annotated[int | None, Field(ge=1, le=32, description="Warps per program (GPU targets).")]
NumStages = Annotated[int | None, Field(ge=1, le=8, description="Software pipelining stages (GPU targets).")]
MaxNReg = Annotated[int | None, Field(ge=24, le=255, description=(
    "Registers per thread at most (NVIDIA: .maxnreg, as Triton's maxnreg): more programs fit on an SM, "
    "the assembler may spill. None: its own choice."))]
ClusterDims = Annotated[list[Annotated[int, Field(ge=1, le=8)]] | None, Field(min_length=1, max_length=3, description=(
    "Programs per thread block cluster along x, y, z (NVIDIA sm_90 and newer: the programs of a cluster run at "
    "once and inline PTX may use each other's shared memory); at most 8 per cluster, the grid a multiple of it. "
    "None: no clusters."))]
Debug = Annotated[
    bool, Field(description="Compile with bounds checks on every load/store (reports the first violation).")
]
LaunchDebug = Annotated[
    bool | None,
    Field(description="Bounds-check every load/store (slower; locates out-of-bounds accesses). Default: as compiled."),
]
Grid = Annotated[
    list[int | str] | int | str,
    Field(
        description="Program instances per axis (1-3 entries). Entries are ints or integer expressions over "
        "scalar args and constexprs with + - * // % and cdiv/max/min, e.g. ['cdiv(n, BLOCK)']."
    ),
]
Args = Annotated[
    dict[str, ArgValue],
    Field(
        description="Every runtime parameter of the kernel by name: a number for scalars, or a tensor spec "
        "{'shape': [1024], 'dtype': 'float32', 'init': 'randn', 'seed': 0}; outputs use init 'empty'."
    ),
]
ReferenceExprs = Annotated[
    dict[str, str] | None,
    Field(
        description="Expected value of output parameters as torch expressions over the other "
        "parameters' names (their values before the launch), e.g. {'out_ptr': 'x_ptr + y_ptr'} or "
        "{'y_ptr': 'torch.softmax(x_ptr, dim=-1)'}. Only whitelisted torch functions and tensor methods."
    ),
]
Tolerance = Annotated[float | None, Field(ge=0, description="Override of the dtype's default tolerance.")]
Outputs = Annotated[
    list[str] | None,
    Field(description="Tensor args to report stats for; default: those with a reference or init 'empty'."),
]


def check_target(value: str) -> str:
    value = value.strip().lower()
    if not _TARGET_RE.match(value):
        raise ValueError("target must be 'auto', 'cpu', 'cuda', 'cuda:sm_XX', or 'amd:gfxNNN'")
    return value


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("target", check_fields=False)
    @classmethod
    def _check_target(cls, value: str) -> str:
        return check_target(value)


class CompileRequest(_Request):
    source: Source = None
    kernel_name: KernelName = None
    signature: Signature = None
    constexprs: Constexprs = None
    target: Target = "auto"
    num_warps: NumWarps = None
    num_stages: NumStages = None
    maxnreg: MaxNReg = None
    cluster_dims: ClusterDims = None
    debug: Debug = False
    artifacts: Annotated[
        list[str],
        Field(description="Compiler outputs to return: 'tir', 'llir', 'asm' (CPU assembly), 'ptx', 'sass'."),
    ] = []
    artifact_lines: Annotated[
        int | None,
        Field(ge=1, description="Lines per artifact page (default 200); page on with read_artifact."),
    ] = None


class LaunchRequest(_Request):
    grid: Grid
    args: Args
    kernel_id: KernelId = None
    source: Source = None
    kernel_name: KernelName = None
    signature: Signature = None
    constexprs: Constexprs = None
    reference: ReferenceExprs = None
    atol: Tolerance = None
    rtol: Tolerance = None
    target: Target = "auto"
    outputs: Outputs = None
    num_warps: NumWarps = None
    num_stages: NumStages = None
    maxnreg: MaxNReg = None
    cluster_dims: ClusterDims = None
    debug: LaunchDebug = None


class BenchConfig(BaseModel):
    """One variant to time: constexpr values and launch options layered over the base kernel."""

    model_config = ConfigDict(extra="forbid")
    constexprs: Annotated[dict[str, Scalar], Field(description="Constexpr overrides, e.g. {'BLOCK': 512}.")] = {}
    num_warps: NumWarps = None
    num_stages: NumStages = None
    maxnreg: MaxNReg = None
    cluster_dims: ClusterDims = None


class BenchmarkRequest(LaunchRequest):
    baseline: Annotated[
        str | None,
        Field(description="A torch expression over the args to time as the baseline, e.g. 'x_ptr + y_ptr'."),
    ] = None
    configs: Annotated[
        list[BenchConfig] | None,
        Field(description="Variants to time (autotuning); default: the kernel as given."),
    ] = None
    bytes: Annotated[
        int | None,
        Field(ge=0, description="Bytes moved per run; default: the sum of all tensor args' sizes."),
    ] = None
    flops: Annotated[int | None, Field(ge=0, description="Floating-point operations per run, for TFLOP/s.")] = None
    warmup_ms: Annotated[float, Field(ge=0, le=2000, description="Warm-up time per config.")] = 25.0
    rep_ms: Annotated[float, Field(gt=0, le=10000, description="Measured time per config.")] = 100.0
    cache: Annotated[
        Literal["cold", "warm"],
        Field(description="'cold': flush the last-level cache before every run; 'warm': do not."),
    ] = "cold"
    input_sets: Annotated[
        int, Field(ge=1, le=8, description="Copies of the inputs at distinct addresses, used in rotation.")
    ] = 3


# --- responses ------------------------------------------------------------------------------------------


class Diagnostic(BaseModel):
    severity: Annotated[Literal["error", "warning", "note"], Field(description="How serious.")]
    message: Annotated[str, Field(description="What is wrong, in one sentence.")]
    line: Annotated[int | None, Field(description="1-based line in the source.")] = None
    column: Annotated[int | None, Field(description="1-based column in the source.")] = None
    source_line: Annotated[str | None, Field(description="The offending source line.")] = None
    hint: Annotated[str | None, Field(description="What to change.")] = None
    text: Annotated[str, Field(description="The full message with the source line and a caret.")] = ""


class Resources(BaseModel):
    registers: Annotated[int | None, Field(description="Registers per thread (GPU).")] = None
    spills: Annotated[int | None, Field(description="Bytes spilled to local memory (GPU).")] = None
    shared_memory_bytes: Annotated[int | None, Field(description="Static shared memory per program (GPU).")] = None
    occupancy: Annotated[float | None, Field(description="Resident warps per SM over the maximum (GPU).")] = None
    num_warps: Annotated[int | None, Field(description="Warps per program.")] = None
    num_stages: Annotated[int | None, Field(description="Pipelining stages.")] = None


class ArtifactPage(BaseModel):
    name: Annotated[str, Field(description="Artifact name: tir, llir, asm, ptx, ...")]
    start_line: Annotated[int, Field(description="First line of this page (1-based).")]
    end_line: Annotated[int, Field(description="Last line of this page.")]
    total_lines: Annotated[int, Field(description="Lines of the whole artifact.")]
    text: Annotated[str, Field(description="The lines of this page.")]
    next_page: Annotated[str | None, Field(description="How to read the next page; null on the last page.")] = None


class CompileResult(BaseModel):
    kernel_id: Annotated[str, Field(description="Handle for launch_kernel/benchmark/read_artifact (content hash).")]
    kernel_name: str
    target: Annotated[str, Field(description="The resolved target, e.g. 'cpu' or 'cuda:sm_90a'.")]
    cached: Annotated[bool, Field(description="True when this exact compile was already done.")]
    signature: Annotated[dict[str, str], Field(description="The argument types used, by parameter name.")]
    constexprs: dict[str, Scalar]
    compile_ms: Annotated[dict[str, float], Field(description="Compile time per stage and 'total', in ms.")]
    resources: Resources
    diagnostics: list[Diagnostic]
    artifacts: Annotated[dict[str, ArtifactPage], Field(description="First page of each requested artifact.")]
    available_artifacts: list[str]
    summary: str


class TensorStats(BaseModel):
    shape: list[int]
    dtype: str
    min: Annotated[float | None, Field(description="Minimum over finite elements.")] = None
    max: Annotated[float | None, Field(description="Maximum over finite elements.")] = None
    mean: Annotated[float | None, Field(description="Mean over finite elements.")] = None
    nan_count: int = 0
    inf_count: int = 0
    unwritten_count: Annotated[
        int | None, Field(description="Elements still holding the poison of init 'empty' (never written).")
    ] = None
    values: Annotated[
        list[float | int | bool | str],
        Field(description="The first few elements, flattened; 'nan'/'inf' as text."),
    ] = []


class Mismatch(BaseModel):
    index: list[int]
    got: float | int | bool | str
    expected: float | int | bool | str


class CheckResult(BaseModel):
    passed: bool
    reference: Annotated[str, Field(description="The reference expression.")]
    max_abs_error: Annotated[float | None, Field(description="Over elements finite in both.")] = None
    max_rel_error: Annotated[float | None, Field(description="|got - expected| / |expected|, finite elements.")] = None
    atol: float
    rtol: float
    mismatched: Annotated[int, Field(description="Elements outside atol + rtol * |expected| (NaN/Inf included).")]
    total: int
    first_mismatch: Mismatch | None = None


class LaunchResult(BaseModel):
    kernel_id: str
    kernel_name: str
    target: str
    device: str
    grid: list[int]
    outputs: Annotated[dict[str, TensorStats], Field(description="Stats of the output tensors after the launch.")]
    checks: Annotated[dict[str, CheckResult], Field(description="Comparison with each reference.")]
    passed: Annotated[bool | None, Field(description="All checks passed; null when no reference was given.")]
    elapsed_ms: Annotated[float, Field(description="Wall time of the launch (not a benchmark).")]
    summary: str


class Timing(BaseModel):
    median_us: float
    p10_us: float
    p90_us: float
    min_us: float
    n: Annotated[int, Field(description="Timed repetitions.")]


class ConfigResult(BaseModel):
    config: BenchConfig
    kernel_id: str | None = None
    timing: Timing | None = None
    gbps: Annotated[float | None, Field(description="bytes / median time.")] = None
    tflops: Annotated[float | None, Field(description="flops / median time.")] = None
    pct_of_peak_bandwidth: Annotated[float | None, Field(description="Of the device's measured copy rate.")] = None
    pct_of_peak_flops: Annotated[float | None, Field(description="Of the device's measured matmul rate.")] = None
    passed: Annotated[bool | None, Field(description="Outputs of the timed runs match the reference.")] = None
    checks: dict[str, CheckResult] = {}
    error: Annotated[str | None, Field(description="Why this config could not be measured.")] = None


class BenchmarkResult(BaseModel):
    kernel_name: str
    target: str
    device: str
    method: Annotated[str, Field(description="How it was measured: timer, warm-up, cache state, input sets.")]
    results: list[ConfigResult]
    best: Annotated[int | None, Field(description="Index of the fastest passing config.")] = None
    best_kernel_id: str | None = None
    baseline: Annotated[Timing | None, Field(description="Timing of the baseline expression.")] = None
    speedup: Annotated[float | None, Field(description="Baseline median / best median.")] = None
    bytes: int
    flops: int | None = None
    passed: bool | None = None
    summary: str


class DeviceEntry(BaseModel):
    kind: Annotated[Literal["cpu", "cuda", "rocm"], Field(description="Device family.")]
    index: int = 0
    name: str
    arch: Annotated[str | None, Field(description="e.g. x86_64, sm_90a, gfx942.")] = None
    cores: Annotated[int | None, Field(description="CPU cores or GPU SMs/CUs.")] = None
    memory_bytes: int | None = None
    copy_gbps: Annotated[float | None, Field(description="Measured device-memory copy rate (read+write).")] = None
    matmul_tflops: Annotated[float | None, Field(description="Measured dense matmul rate.")] = None
    matmul_dtype: str | None = None
    protections: Annotated[
        dict[str, Any] | None,
        Field(description="What confines this device's worker process: environment, memory limit, seccomp, Landlock."),
    ] = None


class DeviceInfo(BaseModel):
    devices: list[DeviceEntry]
    backends: Annotated[list[str], Field(description="Compiler targets available here.")]
    default_target: Annotated[str, Field(description="What target 'auto' resolves to.")]
    versions: dict[str, str]
    limits: Annotated[dict[str, Any], Field(description="Per-call limits in force.")]
    summary: str
