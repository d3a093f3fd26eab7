"""Fused attention, forward and backward: Anvil beside Triton (the same kernel source,
examples/flash_attention.py and examples/flash_attention_bwd.py) and torch's
scaled_dot_product_attention, on one GPU.

The examples' source is compiled by Anvil as written; for Triton the same text is imported with
its two `compiler` imports pointed at `triton` (the backward module is given the forward module of
its own compiler). Medians of CUDA-event timing (L2 flushed, triton.testing.do_bench), each
compiler's best of the configs, results checked against torch first.

FLOPs: the forward counts 4 * Z * H * N^2 * D (half of it when causal); the backward counts 2.5 times
the forward's (two matrix products forward, five backward: the convention of Triton's fused
attention tutorial). The backward times the example's three launches (delta = rowsum(dO * O), then
dK and dV, then dQ) on the output and log-sum-exp of the same compiler's forward, beside
`out.backward(do)` on a torch SDPA output (the backward of the kernel torch picks); dQ, dK and dV
are checked first against autograd of SDPA in float32.

    python benchmarks/attention.py [--quick] [--fwd | --bwd] [--json out.json]

The full run times forward and backward at N = 4096 and 16384; --quick only N = 4096 and only the
forward unless --bwd is given. --smoke-cpu (a development check, no GPU) runs the backward's
correctness check for both compilers on CPU tensors at a tiny size: Anvil's CPU backend and
Triton's interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cold-"))
os.environ.setdefault("ANVIL_CACHE_DIR", tempfile.mkdtemp(prefix="anvil-cold-"))
if "--smoke-cpu" in sys.argv:  # Triton's own @jit helpers (tl.zeros, ...) pick the interpreter when imported
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EXAMPLE = ROOT / "examples" / "flash_attention.py"
BWD_EXAMPLE = ROOT / "examples" / "flash_attention_bwd.py"

# (BLOCK_M, BLOCK_N, num_warps)
CONFIGS = [(128, 64, 8), (128, 128, 8), (64, 64, 4)]
# Backward: (dK/dV kernel's BLOCK_M, BLOCK_N, dQ kernel's BLOCK_M, BLOCK_N, num_warps of both); BLOCK_N of
# dK/dV and BLOCK_M of dQ are the rows each program keeps, the other the block its loop walks. The first is
# the example's attention_backward (32x32 blocks for both, 8 warps from head dim 64); then square 64x64
# blocks; the kept side widened to 128 (Triton's tutorial's split); and 64-row walked blocks beside kept
# blocks of 32 keys and 128 queries (no spills in either compiler's sm_90a build at head dim 128; registers and
# spills of every config: benchmarks/probes/attention_bwd_regs.py, no GPU needed).
BWD_CONFIGS = [(32, 32, 32, 32, 8), (64, 64, 64, 64, 8), (32, 128, 128, 32, 8), (64, 32, 128, 64, 8)]
# The forward that produces O and the log-sum-exp the backward reads (a config both compilers ran above).
BWD_FWD_CONFIG = (64, 64, 4)
# A gradient passes when its largest error, relative to the reference's largest magnitude, is within
# this or 4x that of torch's own half-precision backward, whichever is larger.
BWD_TOL = 1e-2


def _load(name: str, text: str) -> Any:
    path = Path(tempfile.mkdtemp(prefix="attn-")) / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _triton_text(path: Path) -> str:
    src = path.read_text()
    tsrc = src.replace("import compiler.language as tl", "import triton.language as tl")
    tsrc = tsrc.replace("from compiler import cdiv, jit", "from triton import cdiv, jit")
    left = [line for line in tsrc.splitlines() if line.startswith(("import compiler", "from compiler"))]
    if tsrc == src or left:
        raise SystemExit(f"{path}: its `compiler` imports changed ({left or 'none found'}); update the rewrite in "
                         "benchmarks/attention.py")
    return tsrc


def modules() -> dict[str, tuple[Any, Any]]:
    """{compiler: (forward module, backward module)} from the examples' text, Triton's with the imports
    rewritten. The backward example loads its forward from the file beside it (Anvil's, and one module
    for every caller), so each backward module is pointed at its own compiler's forward."""
    out = {}
    for name, text in (("anvil", Path.read_text), ("triton", _triton_text)):
        fwd = _load(f"{name}_attention", text(EXAMPLE))
        bwd = _load(f"{name}_attention_bwd", text(BWD_EXAMPLE))
        bwd._forward_module = lambda fwd=fwd: fwd
        out[name] = (fwd, bwd)
    return out


