"""cut-cross-entropy (Apple's memory-efficient linear cross-entropy): forward and backward kernels.

The forward's log-sum-exp kernel merges its partial results under a lock taken with
`tl.atomic_cas` (programs of one launch synchronizing); the backward's gradient filter reduces with
a `@triton.jit` combine function (`tl.reduce`). The backward takes fp16/bf16 embeddings only.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from compat_harness import Case, Inputs, rand

LIB = "cut-cross-entropy"
FWD = ("cut_cross_entropy.cce_lse_forward:_cce_lse_forward_kernel",
       "cut_cross_entropy.indexed_dot:_indexed_neg_dot_forward_kernel")
BWD = ("cut_cross_entropy.cce_backward:_cce_backward_kernel",)


def build(dtype: torch.dtype) -> Any:
    def b(shape: tuple[int, ...], dev: str) -> Inputs:
        n, v, dim = shape
        t = torch.randint(0, v, (n,), device=dev)
        t[::5] = -100
        return {"e": rand(n, dim, device=dev, dtype=dtype, scale=0.5).requires_grad_(),
                "c": rand(v, dim, device=dev, dtype=dtype, scale=0.5).requires_grad_(), "t": t}

    return b


def call(softcap: float | None, reduction: str, backward: bool) -> Any:
    def run(m: Any, i: Inputs) -> list[Any]:
        loss = m.linear_cross_entropy(i["e"], i["c"], i["t"], softcap=softcap, reduction=reduction,
                                      filter_eps=None, impl="cce")
        if not backward:
            return [loss.detach()]
        loss.backward()
        return [loss.detach(), i["e"].grad, i["c"].grad]

    return run


def ref(softcap: float | None, reduction: str, backward: bool) -> Any:
    def run(i: Inputs) -> list[Any]:
        logits = i["e"].double() @ i["c"].double().T
        if softcap is not None:
            logits = softcap * torch.tanh(logits / softcap)
        loss = F.cross_entropy(logits, i["t"], ignore_index=-100, reduction=reduction)
        if not backward:
            return [loss.float()]
        loss.backward()
        return [loss.float(), i["e"].grad, i["c"].grad]

    return run


SHAPES = ((37, 300, 64), (50, 1003, 32))
CASES = [
    Case("linear_cross_entropy_forward", LIB, "cut_cross_entropy", FWD, build(torch.float32),
         call(None, "mean", False), ref(None, "mean", False), SHAPES, atol=1e-4, rtol=1e-4),
    Case("linear_cross_entropy_forward_softcap_none", LIB, "cut_cross_entropy", FWD, build(torch.float32),
         call(30.0, "none", False), ref(30.0, "none", False), SHAPES, atol=1e-4, rtol=1e-4),
    Case("linear_cross_entropy_backward_fp16_softcap", LIB, "cut_cross_entropy", FWD + BWD, build(torch.float16),
         call(20.0, "mean", True), ref(20.0, "mean", True), SHAPES, atol=2e-3, rtol=2e-2),
]
