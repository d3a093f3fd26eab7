"""`torch.compile(model, backend="anvil")`: fused Anvil kernels for a model's elementwise chains and
row reductions, everything else left to torch.

Part 1, a LayerNorm -> GELU -> Linear module: the kernels eager torch runs per call
(native_layer_norm, gelu, addmm), then the same module compiled with the anvil backend: the layer
norm and the GELU become one generated kernel (its source is printed: the backend writes each
kernel it generates to ANVIL_FUSION_DUMP), the matmul stays torch's addmm. The output is checked
against eager.

Part 2, training: a small pre-norm transformer (embedding, attention + GELU MLP block with
LayerNorms and residuals, dropout 0, a vocabulary head with cross-entropy) takes a few AdamW steps
compiled with the anvil backend, forward and backward, and the same steps eagerly from the same
initial weights; the losses and every gradient are compared step by step.

    python examples/torch_compile.py
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

from compiler.torch import fusion_dump

# ------------------------------------------------------------------------------------------ tools
_ALLOCATIONS = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::resolve_conj", "aten::resolve_neg"}


def _overload(name: str) -> Any:
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    return None if packet is None else getattr(packet, packet.overloads()[0])


def _is_kernel(name: str) -> bool | None:
    """True: an ATen op with a kernel of its own; None: a composite op (made of others); False: a
    view or an allocation (no computation)."""
    op = _overload(name)
    if name in _ALLOCATIONS or op is None or op.is_view:
        return False
    return None if torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd") else True


def kernels_per_call(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The kernels one call of `fn` runs, in order: ATen ops that compute (not views, allocations or
    composite ops: their parts are listed instead), and each fused group as `fused_... (anvil)`."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:  # fused calls are ranges named fused_...
        fn(*args)
    out: list[str] = []

    def visit(event: Any) -> None:
        if event.name.startswith("fused_"):
            out.append(f"{event.name} (anvil)")
            return
        kernel = _is_kernel(event.name) if event.name.startswith("aten::") else None
        if kernel:
            out.append(event.name)
        elif kernel is None:
            for child in event.cpu_children:
                visit(child)

    for event in prof.events():
        if event.cpu_parent is None:
            visit(event)
    return out


# ------------------------------------------------------------------------------------------ part 1
class NormGeluLinear(nn.Module):
    def __init__(self, dim: int, out: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Linear(dim, out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.norm(x)))


def kernels_before_and_after(shape: tuple[int, ...] = (8, 64, 256), out: int = 128) -> dict[str, Any]:
    """NormGeluLinear eager and compiled with the anvil backend (inference): the kernels each runs
    per call, the generated kernels' sources, and the largest difference between the outputs."""
    torch.manual_seed(0)
    model = NormGeluLinear(shape[-1], out)
    x = torch.randn(shape)
    compiled = torch.compile(model, backend="anvil")
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp, fusion_dump(Path(tmp)):
        want = model(x)
        got = compiled(x)  # compiles: the kernels are generated here
        sources = {p.stem: p.read_text() for p in sorted(Path(tmp).glob("*.py"))}
        eager_kernels = kernels_per_call(model, x)
        anvil_kernels = kernels_per_call(compiled, x)
    return {"eager": eager_kernels, "anvil": anvil_kernels, "sources": sources,
            "max_diff": (got - want).abs().max().item()}


# ------------------------------------------------------------------------------------------ part 2
class Block(nn.Module):
    """Pre-norm transformer block: x + attn(LN(x)), then x + MLP(LN(x)) with a GELU MLP; no dropout."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, L, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.0)
        x = x + self.proj(a.transpose(1, 2).reshape(B, L, D))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TinyLM(nn.Module):
    """Token embedding + learned positions -> one Block -> LayerNorm -> vocabulary head; returns the
    cross-entropy of next-token targets."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, hidden: int = 128, max_len: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(0.02 * torch.randn(max_len, dim))
        self.block = Block(dim, heads, hidden)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:tokens.shape[1]]
        logits = self.head(self.norm(self.block(x)))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def train(model: nn.Module, step_fn: Callable[..., torch.Tensor], batches: list[tuple[torch.Tensor, torch.Tensor]],
          lr: float = 1e-2) -> tuple[list[float], list[dict[str, torch.Tensor]]]:
    """One AdamW step per batch; the loss and the gradients (before the step) of each step."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses, grads = [], []
    for tokens, targets in batches:
        opt.zero_grad(set_to_none=True)
        loss = step_fn(tokens, targets)
        loss.backward()
        losses.append(loss.item())
        grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None})
        opt.step()
    return losses, grads


def training_eager_vs_anvil(steps: int = 3, batch: int = 4, seq: int = 16, vocab: int = 64) -> dict[str, Any]:
    """The same AdamW steps of TinyLM (on one batch, so the loss falls) from the same initial weights,
    eagerly and compiled with the anvil backend: the losses of both, and per step the largest
    gradient difference over all parameters, absolute and relative to the largest gradient of that
    parameter. (Weights are not compared after the steps: where a gradient is zero in exact
    arithmetic, e.g. the key bias's, both sides hold rounding noise, and Adam's division by
    sqrt(v) + eps turns different noise into updates that differ by up to lr.)"""
    torch.manual_seed(0)
    eager = TinyLM(vocab=vocab)
    fused = copy.deepcopy(eager)
    data = torch.randint(0, vocab, (batch, seq + 1))
    batches = [(data[:, :-1], data[:, 1:])] * steps
    eager_losses, eager_grads = train(eager, eager, batches)
    fused_losses, fused_grads = train(fused, torch.compile(fused, backend="anvil"), batches)
    abs_diff, rel_diff = [], []
    for ge, gf in zip(eager_grads, fused_grads, strict=True):
        assert ge.keys() == gf.keys()
        abs_diff.append(max((gf[n] - ge[n]).abs().max().item() for n in ge))
        rel_diff.append(max(((gf[n] - ge[n]).abs().max() / ge[n].abs().max().clamp(min=1e-30)).item() for n in ge))
    return {"eager_losses": eager_losses, "anvil_losses": fused_losses, "grad_abs_diff": abs_diff,
            "grad_rel_diff": rel_diff, "n_grads": len(eager_grads[0])}


def main() -> None:
    print("== LayerNorm -> GELU -> Linear, inference ==")
    r = kernels_before_and_after()
    print(f"eager: {len(r['eager'])} kernels per call: {', '.join(r['eager'])}")
    print(f"anvil: {len(r['anvil'])} kernels per call: {', '.join(r['anvil'])}")
    for name, source in r["sources"].items():
        print(f"--- generated kernel {name} ---\n{source.rstrip()}")
    print(f"max |anvil - eager| = {r['max_diff']:.2e}; matches eager: {r['max_diff'] < 1e-4}")

    print("\n== pre-norm transformer block, AdamW training steps ==")
    t = training_eager_vs_anvil()
    losses = list(zip(t["eager_losses"], t["anvil_losses"], strict=True))
    for i, (le, lf) in enumerate(losses):
        print(f"step {i}: loss eager {le:.6f}  anvil {lf:.6f}   max grad diff {t['grad_abs_diff'][i]:.2e} "
              f"(relative {t['grad_rel_diff'][i]:.2e}, {t['n_grads']} tensors)")
    ok = max(t["grad_rel_diff"]) < 1e-4 and all(abs(a - b) < 1e-5 for a, b in losses)
    print(f"losses and gradients match eager: {ok}")

if __name__ == "__main__":
    main()
