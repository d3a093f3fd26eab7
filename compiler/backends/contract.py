"""What a backend is: the contract every target's folder implements (docs/architecture.md).

A backend turns the Tile IR of one specialization into a binary through an ordered list of
*stages*, then loads that binary and launches it. The runtime (compiler/runtime/stages.py) runs
the stages in order, one loop for every target: it verifies the Tile IR after each Tile IR stage
when `ANVIL_VERIFY_IR=1` asks, and keeps each stage's output under the stage's name. What the
stages leave behind, an `Artifacts`, is all the disk cache stores and all `Backend.load` needs:
a kernel cached by one process loads in another without running a stage.

A new target is a folder under compiler/backends/ with a `Backend` subclass and one line in
registry.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .. import errors as E
from ..ir import types as T

if TYPE_CHECKING:
    from ..ir.core import Function
    from ..runtime.compiled import CompiledKernel
    from ..runtime.specialize import LaunchOptions

__all__ = ["Stage", "StageContext", "Artifacts", "Backend", "Launcher", "TILE_IR_PREFIX", "type_from_text",
           "parse_signature_type"]

TILE_IR_PREFIX = "tir."  # the artifacts of Tile IR stages are named "tir.<pass>"


@dataclass
class StageContext:
    """What the stages of one compile share. `outputs` holds each finished stage's output by name
    (a stage reads its predecessors' there); `metadata` is what `Backend.load` and the tools need,
    JSON-serialisable, cached with the outputs; `scratch` holds objects passed from one stage to a
    later one that are never cached (an LLVM module, a lowering's state)."""

    fn: Function
    name: str
    symbol: str
    outputs: dict[str, str | bytes | None] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    scratch: dict[str, Any] = field(default_factory=dict)
    live: dict[str, Any] = field(default_factory=dict)  # becomes Artifacts.live


@dataclass(frozen=True)
class Stage:
    """One step from Tile IR to binary.

    `run(ctx)` returns the stage's output, kept under `name`. A Tile IR stage (`tile_ir=True`,
    named "tir.<pass>") rewrites `ctx.fn` in place (or only analyses it) and returns None, for the
    runtime to keep the printed Tile IR after it, or the Tile IR printed its own way (annotated:
    the NVIDIA backend's layouts). Any other stage returns text (LLVM IR, PTX) or bytes (an object file, a
    cubin), or None where it produced nothing (no assembler). `timing`: the `compile_ms` key its
    time adds to; None when the stage records its own finer timings in `ctx.timings`."""

    name: str
    run: Callable[[StageContext], str | bytes | None]
    tile_ir: bool = False
    timing: str | None = None


@dataclass(frozen=True)
class Artifacts:
    """Everything a compile produced: each stage's output in stage order, and the metadata.
    `live` holds what the compiling process may reuse instead of reloading (the CPU's machine code
    already in its JIT); it is never cached, and `Backend.load` works without it."""

    target: str
    name: str
    symbol: str
    outputs: Mapping[str, str | bytes | None]
    metadata: Mapping[str, Any]
    live: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def tile_ir(self) -> str:
        """The Tile IR as lowered: the output of the last Tile IR stage."""
        last = ""
        for k, v in self.outputs.items():
            if k.startswith(TILE_IR_PREFIX) and isinstance(v, str):
                last = v
        return last

    def text(self, name: str) -> str:
        v = self.outputs.get(name)
        if not isinstance(v, str):
            raise KeyError(f"{self.target} kernel {self.name} has no text artifact {name!r}; "
                           f"it has {', '.join(self.outputs)}")
        return v


class Launcher(Protocol):
    """A loaded kernel's launch: `launch(grid, params)`, where `params` holds a value for every
    kernel parameter (constants ignored). A launcher may also have `fast_entry` (the warm-launch
    entry protocol of runtime/fastpath.py)."""

    def launch(self, grid: tuple[int, int, int], params: list[Any]) -> None: ...


class Backend(ABC):
    """A target: options, stages, loading and launching. Stateless; one instance per process."""

    name: ClassVar[str]  # the target family in target names: "cpu", "cuda" (as in "cuda:sm_90a")
    device: ClassVar[str]  # the torch device type its kernels run on

    @abstractmethod
    def canonical_target(self, target: str) -> str:
        """`target` in full ("cuda" -> "cuda:sm_90a"); raise ArgumentError for a bad variant."""

    @abstractmethod
    def options(self, target: str, launch: LaunchOptions) -> Any:
        """The frozen options the stages read: from the launch options, and from anything else
        that changes the binary (the host CPU, code generation knobs). Its repr is part of the
        compile cache key."""

    @abstractmethod
    def stages(self, options: Any) -> list[Stage]:
        """The stages after the target-independent Tile IR passes, in order: the backend's own
        Tile IR passes first, then lowering, each stage's output feeding the next."""

    @abstractmethod
    def binary(self, artifacts: Artifacts) -> Any:
        """The backend's typed view of `artifacts` (`kernel.binary`: symbol, argument types, ...)."""

    @abstractmethod
    def load(self, artifacts: Artifacts) -> Any:
        """The binary in `artifacts`, loaded and ready to launch (a GPU target needs its device)."""

    @abstractmethod
    def launcher(self, kernel: CompiledKernel) -> Launcher:
        """The launch of `kernel` (loading it now or on first launch)."""

    @abstractmethod
    def kernel_metadata(self, artifacts: Artifacts, launch: LaunchOptions) -> dict[str, Any]:
        """Entries of `kernel.metadata` this target adds (shared, n_regs, n_spills, notes, ...)."""

    @abstractmethod
    def asm(self, kernel: CompiledKernel) -> dict[str, Any]:
        """`kernel.asm`: the artifacts under Triton's names ("tir", "llir", "ptx", "cubin", ...)."""


def type_from_text(s: str) -> Any:
    """A kernel argument's type from its printed form (`str(t)`): how metadata stores types."""
    if s.startswith("!ptr<"):
        return T.PointerType(T.scalar(s[5:-1]))
    return parse_signature_type(s)


def parse_signature_type(s: str) -> T.Type:
    """Triton signature syntax: '*fp32' (pointer), 'i32', 'fp16', ..."""
    s = s.strip()
    try:
        if s.startswith("*"):
            inner = s[1:].strip().removeprefix("k")
            return T.PointerType(T.scalar(inner))
        return T.scalar(s)
    except KeyError:
        raise E.ArgumentError(f"unknown type {s!r} in signature; use e.g. '*fp32', '*fp16', '*bf16', "
                              "'*i32', 'i32', 'i64', 'fp32'") from None
