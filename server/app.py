"""The FastMCP 3.x app: Anvil's tools, resources and instructions for agents.

Each tool is a thin wrapper: build the request model from the arguments, call the plain tool
function in ``tools/`` with a progress callback, and return a :class:`ToolResult` whose first
text block is a one-line summary, whose second is the JSON, and whose structured content
matches the declared output schema. A caller-fixable problem (``ToolInputError``) becomes an
error result (``isError``) whose text says what to change, with structured details where there
are some (compiler diagnostics, the kind of a kernel fault).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.tools.tool import ToolResult
from mcp.types import TextContent
from pydantic import BaseModel, Field, ValidationError

from server import schema_cache
from server.descriptions import tool_description
from server.resources import default_examples_dir, language_text, register_resources
from server.worker import ProcessExecutor
from tools import models as m
from tools.bench import benchmark as run_benchmark
from tools.compile import compile_kernel as run_compile
from tools.compile import list_kernels as run_list_kernels
from tools.compile import read_artifact as run_read_artifact
from tools.device import device_info as run_device_info
from tools.errors import ToolInputError
from tools.generate import GenerateRequest, GenerateResult
from tools.generate import models as gm
from tools.generate.catalog import supported_functions
from tools.launch import launch_kernel as run_launch
from tools.limits import Limits
from tools.paths import no_roots_error, stat_regular
from tools.quantize import QuantizeRequest, QuantizeResult
from tools.quantize.models import Format, Scheme
from tools.quantize.paths import allowed_roots, resolve_input
from tools.reference_language import reference_language
from tools.runtime import Runtime, device_for, resolve_source_file, resolve_target

INSTRUCTIONS = """\
Anvil compiles, runs, checks and benchmarks GPU kernels written in a Triton-style Python DSL \
(import triton; import triton.language as tl; @triton.jit). Nothing you send is executed as \
Python: kernels go through Anvil's compiler, references through a whitelisting evaluator.

Workflow (prompts write_kernel, check_kernel, benchmark_kernel walk through it):
1. compile_kernel(source, constexprs={"BLOCK": 1024}) -> kernel_id, diagnostics with line/column/hint \
(and performance notes), compile_ms per stage, optional artifacts (source, tir, llir, asm, ptx).
2. launch_kernel(kernel_id, grid=["cdiv(n, BLOCK)"], args={...}, reference={"out_ptr": "x_ptr + y_ptr"}) \
-> stats of each output and a check against the torch reference. args: a number for scalars, a tensor \
spec for pointers: {"shape": [1024], "dtype": "float32", "init": "randn"}; outputs use init "empty" \
(poisoned, so unwritten elements are counted). source can replace kernel_id.
3. benchmark(same launch spec, baseline="torch expression", flops=..., autotune=true) -> median/p10/p90 us, \
noise, GB/s or TFLOP/s and % of the measured peaks, speedup, re-checked outputs; autotune searches \
block sizes (and warps/stages on GPUs), or pass configs=[...].

