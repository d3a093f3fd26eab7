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

from tools.specs import ArgValue, ConstexprValue

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
    dict[str, ConstexprValue] | None,
    Field(description="Values of the tl.constexpr parameters: numbers, booleans or short strings, e.g. "
          "{'BLOCK': 1024, 'ACTIVATION': 'leaky_relu'}."),
]
Target = Annotated[
    str,
    Field(description="'auto' (a GPU if present, else the CPU), 'cpu', 'cuda', 'cuda:sm_90a', 'amd:gfx942'. "
          "'cuda:sm_100a', 'cuda:sm_103a', 'cuda:sm_120a' (Blackwell) compile and assemble but are not verified "
          "on hardware; device_info lists every target."),
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
        "scalar args, constexprs and tensor args' shapes with + - * // % and cdiv/max/min, e.g. ['cdiv(n, BLOCK)'] "
        "or ['cdiv(a_ptr.shape[0], BM)']."
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
        "{'y_ptr': 'torch.softmax(x_ptr, dim=-1)'}, or assignments then the value, separated by ';' or "
        "newlines: {'y_ptr': 'm = x_ptr.amax(-1, keepdim=True); torch.exp(x_ptr - m)'}. Only whitelisted torch "
        "functions and tensor methods (language_reference lists them)."
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
        raise ValueError("target must be 'auto', 'cpu', 'cuda', 'cuda:sm_XX' (e.g. 'cuda:sm_90a', verified on an "
                         "H200; 'cuda:sm_100a', 'cuda:sm_103a' and 'cuda:sm_120a' compile only, not verified on "
                         "hardware), or 'amd:gfx942' / 'amd:gfx950' (AMD Instinct, compile only)")
    return value


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("target", check_fields=False)
    @classmethod
    def _check_target(cls, value: str) -> str:
        return check_target(value)

    @field_validator("reference", mode="before", check_fields=False)
    @classmethod
    def _reference_is_a_dict(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(f"reference is a dict from each output argument to its expression, e.g. "
                             f"{{'out_ptr': {value[:200]!r}}}, not a bare string")
        return value


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
        Field(description="Compiler outputs to return: 'tir', 'llir', 'asm' (CPU assembly), 'ptx', 'sass', 'amdgcn', "
              "'binary' (the cubin or AMD code object: size, SHA-256, base64)."),
    ] = []
    artifact_lines: Annotated[
        int | None,
        Field(ge=1, description="Lines per artifact page (default 200); page on with read_artifact."),
    ] = None


MAX_VARIANTS = 8
Variants = Annotated[
    list[dict[str, ArgValue]] | None,
    Field(
        max_length=MAX_VARIANTS,
        description="More argument sets to launch and check the same way after the first, each replacing some "
        "of args, e.g. [{'x_ptr': {'shape': [4097]}, 'out_ptr': {'shape': [4097], 'init': 'empty'}, 'n': 4097}]: "
        "sizes that are not multiples of the block in one call. The grid is evaluated again for each; "
        f"`passed` is true only if every set passes; at most {MAX_VARIANTS}.",
    ),
]


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
    variants: Variants = None


class BenchConfig(BaseModel):
    """One variant to time: constexpr values and launch options layered over the base kernel."""

    model_config = ConfigDict(extra="forbid")
    constexprs: Annotated[dict[str, ConstexprValue],
                          Field(description="Constexpr overrides, e.g. {'BLOCK': 512}.")] = {}
    num_warps: NumWarps = None
    num_stages: NumStages = None
    maxnreg: MaxNReg = None
    cluster_dims: ClusterDims = None


class BenchmarkRequest(LaunchRequest):
    baseline: Annotated[
        str | None,
        Field(description="A torch expression over the args to time as the baseline, e.g. 'x_ptr + y_ptr' "
              "(assignments before it allowed, as in reference). End a view (x_ptr.T) with .contiguous() so that "
              "it moves the data the kernel writes."),
    ] = None
    baseline_setup: Annotated[
        str | None,
        Field(description="Assignments in the reference language evaluated once per input set before timing, "
              "untimed; the baseline may use the names they assign, e.g. 'causal = torch.ones(1000, 1000, "
              "dtype=torch.bool).triu(1)' for a baseline 'torch.softmax(x_ptr.masked_fill(causal, -math.inf), -1)'."),
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
        int, Field(ge=1, le=8, description="Copies of the inputs at distinct addresses, used in rotation (fewer when "
                   "the per-call tensor limits allow fewer).")
    ] = 3
    autotune: Annotated[
        bool, Field(description="Search the configs instead of timing the given ones: block-size constexprs "
                    "(powers of two named with BLOCK or TILE, BM/BN/BK/BD, ROWS, COLS or CHUNK) around their "
                    "values, then num_warps and num_stages (GPU) around the best; every config tried is reported.")
    ] = False


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
    name: Annotated[str, Field(description="Artifact name: source, tir, llir, asm, ptx, sass, amdgcn, binary.")]
    start_line: Annotated[int, Field(description="First line of this page (1-based).")]
    end_line: Annotated[int, Field(description="Last line of this page.")]
    total_lines: Annotated[int, Field(description="Lines of the whole artifact.")]
    text: Annotated[str, Field(description="The lines of this page.")]
    next_page: Annotated[str | None, Field(description="How to read the next page; null on the last page.")] = None


def _d(text: str) -> Any:
    return Field(description=text)


Summary = Annotated[str, _d("One line saying what happened, for a person or a model to read first.")]


class CompileResult(BaseModel):
    kernel_id: Annotated[str, _d("Handle for launch_kernel/benchmark/read_artifact (content hash).")]
    kernel_name: Annotated[str, _d("The @jit function compiled.")]
    target: Annotated[str, _d("The resolved target, e.g. 'cpu' or 'cuda:sm_90a'.")]
    cached: Annotated[bool, _d("True when this exact compile was already done.")]
    signature: Annotated[dict[str, str], _d("The argument types used, by parameter name.")]
    constexprs: Annotated[dict[str, ConstexprValue], _d("The values of the tl.constexpr parameters compiled in.")]
    compile_ms: Annotated[dict[str, float], _d(
        "Milliseconds per stage (frontend, passes, llvm_ir, llvm_opt, codegen on the CPU; llvm_opt_ptx, ptxas on "
        "CUDA; cache_load when the disk cache had it) and total.")]
    resources: Annotated[Resources, _d("Registers, spills, shared memory, occupancy, warps, stages.")]
    diagnostics: Annotated[list[Diagnostic], _d(
        "Warnings and notes: assumed argument types, and 'performance:' notes on slow lowerings with their line.")]
    artifacts: Annotated[dict[str, ArtifactPage], _d("First page of each requested artifact.")]
    available_artifacts: Annotated[list[str], _d("Artifacts read_artifact can return for this kernel.")]
    summary: Summary


class TensorStats(BaseModel):
    shape: Annotated[list[int], _d("Dimensions.")]
    dtype: Annotated[str, _d("Element type, e.g. float32.")]
    min: Annotated[float | None, _d("Minimum over finite elements.")] = None
    max: Annotated[float | None, _d("Maximum over finite elements.")] = None
    mean: Annotated[float | None, _d("Mean over finite elements.")] = None
    nan_count: Annotated[int, _d("NaN elements (the poison of unwritten float elements is a NaN too).")] = 0
    inf_count: Annotated[int, _d("Infinite elements.")] = 0
    zero_count: Annotated[
        int, _d("Elements equal to 0 (e.g. the dropped fraction of a dropout, the sparsity after a ReLU).")
    ] = 0
    unwritten_count: Annotated[
        int | None, _d("Elements still holding the poison of init 'empty' (never written).")
    ] = None
    values: Annotated[
        list[float | int | bool | str],
        _d("The first few elements, flattened; 'nan'/'inf' as text."),
    ] = []


class Mismatch(BaseModel):
    index: Annotated[list[int], _d("Index of the first element outside the tolerance.")]
    got: Annotated[float | int | bool | str, _d("The kernel's value there.")]
    expected: Annotated[float | int | bool | str, _d("The reference's value there.")]


class CheckResult(BaseModel):
    passed: Annotated[bool, _d("Every element within atol + rtol * |expected| (NaN matches NaN).")]
    reference: Annotated[str, _d("The reference expression.")]
    max_abs_error: Annotated[float | None, _d("Over elements finite in both.")] = None
    max_rel_error: Annotated[float | None, _d("|got - expected| / |expected|, finite elements.")] = None
    atol: Annotated[float, _d("Absolute tolerance used (the dtype's default unless given).")]
    rtol: Annotated[float, _d("Relative tolerance used.")]
    mismatched: Annotated[int, _d("Elements outside atol + rtol * |expected| (NaN/Inf included).")]
    total: Annotated[int, _d("Elements compared.")]
    first_mismatch: Annotated[Mismatch | None, _d("The first element outside the tolerance; null if none.")] = None


class LaunchResult(BaseModel):
    kernel_id: Annotated[str, _d("The kernel launched (a specialization of the one asked for when args changed "
                                    "its argument types).")]
    kernel_name: Annotated[str, _d("The @jit function launched.")]
    target: Annotated[str, _d("The resolved target.")]
    device: Annotated[str, _d("Where it ran, e.g. 'cpu' or 'cuda:0'.")]
    signature: Annotated[dict[str, str], _d("The argument types it was compiled for, by parameter name.")] = {}
    constexprs: Annotated[dict[str, ConstexprValue], _d("The constexpr values it was compiled with.")] = {}
    grid: Annotated[list[int], _d("Programs per axis, evaluated.")]
    outputs: Annotated[dict[str, TensorStats], _d("Stats of the output tensors after the launch.")]
    checks: Annotated[dict[str, CheckResult], _d("Comparison with each reference.")]
    passed: Annotated[bool | None, _d("All checks passed; null when no reference was given.")]
    elapsed_ms: Annotated[float, _d("Wall time of the launch (not a benchmark).")]
    summary: Summary
    variants: Annotated[list[VariantResult], _d("One entry per set in the request's variants, in order.")] = []


class VariantResult(BaseModel):
    args: Annotated[dict[str, ArgValue], _d("The args this set replaced.")]
    grid: Annotated[list[int], _d("Programs per axis, evaluated for this set.")]
    passed: Annotated[bool | None, _d("Its checks passed; null when no reference was given.")]
    checks: Annotated[dict[str, CheckResult], _d("Comparison with each reference.")]
    summary: Summary


class Timing(BaseModel):
    median_us: Annotated[float, _d("Median time per run, microseconds.")]
    p10_us: Annotated[float, _d("10th percentile.")]
    p90_us: Annotated[float, _d("90th percentile.")]
    min_us: Annotated[float, _d("Fastest run.")]
    n: Annotated[int, _d("Timed repetitions.")]
    noise_pct: Annotated[float | None, _d("(p90 - p10) / median, percent: the spread of the runs.")] = None
    note: Annotated[str | None, _d("Why this timing may not compare (a baseline that returns a view of an "
                                    "input moves no data).")] = None


class ConfigResult(BaseModel):
    config: Annotated[BenchConfig, _d("The constexprs and launch options of this variant.")]
    kernel_id: Annotated[str | None, _d("The variant's kernel_id.")] = None
    timing: Annotated[Timing | None, _d("Its timing; null when it could not be measured.")] = None
    gbps: Annotated[float | None, _d("bytes / median time.")] = None
    tflops: Annotated[float | None, _d("flops / median time (when flops was given).")] = None
    pct_of_peak_bandwidth: Annotated[float | None, _d("gbps as a percentage of the measured copy rate.")] = None
    pct_of_peak_flops: Annotated[float | None, _d("tflops as a percentage of the measured matmul rate.")] = None
    passed: Annotated[bool | None, _d("Outputs of the timed runs match the reference.")] = None
    checks: Annotated[dict[str, CheckResult], _d("The reference checks of its outputs.")] = {}
    error: Annotated[str | None, _d("Why this config could not be measured.")] = None


class BenchmarkResult(BaseModel):
    kernel_name: Annotated[str, _d("The @jit function timed.")]
    target: Annotated[str, _d("The resolved target.")]
    device: Annotated[str, _d("Where it ran.")]
    method: Annotated[str, _d("How it was measured: timer, warm-up, cache state, input sets, peaks.")]
    results: Annotated[list[ConfigResult], _d("One entry per config, in order (with autotune: every one tried).")]
    best: Annotated[int | None, _d("Index in results of the fastest passing config.")] = None
    best_kernel_id: Annotated[str | None, _d("Its kernel_id, to launch or benchmark again.")] = None
    baseline: Annotated[Timing | None, _d("Timing of the baseline expression.")] = None
    speedup: Annotated[float | None, _d("Baseline median / best median.")] = None
    bytes: Annotated[int, _d("Bytes moved per run used for GB/s.")]
    flops: Annotated[int | None, _d("Flops per run used for TFLOP/s.")] = None
    input_sets: Annotated[int, _d("Input sets used in rotation (fewer than asked when the limits require).")] = 1
    autotune: Annotated[list[str] | None, _d("What the search tried, round by round (autotune=true).")] = None
    passed: Annotated[bool | None, _d("Every checked config passed (with autotune: the best one; the search drops "
                                      "candidates that fail); null without a reference.")] = None
    summary: Summary


class DeviceEntry(BaseModel):
    kind: Annotated[Literal["cpu", "cuda", "rocm"], _d("Device family.")]
    index: Annotated[int, _d("Device index within its family.")] = 0
    name: Annotated[str, _d("Model name.")]
    arch: Annotated[str | None, _d("e.g. x86_64, sm_90a, gfx942.")] = None
    cores: Annotated[int | None, _d("CPU cores or GPU SMs/CUs.")] = None
    memory_bytes: Annotated[int | None, _d("Memory of the device.")] = None
    copy_gbps: Annotated[float | None, _d("Measured device-memory copy rate (read+write).")] = None
    matmul_tflops: Annotated[float | None, _d("Measured dense matmul rate.")] = None
    matmul_dtype: Annotated[str | None, _d("The dtype of that matmul.")] = None
    protections: Annotated[
        dict[str, Any] | None,
        _d("What confines this device's worker process: environment, memory limit, seccomp, Landlock (null until "
           "the worker has started)."),
    ] = None


class TargetEntry(BaseModel):
    target: Annotated[str, _d("A target name compile_kernel takes, e.g. 'cuda:sm_100a'.")]
    family: Annotated[str, _d("The processors it is for.")]
    ptx_version: Annotated[str | None, _d("The PTX ISA version its kernels declare (NVIDIA targets).")] = None
    verified_on_hardware: Annotated[bool, _d(
        "Whether Anvil's GPU tests have run kernels compiled for it on that hardware; false: compiled and "
        "assembled (ptxas) in CI only, never launched, so results and speed there are unchecked.")]
    verified_on: Annotated[str | None, _d("The device they ran on, e.g. 'H200'.")] = None


class DeviceInfo(BaseModel):
    devices: Annotated[list[DeviceEntry], _d("The CPU, then each GPU.")]
    backends: Annotated[list[str], _d("Compiler targets available here.")]
    targets: Annotated[list[TargetEntry], _d(
        "Every target the compiler compiles for (CUDA ones need no GPU to compile), with whether it is verified "
        "on hardware: sm_90a on an H200 is; the Blackwell targets sm_100a, sm_103a, sm_120a and AMD's gfx942, "
        "gfx950 compile only.")] = []
    default_target: Annotated[str, _d("What target 'auto' resolves to.")]
    versions: Annotated[dict[str, str], _d("Versions of Python, Anvil, torch, llvmlite and the other packages.")]
    limits: Annotated[dict[str, Any], _d("Per-call limits in force.")]
    summary: Summary


class KernelEntry(BaseModel):
    kernel_id: Annotated[str, _d("Its handle.")]
    kernel_name: Annotated[str, _d("The @jit function.")]
    target: Annotated[str, _d("The resolved target.")]
    signature: Annotated[dict[str, str], _d("Argument types by parameter name.")]
    constexprs: Annotated[dict[str, ConstexprValue], _d("Constexpr values compiled in.")]
    options: Annotated[dict[str, Any], _d("num_warps, num_stages, maxnreg, cluster_dims, debug where set.")]
    source_lines: Annotated[int, _d("Lines of its source (read it with read_artifact(kernel_id, 'source')).")]
    age_s: Annotated[float, _d("Seconds since it was compiled.")]


class KernelList(BaseModel):
    kernels: Annotated[list[KernelEntry], _d("Compiled kernels, most recently used first.")]
    total: Annotated[int, _d("Kernels this server keeps (it drops the least recently used past its limit).")]
    summary: Summary
