"""Cache hints of global loads and stores on NVIDIA GPUs (tl.load / tl.store's cache_modifier and
eviction_policy, as Triton lowers them), and volatile loads.

An access with a hint goes through memory.py's predicated inline asm (a constant-true predicate when
it has no mask), which keeps its vector width:

* cache operators: a load's '.cg' is `ld.global.cg`, a store's '.cg' / '.cs' / '.wt' are
  `st.global.cg` / `.cs` / `.wt`. The defaults ('.ca' for loads, '.wb' for stores) are plain
  accesses, as without a hint.
* eviction_policy 'evict_first' / 'evict_last': `.L1::evict_*` on the instruction, and an L2 policy
  `createpolicy.fractional.L2::evict_*.b64 %pol, 1.0` (created once per load or store) passed with
  `.L2::cache_hint`: `ld.global.L1::evict_first.L2::cache_hint.v4.b32 {...}, [p], %pol`. PTX has no
  L1 eviction priority next to a cache operator (ptxas: "cannot be combined"), so a '.cg' load
  with a policy is `ld.global.cg.L2::cache_hint` (it does not allocate in L1 anyway). The L1
  priority needs sm_70, createpolicy sm_80; older targets get what they support.
* volatile=True or cache_modifier='.cv': `ld.volatile.global`, which takes no other hint.

Loads and stores of pointers stay LLVM loads and stores: the hints are dropped there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from llvmlite import ir

from ...ir.core import Op
from ..llvm.scalar import I64
from ..nvidia_targets import arch_number

if TYPE_CHECKING:
    from .lower import NvLowering

__all__ = ["Hint", "PLAIN", "load_hint", "store_hint"]

_LOAD_OPERATORS = {".cg": ".cg"}  # '.ca' is the default caching; '.cv' arrives as volatile=True
_STORE_OPERATORS = {".cg": ".cg", ".cs": ".cs", ".wt": ".wt"}  # '.wb' is the default


@dataclass(frozen=True)
class Hint:
    """How one load or store op reaches memory: `ld{prefix}.global{suffix}...`, plus the L2 policy
    register that `.L2::cache_hint` takes as its last operand."""

    prefix: str = ""
    suffix: str = ""
    policy: ir.Value | None = None

    @property
    def forced(self) -> bool:
        """The access needs the asm path even when it has no mask (LLVM has no such load or store)."""
        return bool(self.prefix or self.suffix)


PLAIN = Hint()


def load_hint(lw: NvLowering, op: Op | None) -> Hint:
    if op is None:
        return PLAIN
    if op.attrs.get("volatile"):  # volatile=True, or cache_modifier=".cv" (the frontend folds it in)
        return Hint(prefix=".volatile")
    return _hint(lw, _LOAD_OPERATORS.get(op.attrs.get("cache") or "", ""), op.attrs.get("eviction"))


def store_hint(lw: NvLowering, op: Op) -> Hint:
    return _hint(lw, _STORE_OPERATORS.get(op.attrs.get("cache") or "", ""), op.attrs.get("eviction"))


def _hint(lw: NvLowering, operator: str, eviction: str | None) -> Hint:
    if eviction not in ("evict_first", "evict_last"):
        return Hint(suffix=operator) if operator else PLAIN
    arch = arch_number(lw.arch)
    suffix = operator
    if not operator and arch >= 70:
        suffix += f".L1::{eviction}"
    policy = None
    if arch >= 80:
        # no side effect: LLVM may share it between accesses and hoist it out of loops
        fty = ir.FunctionType(I64, [])
        policy = lw.b.asm(fty, f"createpolicy.fractional.L2::{eviction}.b64 $0, 1.0;", "=l", [],
                          side_effect=False)
        suffix += ".L2::cache_hint"
    return Hint(suffix=suffix, policy=policy) if suffix else PLAIN
