"""compile_kernel: source text -> a kernel_id, stage timings, resources, diagnostics, artifacts.

The calling process only validates and hashes (:func:`plan_compile`); the compiler itself runs
as the "compile" job (:func:`run_compile_job`) in a worker, because compiling untrusted source
can crash a process (LLVM aborts) or take unbounded time. Records are cached by kernel_id.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import re
import time
from functools import cache
from typing import TYPE_CHECKING, Any

import anyio

from tools.arg_kinds import argument_kind_mistake, assumed_type
from tools.errors import ToolInputError, listed, quoted
from tools.executor import Progress, Report, WorkerState, noop_progress, resolve_target
from tools.models import ArtifactPage, CompileRequest, CompileResult, Diagnostic, KernelEntry, KernelList, Resources
from tools.specs import ConstexprValue, check_signature_type
from tools.store import CompileSpec, KernelRecord

if TYPE_CHECKING:
    from tools.runtime import Runtime

# Artifact names agents may ask for, and the compiler's ``asm`` keys that can satisfy each.
ARTIFACT_KEYS: dict[str, tuple[str, ...]] = {
    "source": ("source",),  # the kernel's source text, as compiled
    "tir": ("tir", "ttir"),
    "llir": ("llir",),
    "asm": ("asm", "ptx", "amdgcn"),
    "ptx": ("ptx",),
    "sass": ("sass",),
    "amdgcn": ("amdgcn",),
    "binary": ("binary",),  # the cubin or AMD code object: its size and digest, then base64
}
# a Tile IR op of tl.inline_asm_elementwise, as the printer writes it
_INLINE_ASM = re.compile(r"=\s*inline_asm\b|^\s*inline_asm\b", re.M)
_RESOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "registers": ("registers", "num_regs", "n_regs"),
    "spills": ("spills", "n_spills", "spill_bytes"),
    "shared_memory_bytes": ("shared_memory_bytes", "shared", "shared_mem"),
    "occupancy": ("occupancy",),
    "num_warps": ("num_warps",),
    "num_stages": ("num_stages",),
}


@cache
def compiler_version() -> str:
    """Part of every kernel_id, so an upgraded compiler never reuses old records."""
    try:
        return importlib.metadata.version("anvil")
    except importlib.metadata.PackageNotFoundError:
        return "dev"


def plan_compile(
    rt: Runtime,
    *,
    source: str | None,
    kernel_name: str | None = None,
    signature: dict[str, str] | None = None,
    hints: dict[str, str] | None = None,
    constexprs: dict[str, ConstexprValue] | None = None,
    target: str = "auto",
    num_warps: int | None = None,
    num_stages: int | None = None,
    maxnreg: int | None = None,
    cluster_dims: list[int] | None = None,
    debug: bool = False,
) -> CompileSpec:
    """Validate what can be checked without the compiler and build the CompileSpec."""
    if source is None or not source.strip():
        raise ToolInputError("source is empty: pass the kernel's source text (or a kernel_id where accepted).")
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError as exc:
        line = source.count("\n", 0, exc.start) + 1
        raise ToolInputError(
            f"source has a character that is not valid Unicode text (a lone surrogate, {source[exc.start]!r}) at "
            f"line {line}; send the kernel as plain UTF-8 text."
        ) from None
    if size > rt.limits.max_source_bytes:
        raise ToolInputError(f"source is {size} bytes; the limit is {rt.limits.max_source_bytes}.")
    checked = {name: check_signature_type(t, where=f"signature[{name!r}]") for name, t in (signature or {}).items()}
    return CompileSpec(
        source=source,
        kernel_name=kernel_name,
        signature=checked,
        hints={k: v for k, v in (hints or {}).items() if k not in checked},
        constexprs=dict(constexprs or {}),
        target=resolve_target(target),
        num_warps=num_warps,
        num_stages=num_stages,
        maxnreg=maxnreg,
        cluster_dims=list(cluster_dims) if cluster_dims else None,
        debug=debug,
        compiler_version=compiler_version(),
    )


async def ensure_compiled(
    rt: Runtime, spec: CompileSpec, progress: Progress | None = None, artifacts: list[str] | None = None
) -> tuple[KernelRecord, bool]:
    """The record for ``spec``: from the store, or compiled now. Concurrent equal requests compile once.
    ``artifacts`` made on request only (the CPU's assembly) are added to a stored record that lacks them."""
    kernel_id = spec.kernel_id
    while True:
        record = rt.store.get(kernel_id)
        if record is not None:
            await ensure_artifacts(rt, record, artifacts or [])
            return record, True
        pending = rt._compiling.get(kernel_id)
        if pending is None:
            break
        await pending.wait()  # another call is compiling the same kernel; it may fail, so look again
        if rt.store.get(kernel_id) is None:
            break
    done = rt._compiling[kernel_id] = anyio.Event()
    try:
        payload = spec.to_dict() | {"artifacts": list(artifacts or [])}
        out = await rt.executor.compile(payload, timeout=rt.limits.compile_timeout_s, progress=progress)
    finally:
        rt._compiling.pop(kernel_id, None)
        done.set()
    if not rt.limits.allow_inline_asm and _INLINE_ASM.search(out.get("asm", {}).get("tir", "")):
        raise ToolInputError(
            f"{out.get('kernel_name', 'the kernel')} uses tl.inline_asm_elementwise, which this server does not "
            "allow: GPU assembly addresses memory that the launch's bounds checks cannot see. Write the operation "
            "with tl functions, or ask the operator to start the server with --allow-inline-asm "
            "(ANVIL_ALLOW_INLINE_ASM=1).",
            data={"error": "inline_asm_not_allowed"},
        )
    record = KernelRecord(spec=spec, **out)
    # one compilation, one id: the types resolved (given, implied by launch args, or assumed) and the
    # kernel named, so compile_kernel, launch_kernel and an explicit signature agree on the id
    resolved = spec.with_changes(signature=dict(record.signature), hints={}, kernel_name=record.kernel_name)
    known = rt.store.get(resolved.kernel_id)
    if known is not None:
        rt.store.put(known, also=kernel_id)
        return known, False
    record.resolved_id = resolved.kernel_id  # the spec as asked stays: a later launch re-resolves from it
    rt.store.put(record, also=kernel_id)
    return record, False


# Artifacts a compile makes only when asked (generating them costs as much as the compile's code generation).
ON_REQUEST = {"asm": "cpu"}


async def ensure_artifacts(rt: Runtime, record: KernelRecord, names: list[str]) -> None:
    """Add to ``record`` the on-request artifacts among ``names`` it lacks (a compile job that finds the kernel
    in the compile cache and generates them)."""
    wanted = [n for n in names if ON_REQUEST.get(n) == record.spec.target and n not in record.asm]
    if not wanted:
        return
    payload = record.spec.to_dict() | {"artifacts": wanted}
    out = await rt.executor.compile(payload, timeout=rt.limits.compile_timeout_s)
    for name in wanted:
        if name in out["asm"]:
            record.asm[name] = out["asm"][name]


async def compile_kernel(rt: Runtime, req: CompileRequest, progress: Progress | None = None) -> CompileResult:
    """The compile_kernel tool: compile (or find) the kernel and describe it."""
    progress = progress or noop_progress
    spec = plan_compile(
        rt,
        source=req.source,
        kernel_name=req.kernel_name,
        signature=req.signature,
        constexprs=req.constexprs,
        target=req.target,
        num_warps=req.num_warps,
        num_stages=req.num_stages,
        maxnreg=req.maxnreg,
        cluster_dims=req.cluster_dims,
        debug=req.debug,
    )
    for name in req.artifacts:
        if name not in ARTIFACT_KEYS:
            raise ToolInputError(f"unknown artifact {name!r}; choose from {', '.join(ARTIFACT_KEYS)}.")
    record, cached = await ensure_compiled(rt, spec, progress, list(req.artifacts))
    lines = min(req.artifact_lines or rt.limits.artifact_page_lines, rt.limits.max_artifact_page_lines)
    pages = {name: artifact_page(record, name, 1, lines) for name in req.artifacts}
    total = record.compile_ms.get("total", sum(record.compile_ms.values()))
    sig = ", ".join(f"{k}: {v}" for k, v in record.signature.items())
    summary = (
        f"{'found cached' if cached else 'compiled'} {record.kernel_name}({sig}) for {spec.target}"
        f"{'' if cached else f' in {total:.0f} ms'}; kernel_id={record.kernel_id}"
    )
    warnings = [d for d in record.diagnostics if d.get("severity") != "note"]
    if warnings:
        summary += f"; {len(warnings)} warning(s)"
    slow = [d for d in record.diagnostics if str(d.get("message", "")).startswith("performance:")]
    if slow:
        summary += f"; {len(slow)} performance note(s): " + "; ".join(
            f"line {d.get('line')}: {str(d['message']).removeprefix('performance: ').split(':')[0]}" for d in slow[:3])
    return CompileResult(
        kernel_id=record.kernel_id,
        kernel_name=record.kernel_name,
        target=spec.target,
        cached=cached,
        signature=record.signature,
        constexprs=spec.constexprs,
        compile_ms={**record.compile_ms, "total": round(total, 3)},
        resources=Resources(**record.resources),
        diagnostics=[Diagnostic(**d) for d in record.diagnostics],
        artifacts=pages,
        available_artifacts=available_artifacts(record),
        summary=summary,
    )


def binary_text(kind: str, data: bytes, target: str) -> str:
    """A binary artifact as text: one line saying what it is (kind, size, SHA-256), then base64 in lines of
    76 characters (`base64 -d` restores the file)."""
    digest = hashlib.sha256(data).hexdigest()
    encoded = base64.b64encode(data).decode("ascii")
    lines = [f"# {kind} for {target}: {len(data)} bytes, sha256 {digest}; base64 below (decode with base64 -d)"]
    lines += [encoded[i:i + 76] for i in range(0, len(encoded), 76)]
    return "\n".join(lines)


def available_artifacts(record: KernelRecord) -> list[str]:
    return [name for name, keys in ARTIFACT_KEYS.items()
            if name == "source" or ON_REQUEST.get(name) == record.spec.target or any(k in record.asm for k in keys)]


def artifact_text(record: KernelRecord, name: str) -> str:
    if name == "source":
        return record.spec.source
    for key in ARTIFACT_KEYS.get(name, (name,)):
        if key in record.asm:
            return record.asm[key]
    raise ToolInputError(
        f"kernel {record.kernel_id} has no artifact {name!r} for target {record.spec.target}; "
        f"available: {', '.join(available_artifacts(record)) or '(none)'}."
    )


def artifact_page(record: KernelRecord, name: str, start_line: int, count: int) -> ArtifactPage:
    """Lines ``start_line .. start_line + count - 1`` of an artifact, with how to get the next page."""
    lines = artifact_text(record, name).splitlines()
    start = max(1, start_line)
    end = min(len(lines), start + count - 1)
    next_page = None
    if end < len(lines):
        next_page = (
            f"read_artifact(kernel_id='{record.kernel_id}', artifact='{name}', start_line={end + 1}, "
            f"max_lines={count}) or resource "
            f"anvil://kernels/{record.kernel_id}/{name}?start={end + 1}&count={count}"
        )
    return ArtifactPage(
        name=name,
        start_line=start,
        end_line=end,
        total_lines=len(lines),
        text="\n".join(lines[start - 1 : end]),
        next_page=next_page,
    )


async def read_artifact(
    rt: Runtime, kernel_id: str, artifact: str, start_line: int = 1, max_lines: int | None = None
) -> ArtifactPage:
    """The read_artifact tool: one page of a compiled kernel's artifact (its source, Tile IR, LLVM IR, assembly,
    PTX)."""
    record = get_record(rt, kernel_id)
    await ensure_artifacts(rt, record, [artifact])
    count = min(max_lines or rt.limits.artifact_page_lines, rt.limits.max_artifact_page_lines)
    page = artifact_page(record, artifact, start_line, max(1, count))
    if start_line > max(1, page.total_lines):
        raise ToolInputError(f"start_line={start_line} is past the end of {artifact!r}, which has "
                             f"{page.total_lines} line(s); read from start_line=1.")
    return page


def list_kernels(rt: Runtime, name: str | None = None, limit: int = 50) -> KernelList:
    """The list_kernels tool: the compiled kernels this server keeps, most recently used first."""
    now = time.time()
    records = [r for r in rt.store.recent() if name is None or name.lower() in r.kernel_name.lower()]
    entries = [
        KernelEntry(
            kernel_id=r.kernel_id, kernel_name=r.kernel_name, target=r.spec.target, signature=r.signature,
            constexprs=r.spec.constexprs, source_lines=len(r.spec.source.splitlines()), age_s=round(now - r.created, 1),
            options={k: v for k, v in (("num_warps", r.spec.num_warps), ("num_stages", r.spec.num_stages),
                                       ("maxnreg", r.spec.maxnreg), ("cluster_dims", r.spec.cluster_dims),
                                       ("debug", r.spec.debug or None)) if v is not None},
        )
        for r in records[:limit]
    ]
    shown = ", ".join(f"{e.kernel_name} {e.kernel_id}" for e in entries[:5])
    more = f" (showing {len(entries)})" if len(records) > len(entries) else ""
    summary = f"{len(records)} kernel(s){' named like ' + repr(name) if name else ''}{more}" + (f": {shown}" if shown
                                                                                                  else "")
    return KernelList(kernels=entries, total=len(rt.store), summary=summary)


def get_record(rt: Runtime, kernel_id: str) -> KernelRecord:
    record = rt.store.get(kernel_id)
    if record is None:
        raise ToolInputError(
            f"unknown kernel_id {kernel_id!r}: compile the kernel with compile_kernel "
            "(or pass source) first. "
            f"This server keeps the {rt.limits.max_kernels} most recently used kernels while it runs."
        )
    return record


# --- the job, run in a compile worker ---------------------------------------------------------------


def diagnostic_from(exc: BaseException) -> dict[str, Any]:
    """A Diagnostic dict from a compiler.CompilationError (any attribute may be missing)."""
    message = getattr(exc, "message", None) or str(exc).splitlines()[0]
    return {
        "severity": "error",
        "message": str(message),
        "line": getattr(exc, "lineno", None),
        "column": getattr(exc, "col", None),
        "source_line": getattr(exc, "source_line", None),
        "hint": getattr(exc, "hint", None),
        "text": str(exc),
    }


def compile_error(exc: BaseException) -> ToolInputError:
    diag = diagnostic_from(exc)
    return ToolInputError(f"compilation failed:\n{diag['text']}", data={"diagnostics": [diag]})


def load_kernel(source: str, kernel_name: str | None) -> Any:
    """compiler.compile_source with compile errors turned into ToolInputError."""
    # deferred: start-up cost: the compiler (about 0.2 s); the server process imports this module and never compiles
    import compiler

    try:
        return compiler.compile_source(source, kernel_name, filename="<source>")
    except compiler.CompilationError as exc:
        raise compile_error(exc) from None


def run_compile_job(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    """Compile a CompileSpec; return the fields of a KernelRecord (except the spec). The compiled code
    is not kept: the device worker builds the binary it launches, so a compile worker's memory stays flat."""
    # deferred: start-up cost: the compiler (about 0.2 s); the server process imports this module and never compiles
    from compiler.runtime.compiled import forget_compiled

    try:
        return _compile_job(payload, report)
    finally:
        forget_compiled()


def _compile_job(payload: dict[str, Any], report: Report) -> dict[str, Any]:
    # deferred: start-up cost: the compiler (about 0.2 s); the server process imports this module and never compiles
    import compiler

    requested = list(payload.get("artifacts") or [])
    spec = CompileSpec.from_dict({k: v for k, v in payload.items() if k != "artifacts"})
    report(0, 2, "parsing")
    jit = load_kernel(spec.source, spec.kernel_name)
    arg_names = list(jit.arg_names)
    constexpr_names = [a for a in arg_names if a in set(jit.constexpr_names)]
    runtime = [a for a in arg_names if a not in constexpr_names]
    kernel_name = getattr(jit, "__name__", None) or spec.kernel_name or "kernel"
    problems: list[str] = []
    for name in spec.signature:
        if name in constexpr_names:
            problems.append(f"signature gives a type for {name!r}, a tl.constexpr parameter: pass it in constexprs")
        elif name not in arg_names:
            problems.append(f"signature names {quoted(name)}, which is not a parameter of {kernel_name}")
    for name in spec.constexprs:
        if name not in constexpr_names:
            if name in arg_names:
                problems.append(
                    f"constexprs has {quoted(name)}, which is a runtime parameter of {kernel_name}: if it is a "
                    f"compile-time value (a block size, a flag), annotate it `{name}: tl.constexpr` in the kernel; "
                    f"else pass it in args")
            else:
                problems.append(f"constexprs has {quoted(name)}, which is not a parameter of {kernel_name}")
    missing = [n for n in constexpr_names if n not in spec.constexprs]
    if missing:
        example = ", ".join(f"'{n}': ..." for n in missing)
        problems.append(f"no value for tl.constexpr parameter(s) {', '.join(missing)}: pass constexprs={{{example}}}")
    if problems:
        params = ", ".join(f"{a}{': tl.constexpr' if a in constexpr_names else ''}" for a in arg_names)
        raise ToolInputError(listed(problems) + f". The parameters of {kernel_name} are ({params}).")
    notes: list[dict[str, Any]] = []
    signature: dict[str, str] = {}
    for name in runtime:
        signature[name] = spec.signature.get(name) or spec.hints.get(name) or assumed_type(name)
    assumed = {n: t for n, t in signature.items() if n not in spec.signature and n not in spec.hints}
    if assumed:
        given = ", ".join(f"{n}: {t}" for n, t in assumed.items())
        message = f"no types given for {', '.join(assumed)}; assumed {given}"
        notes.append({
            "severity": "note",
            "message": message,
            "hint": "pass signature={'x_ptr': '*fp16', ...} to change them; launch_kernel infers them",
            "text": "note: " + message,
        })  # fmt: skip
    report(1, 2, "compiling")
    options: dict[str, Any] = {"target": spec.target, "debug": spec.debug}
    if spec.num_warps is not None:
        options["num_warps"] = spec.num_warps
    if spec.num_stages is not None:
        options["num_stages"] = spec.num_stages
    if spec.maxnreg is not None:
        options["maxnreg"] = spec.maxnreg
    if spec.cluster_dims is not None:
        options["cluster_dims"] = tuple(spec.cluster_dims)
    try:
        compiled = jit.compile(signature, dict(spec.constexprs), **options)
    except compiler.CompilationError as exc:
        failure = diagnostic_from(exc) | {"kind": type(exc).__name__}
        mistake = argument_kind_mistake(jit, spec, signature, options, kernel_name, failure)
        raise (mistake or compile_error(exc)) from None
    except Exception as exc:  # a compiler bug: still the agent's only lead, so report it as such
        raise ToolInputError(
            f"internal compiler error while compiling {kernel_name}: {type(exc).__name__}: {exc}. "
            "This is a bug in Anvil's compiler, not necessarily in your kernel; rewriting the construct "
            "involved (or simplifying the kernel) may avoid it.",
            data={"internal": True},
        ) from None
    metadata = dict(getattr(compiled, "metadata", {}) or {})
    stages = metadata.get("compile_ms") or {}
    # stage names without the unit: the field (compile_ms) carries it
    compile_ms = {str(k).removesuffix("_ms"): float(v) for k, v in stages.items() if isinstance(v, int | float)}
    resources = {
        field: metadata[key]
        for field, keys in _RESOURCE_KEYS.items()
        for key in keys
        if isinstance(metadata.get(key), int | float) and not isinstance(metadata.get(key), bool)
    }
    artifacts = getattr(compiled, "asm", {}) or {}
    for name in requested:
        if ON_REQUEST.get(name) == spec.target:
            artifacts[name]  # noqa: B018 - made when first read (the CPU's assembly)
    asm = {str(k): v if isinstance(v, str) else str(v) for k, v in artifacts.items() if not isinstance(v, bytes)}
    binaries = [(str(k), v) for k, v in artifacts.items() if isinstance(v, bytes)]
    if binaries:  # the loadable binary (a cubin, an AMD code object), as text an agent can carry
        asm["binary"] = binary_text(*binaries[0], spec.target)
    lines = spec.source.splitlines()
    for note in metadata.get("notes", []) or []:
        line = note.get("line")
        text_line = lines[line - 1] if isinstance(line, int) and 0 < line <= len(lines) else None
        kind = "" if str(note["message"]).startswith("portability:") else "performance: "
        message = f"{kind}{note['message']}"
        notes.append({"severity": "note", "message": message, "line": line, "column": note.get("column"),
                      "source_line": text_line, "hint": note.get("hint"),
                      "text": f"<source>:{line}:{note.get('column')}: note: {message}"
                      + (f"\n    {text_line.strip()}" if text_line else "")})
    unmasked = [a | {"source_line": lines[a["line"] - 1].strip() if 0 < a["line"] <= len(lines) else ""}
                for a in metadata.get("unmasked_accesses", []) or []]
    for warning in metadata.get("warnings", []) or []:
        if isinstance(warning, BaseException):
            notes.append(diagnostic_from(warning) | {"severity": "warning"})
        else:
            notes.append({"severity": "warning", "message": str(warning), "text": str(warning)})
    report(2, 2, "compiled")
    return {
        "kernel_name": kernel_name,
        "arg_names": arg_names,
        "constexpr_names": constexpr_names,
        "signature": signature,
        "compile_ms": compile_ms,
        "resources": resources,
        "diagnostics": notes,
        "asm": asm,
        "unmasked_accesses": unmasked,
    }
