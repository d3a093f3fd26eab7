"""The functions generate_kernel fuses, by name: its tool description lists them.

The lowerings (lowerings.py, rowwise.py) import torch and the compiler's fusion library; the
server process describes the tool without either, from this table. Registering a lowering
under a name not listed here fails (registry.py), and tests/tools/test_generate.py checks
that every name listed has a lowering.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["FUSED", "FUSED_KEYS", "describe", "supported_functions"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# namespace -> names: "torch.add", "F.gelu", "Tensor.sum" (a method), "builtin.abs" (a Python builtin)
FUSED: dict[str, frozenset[str]] = {
    "torch": _words(
        """
        abs absolute add addcdiv addcmul addmm amax amin broadcast_to clamp clip clone cos div divide eq erf
        erfc exp exp2 expm1 flatten ge gt le lerp log log10 log1p log2 log_softmax logical_and logical_not
        logical_or logsumexp lt matmul max maximum mean min minimum mm mul multiply ne neg negative norm
        permute pow reciprocal relu reshape rsqrt sigmoid sin softmax sqrt square squeeze std sub subtract
        sum t tanh transpose unsqueeze var where
        """
    ),
    "F": _words(
        """
        celu elu gelu hardsigmoid hardswish hardtanh layer_norm leaky_relu linear log_softmax logsigmoid
        mish normalize relu relu6 rms_norm selu sigmoid silu softmax softmin softplus softsign tanh
        tanhshrink
        """
    ),
    "special": _words("erf erfc exp2 expit expm1 log1p logsumexp ndtr softmax"),
    "linalg": _words("norm vector_norm"),
    "math": _words("ceil cos erf exp fabs floor log log10 log2 sin sqrt tan tanh"),
    "builtin": _words("abs float int max min"),
    "Tensor": _words(
        """
        abs add amax amin bfloat16 bool broadcast_to clamp clip clone contiguous cos dim div double eq erf
        exp exp2 expand expand_as expm1 flatten float ge gt half int le lerp log log10 log1p log2
        log_softmax logical_and logical_not logical_or logsumexp long lt masked_fill matmul max maximum mean
        min minimum mm mul ne neg norm numel permute pow reciprocal relu reshape rsqrt sigmoid sin size
        softmax sqrt square squeeze std sub sum t tanh to transpose type_as unsqueeze var view where
        """
    ),
}
FUSED_KEYS: frozenset[str] = frozenset(f"{space}.{name}" for space, names in FUSED.items() for name in names)


def describe(keys: Iterable[str]) -> str:
    """Every function of ``keys`` ("torch.add", "Tensor.sum", ...), as a caller writes it."""
    groups: dict[str, list[str]] = {"torch": [], "F": [], "special": [], "linalg": [], "Tensor": [], "math": []}
    for key in keys:
        space, _, name = key.partition(".")
        if space in groups:
            groups[space].append(name)
    parts = [f"{space}.{{{', '.join(sorted(names))}}}" for space, names in groups.items()
             if names and space != "Tensor"]
    parts.append("tensor methods .{" + ", ".join(sorted(groups["Tensor"])) + "}")
    return "; ".join(parts) + "; operators + - * / ** @ < <= > >= == != and unary -, ~"


def supported_functions() -> str:
    """Every function generate_kernel fuses, as a caller writes it."""
    return describe(FUSED_KEYS)
