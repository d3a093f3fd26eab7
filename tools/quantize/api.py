"""quantize_weights: a safetensors file (or a tensor) in, the ecosystem's quantized layout out.

Flow: validate the options and paths -> pick the weights (glob patterns; 2-D floating point
only) -> with calibration activations and int4_awq, run AWQ's searches and fold the inverse
scales into the producing op (see ``_fold_plan``) -> quantize each weight with the Anvil kernels
-> measure its error against the source -> write the tensors (others copied unchanged) and the
quantization config, never replacing a file unless ``overwrite``.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tools.errors import ToolInputError
from tools.specs import TensorSpec
from tools.tensors import build_tensor

from .awq import awq_search, int4_fake_quant
from .configs import quantization_config
from .formats import base_of, quantize_tensor, resolve_options, unsupported_reason
from .metrics import ErrorSums
from .models import OverallReport, QuantizeResult, SkippedTensor, TensorReport
from .paths import allowed_roots, resolve_input, resolve_output

__all__ = ["quantize_weights", "DEFAULT_KEEP"]

# With the default pattern ["*"], these stay in full precision (inference stacks expect them so).
DEFAULT_KEEP = ("*embed*", "*norm*", "*lm_head*")
# Calibration activations kept per weight (rows of X), enough for AWQ's searches.
MAX_CALIBRATION_TOKENS = 4096

Progress = Callable[[int, int, str], Any]

# Producers whose output feeds a group of linear layers, for folding AWQ's 1/s (Llama-style names):
# (consumer pattern, producer weight, kind). "norm": scale a norm's weight and bias; "rows":
# scale the output rows of a linear layer.
_FOLD_RULES = (
    (re.compile(r"^(.*)\.self_attn\.[qkv]_proj\.weight$"), r"\1.input_layernorm.weight", "norm"),
    (re.compile(r"^(.*)\.mlp\.(gate|up)_proj\.weight$"), r"\1.post_attention_layernorm.weight", "norm"),
    (re.compile(r"^(.*)\.mlp\.down_proj\.weight$"), r"\1.mlp.up_proj.weight", "rows"),
    (re.compile(r"^(.*)\.self_attn\.o_proj\.weight$"), r"\1.self_attn.v_proj.weight", "rows"),
)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _describe(t: torch.Tensor) -> str:
    return f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"


@dataclass
class _Source:
    tensors: dict[str, torch.Tensor]
    metadata: dict[str, str] = field(default_factory=dict)


def _load_source(source: Any, roots: list[Path]) -> tuple[_Source, Path | None]:
    if isinstance(source, torch.Tensor):
        return _Source({"weight": source.detach().cpu()}), None
    if isinstance(source, Mapping) and source and all(isinstance(v, torch.Tensor) for v in source.values()):
        return _Source({str(k): v.detach().cpu() for k, v in source.items()}), None
    if isinstance(source, Mapping):
        try:
            spec = TensorSpec.model_validate(dict(source))
        except Exception as exc:
            raise ToolInputError(f"source is neither a path nor a tensor spec: {exc}") from exc
        return _Source({"weight": build_tensor("weight", spec)}), None
    path = resolve_input(source, roots, "source_path")
    return _Source(*_read_safetensors(path, "source_path")), path


def _read_safetensors(path: Path, what: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
            return {k: f.get_tensor(k) for k in f.keys()}, meta  # noqa: SIM118 (safe_open is no mapping)
    except Exception as exc:
        raise ToolInputError(f"{what} {str(path)!r} is not a readable .safetensors file: {exc}") from exc


def _selector(patterns: Sequence[str]) -> Callable[[str], bool]:
    if isinstance(patterns, str):
        patterns = [patterns]
    include = [p for p in patterns if not p.startswith("!")]
    exclude = [p[1:] for p in patterns if p.startswith("!")]
    if list(patterns) == ["*"]:
        exclude += list(DEFAULT_KEEP)
    if not include:
        include = ["*"]
    return lambda name: any(fnmatchcase(name, p) for p in include) and not any(fnmatchcase(name, p) for p in exclude)


def _calibration_for(name: str, calib: dict[str, torch.Tensor], k: int) -> torch.Tensor | None:
    base = base_of(name).rstrip(".")
    for key in (name, base, base + ".input"):
        x = calib.get(key)
        if x is not None:
            x = x.reshape(-1, x.shape[-1]).float()
            if x.shape[1] != k:
                raise ToolInputError(f"calibration {key!r} has {x.shape[1]} channels but {name!r} has K={k}.")
            if x.shape[0] > MAX_CALIBRATION_TOKENS:
                x = x[torch.linspace(0, x.shape[0] - 1, MAX_CALIBRATION_TOKENS).long()]
            return x
    return None


@dataclass
class _Awq:
    """AWQ's outcome for one weight: what to quantize, its input scales, and the output errors."""

    weight: torch.Tensor  # what to quantize: W * s, clipped
    reference: torch.Tensor  # the exact weight it stands for (W, with a consumer's 1/s folded into its rows)
    scales: torch.Tensor | None
    notes: list[str]
    x: torch.Tensor | None  # the calibration activations of its input


