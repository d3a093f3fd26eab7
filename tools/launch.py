"""launch_kernel: run a kernel once on harness-built inputs and check its outputs.

In the calling process: find or compile the kernel (:func:`resolve_kernel`), then check the
args against its parameters, the limits, the grid and the reference expressions
(:func:`plan_launch`). In the device worker (tools/launch_job.py: ``run_launch_job``): build the
tensors, evaluate the references on the pristine inputs, launch, synchronise, report stats and
checks. This module does not import torch or the compiler: the server process runs it.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tools.compile import ensure_compiled, get_record, plan_compile
from tools.errors import ToolInputError, listed, quoted
from tools.executor import Progress, device_for, gpu_available, noop_progress, resolve_target
from tools.grid import evaluate_grid
from tools.models import LaunchRequest, LaunchResult, VariantResult
from tools.reference_program import parse_reference_text
from tools.specs import (
    BY_TRITON,
    Scalar,
    TensorSpec,
    check_args_limits,
    scalar_fits,
    signature_of,
)
from tools.store import KernelRecord

if TYPE_CHECKING:
    from tools.runtime import Runtime


async def resolve_kernel(rt: Runtime, req: LaunchRequest, progress: Progress | None = None) -> KernelRecord:
    """The kernel to launch: ``kernel_id`` (recompiled if types, constexprs or options differ) or source."""
    hints = {name: signature_of(value) for name, value in req.args.items()}
    if req.kernel_id and req.source:
        raise ToolInputError("pass either kernel_id or source, not both.")
    if req.source:
        spec = plan_compile(
            rt,
            source=req.source,
            kernel_name=req.kernel_name,
            signature=req.signature,
            hints=hints,
            constexprs=req.constexprs,
            target=req.target,
            num_warps=req.num_warps,
            num_stages=req.num_stages,
            maxnreg=req.maxnreg,
            cluster_dims=req.cluster_dims,
            debug=bool(req.debug),
        )
        return (await ensure_compiled(rt, spec, progress))[0]
    if not req.kernel_id:
        raise ToolInputError("pass kernel_id (returned by compile_kernel) or the kernel's source.")
    base = get_record(rt, req.kernel_id)
    if req.kernel_name and req.kernel_name != base.kernel_name:
        raise ToolInputError(f"kernel_id {req.kernel_id} is kernel {base.kernel_name!r}, not {req.kernel_name!r}.")
    explicit = {**base.spec.signature, **(req.signature or {})}
    wanted = {n: explicit.get(n) or hints.get(n) or base.signature[n] for n in base.runtime_args}
    spec = base.spec.with_changes(
        signature=explicit,
        hints={n: t for n, t in wanted.items() if n not in explicit},
        constexprs={**base.spec.constexprs, **(req.constexprs or {})},
        target=base.spec.target if req.target == "auto" else resolve_target(req.target),
        num_warps=req.num_warps if req.num_warps is not None else base.spec.num_warps,
        num_stages=req.num_stages if req.num_stages is not None else base.spec.num_stages,
        maxnreg=req.maxnreg if req.maxnreg is not None else base.spec.maxnreg,
        cluster_dims=req.cluster_dims if req.cluster_dims is not None else base.spec.cluster_dims,
        debug=base.spec.debug if req.debug is None else req.debug,
    )
    unchanged = (
        wanted == base.signature
        and spec.constexprs == base.spec.constexprs
        and (spec.target, spec.num_warps, spec.num_stages, spec.maxnreg, spec.cluster_dims, spec.debug)
        == (base.spec.target, base.spec.num_warps, base.spec.num_stages, base.spec.maxnreg, base.spec.cluster_dims,
            base.spec.debug)
    )
    if unchanged:
        return base
    spec = plan_compile(rt, **{k: v for k, v in spec.to_dict().items() if k != "compiler_version"})
    return (await ensure_compiled(rt, spec, progress))[0]


@dataclass
class LaunchPlan:
    """A launch checked against its kernel: ready to send to a device worker."""

    record: KernelRecord
    grid: list[int]
    args: dict[str, TensorSpec | Scalar]
    references: dict[str, str]
    outputs: list[str]
    atol: float | None
    rtol: float | None
    device: str

    def payload(self, rt: Runtime) -> dict[str, Any]:
        return {
            "kernel": self.record.launch_info(),
            "grid": self.grid,
            "args": {n: v.model_dump() if isinstance(v, TensorSpec) else v for n, v in self.args.items()},
            "references": self.references,
            "outputs": self.outputs,
            "atol": self.atol,
            "rtol": self.rtol,
            "device": self.device,
            "max_reference_elements": rt.limits.max_reference_elements,
            "max_reference_bytes": rt.limits.max_reference_bytes,
            "reference_limits": _reference_limits(rt),
        }


def _reference_limits(rt: Runtime) -> dict[str, int]:
    return {
        "max_chars": rt.limits.max_reference_chars,
        "max_nodes": rt.limits.max_reference_nodes,
        "max_depth": rt.limits.max_reference_depth,
    }


def _parameters(record: KernelRecord) -> str:
    parts = [
        f"{a}: tl.constexpr" if a in record.constexpr_names else f"{a}: {record.signature.get(a, '?')}"
        for a in record.arg_names
    ]
    return f"{record.kernel_name}({', '.join(parts)})"


def _nearest_parameter(name: str, unused: list[str]) -> str | None:
    """The runtime parameter not given that `name` most likely means: `x` for `x_ptr` (or the other
    way round), else the closest spelling."""
    for cand in unused:
        if cand.removesuffix("_ptr") == name.removesuffix("_ptr"):
            return cand
    close = difflib.get_close_matches(name, unused, n=1, cutoff=0.75)
    return close[0] if close else None


def check_args(record: KernelRecord, args: Mapping[str, TensorSpec | Scalar]) -> None:
    """Every runtime parameter has an arg of a matching type; nothing else is passed."""
    problems: list[str] = []
    for name in args:
        if name in record.constexpr_names:
            problems.append(f"{name!r} is a tl.constexpr parameter: pass it in constexprs, not args")
        elif name not in record.arg_names:
            near = _nearest_parameter(name, [a for a in record.runtime_args if a not in args])
            problems.append(f"{quoted(name)} is not a parameter" + (f" (did you mean {near!r}?)" if near else ""))
    for name in record.runtime_args:
        sig = record.signature[name]
        if name not in args:
            kind = "a tensor spec" if sig.startswith("*") else "a number"
            problems.append(f"missing {name!r} ({sig}): give {kind}")
            continue
        value = args[name]
        if isinstance(value, TensorSpec):
            if not sig.startswith("*"):
                problems.append(f"{name!r} is a scalar ({sig}) but got a tensor spec")
            elif signature_of(value) != sig:
                problems.append(
                    f"{name!r} was compiled as {sig} but the spec has dtype {value.dtype}; "
                    f"use dtype {BY_TRITON[sig[1:]].name if sig[1:] in BY_TRITON else '?'} or recompile"
                )
        elif sig.startswith("*"):
            problems.append(f"{name!r} is a pointer ({sig}): give a tensor spec, e.g. {{'shape': [1024]}}")
        elif not scalar_fits(value, sig):
            problems.append(f"{name!r} = {value!r} does not fit its type {sig}")
    if problems:
        raise ToolInputError("args: " + listed(problems) + f". The kernel is {_parameters(record)}.")


def plan_launch(rt: Runtime, req: LaunchRequest, record: KernelRecord, *, copies: int = 1) -> LaunchPlan:
    """Check a launch request against its kernel and the limits (no tensors are built here)."""
    check_args(record, req.args)
    check_args_limits(dict(req.args), rt.limits, copies=copies)
    scalars = {n: v for n, v in req.args.items() if not isinstance(v, TensorSpec)}
    shapes = {n: tuple(v.shape) for n, v in req.args.items() if isinstance(v, TensorSpec) and v.shape is not None}
    grid = evaluate_grid(req.grid, {**scalars, **record.spec.constexprs}, max_programs=rt.limits.max_grid_programs,
                         shapes=shapes)
    tensors = [n for n, v in req.args.items() if isinstance(v, TensorSpec)]
    empty = {n for n in tensors if req.args[n].init == "empty"}  # type: ignore[union-attr]
    references = dict(req.reference or {})
    for name, expression in references.items():
        if name not in tensors:
            raise ToolInputError(
                f"reference has an entry for {name!r}, which is not a tensor argument; "
                f"references are keyed by output tensors ({', '.join(tensors) or 'none'})."
            )
        ref = parse_reference_text(expression, names=list(req.args), label=f"reference[{name!r}]",
                                   **_reference_limits(rt))
        unset = sorted(ref.names_used & empty)
        if unset:
            raise ToolInputError(
                f"reference[{name!r}] reads {', '.join(unset)}, which has init 'empty' (no defined "
                "value before the launch); give it an init such as 'zeros' or leave it out of the expression."
            )
    outputs = list(req.outputs) if req.outputs is not None else [n for n in tensors if n in references or n in empty]
    for name in outputs:
        if name not in tensors:
            raise ToolInputError(f"outputs names {name!r}, which is not a tensor argument.")
    ordered = {n: req.args[n] for n in record.runtime_args}
    device = device_for(record.spec.target)
    if device != "cpu" and not gpu_available():
        raise ToolInputError(
            f"target {record.spec.target!r} needs a GPU, and this machine has none that torch can use: kernels "
            f"run here on the CPU backend. Launch with target='cpu' (or 'auto'); compile_kernel still compiles "
            f"for {record.spec.target!r} (PTX, resources, diagnostics) without launching."
        )
    return LaunchPlan(
        record,
        grid,
        ordered,
        references,
        outputs or tensors,
        req.atol,
        req.rtol,
        device,
    )


async def launch_kernel(rt: Runtime, req: LaunchRequest, progress: Progress | None = None) -> LaunchResult:
    """The launch_kernel tool."""
    progress = progress or noop_progress
    record = await resolve_kernel(rt, req, progress)
    plan = plan_launch(rt, req, record)
    # launch_timeout_s holds for the call: the variants' launches share what the first one left
    deadline = time.monotonic() + rt.limits.launch_timeout_s
    out = await rt.executor.run(
        plan.device, "launch", plan.payload(rt), timeout=rt.limits.launch_timeout_s, progress=progress
    )
    result = LaunchResult.model_validate(out)
    if req.variants:
        result = await _launch_variants(rt, req, result, progress, deadline)
    return result


async def _launch_variants(rt: Runtime, req: LaunchRequest, first: LaunchResult, progress: Progress,
                           deadline: float) -> LaunchResult:
    """Launch and check each argument set of ``req.variants`` as the first launch was, within the
    call's launch time (`deadline`); the result's ``passed`` and summary then speak for all of them."""
    assert req.variants
    variants: list[VariantResult] = []
    for i, changes in enumerate(req.variants):
        unknown = sorted(set(changes) - set(req.args))
        if unknown:
            raise ToolInputError(
                f"variants[{i}] names {', '.join(map(repr, unknown))}, which args does not: a variant replaces "
                f"arguments of the first launch ({', '.join(req.args)})."
            )
        sub = req.model_copy(update={"args": {**req.args, **changes}, "variants": None})
        try:
            record = await resolve_kernel(rt, sub, progress)
            plan = plan_launch(rt, sub, record)
            left = deadline - time.monotonic()
            if left <= 0:
                raise ToolInputError(
                    f"the call's launches took its whole launch time ({rt.limits.launch_timeout_s:g} s, "
                    f"launch_timeout_s, which holds for a call with all its variants) before this one ran. "
                    f"Pass fewer or smaller variants per call, or raise the limit (anvil serve --launch-timeout)."
                )
            out = await rt.executor.run(plan.device, "launch", plan.payload(rt), timeout=left, progress=progress)
        except ToolInputError as exc:
            exc.message = f"variants[{i}] ({_describe_changes(changes)}): {exc.message}"
            exc.args = (exc.message,)
            raise
        r = LaunchResult.model_validate(out)
        variants.append(VariantResult(args=changes, grid=r.grid, passed=r.passed, checks=r.checks,
                                      summary=r.summary))
    checked = [p for p in [first.passed, *(v.passed for v in variants)] if p is not None]
    passed = all(checked) if checked else None
    failing = [f"variants[{i}] ({_describe_changes(v.args)}): {v.summary}" for i, v in enumerate(variants)
               if v.passed is False]
    ok = sum(v.passed is True for v in variants)
    checked_variants = sum(v.passed is not None for v in variants)
    summary = first.summary + (f"; variants: {ok}/{len(variants)} passed" if checked_variants
                               else f"; variants: {len(variants)} launched (no reference to check them against)")
    if failing:
        summary += "; " + "; ".join(failing)
    return first.model_copy(update={"variants": variants, "passed": passed, "summary": summary})


def _describe_changes(changes: dict[str, Any]) -> str:
    """`x_ptr shape [4097], n=4097`: what a variant changed, short."""
    parts = []
    for name, value in changes.items():
        shape = getattr(value, "shape", None)
        parts.append(f"{name} shape {list(shape)}" if shape is not None else f"{name}={value}")
    return ", ".join(parts)
