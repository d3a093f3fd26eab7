"""launch_kernel's job in the device worker: build the tensors a launch's specs describe, evaluate
the references on the pristine inputs, launch, synchronise, report stats and checks.

The calling process checks the launch first (tools/launch.py: ``plan_launch``); what arrives here
is its payload.
"""

from __future__ import annotations

import json
import time
from typing import Any

import torch

from tools.checks import compare, reference_shape_error, tensor_stats
from tools.compile import compile_error, load_kernel
from tools.errors import ToolInputError
from tools.executor import Report, WorkerState
from tools.reference import DEFAULT_MAX_BYTES, evaluate
from tools.reference_program import parse_reference_text
from tools.reference_sizes import SizeLimits
from tools.specs import TensorSpec, generated_on_host, resolved_seed
from tools.tensors import build_tensor


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def get_kernel(state: WorkerState, kernel: dict[str, Any]) -> tuple[Any, bool]:
    """The loaded kernel for a launch_info dict, and whether it was already loaded in this worker."""
    jit = state.jit_cache.get(kernel["kernel_id"])
    if jit is not None:
        return jit, True
    return state.remember(kernel["kernel_id"], load_kernel(kernel["source"], kernel["kernel_name"])), False


def build_args(payload: dict[str, Any], state: WorkerState | None = None) -> dict[str, Any]:
    """Tensors and scalars by name, in parameter order, on the payload's device. With ``state``, tensors
    whose values come from the host (random, arange, listed) are generated once per worker and kept on the
    device; each launch gets a fresh copy of them."""
    signature = payload["kernel"]["signature"]
    values: dict[str, Any] = {}
    for name, value in payload["args"].items():
        if isinstance(value, dict):
            values[name] = input_tensor(name, TensorSpec.model_validate(value), payload["device"], state)
        elif signature[name].startswith(("fp", "bf")):
            values[name] = float(value)
        else:
            values[name] = value
    return values


def input_tensor(name: str, spec: TensorSpec, device: str, state: WorkerState | None) -> torch.Tensor:
    """A new tensor as ``spec`` describes it, on ``device``; generated values come from the worker's cache
    (a device-side copy, no host work) when an equal spec was built before."""
    if state is None or not generated_on_host(spec) or spec.nbytes > state.input_cache_bytes // 2:
        return build_tensor(name, spec, device)
    key = json.dumps([spec.model_dump(mode="json") | {"seed": resolved_seed(name, spec)}, device], sort_keys=True)
    kept = state.inputs.get(key)
    if kept is None:
        kept = build_tensor(name, spec, device)
        state.keep_input(key, kept)
    else:
        state.inputs.move_to_end(key)
    return kept.clone()


def reference_size_limits(payload: dict[str, Any]) -> SizeLimits:
    """The element and byte limits of reference and baseline evaluation, as keyword arguments of evaluate."""
    return SizeLimits(
        max_elements=payload["max_reference_elements"],
        max_bytes=payload.get("max_reference_bytes", DEFAULT_MAX_BYTES),
    )