def _fold_plan(selected: list[str], tensors: dict[str, torch.Tensor]) -> dict[str, tuple[str, str, list[str]]]:
    """weight name -> (producer weight, kind, group members) for weights whose 1/s can be folded."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for name in selected:
        for pattern, producer, kind in _FOLD_RULES:
            match = pattern.match(name)
            if match:
                prod = match.expand(producer)
                if prod in tensors:
                    groups.setdefault(prod, (kind, []))[1].append(name)
                break
    plan: dict[str, tuple[str, str, list[str]]] = {}
    for prod, (kind, members) in groups.items():
        k = tensors[members[0]].shape[1]
        if any(tensors[m].shape[1] != k for m in members):
            continue
        p = tensors[prod]
        if (kind == "norm" and (p.dim() != 1 or p.shape[0] != k)) or (kind == "rows" and p.shape[0] != k):
            continue  # e.g. grouped-query attention: v_proj's rows are not o_proj's inputs
        for m in members:
            plan[m] = (prod, kind, members)
    return plan


def _group_calibration(members: list[str], calib: dict[str, torch.Tensor], weights: dict[str, torch.Tensor]
                       ) -> torch.Tensor | None:
    """The activations of a group's shared input: those given for any of its members."""
    for m in members:
        x = _calibration_for(m, calib, weights[m].shape[1])
        if x is not None:
            return x
    return None


def _run_awq(selected: list[str], tensors: dict[str, torch.Tensor], calib: dict[str, torch.Tensor], gs: int,
             out: dict[str, torch.Tensor], progress: Callable[[str], None]) -> dict[str, _Awq]:
    """Scale search per foldable group (folding 1/s into its producer in ``out``), clip search per weight."""
    plan = _fold_plan(selected, tensors)
    done: dict[str, _Awq] = {}
    weights = {n: tensors[n].float() for n in selected}
    scales: dict[str, torch.Tensor] = {}
    for name in selected:
        if name in scales or name not in plan:
            continue
        prod, kind, members = plan[name]
        xg = _group_calibration(members, calib, weights)
        if xg is None:
            continue
        progress(f"AWQ scale search for {', '.join(members)}")
        res = awq_search(xg, torch.cat([weights[m] for m in members]), gs, scale=True, clip=False)
        if res.scales is None:
            continue
        sg = res.scales
        for m in members:
            scales[m] = sg
        # Fold 1/s into the producer; it may itself be a weight being quantized (kind "rows").
        src = weights[prod] if prod in weights else out[prod]
        folded = src.float() / (sg if kind == "norm" else sg[:, None])
        if prod in weights:
            weights[prod] = folded
        else:
            out[prod] = folded.to(src.dtype)
        bias = prod[: -len("weight")] + "bias"
        if bias in out:
            out[bias] = (out[bias].float() / sg).to(out[bias].dtype)
    for name in selected:
        x = _calibration_for(name, calib, weights[name].shape[1])
        if x is None and name in plan:
            x = _group_calibration(plan[name][2], calib, weights)
        notes: list[str] = []
        w = ref = weights[name]
        s = scales.get(name)
        if s is not None:
            w = w * s
            notes.append(f"AWQ scales applied; 1/s folded into {plan[name][0]}")
        elif x is not None:
            notes.append("AWQ scale search skipped: no foldable producer of this layer's input is known "
                         "(Llama-style norms, up_proj and v_proj are); clip search only")
        if x is not None:
            progress(f"AWQ clip search for {name}")
            res = awq_search(x / s if s is not None else x, w, gs, scale=False, clip=True)
            w = res.weight
            notes.append("AWQ clip search applied")
        done[name] = _Awq(w, ref, s, notes, x)
    return done