generate_kernel(expression, args): a torch expression -> a fused kernel's source, kernel_id, checked launch.
list_kernels and read_artifact(kernel_id, "source") find kernels again. device_info: devices, limits. \
Language: language_reference(section) or resource anvil://docs/language; examples: anvil://examples. \
References allow torch.*, F.*, tensor methods (launch_kernel's description lists every one).
A kernel that crashes or hangs returns an error naming its unmasked accesses; launch with debug=true to \
locate an out-of-bounds access. quantize_weights writes quantized .safetensors (allowed directories only).
"""

GENERATE_DESCRIPTION = f"""\
Write a fused kernel for a torch expression and check it: the reference language's expression (or \
assignments 'h = x @ w + b; y = F.gelu(h)') over tensor specs and numbers becomes one kernel of the \
torch.compile backend's code generator, with named parameters, BLOCK constexprs and masks: 'pointwise' \
(elementwise work), 'rows' (reductions over the last dim: softmax, layer/RMS norm, log-softmax, norms; \
rows up to 16384 values) or 'matmul' ((..., K) @ (K, N) with an elementwise epilogue). It is compiled \
(kernel_id, as compile_kernel), launched against the expression itself and, with benchmark=true, timed \
against torch. Returns source (edit it and relaunch with launch's arguments), launch (kernel_id, grid, \
args incl. outputs, sizes and strides, reference, constexprs), compile, check, benchmark, passed, notes. \
Nothing is executed as Python. It fuses: {supported_functions()}."""

_Model = TypeVar("_Model", bound=BaseModel)
# Seconds from the server's start to importing torch in the background: a client's first requests (initialize,
# tools/list) arrive at once, and an import beside them holds the interpreter (measured: tools/list answered
# 0.3-0.5 s later with it, 0.05 s without, on two shared cores).
QUIET_START_S = 1.0
ALLOWED_PATHS_ENV = "ANVIL_ALLOWED_PATHS"
SERVER_CACHE_ENV = "ANVIL_SERVER_CACHE_DIR"
SourceFile = Annotated[
    str | None,
    Field(
        description="Path of a kernel source file, instead of source "
        "(only inside the server's --allow-path directories)."
    ),
]


def env_allowed_paths(environ: dict[str, str] | None = None) -> list[Path]:
    """The directories in ``ANVIL_ALLOWED_PATHS`` (``os.pathsep``-separated), resolved; [] if unset."""
    raw = (os.environ if environ is None else environ).get(ALLOWED_PATHS_ENV, "")
    return [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]


def _quantize_field(name: str) -> Any:
    """The description of a QuantizeRequest field, so the tool's schema says what the library says."""
    return Field(description=QuantizeRequest.model_fields[name].description)


def server_cache_dir(environ: dict[str, str] | None = None) -> Path:
    """Where the server keeps what it measured about this machine (device ceilings):
    ``ANVIL_SERVER_CACHE_DIR``, default ``~/.cache/anvil-server``. Workers cannot write there."""
    env = os.environ if environ is None else environ
    raw = env.get(SERVER_CACHE_ENV)
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "anvil-server"


def default_docs_path() -> Path:
    """docs/language.md of this checkout, or ``ANVIL_DOCS``."""
    env = os.environ.get("ANVIL_DOCS")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "docs" / "language.md"


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's top-level fields with their types and descriptions, nested objects left open.

    Clients validate every result against the output schema, and the official SDK re-checks the
    schema itself on each call (tens of ms for the full nested schemas of these models); a shallow
    schema keeps that to a few ms while still naming and describing every field.
    """
    full = model.model_json_schema()
    defs = full.get("$defs", {})

    def shallow(prop: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in prop:
            target = defs[prop["$ref"].rsplit("/", 1)[-1]]
            return {"type": "object", "description": prop.get("description") or target.get("description", "")}
        if "anyOf" in prop:
            types = sorted({t for option in prop["anyOf"] for t in _types(shallow(option))})
            out: dict[str, Any] = {"type": types[0] if len(types) == 1 else types}
        else:
            out = {"type": prop["type"]} if "type" in prop else {}
            if prop.get("type") == "array":
                out["items"] = {}
        if "enum" in prop:
            out["enum"] = prop["enum"]
        if prop.get("description"):
            out["description"] = prop["description"]
        return out

    properties = {name: shallow(prop) for name, prop in full["properties"].items()}
    return {"type": "object", "properties": properties, "required": full.get("required", [])}


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    return kind if isinstance(kind, list) else [kind] if kind else ["object"]


def _validation_message(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors()[:8]:
        where = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-", "tagged-union")))
        lines.append(f"{where or 'request'}: {err['msg']}")
    return "invalid request: " + "; ".join(lines)


def _build(model: type[_Model], **fields: Any) -> _Model:
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise ToolError(_validation_message(exc)) from None


def _result(result: BaseModel) -> ToolResult:
    data = result.model_dump(mode="json")
    summary = str(data.get("summary") or "")
    blocks = [TextContent(type="text", text=json.dumps(data, separators=(",", ":")))]
    if summary:
        blocks.insert(0, TextContent(type="text", text=summary))
    return ToolResult(content=blocks, structured_content=data)


def _error(exc: ToolInputError) -> ToolResult:
    return ToolResult(
        content=[TextContent(type="text", text=exc.message)],
        structured_content={"error": exc.message, **exc.data} if exc.data else None,
        is_error=True,
    )


def _generate_tool() -> Callable[..., Awaitable[GenerateResult]]:
    """generate_kernel's implementation, loaded on the tool's first use."""
    # deferred: start-up cost: torch and the compiler's fusion library (about 3 s), which only this tool needs here
    from tools.generate.tool import generate_kernel

    return generate_kernel


class _Gate:
    """Counts calls in flight and refuses those beyond ``Limits.max_concurrent_calls``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0

    @contextlib.contextmanager
    def enter(self) -> Any:
        if self.in_flight >= self.limit:
            raise ToolError(f"server busy: {self.in_flight} calls in flight (limit {self.limit}); retry shortly.")
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


def _progress(ctx: Context | None) -> Callable[[float, float | None, str], Awaitable[None]] | None:
    if ctx is None:
        return None

    async def report(done: float, total: float | None, message: str) -> None:
        with contextlib.suppress(Exception):  # a client gone away must not fail the call
            await ctx.report_progress(done, total, message)

    return report


def create_app(
    runtime: Runtime | None = None,
    *,
    limits: Limits | None = None,
    allowed_paths: list[Path] | None = None,
    docs_path: Path | None = None,
    auth: Any = None,
    prestart: bool = False,
    executor: Any = None,
    examples_dir: Path | None = None,
) -> FastMCP:
    """The MCP app. Without ``runtime`` it creates one with process workers (``executor``, when given: one
    made early so that its workers start while the server imports) and stops them on exit. ``prestart``:
    start the compile worker and the default device's worker when the server starts, and their spares
    once they are ready.

    ``allowed_paths`` (default: ``ANVIL_ALLOWED_PATHS``) are the directories tools may read kernel
    files from and quantize_weights may read and write; with none, those tools refuse (naming
    ``--allow-path`` and ``ANVIL_ALLOWED_PATHS``).
    """
    schema_cache.install()
    owns = runtime is None
    if allowed_paths is None:
        allowed_paths = env_allowed_paths()
    if runtime is None:
        limits = limits or Limits.from_env()
        runtime = Runtime(limits=limits, executor=executor or ProcessExecutor(limits), allowed_paths=allowed_paths,
                          state_dir=server_cache_dir())
    rt = runtime
    docs = docs_path or default_docs_path()
    gate = _Gate(rt.limits.max_concurrent_calls)
    file_roots = list(rt.allowed_paths or allowed_paths)  # a given runtime's own list first
    quantize_lock = anyio.Lock()  # one quantization at a time: each is CPU- and memory-heavy

    async def start_up() -> None:
        """What the server does once it is up, in the background. With ``prestart``: the compile worker (unless
        started already: ``anvil serve`` starts it before importing the server). Then, after the client's first
        requests, torch, imported in a thread, says what target 'auto' means (the tools ask it on the event
        loop: by then it is imported); with ``prestart`` that device's worker starts (``anvil serve`` guessed it
        from the device nodes), and the started workers' spares once they are ready."""
        prestart_workers = getattr(rt.executor, "prestart", None) if prestart else None
        warm = getattr(rt.executor, "warm", None)
        if prestart_workers is not None:
            prestart_workers([])
        await anyio.sleep(QUIET_START_S)
        target = await anyio.to_thread.run_sync(resolve_target, "auto", abandon_on_cancel=True)
        if prestart_workers is not None:
            prestart_workers([device_for(target)])
            if warm is not None:
                await warm()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastMCP) -> AsyncIterator[dict[str, Any]]:
        # a task, not a task group: the lifespan may be left from another task than the one that entered it
        starting = asyncio.get_running_loop().create_task(start_up())
        try:
            yield {"runtime": rt}
        finally:
            starting.cancel()
            if owns:
                rt.executor.close()

    # Arguments are validated by pydantic from the signatures; a second jsonschema pass only adds latency.
    mcp = FastMCP("anvil", instructions=INSTRUCTIONS, lifespan=lifespan, auth=auth, strict_input_validation=False)

    def tool(result: type[BaseModel] | None, *extra: str, elsewhere: Mapping[type[BaseModel], str] | None = None,
             **options: Any) -> Callable[[Any], Any]:
        """Register a tool whose description is its docstring, ``extra`` and the fields of ``result`` (those
        of the nested results in ``elsewhere`` by reference to the tool that returns them)."""

        def register(fn: Any) -> Any:
            schema = output_schema(result) if result is not None else None
            description = tool_description(fn, result, *extra, elsewhere=elsewhere)
            return mcp.tool(description=description, output_schema=schema, **options)(fn)

        return register

    async def guarded(call: Callable[[], Awaitable[BaseModel]]) -> ToolResult:
        with gate.enter():
            try:
                return _result(await call())
            except ToolInputError as exc:
                return _error(exc)

    async def source_of(source: str | None, source_file: str | None) -> str | None:
        if source_file is None:
            return source
        if source is not None:
            raise ToolError("pass source or source_file, not both.")
        read = functools.partial(resolve_source_file, source_file, file_roots, rt.limits.max_source_bytes)
        try:
            return await anyio.to_thread.run_sync(read)  # a slow disk or a big file never stalls the event loop
        except ToolInputError as exc:
            raise ToolError(exc.message) from None

    @tool(m.CompileResult, annotations={"title": "Compile a kernel", "readOnlyHint": True, "idempotentHint": True})
    async def compile_kernel(
        source: m.Source = None,
        kernel_name: m.KernelName = None,
        signature: m.Signature = None,
        constexprs: m.Constexprs = None,
        target: m.Target = "auto",
        num_warps: m.NumWarps = None,
        num_stages: m.NumStages = None,
        maxnreg: m.MaxNReg = None,
        cluster_dims: m.ClusterDims = None,
        artifacts: Annotated[
            list[str],
            Field(description="Compiler outputs to return: source, tir, llir, asm (x86 assembly on the CPU, PTX on "
                  "CUDA, AMDGCN on AMD), ptx, sass, amdgcn, binary (the cubin or AMD code object: size, SHA-256 "
                  "and base64)."),
        ] = [],  # noqa: B006 - pydantic copies defaults
        artifact_lines: Annotated[int | None, Field(ge=1, description="Lines per artifact page (default 200).")] = None,
        debug: m.Debug = False,
        source_file: SourceFile = None,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Compile a Triton-style kernel. Returns a kernel_id (a content hash: the same input gives the same
        id, and a repeated compile is a cache hit), compile time per stage, resources, diagnostics with
        line, column and hint, and the first page of each requested artifact. Errors show the source line
        with a caret."""
        req = _build(
            m.CompileRequest,
            source=await source_of(source, source_file),
            kernel_name=kernel_name,
            signature=signature,
            constexprs=constexprs,
            target=target,
            num_warps=num_warps,
            num_stages=num_stages,
            maxnreg=maxnreg,
            cluster_dims=cluster_dims,
            artifacts=artifacts,
            artifact_lines=artifact_lines,
            debug=debug,
        )
        return await guarded(lambda: run_compile(rt, req, _progress(ctx)))

    @tool(m.LaunchResult, reference_language(), annotations={"title": "Launch and check a kernel",
                                                             "readOnlyHint": True})
    async def launch_kernel(
        grid: m.Grid,
        args: m.Args,
        kernel_id: m.KernelId = None,
        source: m.Source = None,
        kernel_name: m.KernelName = None,
        constexprs: m.Constexprs = None,
        reference: m.ReferenceExprs = None,
        atol: m.Tolerance = None,
        rtol: m.Tolerance = None,
        target: m.Target = "auto",
        outputs: m.Outputs = None,
        signature: m.Signature = None,
        num_warps: m.NumWarps = None,
        num_stages: m.NumStages = None,
        maxnreg: m.MaxNReg = None,
        cluster_dims: m.ClusterDims = None,
        debug: m.LaunchDebug = None,
        variants: m.Variants = None,
        source_file: SourceFile = None,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Run a kernel once on inputs the harness builds from tensor specs (every load and store bounds-checked),
        then report each output's stats (min/max/mean, NaN/Inf counts, elements never written, first values) and
        compare it with a torch reference expression (max abs/rel error, pass/fail at the dtype's tolerance).
        Echoes the signature and constexprs it ran with. `variants` checks more sizes in the same call. A kernel
        that crashes or hangs returns an error that names its unmasked accesses; the server recovers at once (a
        warm spare worker takes over)."""
        req = _build(
            m.LaunchRequest,
            grid=grid,
            args=args,
            kernel_id=kernel_id,
            source=await source_of(source, source_file),
            kernel_name=kernel_name,
            signature=signature,
            constexprs=constexprs,
            reference=reference,
            atol=atol,
            rtol=rtol,
            target=target,
            outputs=outputs,
            num_warps=num_warps,
            num_stages=num_stages,
            maxnreg=maxnreg,
            cluster_dims=cluster_dims,
            debug=debug,
            variants=variants,
        )
        return await guarded(lambda: run_launch(rt, req, _progress(ctx)))

    @tool(m.BenchmarkResult, "The baseline and references use the reference language of launch_kernel "
          "(resource anvil://docs/reference-expressions).", annotations={"title": "Benchmark a kernel",
                                                                        "readOnlyHint": True})
    async def benchmark(
        grid: m.Grid,
        args: m.Args,
        kernel_id: m.KernelId = None,
        source: m.Source = None,
        kernel_name: m.KernelName = None,
        constexprs: m.Constexprs = None,
        reference: m.ReferenceExprs = None,
        baseline: Annotated[
            str | None, Field(description=m.BenchmarkRequest.model_fields["baseline"].description)
        ] = None,
        baseline_setup: Annotated[
            str | None, Field(description=m.BenchmarkRequest.model_fields["baseline_setup"].description)
        ] = None,
        configs: Annotated[
            list[m.BenchConfig] | None,
            Field(description="Variants to time, e.g. [{'constexprs': {'BLOCK': 256}, 'num_warps': 4}]."),
        ] = None,
        bytes: Annotated[int | None, Field(ge=0, description="Bytes moved per run (default: all tensors).")] = None,
        flops: Annotated[int | None, Field(ge=0, description="Flops per run, for TFLOP/s.")] = None,
        warmup_ms: Annotated[float, Field(ge=0, le=2000, description="Warm-up time per config.")] = 25.0,
        rep_ms: Annotated[float, Field(gt=0, le=10000, description="Measured time per config.")] = 100.0,
        cache: Annotated[str, Field(description="'cold' (flush the cache before each run) or 'warm'.")] = "cold",
        input_sets: Annotated[int, Field(ge=1, le=8, description="Input copies at distinct addresses (fewer when the "
                                                  "per-call tensor limits allow fewer).")] = 3,
        autotune: Annotated[bool, Field(description=m.BenchmarkRequest.model_fields["autotune"].description)] = False,
        atol: m.Tolerance = None,
        rtol: m.Tolerance = None,
        target: m.Target = "auto",
        signature: m.Signature = None,
        num_warps: m.NumWarps = None,
        num_stages: m.NumStages = None,
        maxnreg: m.MaxNReg = None,
        cluster_dims: m.ClusterDims = None,
        debug: m.LaunchDebug = None,
        source_file: SourceFile = None,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Time a kernel (and optional config variants, or with autotune=true a search of block sizes, warps and
        stages, and a torch baseline) on harness-owned inputs: warm-up by time, cache flushed between runs, at
        least 10 timed runs each (unless the call's time runs out), configs and baseline taken in interleaved
        rounds, several input sets at distinct addresses. Reports median/p10/p90 us, n and the noise,
        GB/s, and TFLOP/s when flops is given, as percentages of the device's measured peaks, the speedup over the
        baseline, the measurement method, and re-checks the timed outputs against the reference."""
        req = _build(
            m.BenchmarkRequest,
            grid=grid,
            args=args,
            kernel_id=kernel_id,
            source=await source_of(source, source_file),
            kernel_name=kernel_name,
            constexprs=constexprs,
            reference=reference,
            baseline=baseline,
            baseline_setup=baseline_setup,
            configs=configs,
            bytes=bytes,
            flops=flops,
            warmup_ms=warmup_ms,
            rep_ms=rep_ms,
            cache=cache,
            input_sets=input_sets,
            autotune=autotune,
            atol=atol,
            rtol=rtol,
            target=target,
            signature=signature,
            num_warps=num_warps,
            num_stages=num_stages,
            maxnreg=maxnreg,
            cluster_dims=cluster_dims,
            debug=debug,
        )
        return await guarded(lambda: run_benchmark(rt, req, _progress(ctx)))

    @tool(GenerateResult, GENERATE_DESCRIPTION,
          elsewhere={m.CompileResult: "compile_kernel", m.LaunchResult: "launch_kernel",
                     m.BenchmarkResult: "benchmark"},
          annotations={"title": "Generate a fused kernel from a torch expression", "readOnlyHint": True})
    async def generate_kernel(
        expression: gm.Expression,
        args: gm.GenerateArgs,
        outputs: gm.OutputNames = None,
        kernel_name: gm.KernelNameParam = None,
        target: m.Target = "auto",
        check: gm.Check = None,
        benchmark: gm.Benchmark = False,
        rep_ms: gm.BenchRepMs = 50.0,
        atol: m.Tolerance = None,
        rtol: m.Tolerance = None,
        ctx: Context | None = None,
    ) -> ToolResult:
        req = _build(
            GenerateRequest,
            expression=expression,
            args=args,
            outputs=outputs,
            kernel_name=kernel_name,
            target=target,
            check=check,
            benchmark=benchmark,
            rep_ms=rep_ms,
            atol=atol,
            rtol=rtol,
        )
        run_generate = await anyio.to_thread.run_sync(_generate_tool)  # (its first use imports torch: not on the loop)
        return await guarded(lambda: run_generate(rt, req, _progress(ctx)))

    @tool(m.DeviceInfo, annotations={"title": "Devices and limits", "readOnlyHint": True, "idempotentHint": True})
    async def device_info(ctx: Context | None = None) -> ToolResult:
        """Describe the CPU and each GPU (name, architecture, cores/SMs, memory, measured copy bandwidth and
        matmul rate: measured once per machine and kept on disk), the available backends, every compile target
        with whether it is verified on hardware (Blackwell sm_100a/sm_103a/sm_120a: compile only), what target
        'auto' means, versions and limits."""
        return await guarded(lambda: run_device_info(rt, _progress(ctx)))

    @tool(m.ArtifactPage, annotations={"title": "Read a kernel's source or artifact", "readOnlyHint": True,
                                       "idempotentHint": True})
    async def read_artifact(
        kernel_id: Annotated[str, Field(description="A kernel_id from compile_kernel or list_kernels.")],
        artifact: Annotated[str, Field(description="source, tir (Tile IR), llir (LLVM IR), asm (x86 assembly on the "
                                                   "CPU), ptx, sass, amdgcn or binary (base64 of the cubin or AMD "
                                                   "code object).")],
        start_line: Annotated[int, Field(ge=1, description="First line (1-based).")] = 1,
        max_lines: Annotated[int | None, Field(ge=1, description="Lines to return (default 200).")] = None,
    ) -> ToolResult:
        """Read one page of a compiled kernel's source or compiler artifact (Tile IR, LLVM IR, assembly, PTX);
        next_page says how to continue. Also as resource anvil://kernels/{kernel_id}/{artifact}."""
        return await guarded(lambda: run_read_artifact(rt, kernel_id, artifact, start_line, max_lines))

    @tool(m.KernelList, annotations={"title": "List compiled kernels", "readOnlyHint": True, "idempotentHint": True})
    async def list_kernels(
        name: Annotated[str | None, Field(description="Only kernels whose name contains this.")] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Kernels to list at most.")] = 50,
    ) -> ToolResult:
        """List the kernels this server has compiled (most recently used first) with their kernel_id, types,
        constexprs and options; read one's source with read_artifact(kernel_id, 'source')."""

        async def listing() -> BaseModel:
            return run_list_kernels(rt, name, limit)

        return await guarded(listing)

    @tool(
        QuantizeResult,
        annotations={
            "title": "Quantize model weights",
            "readOnlyHint": False,
            "destructiveHint": True,  # replaces files only with overwrite=true
            "idempotentHint": False,
            "openWorldHint": False,
        },
    )
    async def quantize_weights(
        source_path: Annotated[str, _quantize_field("source_path")],
        format: Annotated[Format, _quantize_field("format")],
        output_path: Annotated[str, _quantize_field("output_path")],
        tensors: Annotated[list[str], _quantize_field("tensors")] = ["*"],  # noqa: B006 - pydantic copies defaults
        group_size: Annotated[int | None, _quantize_field("group_size")] = None,
        scheme: Annotated[Scheme | None, _quantize_field("scheme")] = None,
        calibration_path: Annotated[str | None, _quantize_field("calibration_path")] = None,
        overwrite: Annotated[bool, _quantize_field("overwrite")] = False,
        ctx: Context | None = None,
    ) -> ToolResult:
        """Quantize the 2-D weights of a .safetensors file to fp8_e4m3/fp8_e5m2 (vLLM, compressed-tensors),
        int4_awq (AutoAWQ gemm), nvfp4 (ModelOpt) or mxfp4 (OCP MX) with Anvil's kernels, write the
        quantized .safetensors plus a <output>.quantization_config.json, and report each weight's error
        (SQNR dB, relative error, cosine, max abs error, bytes before/after) and the pooled totals. Paths must
        lie inside the server's allowed directories (--allow-path / ANVIL_ALLOWED_PATHS; without them the tool
        is disabled; relative paths start in the first); existing files are replaced only with overwrite=true."""
        req = _build(
            QuantizeRequest,
            source_path=source_path,
            format=format,
            output_path=output_path,
            tensors=tensors,
            group_size=group_size,
            scheme=scheme,
            calibration_path=calibration_path,
            overwrite=overwrite,
        )
        dirs = file_roots
        if not dirs:
            raise ToolError(no_roots_error("quantize_weights").message)
        report = _progress(ctx)

        async def send(done: int, total: int, message: str) -> None:
            if report is not None:
                await report(done, total, message)

        def forward(done: int, total: int, message: str) -> None:  # in the worker thread, per tensor
            if report is not None:
                with contextlib.suppress(Exception):  # a client gone away must not fail the quantization
                    anyio.from_thread.run(send, done, total, message)

        def work() -> QuantizeResult:
            roots = allowed_roots(dirs)
            named = [("source_path", req.source_path), ("calibration_path", req.calibration_path)]
            for what, name in named:
                if name is None:
                    continue
                size = stat_regular(resolve_input(name, roots, what), what, name).st_size
                if size > rt.limits.max_quantize_bytes:
                    raise ToolInputError(
                        f"{what} is {size:,} bytes, over the server's max_quantize_bytes of "
                        f"{rt.limits.max_quantize_bytes:,} (the file is loaded whole): quantize one shard at a "
                        "time, or raise ANVIL_MAX_QUANTIZE_BYTES."
                    )
            # deferred: start-up cost: torch and the quantization kernels (about 3 s), loaded on the first quantization
            from tools.quantize.api import quantize_weights

            return quantize_weights(**req.model_dump(), allowed_dirs=dirs, progress=forward)

        with gate.enter():
            if quantize_lock.locked() and report is not None:
                await report(0, None, "waiting for another quantize_weights call to finish")
            async with quantize_lock:
                try:
                    result = await anyio.to_thread.run_sync(work)
                except ToolInputError as exc:
                    raise ToolError(exc.message) from None
        return _result(result)

    @tool(None, annotations={"title": "Language reference", "readOnlyHint": True, "idempotentHint": True})
    async def language_reference(
        section: Annotated[
            str | None,
            Field(description="A heading to look up (e.g. 'tl.load', 'reductions'); omit for all."),
        ] = None,
    ) -> str:
        """The Anvil kernel language reference: every op with its signature and a one-line example."""
        return language_text(docs, section)

    register_resources(mcp, rt, docs, examples_dir or default_examples_dir())
    return mcp