def evaluate_references(payload: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Each reference evaluated on the inputs as built (before the kernel can change them)."""
    expected: dict[str, Any] = {}
    storages = {v.untyped_storage().data_ptr() for v in values.values() if isinstance(v, torch.Tensor)}
    limits = payload.get("reference_limits", {})
    for name, expression in payload["references"].items():
        ref = parse_reference_text(expression, names=list(values), label=f"reference[{name!r}]", **limits)
        with torch.no_grad():
            value = evaluate(ref, values, **reference_size_limits(payload))
        problem = reference_shape_error(name, value, values[name], expression)
        if problem:
            raise ToolInputError(problem)
        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() in storages:
            value = value.clone()  # an alias of an argument would change with the launch
        expected[name] = value
    return expected


def launch_options(kernel: dict[str, Any], *, checked: bool = True) -> dict[str, Any]:
    """The keyword options of a launch of ``kernel`` (a launch_info dict): constexprs and options.

    ``checked``: every load, store and atomic is checked against the tensor it addresses, so an
    out-of-bounds access is reported as this call's error and never performed (debug mode's
    checks; tl.device_assert stays as compiled). Only benchmark's timed runs go unchecked, after
    a checked run of the same launch passed."""
    options: dict[str, Any] = dict(kernel["constexprs"])
    for name in ("num_warps", "num_stages", "maxnreg"):
        if kernel.get(name) is not None:
            options[name] = kernel[name]
    if kernel.get("cluster_dims") is not None:
        options["cluster_dims"] = tuple(kernel["cluster_dims"])
    options["debug"] = bool(kernel.get("debug"))
    if checked:
        options["bounds_check"] = True
    return options


def launch_once(
    jit: Any, kernel: dict[str, Any], grid: list[int], values: dict[str, Any], *, checked: bool = True
) -> None:
    """One launch, exactly like Triton: ``kernel[grid](*args, **constexprs)`` (bounds-checked unless
    ``checked`` is false)."""
    options = launch_options(kernel, checked=checked)
    args = [values[name] for name in kernel["arg_names"] if name not in kernel["constexpr_names"]]
    try:
        jit[tuple(grid)](*args, **options)
    except ToolInputError:
        raise
    except Exception as exc:
        # deferred: start-up cost: the compiler (about 0.2 s); the server process imports this module and never compiles
        import compiler

        if isinstance(exc, compiler.CompilationError):
            raise compile_error(exc) from None
        if isinstance(exc, compiler.errors.OutOfBoundsError | compiler.errors.DeviceAssertError):
            raise runtime_report(exc, kernel) from None
        if is_device_fault(exc):
            raise
        raise ToolInputError(
            f"launching {kernel['kernel_name']} raised {type(exc).__name__}: {str(exc).strip()[:2000]}"
        ) from None


def _source_line(source: str, line: int | None) -> str:
    lines = source.splitlines()
    return lines[line - 1].strip() if line and 0 < line <= len(lines) else ""


def runtime_report(exc: Any, kernel: dict[str, Any]) -> ToolInputError:
    """A located tool error for an out-of-bounds access or failed device_assert the launch caught.

    ``data`` holds the fields: error ("out_of_bounds" or "device_assert"), kernel_name, kernel_id,
    file, line, column, source_line, program_id, and for accesses tensor, offset (elements from
    the tensor's start) and numel."""
    # deferred: start-up cost: the compiler (about 0.2 s); the server process imports this module and never compiles
    import compiler

    info: dict[str, Any] = dict(getattr(exc, "info", {}) or {})
    oob = isinstance(exc, compiler.errors.OutOfBoundsError)
    name = info.get("kernel") or kernel["kernel_name"]
    line = info.get("line")
    source_line = _source_line(kernel.get("source", ""), line)
    where = f"{info.get('file', '<source>')}:{line}:{info.get('column')}" if line else "an unknown location"
    pid = tuple(info.get("program_id") or ())
    data: dict[str, object] = {
        "error": "out_of_bounds" if oob else "device_assert",
        "kernel_name": name,
        "kernel_id": kernel.get("kernel_id"),
        "file": info.get("file"),
        "line": line,
        "column": info.get("column"),
        "source_line": source_line,
        "program_id": list(pid),
    }
    if oob:
        data.update(tensor=info.get("tensor"), offset=info.get("offset"), numel=info.get("numel"))
        what = "out-of-bounds access"
        if info.get("tensor") is not None:
            near = "" if info.get("single_tensor", True) else " (through a pointer of no single tensor; the nearest)"
            what += (f" at offset {info['offset']} of {info['tensor']!r}{near} (which holds {info['numel']} "
                     f"elements; valid offsets are 0..{int(info['numel']) - 1})")
        hint = ("The access was not performed and the worker is unaffected. Mask the load/store "
                "(mask=offs < n) or fix the offsets.")
    else:
        what = "device_assert failed"
        hint = "The kernel stopped at its first failed assertion; check the condition and its inputs."
    message = f"{what} in kernel {name} at {where}, program id {pid}\n    {source_line}\n{hint}"
    return ToolInputError(message, data=data)


def is_device_fault(exc: BaseException) -> bool:
    """A GPU error after which the device context is unusable (the worker must be replaced)."""
    text = str(exc).lower()
    return any(s in text for s in ("illegal memory access", "illegal address", "unspecified launch failure",
                                   "cuda error", "misaligned address", "hip error"))  # fmt: skip


def check_outputs(
    payload: dict[str, Any], values: dict[str, Any], expected: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stats by output, checks by referenced output) as JSON-ready dicts."""
    poisoned = {n for n, v in payload["args"].items() if isinstance(v, dict) and v.get("init") == "empty"}
    stats = {name: tensor_stats(values[name], poisoned=name in poisoned).model_dump() for name in payload["outputs"]}
    checks = {
        name: compare(
            values[name],
            value,
            reference=payload["references"][name],
            atol=payload["atol"],
            rtol=payload["rtol"],
        ).model_dump()
        for name, value in expected.items()
    }
    return stats, checks


def launch_summary(
    kernel: dict[str, Any], device: str, grid: list[int], stats: dict[str, Any], checks: dict[str, Any]
) -> str:
    parts = []
    for name, check in checks.items():
        if check["passed"]:
            parts.append(f"{name} PASSED (max abs err {check['max_abs_error']:.3g})")
        else:
            first = check["first_mismatch"] or {}
            parts.append(
                f"{name} FAILED: {check['mismatched']}/{check['total']} mismatched, "
                f"first at {first.get('index')} got {first.get('got')} expected {first.get('expected')}"
            )
    unwritten = [name for name, s in stats.items() if s.get("unwritten_count")]
    for name in unwritten:
        parts.append(f"{name}: {stats[name]['unwritten_count']} elements never written")
    if unwritten:
        sizes = ", ".join(f"{k}={v}" for k, v in kernel["constexprs"].items() if isinstance(v, int))
        parts.append(
            f"hint: the grid {grid} and the block sizes{f' ({sizes})' if sizes else ''} may not cover every "
            "element (a block smaller than the row or the data it loops over, or too few programs), or a mask "
            "leaves some out"
        )
    if not parts:
        parts = [f"{n}: min {s['min']} max {s['max']}" for n, s in list(stats.items())[:3]]
    return f"{kernel_signature(kernel)} on {device}, grid {grid}: " + "; ".join(parts)


def kernel_signature(kernel: dict[str, Any]) -> str:
    """``name(x_ptr: *fp32, n: i32, BLOCK=256)``: the types and constexprs a launch_info dict was compiled for."""
    params = [f"{a}={kernel['constexprs'].get(a)}" if a in kernel["constexpr_names"]
              else f"{a}: {kernel['signature'].get(a, '?')}" for a in kernel["arg_names"]]
    return f"{kernel['kernel_name']}({', '.join(params)})"


def run_launch_job(payload: dict[str, Any], state: WorkerState, report: Report) -> dict[str, Any]:
    """Build inputs, evaluate references, launch once, check; return a LaunchResult dict."""
    kernel = payload["kernel"]
    report(0, 3, "building inputs")
    jit, was_loaded = get_kernel(state, kernel)
    values = build_args(payload, state)
    expected = evaluate_references(payload, values)
    report(1, 3, "launching")
    synchronize(payload["device"])
    start = time.perf_counter()
    launch_once(jit, kernel, payload["grid"], values)
    synchronize(payload["device"])
    elapsed_ms = (time.perf_counter() - start) * 1e3
    report(2, 3, "checking outputs")
    stats, checks = check_outputs(payload, values, expected)
    passed = all(c["passed"] for c in checks.values()) if checks else None
    summary = launch_summary(kernel, payload["device"], payload["grid"], stats, checks)
    if not was_loaded:
        summary += (" (the kernel's first launch in this worker process, which is replaced after every benchmark "
                    "and fault: elapsed_ms includes loading it)")
    return {
        "kernel_id": kernel["kernel_id"],
        "kernel_name": kernel["kernel_name"],
        "target": kernel["target"],
        "device": payload["device"],
        "signature": kernel["signature"],
        "constexprs": kernel["constexprs"],
        "grid": payload["grid"],
        "outputs": stats,
        "checks": checks,
        "passed": passed,
        "elapsed_ms": round(elapsed_ms, 4),
        "summary": summary,
    }