def _output_errors(x: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor, fmt: str, gs: int
                   ) -> tuple[float, float | None]:
    ref = x @ w.t()
    den = float(ref.norm()) or 1.0
    err = float((x @ w_hat.float().t() - ref).norm()) / den
    plain = None
    if fmt == "int4_awq":
        plain = float((x @ int4_fake_quant(w, gs).t() - ref).norm()) / den
    return err, plain


def quantize_weights(
    source_path: str | os.PathLike[str] | torch.Tensor | Mapping[str, Any],
    format: str,
    output_path: str | os.PathLike[str] | None,
    tensors: Sequence[str] = ("*",),
    group_size: int | None = None,
    scheme: str | None = None,
    calibration_path: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    allowed_dirs: Sequence[str | os.PathLike[str]] | None = None,
    progress: Progress | None = None,
) -> QuantizeResult:
    """Quantize the 2-D weights of a safetensors file (or one tensor) and report the error.

    ``source_path`` is a .safetensors path inside ``allowed_dirs`` (default: the working
    directory), a torch tensor, a mapping of names to tensors, or a tensor spec dict
    (``{"shape": [N, K], "init": "randn"}``). ``output_path`` may be None for in-memory sources
    (report only). ``progress(done, total, message)`` is called as tensors are processed.
    Raises ToolInputError for anything the caller can fix.
    """
    t0 = time.perf_counter()
    try:
        gs, scheme = resolve_options(format, group_size, scheme)
    except ValueError as exc:
        raise ToolInputError(str(exc)) from exc
    roots = allowed_roots(allowed_dirs)
    if output_path is None and not isinstance(source_path, torch.Tensor | Mapping):
        raise ToolInputError("output_path is required when quantizing a file.")
    src, src_path = _load_source(source_path, roots)
    out_path = cfg_path = None
    if output_path is not None:
        out_path = resolve_output(output_path, roots, overwrite)
        if src_path is not None and out_path == src_path:
            raise ToolInputError("output_path must differ from source_path.")
        cfg_path = resolve_output(out_path.with_name(out_path.stem + ".quantization_config.json"), roots, overwrite,
                                  "config path")
    calib: dict[str, torch.Tensor] = {}
    if calibration_path is not None:
        calib, _ = _read_safetensors(resolve_input(calibration_path, roots, "calibration_path"), "calibration_path")

    select = _selector(tensors)
    chosen: list[str] = []
    skipped: list[SkippedTensor] = []
    default_keep = list(tensors) == ["*"]
    for name, t in src.tensors.items():
        if t.dim() != 2:
            continue
        if not select(name):
            if default_keep and any(fnmatchcase(name, p) for p in DEFAULT_KEEP) and t.is_floating_point():
                skipped.append(SkippedTensor(name=name, reason="embeddings, norms and lm_head stay in full "
                                             "precision by default; name them in `tensors` to quantize them"))
            continue
        if not t.is_floating_point() or t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            skipped.append(SkippedTensor(name=name, reason=f"not a high-precision float weight ({t.dtype})"))
            continue
        reason = unsupported_reason(format, tuple(t.shape), gs)
        if reason:
            skipped.append(SkippedTensor(name=name, reason=reason))
            continue
        chosen.append(name)
    if not chosen:
        raise ToolInputError(
            f"no tensor was quantized: none of the {len(src.tensors)} tensors is a 2-D float weight matching "
            f"{list(tensors)} that {format} can store" + (f" (skipped: {skipped[0].name}: {skipped[0].reason})"
                                                          if skipped else "") + "."
        )

    total = len(chosen)
    step = [0]

    def report(message: str) -> None:
        if progress is not None:
            progress(step[0], total, message)

    out: dict[str, torch.Tensor] = dict(src.tensors)
    awq: dict[str, _Awq] = {}
    if calib and format == "int4_awq":
        awq = _run_awq(chosen, src.tensors, calib, gs, out, report)

    reports: list[TensorReport] = []
    pooled = ErrorSums()
    for name in chosen:
        report(f"quantizing {name}")
        w = src.tensors[name]
        a = awq.get(name)
        q = quantize_tensor(a.weight if a else w.float(), format, group_size, scheme, a.scales if a else None)
        base = base_of(name)
        del out[name]
        stored = {}
        for suffix, t in q.tensors.items():
            key = base + suffix
            if key in out:
                raise ToolInputError(f"quantizing {name!r} would write {key!r}, which the source already has.")
            out[key] = t.contiguous()
            stored[key] = _describe(t)
        ref = a.reference if a else w
        sums = ErrorSums.of(ref, q.dequantized)
        pooled.add(sums)
        rep = TensorReport(
            name=name, shape=list(w.shape), dtype=str(w.dtype).removeprefix("torch."), stored_as=stored,
            sqnr_db=sums.sqnr_db, rel_error=sums.rel_error, cosine=sums.cosine, max_abs_error=sums.max_abs,
            bytes_before=_nbytes(w), bytes_after=sum(_nbytes(t) for t in q.tensors.values()),
            notes=list(a.notes if a else []) + q.notes,
        )
        x = a.x if a else (_calibration_for(name, calib, w.shape[1]) if calib else None)
        if x is not None:
            rep.output_rel_error, rep.plain_output_rel_error = _output_errors(x, ref.float(), q.dequantized, format,
                                                                              gs)
        reports.append(rep)
        step[0] += 1
        report(f"quantized {name}: {_fmt_db(sums.sqnr_db)}")

    chosen_set = set(chosen)
    ignored = sorted(
        base_of(n).rstrip(".") for n, t in src.tensors.items()
        if t.dim() == 2 and t.is_floating_point() and n.endswith("weight") and n not in chosen_set
    )
    config = quantization_config(format, scheme, gs, ignored)
    if out_path is not None and cfg_path is not None:
        _write(out, src.metadata, format, out_path, cfg_path, config)

    before_all = sum(_nbytes(t) for t in src.tensors.values())
    after_all = sum(_nbytes(t) for t in out.values())
    overall = OverallReport(
        tensors_quantized=len(reports), tensors_copied=len(src.tensors) - len(reports),
        sqnr_db=pooled.sqnr_db, rel_error=pooled.rel_error, cosine=pooled.cosine, max_abs_error=pooled.max_abs,
        bytes_before=sum(r.bytes_before for r in reports), bytes_after=sum(r.bytes_after for r in reports),
        file_bytes_before=before_all, file_bytes_after=after_all,
        compression=before_all / after_all if after_all else None, seconds=time.perf_counter() - t0,
    )
    worst = min(reports, key=lambda r: r.sqnr_db if r.sqnr_db is not None else math.inf)
    summary = (
        f"{format}{'/' + scheme if scheme else ''}: quantized {len(reports)} tensors "
        f"({overall.bytes_before / 2**20:.1f} MiB -> {overall.bytes_after / 2**20:.1f} MiB), overall SQNR "
        f"{_fmt_db(overall.sqnr_db)}, cosine {overall.cosine:.5f}; worst {worst.name} {_fmt_db(worst.sqnr_db)}"
        + (f"; {len(skipped)} left unquantized" if skipped else "")
        + (f"; wrote {out_path}" if out_path else "")
    )
    return QuantizeResult(
        output_path=str(out_path) if out_path else None, config_path=str(cfg_path) if out_path else None,
        format=format, scheme=scheme, group_size=gs, quantization_config=config,  # type: ignore[arg-type]
        tensors=reports, skipped=skipped, overall=overall, summary=summary,
    )


def _fmt_db(v: float | None) -> str:
    return "exact" if v is None else f"{v:.2f} dB"


def _write(out: dict[str, torch.Tensor], metadata: dict[str, str], fmt: str, out_path: Path, cfg_path: Path,
           config: dict[str, Any]) -> None:
    """Write through temporary files in the same directory, then rename (no half-written outputs)."""
    meta = {**metadata, "format": metadata.get("format", "pt"), "quantization": fmt, "quantized_by": "anvil"}
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    tmp_cfg = cfg_path.with_name(f".{cfg_path.name}.{os.getpid()}.tmp")
    try:
        save_file({k: v.contiguous() for k, v in out.items()}, str(tmp), metadata=meta)
        tmp_cfg.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out_path)
        os.replace(tmp_cfg, cfg_path)
    finally:
        for t in (tmp, tmp_cfg):
            if t.exists():
                t.unlink()
