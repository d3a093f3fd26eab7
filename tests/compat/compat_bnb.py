"""bitsandbytes' Triton backend: 4-bit (NF4, FP4) and 8-bit blockwise quantization, 32-bit optimizers.

The kernel modules are imported directly (`bitsandbytes.backends.triton.ops` asks torch for an
accelerator at import). The quantization references pick each element's nearest code value in
torch; the checks compare decoded values, so that the sign of a zero code cannot matter.
"""

from __future__ import annotations

from typing import Any

import torch
from compat_harness import Case, Inputs, rand

LIB = "bitsandbytes"
K4 = "bitsandbytes.backends.triton.kernels_4bit"
K8 = "bitsandbytes.backends.triton.kernels_8bit_quant"
OPT = "bitsandbytes.backends.triton.kernels_optim"


def code4(kind: str, device: str) -> torch.Tensor:
    from bitsandbytes.functional import get_4bit_type

    return get_4bit_type(kind, device=device).float()


def decode4(packed: torch.Tensor, code: torch.Tensor, absmax: torch.Tensor, block: int, n: int) -> torch.Tensor:
    b = packed.flatten().to(torch.int64)
    idx = torch.stack((b >> 4, b & 15), -1).flatten()[:n]
    return (code[idx] * absmax.repeat_interleave(block)[:n]).double()