def run(kernel: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
        causal: bool, cfg: tuple[int, int, int]) -> None:
    bm, bn, w = cfg
    z, h, n, d = q.shape
    kernel[(triton.cdiv(n, bm), z * h)](q, k, v, o, lse, 1.0 / math.sqrt(d), *q.stride(), *k.stride(), *v.stride(),
                                        *o.stride(), h, n, HEAD_DIM=d, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=causal,
                                        num_warps=w)


def case(z: int, h: int, n: int, d: int, causal: bool, anvil: Any, tri: Any) -> dict[str, Any]:
    q, k, v = (torch.randn(z, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    flop = 4 * z * h * n * n * d * (0.5 if causal else 1.0)
    row: dict[str, Any] = {"pass": "fwd", "shape": f"{z}x{h}x{n}x{d}", "causal": causal}
    t = float(triton.testing.do_bench(
        lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal), return_mode="median"))
    row["torch_tflops"] = flop / t / 1e9
    for name, kernel in (("anvil", anvil), ("triton", tri)):
        best = None
        for cfg in CONFIGS:
            o = torch.full_like(q, float("nan"))
            lse = torch.empty((z, h, n), device="cuda", dtype=torch.float32)
            try:
                run(kernel, q, k, v, o, lse, causal, cfg)
                torch.cuda.synchronize()
                err = float((o.float() - ref.float()).abs().max())
                if not err < 2e-2:
                    print(f"  {name} {cfg}: wrong result (max abs err {err:.2e})", flush=True)
                    continue
                ms = float(triton.testing.do_bench(lambda o=o, lse=lse, cfg=cfg, kernel=kernel: run(
                    kernel, q, k, v, o, lse, causal, cfg), warmup=5, rep=40, return_mode="median"))
            except Exception as e:  # noqa: BLE001 - one failing config must not stop the sweep
                print(f"  {name} {cfg}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                continue
            print(f"  {name} {row['shape']} causal={causal} {cfg}: {flop / ms / 1e9:.0f} TFLOP/s", flush=True)
            if best is None or ms < best[0]:
                best = (ms, cfg)
        if best is not None:
            row[f"{name}_tflops"] = flop / best[0] / 1e9
            row[f"{name}_config"] = "x".join(map(str, best[1]))
    if "anvil_tflops" in row and "triton_tflops" in row:
        row["ratio"] = row["anvil_tflops"] / row["triton_tflops"]
    return row


def run_bwd(mod: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
            do: torch.Tensor, grads: tuple[torch.Tensor, torch.Tensor, torch.Tensor], delta: torch.Tensor,
            causal: bool, cfg: tuple[int, int, int, int, int]) -> None:
    """The launches of the example's attention_backward (contiguous (Z, H, N, D) tensors, buffers given)."""
    m1, n1, m2, n2, w = cfg
    z, h, n, d = q.shape
    dq, dk, dv = grads
    scale = 1.0 / math.sqrt(d)
    # the example runs all three on one BLOCK_M; delta = rowsum(dO * O) here on the dQ kernel's query blocks
    mod._bwd_preprocess[(triton.cdiv(n, m2), z * h)](o, do, delta, n, HEAD_DIM=d, BLOCK_M=m2)
    mod._bwd_dkdv[(triton.cdiv(n, n1), z * h)](q, k, v, do, dk, dv, lse, delta, scale, n, HEAD_DIM=d, BLOCK_M=m1,
                                               BLOCK_N=n1, CAUSAL=causal, num_warps=w)
    mod._bwd_dq[(triton.cdiv(n, m2), z * h)](q, k, v, do, dq, lse, delta, scale, n, HEAD_DIM=d, BLOCK_M=m2,
                                             BLOCK_N=n2, CAUSAL=causal, num_warps=w)


def _bwd_name(cfg: tuple[int, int, int, int, int]) -> str:
    return f"{cfg[0]}x{cfg[1]}/{cfg[2]}x{cfg[3]}w{cfg[4]}"


def _rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest absolute error relative to the reference's largest magnitude (NaN when anything is NaN)."""
    return float((got.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def _sync(t: torch.Tensor) -> None:
    if t.is_cuda:
        torch.cuda.synchronize(t.device)


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
               causal: bool) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """SDPA's output and (dq, dk, dv) by autograd in float32, a few heads at a time (should torch fall back
    to its math backend for float32, the scores of one slice stay a few GB)."""
    out = torch.empty(q.shape, device=q.device, dtype=torch.float32)
    grads = tuple(torch.empty_like(out) for _ in range(3))
    for h0 in range(0, q.shape[1], 4):
        sl = (slice(None), slice(h0, h0 + 4))
        qf, kf, vf = (t[sl].float().requires_grad_(True) for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
        for g, r in zip(grads, torch.autograd.grad(o, (qf, kf, vf), do[sl].float()), strict=True):
            g[sl] = r
        out[sl] = o.detach()
    return out, grads


def bwd_case(z: int, h: int, n: int, d: int, causal: bool, mods: dict[str, tuple[Any, Any]],
             device: str = "cuda", timed: bool = True) -> dict[str, Any]:
    """One backward row: every config of both compilers checked (and, when timed, timed) against torch."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v, do = (torch.randn(z, h, n, d, device=device, dtype=torch.float16) for _ in range(4))
    ref_out, ref = _reference(q, k, v, do, causal)
    # torch's half-precision backward: the baseline, and the yardstick of the tolerance.
    qh, kh, vh = (t.clone().requires_grad_(True) for t in (q, k, v))
    out = sdpa(qh, kh, vh, is_causal=causal)
    got = torch.autograd.grad(out, (qh, kh, vh), do, retain_graph=True)
    torch_err = max(_rel_err(g, r) for g, r in zip(got, ref, strict=True))
    del got
    tol = max(BWD_TOL, 4 * torch_err)
    flop = 2.5 * 4 * z * h * n * n * d * (0.5 if causal else 1.0)
    row: dict[str, Any] = {"pass": "bwd", "shape": f"{z}x{h}x{n}x{d}", "causal": causal, "torch_err": torch_err,
                           "errors": {}, "failed": {}}
    if timed:
        ms = float(triton.testing.do_bench(lambda: out.backward(do, retain_graph=True), grad_to_none=[qh, kh, vh],
                                           return_mode="median"))
        row["torch_tflops"] = flop / ms / 1e9
    for name, (fwd, bwd) in mods.items():
        o = torch.full_like(q, float("nan"))
        lse = torch.full((z, h, n), float("nan"), device=device, dtype=torch.float32)
        try:
            run(fwd._attn_fwd, q, k, v, o, lse, causal, BWD_FWD_CONFIG)
            _sync(q)
            err = _rel_err(o, ref_out)
        except Exception as e:  # noqa: BLE001 - report it and go on with the other compiler
            err, why = float("nan"), f"{type(e).__name__}: {str(e)[:160]}"
        else:
            why = f"wrong output (relative error {err:.2e})"
        if not err < BWD_TOL:
            print(f"  {name} forward {BWD_FWD_CONFIG}: {why}; no backward", flush=True)
            row["failed"][f"{name} forward"] = why
            continue
        best = None
        for cfg in BWD_CONFIGS:
            dq, dk, dv = (torch.full_like(q, float("nan")) for _ in range(3))
            grads = (dq, dk, dv)
            delta = torch.full((z, h, n), float("nan"), device=device, dtype=torch.float32)
            args = (bwd, q, k, v, o, lse, do, grads, delta, causal, cfg)
            tag = f"{name} {row['shape']} causal={causal} {_bwd_name(cfg)}"
            try:
                run_bwd(*args)
                _sync(q)
                errs = [_rel_err(g, r) for g, r in zip(grads, ref, strict=True)]
                if not all(e <= tol for e in errs):  # also false on NaN (which max() may skip)
                    why = "wrong result (relative error dq {:.1e} dk {:.1e} dv {:.1e})".format(*errs)
                    print(f"  {tag}: {why}, tolerance {tol:.1e}", flush=True)
                    row["failed"][f"{name} {_bwd_name(cfg)}"] = why
                    continue
                row["errors"][f"{name} {_bwd_name(cfg)}"] = max(errs)
                if not timed:
                    print(f"  {tag}: ok (relative error dq {errs[0]:.1e} dk {errs[1]:.1e} dv {errs[2]:.1e}, "
                          f"torch {torch_err:.1e})", flush=True)
                    continue
                ms = float(triton.testing.do_bench(lambda args=args: run_bwd(*args), warmup=5, rep=40,
                                                   return_mode="median"))
            except Exception as e:  # noqa: BLE001 - one failing config must not stop the sweep
                why = f"{type(e).__name__}: {str(e)[:160]}"
                print(f"  {tag}: {why}", flush=True)
                row["failed"][f"{name} {_bwd_name(cfg)}"] = why
                continue
            print(f"  {tag}: {flop / ms / 1e9:.0f} TFLOP/s", flush=True)
            if best is None or ms < best[0]:
                best = (ms, cfg)
        if best is not None:
            row[f"{name}_tflops"] = flop / best[0] / 1e9
            row[f"{name}_config"] = _bwd_name(best[1])
    if "anvil_tflops" in row and "triton_tflops" in row:
        row["ratio"] = row["anvil_tflops"] / row["triton_tflops"]
    if "anvil_tflops" in row and "torch_tflops" in row:
        row["ratio_torch"] = row["anvil_tflops"] / row["torch_tflops"]
    return row


def smoke_cpu() -> int:
    """The backward's correctness check of both compilers on CPU tensors (Triton through its interpreter)."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("smoke_cpu: set TRITON_INTERPRET=1 before triton is imported (the --smoke-cpu flag does)")
    torch.manual_seed(0)
    mods = modules()
    assert mods["triton"][1]._forward_module() is mods["triton"][0]
    failed = 0
    for n in (64, 128):
        for causal in (False, True):
            row = bwd_case(1, 2, n, 64, causal, mods, device="cpu", timed=False)
            failed += len(row["failed"])
            if len(row["errors"]) != len(mods) * len(BWD_CONFIGS):
                failed += 1
    # The autograd wrapper of each backward module, through its own compiler's forward.
    q, k, v = (torch.randn(1, 2, 80, 64, requires_grad=True) for _ in range(3))
    do = torch.randn(1, 2, 80, 64)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = torch.autograd.grad(out, (q, k, v), do)
    for name, (_, bwd) in mods.items():
        got = torch.autograd.grad(bwd.attention_with_grad(q, k, v, True), (q, k, v), do)
        errs = [_rel_err(g, r) for g, r in zip(got, ref, strict=True)]
        print(f"  {name} attention_with_grad (1, 2, 80, 64) float32 causal: relative error dq {errs[0]:.1e} "
              f"dk {errs[1]:.1e} dv {errs[2]:.1e}", flush=True)
        failed += not all(e < 1e-4 for e in errs)
    print("smoke-cpu:", "all passed" if not failed else f"{failed} failures")
    return 1 if failed else 0


def _print_fwd(rows: list[dict[str, Any]]) -> None:
    print(f"{'shape':16} {'causal':6} {'anvil TF/s':>10} {'triton TF/s':>11} {'torch TF/s':>10} {'ratio':>6}  "
          f"{'anvil cfg':10} {'triton cfg':10}")
    for r in rows:
        print(f"{r['shape']:16} {str(r['causal']):6} {r.get('anvil_tflops', 0):10.0f} "
              f"{r.get('triton_tflops', 0):11.0f} {r['torch_tflops']:10.0f} {r.get('ratio', 0):6.3f}  "
              f"{r.get('anvil_config', '-'):10} {r.get('triton_config', '-'):10}")


def _print_bwd(rows: list[dict[str, Any]]) -> None:
    print(f"backward (FLOPs 2.5x the forward's), configs dK/dV BLOCK_MxBLOCK_N / dQ BLOCK_MxBLOCK_N, warps\n"
          f"{'shape':16} {'causal':6} {'anvil TF/s':>10} {'triton TF/s':>11} {'torch TF/s':>10} "
          f"{'a/triton':>8} {'a/torch':>7}  {'anvil cfg':16} {'triton cfg':16}")
    for r in rows:
        print(f"{r['shape']:16} {str(r['causal']):6} {r.get('anvil_tflops', 0):10.0f} "
              f"{r.get('triton_tflops', 0):11.0f} {r['torch_tflops']:10.0f} {r.get('ratio', 0):8.3f} "
              f"{r.get('ratio_torch', 0):7.3f}  {r.get('anvil_config', '-'):16} {r.get('triton_config', '-'):16}")


def main() -> None:
    ap = argparse.ArgumentParser(description="Fused attention forward and backward: Anvil, Triton, torch SDPA.")
    ap.add_argument("--quick", action="store_true", help="sequence 4096 only, and the forward only unless --bwd")
    only = ap.add_mutually_exclusive_group()
    only.add_argument("--fwd", action="store_true", help="the forward only")
    only.add_argument("--bwd", action="store_true", help="the backward only")
    ap.add_argument("--json")
    ap.add_argument("--smoke-cpu", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.smoke_cpu:
        sys.exit(smoke_cpu())
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/attention.py: torch sees no CUDA GPU; run it on a GPU machine (--smoke-cpu "
                         "checks the backward of both compilers on the CPU)")
    mods = modules()
    seqs = [4096] if args.quick else [4096, 16384]
    fwd_rows, bwd_rows = [], []
    if not args.bwd:
        fwd_rows = [case(2, 16, n, 128, causal, mods["anvil"][0]._attn_fwd, mods["triton"][0]._attn_fwd)
                    for n in seqs for causal in (False, True)]
    if args.bwd or not (args.fwd or args.quick):
        bwd_rows = [bwd_case(2, 16, n, 128, causal, mods) for n in seqs for causal in (False, True)]
    print(f"\n{torch.cuda.get_device_name()} | torch {torch.__version__} | triton {triton.__version__}")
    if fwd_rows:
        _print_fwd(fwd_rows)
    if bwd_rows:
        _print_bwd(bwd_rows)
    if args.json:
        Path(args.json).write_text(json.dumps(fwd_rows + bwd_rows, indent=1))


if __name__ == "__main__":
    main()
