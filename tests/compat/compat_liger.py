"""liger-kernel (LinkedIn's fine-tuning kernels): the autograd Functions, forward and backward.

Each call runs the library's `torch.autograd.Function` (its Python wrapper launches the Triton
kernels) forward, then backward with a random upstream gradient; the reference is torch's own
autograd of the same formula in float64.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from compat_harness import Case, Inputs, rand

# The MoE kernels autotune over dozens of GEMM configs (a minute on two CPU cores); the library's own
# switch pins one config each. Read when liger-kernel is first imported, hence set here.
os.environ.setdefault("LIGER_FUSED_MOE_AUTOTUNE", "0")

LIB = "liger-kernel"
OPS = "liger_kernel.ops."


def grads(fn: Callable[[], Any], inp: Inputs, wrt: Sequence[str]) -> list[Any]:
    """[outputs of fn(), then d(outputs . dy)/d(inp[k]) for k in wrt]."""
    out = fn()
    first = out[0] if isinstance(out, (tuple, list)) else out
    dy = inp.get("dy")
    first.backward(dy.to(first.dtype) if dy is not None else None)
    return [first.detach(), *[inp[k].grad for k in wrt]]


def leaf(*shape: int, device: str, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> torch.Tensor:
    return rand(*shape, device=device, dtype=dtype, scale=scale).requires_grad_()


def d(x: torch.Tensor) -> torch.Tensor:
    return x.double()


# ---------------------------------------------------------------- norms
def rms_ref(x: torch.Tensor, w: torch.Tensor, eps: float, offset: float = 0.0) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (offset + w)


def b_norm(shape: tuple[int, ...], dev: str) -> Inputs:
    *rows, n = shape
    return {"x": leaf(*rows, n, device=dev), "w": leaf(n, device=dev), "b": leaf(n, device=dev),
            "dy": rand(*rows, n, device=dev)}


def layer_norm_ref(i: Inputs) -> list[Any]:
    return grads(lambda: F.layer_norm(d(i["x"]), i["x"].shape[-1:], d(i["w"]), d(i["b"]), 1e-6), i, "xwb")


def b_group_norm(shape: tuple[int, ...], dev: str) -> Inputs:
    bsz, ch, hw = shape
    return {"x": leaf(bsz, ch, hw, device=dev), "w": leaf(ch, device=dev), "b": leaf(ch, device=dev),
            "dy": rand(bsz, ch, hw, device=dev)}


def b_add_rms(shape: tuple[int, ...], dev: str) -> Inputs:
    return {**b_norm(shape, dev), "r": leaf(*shape, device=dev), "dr": rand(*shape, device=dev)}


def add_rms(i: Inputs, y: torch.Tensor, s: torch.Tensor) -> list[Any]:
    torch.autograd.backward([y, s], [i["dy"], i["dr"]])
    return [y.detach(), s.detach(), i["x"].grad, i["r"].grad, i["w"].grad]


def add_rms_ref(i: Inputs) -> list[Any]:
    s = d(i["x"]) + d(i["r"])
    return add_rms(i, rms_ref(s, d(i["w"]), 1e-6), s)


def poly_ref(i: Inputs) -> list[Any]:
    def f() -> torch.Tensor:
        x, w = d(i["x"]), d(i["w"])
        n = [p * torch.rsqrt(p.pow(2).mean(-1, keepdim=True) + 1e-6) for p in (x**3, x**2, x)]
        return w[0] * n[0] + w[1] * n[1] + w[2] * n[2] + d(i["b"])

    return grads(f, i, "xwb")


def b_poly(shape: tuple[int, ...], dev: str) -> Inputs:
    return {"x": leaf(*shape, device=dev), "w": leaf(3, device=dev), "b": rand(device=dev).requires_grad_(),
            "dy": rand(*shape, device=dev)}


def b_dyt(shape: tuple[int, ...], dev: str) -> Inputs:
    n = shape[-1]
    return {"x": leaf(*shape, device=dev), "a": leaf(1, device=dev), "w": leaf(n, device=dev),
            "b": leaf(n, device=dev), "dy": rand(*shape, device=dev)}


def dyt_call(m: Any, i: Inputs) -> list[Any]:
    """The library's forward; its backward wrapper sizes a buffer by the GPU's multiprocessors (none
    on the CPU), so the harness launches the backward kernel as that wrapper does, with 3 "SMs"."""
    x, a, w, b, dy = (i[k].detach() for k in ("x", "a", "w", "b", "dy"))
    y = m.liger_dyt_fwd(x, a, w, b)
    x2, dy2 = x.view(-1, x.shape[-1]), dy.reshape(-1, x.shape[-1])
    rows, n, sms = x2.shape[0], x2.shape[1], 3
    da = torch.zeros(sms, m.triton.cdiv(n, 512), device=x.device)
    dg, db = torch.full((sms, n), float("nan"), device=x.device), torch.full((sms, n), float("nan"), device=x.device)
    dx = torch.full_like(dy2, float("nan"))
    m._dyt_bwd_kernel[lambda meta: (m.triton.cdiv(n, meta["BLOCK_N"]), sms)](dy2, dx, da, dg, db, x2, a, w, True,
                                                                             rows, n)
    return [y, dx.view(x.shape), da.sum().view(1), dg.sum(0), db.sum(0)]


# ---------------------------------------------------------------- activations
def b_pair(shape: tuple[int, ...], dev: str) -> Inputs:
    return {"a": leaf(*shape, device=dev), "b": leaf(*shape, device=dev), "dy": rand(*shape, device=dev)}


def b_one(shape: tuple[int, ...], dev: str) -> Inputs:
    return {"x": leaf(*shape, device=dev), "dy": rand(*shape, device=dev)}


def sparsemax_ref(x: torch.Tensor) -> torch.Tensor:
    z, _ = torch.sort(x, dim=-1, descending=True)
    k = torch.arange(1, x.shape[-1] + 1, device=x.device, dtype=x.dtype)
    cum = z.cumsum(-1)
    support = (1 + k * z) > cum
    kz = support.sum(-1, keepdim=True)
    tau = (cum.gather(-1, kz - 1) - 1) / kz.to(x.dtype)
    return torch.clamp(x - tau, min=0)


def sparsemax_grad_ref(i: Inputs) -> list[Any]:
    y = sparsemax_ref(d(i["x"]))
    s = (y > 0).double()
    g = d(i["dy"])
    v = (g * s).sum(-1, keepdim=True) / s.sum(-1, keepdim=True)
    return [y, s * (g - v)]


# ---------------------------------------------------------------- losses
def b_logits(shape: tuple[int, ...], dev: str) -> Inputs:
    bt, v = shape
    tgt = torch.randint(0, v, (bt,), device=dev)
    tgt[::3] = -100  # ignored rows
    return {"x": leaf(bt, v, device=dev, scale=2.0), "t": tgt}


def ce_ref(i: Inputs, smoothing: float = 0.0, z: float = 0.0, softcap: float | None = None) -> list[Any]:
    x = d(i["x"])
    if softcap is not None:
        x = softcap * torch.tanh(x / softcap)
    loss = F.cross_entropy(x, i["t"], ignore_index=-100, label_smoothing=smoothing)
    keep = i["t"] != -100
    if z:
        loss = loss + z * (torch.logsumexp(x, -1)[keep] ** 2).sum() / keep.sum()
    return grads(lambda: loss, i, "x")


def ce_call(m: Any, i: Inputs, smoothing: float = 0.0, z: float = 0.0, softcap: float | None = None) -> list[Any]:
    return grads(lambda: m.LigerCrossEntropyFunction.apply(i["x"], i["t"], None, -100, z, smoothing, "mean",
                                                           softcap), i, "x")


def b_dists(shape: tuple[int, ...], dev: str) -> Inputs:
    bt, v = shape
    return {"x": torch.log_softmax(rand(bt, v, device=dev), -1).requires_grad_(),
            "y": torch.log_softmax(rand(bt, v, device=dev), -1)}


def jsd_ref(i: Inputs, beta: float = 0.5) -> list[Any]:
    def f() -> torch.Tensor:
        x, y = d(i["x"]), d(i["y"])
        m = torch.log(beta * y.exp() + (1 - beta) * x.exp())
        return (beta * y.exp() * (y - m) + (1 - beta) * x.exp() * (x - m)).sum() / x.shape[0]

    return grads(f, i, "x")


def b_probs(shape: tuple[int, ...], dev: str) -> Inputs:
    bt, v = shape
    return {"p": torch.softmax(rand(bt, v, device=dev), -1).requires_grad_(),
            "q": torch.softmax(rand(bt, v, device=dev), -1)}


# ---------------------------------------------------------------- rotary embeddings
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def b_rope(shape: tuple[int, ...], dev: str) -> Inputs:
    bsz, hq, hk, s, hd = shape
    ang = torch.rand(1, s, hd // 2, device=dev) * 6
    ang = torch.cat((ang, ang), -1)
    return {"q": leaf(bsz, hq, s, hd, device=dev), "k": leaf(bsz, hk, s, hd, device=dev), "cos": ang.cos(),
            "sin": ang.sin(), "dy": rand(bsz, hq, s, hd, device=dev), "dk": rand(bsz, hk, s, hd, device=dev)}


def rope_both(i: Inputs, q: torch.Tensor, k: torch.Tensor) -> list[Any]:
    torch.autograd.backward([q, k], [i["dy"].to(q.dtype), i["dk"].to(k.dtype)])
    return [q.detach(), k.detach(), i["q"].grad, i["k"].grad]


def rope_ref(i: Inputs) -> list[Any]:
    c, s = d(i["cos"]).unsqueeze(1), d(i["sin"]).unsqueeze(1)
    q, k = d(i["q"]), d(i["k"])
    return rope_both(i, q * c + rotate_half(q) * s, k * c + rotate_half(k) * s)


def b_mrope(shape: tuple[int, ...], dev: str) -> Inputs:
    bsz, hq, hk, s, hd = shape
    ang = torch.rand(3, bsz, s, hd // 2, device=dev) * 6
    ang = torch.cat((ang, ang), -1)
    q, k = leaf(bsz, hq, s, hd, device=dev), leaf(bsz, hk, s, hd, device=dev)
    sec = [hd // 8, hd // 8 + (hd // 2 - hd // 4) // 2]
    sec.append(hd // 2 - sum(sec))
    return {"q": q, "k": k, "cos": ang.cos(), "sin": ang.sin(), "sec": sec, "dy": rand(bsz, hq, s, hd, device=dev),
            "dk": rand(bsz, hk, s, hd, device=dev)}


def mrope_ref(i: Inputs) -> list[Any]:
    sec = i["sec"] * 2

    def pick(t: torch.Tensor) -> torch.Tensor:  # each section from its own position stream
        return torch.cat([m[j % 3] for j, m in enumerate(t.split(sec, dim=-1))], dim=-1).unsqueeze(1)

    c, s = pick(d(i["cos"])), pick(d(i["sin"]))
    q, k = d(i["q"]), d(i["k"])
    return rope_both(i, q * c + rotate_half(q) * s, k * c + rotate_half(k) * s)


def b_llama4(shape: tuple[int, ...], dev: str) -> Inputs:
    bsz, s, hq, hk, hd = shape
    ang = torch.rand(s, hd // 2, device=dev) * 6
    return {"q": rand(bsz, s, hq, hd, device=dev), "k": rand(bsz, s, hk, hd, device=dev),
            "f": torch.polar(torch.ones_like(ang), ang)}


def llama4_ref(i: Inputs) -> list[Any]:
    def rot(x: torch.Tensor) -> torch.Tensor:
        xc = torch.view_as_complex(d(x).reshape(*x.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(xc * i["f"].to(torch.complex128)[None, :, None, :]).flatten(-2)

    return [rot(i["q"]), rot(i["k"])]


CASES = [
    Case("rms_norm", LIB, OPS + "rms_norm", ("_rms_norm_forward_kernel", "_rms_norm_backward_kernel"), b_norm,
         lambda m, i: grads(lambda: m.LigerRMSNormFunction.apply(i["x"], i["w"], 1e-6, 0.0, "llama", False), i, "xw"),
         lambda i: grads(lambda: rms_ref(d(i["x"]), d(i["w"]), 1e-6), i, "xw"), ((3, 77), (2, 5, 130)),
         atol=1e-4, rtol=1e-4),
    Case("rms_norm_gemma", LIB, OPS + "rms_norm", ("_rms_norm_forward_kernel", "_rms_norm_backward_kernel"), b_norm,
         lambda m, i: grads(lambda: m.LigerRMSNormFunction.apply(i["x"], i["w"], 1e-6, 1.0, "gemma", False), i, "xw"),
         lambda i: grads(lambda: rms_ref(d(i["x"]), d(i["w"]), 1e-6, 1.0), i, "xw"), ((4, 50),), atol=1e-4, rtol=1e-4),
    Case("rms_norm_block", LIB, OPS + "rms_norm", ("_block_rms_norm_forward_kernel", "_block_rms_norm_backward_kernel"),
         b_norm,
         lambda m, i: grads(lambda: m.LigerRMSNormFunction.apply(i["x"], i["w"], 1e-6, 0.0, "llama", False, False),
                            i, "xw"),
         lambda i: grads(lambda: rms_ref(d(i["x"]), d(i["w"]), 1e-6), i, "xw"), ((32771, 40),),
         atol=1e-4, rtol=1e-4),
    Case("layer_norm", LIB, OPS + "layer_norm", ("_layer_norm_forward_kernel", "_layer_norm_backward_kernel"), b_norm,
         lambda m, i: grads(lambda: m.LigerLayerNormFunction.apply(i["x"], i["w"], i["b"], 1e-6), i, "xwb"),
         layer_norm_ref, ((5, 77), (3, 4, 200)), atol=1e-4, rtol=1e-4),
    Case("group_norm", LIB, OPS + "group_norm", ("_group_norm_forward_kernel", "_group_norm_backward_kernel"),
         b_group_norm,
         lambda m, i: grads(lambda: m.LigerGroupNormFunction.apply(i["x"], i["w"], i["b"], i["x"].shape[1], 3, 1e-6),
                            i, "xwb"),
         lambda i: grads(lambda: F.group_norm(d(i["x"]), 3, d(i["w"]), d(i["b"]), 1e-6), i, "xwb"),
         ((2, 6, 45), (3, 12, 17)), atol=1e-4, rtol=1e-4),
    Case("fused_add_rms_norm", LIB, OPS + "fused_add_rms_norm",
         ("_fused_add_rms_norm_forward_kernel", "_fused_add_rms_norm_backward_kernel"), b_add_rms,
         lambda m, i: add_rms(i, *m.LigerFusedAddRMSNormFunction.apply(i["x"], i["r"], i["w"], 1e-6, 0.0, "llama",
                                                                       False)),
         add_rms_ref, ((6, 77), (2, 3, 64)), atol=1e-4, rtol=1e-4),
    Case("poly_norm", LIB, OPS + "poly_norm", ("_poly_norm_forward_kernel", "_poly_norm_backward_kernel"), b_poly,
         lambda m, i: grads(lambda: m.LigerPolyNormFunction.apply(i["x"], i["w"], i["b"], 1e-6, False), i, "xwb"),
         poly_ref, ((5, 77), (3, 129)), atol=1e-4, rtol=1e-4),
    Case("dyt", LIB, OPS + "dyt", ("_dyt_fwd_kernel", "_dyt_bwd_kernel"), b_dyt, dyt_call,
         lambda i: grads(lambda: torch.tanh(d(i["a"]) * d(i["x"])) * d(i["w"]) + d(i["b"]), i, "xawb"),
         ((5, 77), (3, 3, 77)), atol=1e-4, rtol=1e-4),
    Case("swiglu", LIB, OPS + "swiglu", ("_swiglu_forward_kernel", "_swiglu_backward_kernel"), b_pair,
         lambda m, i: grads(lambda: m.LigerSiLUMulFunction.apply(i["a"], i["b"]), i, "ab"),
         lambda i: grads(lambda: F.silu(d(i["a"])) * d(i["b"]), i, "ab"), ((3, 77), (2, 3, 130)),
         atol=1e-5, rtol=1e-5),
    Case("geglu", LIB, OPS + "geglu", ("_geglu_tanh_forward_kernel", "_geglu_tanh_backward_kernel"), b_pair,
         lambda m, i: grads(lambda: m.LigerGELUMulFunction.apply(i["a"], i["b"]), i, "ab"),
         lambda i: grads(lambda: F.gelu(d(i["a"]), approximate="tanh") * d(i["b"]), i, "ab"), ((3, 77), (2, 3, 130)),
         atol=1e-5, rtol=1e-5),
    Case("relu_squared", LIB, OPS + "relu_squared", ("_relu_squared_forward_kernel", "_relu_squared_backward_kernel"),
         b_one, lambda m, i: grads(lambda: m.LigerReLUSquaredFunction.apply(i["x"]), i, "x"),
         lambda i: grads(lambda: F.relu(d(i["x"])) ** 2, i, "x"), ((3, 77), (1000,)), atol=1e-5, rtol=1e-5),
    Case("softmax", LIB, OPS + "softmax", ("_softmax_single_block_forward_kernel",
                                            "_softmax_single_block_backward_kernel"),
         b_one, lambda m, i: grads(lambda: m.LigerSoftmaxFunction.apply(i["x"]), i, "x"),
         lambda i: grads(lambda: torch.softmax(d(i["x"]), -1), i, "x"), ((3, 77), (2, 5, 130)), atol=1e-5, rtol=1e-5),
    Case("sparsemax", LIB, OPS + "sparsemax", ("_sparsemax_forward_kernel", "_sparsemax_backward_kernel"), b_one,
         lambda m, i: grads(lambda: m.LigerSparsemaxFunction.apply(i["x"], -1), i, "x"), sparsemax_grad_ref,
         ((3, 77), (4, 130)), atol=1e-5, rtol=1e-5),
    Case("cross_entropy", LIB, OPS + "cross_entropy", ("liger_cross_entropy_kernel",), b_logits, ce_call, ce_ref,
         ((7, 100), (5, 1000)), atol=1e-5, rtol=1e-4),
    Case("cross_entropy_smooth_z_softcap", LIB, OPS + "cross_entropy", ("liger_cross_entropy_kernel",), b_logits,
         lambda m, i: ce_call(m, i, 0.1, 1e-3, 20.0), lambda i: ce_ref(i, 0.1, 1e-3, 20.0), ((7, 100), (4, 333)),
         atol=1e-5, rtol=1e-4),
    Case("kl_div", LIB, OPS + "kl_div", ("_kldiv_kernel_forward", "_kldiv_kernel_backward"), b_dists,
         lambda m, i: grads(lambda: m.LigerKLDivLossFunction.apply(i["x"], i["y"], "batchmean", True), i, "x"),
         lambda i: grads(lambda: F.kl_div(d(i["x"]), d(i["y"]), reduction="batchmean", log_target=True), i, "x"),
         ((4, 100), (3, 1000)), atol=1e-6, rtol=1e-4),
    Case("jsd", LIB, OPS + "jsd", ("_jsd_kernel",), b_dists,
         lambda m, i: grads(lambda: m.LigerJSDFunction.apply(i["x"], i["y"], None, 0.3), i, "x"),
         lambda i: jsd_ref(i, 0.3), ((4, 100), (3, 1000)), atol=1e-6, rtol=1e-4),
    Case("tvd", LIB, OPS + "tvd", ("_tv_distance_kernel",), b_probs,
         lambda m, i: grads(lambda: m.LigerTVDLossFunction.apply(i["p"], i["q"], None, "batchmean"), i, "p"),
         lambda i: grads(lambda: 0.5 * (d(i["p"]) - d(i["q"])).abs().sum() / i["p"].shape[0], i, "p"),
         ((4, 100), (3, 1000)), atol=1e-6, rtol=1e-4),
    Case("rope", LIB, OPS + "rope", ("_triton_rope",), b_rope,
         lambda m, i: rope_both(i, *m.LigerRopeFunction.apply(i["q"], i["k"], i["cos"], i["sin"])), rope_ref,
         ((2, 4, 2, 7, 64), (1, 3, 1, 5, 32)), atol=1e-5, rtol=1e-5),
    Case("qwen2vl_mrope", LIB, OPS + "qwen2vl_mrope", ("_triton_qwen2vl_mrope",), b_mrope,
         lambda m, i: rope_both(i, *m.LigerQwen2VLMRopeFunction.apply(i["q"], i["k"], i["cos"], i["sin"], i["sec"])),
         mrope_ref, ((2, 4, 2, 7, 64), (1, 3, 1, 5, 32)), atol=1e-5, rtol=1e-5),
    Case("llama4_rope", LIB, OPS + "llama4_rope", ("_llama4_rope_kernel",), b_llama4,
         lambda m, i: list(m.llama4_rope_forward(i["q"], i["k"], i["f"])), llama4_ref,
         ((2, 7, 4, 2, 64), (1, 5, 3, 1, 32)), atol=1e-5, rtol=1e-5),
]


# ---------------------------------------------------------------- mixture of experts
def b_moe(shape: tuple[int, ...], dev: str) -> Inputs:
    t, h, inter, e, k = shape
    idx = torch.stack([torch.randperm(e, device=dev)[:k] for _ in range(t)]).to(torch.int32)
    return {"x": leaf(t, h, device=dev), "w1": leaf(e, 2 * inter, h, device=dev, scale=0.2),
            "w2": leaf(e, h, inter, device=dev, scale=0.2), "idx": idx,
            "wt": torch.softmax(rand(t, k, device=dev), -1).requires_grad_(), "dy": rand(t, h, device=dev)}


def moe_ref(i: Inputs) -> list[Any]:
    def f() -> torch.Tensor:
        x, w1, w2, wt = d(i["x"]), d(i["w1"]), d(i["w2"]), d(i["wt"])
        out = torch.zeros_like(x)
        for j in range(i["idx"].shape[1]):
            e = i["idx"][:, j].long()
            gu = torch.einsum("th,tih->ti", x, w1[e])
            g, u = gu.chunk(2, -1)
            out = out + wt[:, j:j + 1] * torch.einsum("ti,thi->th", F.silu(g) * u, w2[e])
        return out

    return grads(f, i, ("x", "w1", "w2", "wt"))


MOE = "liger_kernel.ops.fused_moe_kernels:"
CASES.append(
    Case("fused_moe", LIB, OPS + "fused_moe",
         tuple(MOE + k for k in (
             "_moe_router_histogram_kernel", "_moe_router_prefix_sum_kernel", "_moe_router_scatter_kernel",
             "_fused_up_proj_swiglu_kernel", "_fused_down_proj_kernel", "_token_gather_weighted_sum_kernel",
             "_moe_bwd_down_proj_kernel", "_moe_bwd_dW2_kernel", "_moe_bwd_dX_expanded_kernel", "_moe_bwd_dW1_kernel")),
         b_moe,
         lambda m, i: grads(lambda: m.LigerFusedMoEFunction.apply(i["x"], i["w1"], i["w2"], i["idx"], i["wt"]), i,
                            ("x", "w1", "w2", "wt")),
         moe_ref, ((37, 32, 48, 4, 2),), atol=1e-3, rtol=1e-3, tf32=True))


# ---------------------------------------------------------------- attention-side and fused-linear ops
def b_mta(shape: tuple[int, ...], dev: str) -> Inputs:
    b, h, n = shape
    return {"s": leaf(b, h, n, n, device=dev), "w": leaf(h, h, 3, 3, device=dev, scale=0.3),
            "dy": rand(b, h, n, n, device=dev)}


def mta_ref(i: Inputs) -> list[Any]:
    def f() -> torch.Tensor:
        s = d(i["s"])
        upper = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
        p = torch.softmax(s.masked_fill(upper, float("-inf")), -1)
        return F.conv2d(p, d(i["w"]), padding=1).masked_fill(upper, 0.0)

    return grads(f, i, "sw")


def b_sel(shape: tuple[int, ...], dev: str) -> Inputs:
    b, n, v = shape
    return {"logits": rand(b, n + 1, v, device=dev, scale=2.0), "ids": torch.randint(0, v, (b, n + 3), device=dev)}


def sel_ref(i: Inputs) -> torch.Tensor:
    n = i["logits"].shape[1] - 1
    lp = torch.log_softmax(i["logits"][:, :n].double() / 0.9, -1)
    return lp.gather(-1, i["ids"][:, -n:, None]).squeeze(-1)


def b_flce(shape: tuple[int, ...], dev: str) -> Inputs:
    n, v, h = shape
    t = torch.randint(0, v, (n,), device=dev)
    t[::4] = -100
    return {"x": leaf(n, h, device=dev), "w": leaf(v, h, device=dev, scale=0.3), "t": t, "dy": torch.tensor(0.7)}


def b_swiglu_mlp(shape: tuple[int, ...], dev: str) -> Inputs:
    b, s, dim, hidden = shape
    return {"x": rand(b, s, dim, device=dev), "g": rand(hidden, dim, device=dev, scale=0.2),
            "u": rand(hidden, dim, device=dev, scale=0.2)}


CASES += [
    Case("multi_token_attention", LIB, OPS + "multi_token_attention", ("_mask_fwd_kernel", "_mask_bwd_kernel"), b_mta,
         lambda m, i: grads(lambda: m.LigerMultiTokenAttentionFunction.apply(i["s"], i["w"], None, 1, 1), i, "sw"),
         mta_ref, ((2, 3, 9), (1, 2, 20)), atol=1e-4, rtol=1e-4),
    Case("selective_log_softmax", LIB, OPS + "grpo_loss", ("_selective_log_softmax_kernel",), b_sel,
         lambda m, i: m.fused_selective_log_softmax(i["logits"], i["ids"], 0.9), sel_ref, ((2, 9, 50), (3, 5, 3000)),
         atol=1e-5, rtol=1e-5),
    Case("fused_linear_cross_entropy", LIB, OPS + "fused_linear_cross_entropy",
         (OPS + "cross_entropy:liger_cross_entropy_kernel", OPS + "utils:element_mul_kernel"), b_flce,
         lambda m, i: grads(lambda: m.LigerFusedLinearCrossEntropyFunction.apply(i["x"], i["w"], i["t"]), i, "xw"),
         lambda i: grads(lambda: F.cross_entropy(d(i["x"]) @ d(i["w"]).T, i["t"], ignore_index=-100), i, "xw"),
         ((37, 100, 32), (20, 333, 16)), atol=1e-4, rtol=1e-4),
    Case("gemm_swiglu_tensor_descriptors", LIB, OPS + "mlp", ("_swiglu_kernel_forward_inference",), b_swiglu_mlp,
         lambda m, i: m.gemm_swiglu(i["x"], i["g"], i["u"], 1.0, store_preact=False)[0],
         lambda i: F.silu(d(i["x"]) @ d(i["g"]).T) * (d(i["x"]) @ d(i["u"]).T), ((1, 37, 32, 48), (2, 20, 32, 48)),
         atol=1e-3, rtol=1e-3, tf32=True),
]