def nearest(x: torch.Tensor, code: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = x.numel()
    pad = torch.nn.functional.pad(x.flatten().double(), (0, (-n) % block)).view(-1, block)
    absmax = pad.abs().amax(-1)
    norm = (pad / absmax[:, None]).clamp(-1, 1)
    idx = (norm[..., None] - code.double()).abs().argmin(-1)
    return (code.double()[idx] * absmax[:, None]).flatten()[:n], absmax


def b_4bit(shape: tuple[int, ...], dev: str) -> Inputs:
    n, block = shape
    return {"x": rand(n, device=dev), "block": block}


def quant4_call(kind: str) -> Any:
    def call(m: Any, i: Inputs) -> list[torch.Tensor]:
        x, block = i["x"], i["block"]
        n = x.numel()
        xp = torch.nn.functional.pad(x, (0, (-n) % block))
        blocks = -(xp.numel() // -(block * 2))
        absmax = torch.empty(blocks * 2, device=x.device)
        out = torch.empty(xp.numel() - xp.numel() // 2, 1, device=x.device, dtype=torch.uint8)
        m.quantize_4bit_blockwise_triton(xp, block, kind, blocks, absmax, xp.numel(), out)
        nb = -(n // -block)
        deq = torch.empty(n, device=x.device)
        m.dequantize_4bit_impl(out, absmax[:nb], block, kind, torch.float32, deq)
        return [absmax[:nb], decode4(out, code4(kind, x.device.type), absmax, block, n), deq]

    return call


def quant4_ref(kind: str) -> Any:
    def ref(i: Inputs) -> list[torch.Tensor]:
        values, absmax = nearest(i["x"], code4(kind, i["x"].device.type), i["block"])
        return [absmax, values, values]

    return ref


def b_packed(shape: tuple[int, ...], dev: str) -> Inputs:
    n, block = shape
    return {"q": torch.randint(0, 256, (n // 2,), device=dev, dtype=torch.uint8),
            "absmax": rand(-(n // -block), device=dev).abs() + 0.1, "block": block, "n": n}


def dequant_code_call(m: Any, i: Inputs) -> torch.Tensor:
    out = torch.empty(i["n"], device=i["q"].device)
    m.dequantize_4bit_impl_passing_code(i["q"], i["absmax"], i["block"], code4("nf4", out.device.type),
                                        torch.float32, out)
    return out


def dyn_code(device: str) -> torch.Tensor:
    from bitsandbytes.functional import create_dynamic_map

    return create_dynamic_map().to(device)


def quant8_call(m: Any, i: Inputs) -> list[torch.Tensor]:
    code = dyn_code(i["x"].device.type)
    q, absmax = m.quantize_blockwise_triton(i["x"], code, i["block"])
    deq = m.dequant_8bit_blockwise(q, absmax, code, i["block"], torch.float32)
    return [absmax, (code[q.long()] * absmax.repeat_interleave(i["block"])[: q.numel()]).double(), deq]


def quant8_ref(i: Inputs) -> list[torch.Tensor]:
    values, absmax = nearest(i["x"], dyn_code(i["x"].device.type), i["block"])
    return [absmax, values, values]


def b_opt(shape: tuple[int, ...], dev: str) -> Inputs:
    (n,) = shape
    return {"g": rand(n, device=dev), "p": rand(n, device=dev), "s1": rand(n, device=dev).abs(),
            "s2": rand(n, device=dev).abs(), "step": 3}


def adam_call(m: Any, i: Inputs) -> list[torch.Tensor]:
    p, s1, s2 = i["p"].clone(), i["s1"].clone(), i["s2"].clone()
    m.optimizer_update_32bit_impl("adam", i["g"], p, s1, s2, None, 0.0, 0.0, 0.9, 0.99, 0.0, 0.0, 1e-8, 0.01,
                                  i["step"], 1e-3)
    return [p, s1, s2]


def adam_ref(i: Inputs) -> list[torch.Tensor]:
    g, p, s1, s2 = (i[k].double() for k in ("g", "p", "s1", "s2"))
    t = i["step"]
    s1 = s1 * 0.9 + 0.1 * g
    s2 = s2 * 0.99 + 0.01 * g * g
    c2 = (1 - 0.99**t) ** 0.5
    p = p * (1 - 1e-3 * 0.01) - 1e-3 * c2 / (1 - 0.9**t) * (s1 / (s2.sqrt() + 1e-8 * c2))
    return [p, s1, s2]


def one_state_call(name: str) -> Any:
    def call(m: Any, i: Inputs) -> list[torch.Tensor]:
        p, s1 = i["p"].clone(), i["s1"].clone()
        m.optimizer_update_32bit_impl(name, i["g"], p, s1, None, None, 0.0, 0.0, 0.9, 0.95, 0.0, 0.0, 1e-8, 0.01,
                                      i["step"], 1e-2)
        return [p, s1]

    return call


def one_state_ref(name: str) -> Any:
    def ref(i: Inputs) -> list[torch.Tensor]:
        g, p, s1 = i["g"].double(), i["p"].double(), i["s1"].double()
        if name == "lion":
            p = p * (1 - 1e-2 * 0.01) - 1e-2 * torch.sign(s1 * 0.9 + 0.1 * g)
            return [p, s1 * 0.95 + 0.05 * g]
        g = g + p * 0.01
        if name == "momentum":
            s1 = s1 * 0.9 + g
            return [p - 1e-2 * s1, s1]
        if name == "rmsprop":
            s1 = s1 * 0.9 + 0.1 * g * g
        else:  # adagrad
            s1 = s1 + g * g
        return [p - 1e-2 * g / (s1.sqrt() + 1e-8), s1]

    return ref


CASES = [
    Case("nf4_quantize_dequantize", LIB, K4, ("quantize_nf4_blockwise_kernel", "dequant_nf4_kernel"), b_4bit,
         quant4_call("nf4"), quant4_ref("nf4"), ((1000, 64), (4099, 128)), atol=1e-6, rtol=1e-6),
    Case("fp4_quantize_dequantize", LIB, K4, ("quantize_fp4_blockwise_kernel", "dequant_fp4_kernel"), b_4bit,
         quant4_call("fp4"), quant4_ref("fp4"), ((1000, 64), (4099, 128)), atol=1e-6, rtol=1e-6),
    Case("dequantize_4bit_with_code", LIB, K4, ("dequant_4bit_kernel",), b_packed, dequant_code_call,
         lambda i: decode4(i["q"], code4("nf4", i["q"].device.type), i["absmax"], i["block"], i["n"]),
         ((1000, 64), (4098, 128)), atol=1e-6, rtol=1e-6),
    Case("int8_blockwise_quantize_dequantize", LIB, K8, ("quantize_8bit_blockwise_kernel", "dequant_8bit_kernel"),
         b_4bit, quant8_call, quant8_ref, ((1000, 64), (4099, 256)), atol=1e-6, rtol=1e-6),
    Case("adam_32bit", LIB, OPT, ("_optimizer_update_2state_32bit_triton_kernel",), b_opt, adam_call, adam_ref,
         ((1000,), (4099,)), atol=1e-6, rtol=1e-5),
    *[Case(f"{name}_32bit", LIB, OPT, ("_optimizer_update_1state_32bit_triton_kernel",), b_opt, one_state_call(name),
           one_state_ref(name), ((1000,), (4099,)), atol=1e-6, rtol=1e-5)
      for name in ("momentum", "rmsprop", "adagrad", "lion")],
]
