"""fla-core (flash-linear-attention's operators): activations, norms, chunked cumsums, triangular
solves, gates and recurrent linear attention, forward and backward.

These kernels autotune over many configs, pick constexpr flags with `@triton.heuristics`, call
helper modules (`fla.ops.utils.op`), scan with `@triton.jit` combine functions and address memory
through block pointers and tensor descriptors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from compat_harness import Case, Inputs, rand
from compat_liger import b_one, b_pair, d, grads, leaf

LIB = "fla-core"
ACT = "fla.modules.activations.ops"


def act(name: str, fn: str, ref: Callable[[torch.Tensor], torch.Tensor], *extra: Any) -> Case:
    return Case(name, LIB, ACT, (f"{name}_fwd_kernel", f"{name}_bwd_kernel"), b_one,
                lambda m, i: grads(lambda: getattr(m, fn).apply(i["x"], *extra), i, "x"),
                lambda i: grads(lambda: ref(d(i["x"])), i, "x"), ((3, 77), (5, 3, 77)), atol=1e-5, rtol=1e-5)


def glu(name: str, ref: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *extra: Any) -> Case:
    return Case(name, LIB, ACT, (f"{name}_fwd_kernel", f"{name}_fwdbwd_kernel"), b_pair,
                lambda m, i: grads(lambda: getattr(m, name)(i["a"], i["b"], *extra), i, "ab"),
                lambda i: grads(lambda: ref(d(i["a"]), d(i["b"])), i, "ab"), ((3, 77), (5, 3, 77)),
                atol=1e-5, rtol=1e-5)


def powglu_ref(x: torch.Tensor, y: torch.Tensor, m: float = 3.0) -> torch.Tensor:
    xp = torch.where(x > 0, x, torch.ones_like(x))
    g = torch.where(x > 0, xp ** (m / (xp.sqrt() + 1)) * torch.sigmoid(x), x * torch.sigmoid(x))
    return g * y


# ---------------------------------------------------------------- norms
def b_norm(shape: tuple[int, ...], dev: str) -> Inputs:
    *rows, n = shape
    return {"x": leaf(*rows, n, device=dev), "w": leaf(n, device=dev), "b": leaf(n, device=dev),
            "r": leaf(*rows, n, device=dev), "dy": rand(*rows, n, device=dev)}


def fla_norm_ref(i: Inputs, rms: bool) -> list[Any]:
    def f() -> torch.Tensor:
        x = d(i["x"]) + d(i["r"])
        if rms:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * d(i["w"]) + d(i["b"])
        return F.layer_norm(x, x.shape[-1:], d(i["w"]), d(i["b"]), 1e-5)

    return grads(f, i, "xwbr")


def b_l2(shape: tuple[int, ...], dev: str) -> Inputs:
    return {"x": leaf(*shape, device=dev), "dy": rand(*shape, device=dev)}


# ---------------------------------------------------------------- chunked scans
def b_gates(shape: tuple[int, ...], dev: str) -> Inputs:
    return {"g": rand(*shape, device=dev)}


def local_cumsum_ref(g: torch.Tensor, chunk: int, reverse: bool) -> torch.Tensor:
    t = g.shape[1]
    out = torch.empty_like(g, dtype=torch.float64)
    for s in range(0, t, chunk):
        part = g[:, s:s + chunk].double()
        out[:, s:s + chunk] = part.flip(1).cumsum(1).flip(1) if reverse else part.cumsum(1)
    return out


def b_tril(shape: tuple[int, ...], dev: str) -> Inputs:
    b, t, h, bt = shape
    a = rand(b, t, h, bt, device=dev, scale=0.1)
    pos = torch.arange(t, device=dev)[:, None] % bt  # the row's place in its chunk
    a = a * (torch.arange(bt, device=dev)[None, :] < pos).to(a.dtype)[None, :, None, :]  # strictly lower
    return {"a": a, "bt": bt}


def tril_ref(i: Inputs) -> torch.Tensor:
    a, bt = i["a"].double(), i["bt"]
    b, t, h, _ = a.shape
    out = torch.zeros_like(a)
    for s in range(0, t, bt):
        n = min(bt, t - s)
        blk = a[:, s:s + n, :, :n].permute(0, 2, 1, 3)  # [B, H, n, n]
        inv = torch.linalg.inv(torch.eye(n, dtype=a.dtype, device=a.device) + blk)
        out[:, s:s + n, :, :n] = inv.permute(0, 2, 1, 3)
    return out


def solve_tril_tma(m: Any, i: Inputs) -> torch.Tensor:
    """solve_tril with the library's tensor-descriptor path (taken where it sees a Hopper GPU and
    FLA_USE_TMA=1): its module flag set for the call."""
    saved = m.IS_TMA_SUPPORTED
    m.IS_TMA_SUPPORTED = True
    try:
        return m.solve_tril(i["a"])
    finally:
        m.IS_TMA_SUPPORTED = saved


# ---------------------------------------------------------------- gates and recurrences
def b_gate(shape: tuple[int, ...], dev: str) -> Inputs:
    b, t, h, k = shape
    return {"x": leaf(b, t, h, k, device=dev), "h0": rand(b, 1, h, k, device=dev).requires_grad_(),
            "dk": rand(b, t, h, k, device=dev), "dg": rand(b, t, h, k, device=dev), "dh": rand(b, 1, h, k, device=dev)}


def gate_backward(i: Inputs, k: torch.Tensor, g: torch.Tensor, hn: torch.Tensor) -> list[Any]:
    torch.autograd.backward([k, g, hn], [i["dk"].to(k.dtype), i["dg"].to(g.dtype), i["dh"].to(hn.dtype)])
    return [k.detach(), g.detach(), hn.detach(), i["x"].grad, i["h0"].grad]


def gate_ref(i: Inputs) -> list[Any]:
    x, h0 = d(i["x"]), d(i["h0"])
    z = torch.logcumsumexp(torch.cat((h0, x), 1), 1)[:, 1:]
    zprev = torch.cat((h0, z[:, :-1]), 1)
    return gate_backward(i, torch.exp(x - z), zprev - z, z[:, -1:])


def b_rec(shape: tuple[int, ...], dev: str) -> Inputs:
    b, t, h, k, v = shape
    return {"q": leaf(b, t, h, k, device=dev), "k": leaf(b, t, h, k, device=dev, scale=0.5),
            "v": leaf(b, t, h, v, device=dev), "g": (-torch.rand(b, t, h, device=dev)).requires_grad_(),
            "h0": rand(b, h, k, v, device=dev).requires_grad_(), "dy": rand(b, t, h, v, device=dev),
            "dh": rand(b, h, k, v, device=dev)}


def rec_backward(i: Inputs, o: torch.Tensor, hn: torch.Tensor) -> list[Any]:
    torch.autograd.backward([o, hn], [i["dy"].to(o.dtype), i["dh"].to(hn.dtype)])
    return [o.detach(), hn.detach(), *[i[k].grad for k in ("q", "k", "v", "g", "h0")]]


def simple_gla_ref(i: Inputs) -> list[Any]:
    q, k, v, g, h = (d(i[n]) for n in ("q", "k", "v", "g", "h0"))
    scale = q.shape[-1] ** -0.5
    outs = []
    for t in range(q.shape[1]):
        h = h * g[:, t, :, None, None].exp() + k[:, t, :, :, None] * v[:, t, :, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * scale, h))
    return rec_backward(i, torch.stack(outs, 1), h)


CASES = [
    act("sigmoid", "SigmoidFunction", torch.sigmoid),
    act("elu_p1", "ELUPlusOneFunction", lambda x: F.elu(x) + 1),  # (fla's elu_p1() itself uses torch on the CPU)
    act("logsigmoid", "LogSigmoidFunction", lambda x: F.logsigmoid(x) / 2.0, 2.0),
    act("swish", "SwishFunction", F.silu),
    glu("swiglu", lambda a, b: F.silu(a) * b),
    glu("sigmoidglu", lambda a, b: torch.sigmoid(a) * b),
    glu("powglu", powglu_ref),
    Case("layer_norm_residual", LIB, "fla.modules.norm.layernorm", ("layer_norm_fwd_kernel", "layer_norm_bwd_kernel"),
         b_norm, lambda m, i: grads(lambda: m.layer_norm(i["x"], i["w"], i["b"], i["r"]), i, "xwbr"),
         lambda i: fla_norm_ref(i, False), ((5, 77), (3, 4, 200)), atol=1e-4, rtol=1e-4),
    Case("rms_norm_residual", LIB, "fla.modules.norm.layernorm", ("layer_norm_fwd_kernel", "layer_norm_bwd_kernel"),
         b_norm, lambda m, i: grads(lambda: m.rms_norm(i["x"], i["w"], i["b"], i["r"]), i, "xwbr"),
         lambda i: fla_norm_ref(i, True), ((5, 77), (3, 4, 200)), atol=1e-4, rtol=1e-4),
    Case("l2norm", LIB, "fla.modules.norm.l2norm", ("l2norm_fwd_kernel", "l2norm_bwd_kernel"), b_l2,
         lambda m, i: grads(lambda: m.l2norm(i["x"]), i, "x"),
         lambda i: grads(lambda: F.normalize(d(i["x"]), dim=-1, eps=0) * 1.0, i, "x"),
         ((3, 5, 64), (70, 32)), atol=1e-4, rtol=1e-4),
    Case("l2norm_wide_rows", LIB, "fla.modules.norm.l2norm", ("l2norm_fwd_kernel_row", "l2norm_bwd_kernel_row"), b_l2,
         lambda m, i: grads(lambda: m.l2norm(i["x"]), i, "x"),
         lambda i: grads(lambda: F.normalize(d(i["x"]), dim=-1, eps=0) * 1.0, i, "x"),
         ((3, 1000), (5, 700)), atol=1e-4, rtol=1e-4),
    Case("chunk_local_cumsum_scalar", LIB, "fla.ops.utils.cumsum", ("chunk_local_cumsum_scalar_kernel",), b_gates,
         lambda m, i: m.chunk_local_cumsum(i["g"], 16), lambda i: local_cumsum_ref(i["g"], 16, False),
         ((2, 50, 3), (1, 37, 4)), atol=1e-5, rtol=1e-5),
    Case("chunk_local_cumsum_vector_reverse", LIB, "fla.ops.utils.cumsum", ("chunk_local_cumsum_vector_kernel",),
         b_gates, lambda m, i: m.chunk_local_cumsum(i["g"], 32, reverse=True),
         lambda i: local_cumsum_ref(i["g"], 32, True), ((2, 50, 3, 20), (1, 70, 2, 64)), atol=1e-5, rtol=1e-5),
    Case("chunk_global_cumsum", LIB, "fla.ops.utils.cumsum", ("chunk_global_cumsum_scalar_kernel",), b_gates,
         lambda m, i: m.chunk_global_cumsum(i["g"]), lambda i: i["g"].double().cumsum(1),
         ((2, 50, 3), (1, 300, 4)), atol=1e-4, rtol=1e-5),
    Case("chunk_global_cumsum_vector_reverse", LIB, "fla.ops.utils.cumsum", ("chunk_global_cumsum_vector_kernel",),
         b_gates, lambda m, i: m.chunk_global_cumsum(i["g"], reverse=True),
         lambda i: i["g"].double().flip(1).cumsum(1).flip(1), ((2, 50, 3, 20), (1, 130, 2, 64)), atol=1e-4, rtol=1e-5),
    *[Case(f"solve_tril_{kernel}", LIB, "fla.ops.utils.solve_tril", (kernel,), b_tril,
           lambda m, i: m.solve_tril(i["a"]), tril_ref, shapes, atol=1e-4, rtol=1e-4)
      for kernel, shapes in (("solve_tril_16x16_kernel", ((1, 40, 2, 16), (2, 23, 1, 16))),
                             ("merge_16x16_to_32x32_inverse_kernel", ((1, 50, 2, 32),)),
                             ("merge_16x16_to_64x64_inverse_kernel", ((1, 100, 1, 64),)))],
    *[Case(f"solve_tril_tensor_descriptors_{kernel}", LIB, "fla.ops.utils.solve_tril", (kernel,), b_tril,
           solve_tril_tma, tril_ref, ((1, 40, 2, bt),), atol=1e-4, rtol=1e-4)
      for kernel, bt in (("solve_tril_16x16_kernel", 16), ("merge_16x16_to_32x32_inverse_kernel", 32),
                         ("merge_16x16_to_64x64_inverse_kernel", 64))],
    Case("fused_additive_gate", LIB, "fla.ops.gsa.gate", ("fused_additive_gate_fwd_kernel",
                                                          "fused_additive_gate_bwd_kernel"),
         b_gate, lambda m, i: gate_backward(i, *m.fused_additive_gate(i["x"], i["h0"])), gate_ref,
         ((2, 37, 2, 16), (1, 70, 3, 8)), atol=1e-4, rtol=1e-4),
    Case("fused_recurrent_simple_gla", LIB, "fla.ops.simple_gla.fused_recurrent",
         ("fla.ops.common.fused_recurrent:fused_recurrent_fwd_kernel",
          "fla.ops.common.fused_recurrent:fused_recurrent_bwd_kernel"), b_rec,
         lambda m, i: rec_backward(i, *m.fused_recurrent_simple_gla(i["q"], i["k"], i["v"], i["g"],
                                                                    initial_state=i["h0"], output_final_state=True)),
         simple_gla_ref, ((2, 13, 2, 16, 24), (1, 20, 1, 32, 16)), atol=1e-4, rtol=1e-4),
]
