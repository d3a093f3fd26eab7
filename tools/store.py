"""Compiled kernels by id: what was asked (a CompileSpec) and what the compiler produced.

A kernel_id is a content hash of everything that changes the binary: source, kernel name,
argument types, constexprs, target, options, and the compiler's version. The same input always
gives the same id, so a repeated compile is a lookup. The store keeps the most recently used
records (``Limits.max_kernels``); an id that fell out is reported as unknown.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tools.specs import ConstexprValue


@dataclass(frozen=True)
class CompileSpec:
    """The inputs of one compilation (hashable, JSON-serialisable)."""

    source: str
    kernel_name: str | None
    signature: dict[str, str]  # types the caller gave, by parameter
    hints: dict[str, str]  # types implied by launch args, used where the caller gave none
    constexprs: dict[str, ConstexprValue]
    target: str
    num_warps: int | None = None
    num_stages: int | None = None
    maxnreg: int | None = None
    cluster_dims: list[int] | None = None
    debug: bool = False
    compiler_version: str = ""

    @property
    def kernel_id(self) -> str:
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return "k" + hashlib.sha256(canonical.encode()).hexdigest()[:20]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileSpec:
        return cls(**data)

    def with_changes(self, **changes: Any) -> CompileSpec:
        return replace(self, **changes)


@dataclass
class KernelRecord:
    """A successful compilation: the spec plus what the compiler reported."""

    spec: CompileSpec
    kernel_name: str
    arg_names: list[str]
    constexpr_names: list[str]
    signature: dict[str, str]  # resolved type of every runtime parameter
    compile_ms: dict[str, float]
    resources: dict[str, Any]
    diagnostics: list[dict[str, Any]]
    asm: dict[str, str]
    # loads, stores and atomics without a mask whose address depends on the program id (kind, line, column,
    # pointer, source_line): named when a launch of the kernel crashes
    unmasked_accesses: list[dict[str, Any]] = field(default_factory=list)
    created: float = field(default_factory=time.time)
    # the id of the compilation as resolved (every type known, the kernel named): the same however
    # the types were given; empty until the tools set it (then it is the record's kernel_id)
    resolved_id: str = ""

    @property
    def kernel_id(self) -> str:
        return self.resolved_id or self.spec.kernel_id

    @property
    def runtime_args(self) -> list[str]:
        return [a for a in self.arg_names if a not in self.constexpr_names]

    def launch_info(self) -> dict[str, Any]:
        """What a worker needs to launch this kernel (no artifacts)."""
        return {
            "kernel_id": self.kernel_id,
            "source": self.spec.source,
            "kernel_name": self.kernel_name,
            "arg_names": self.arg_names,
            "constexpr_names": self.constexpr_names,
            "signature": self.signature,
            "constexprs": self.spec.constexprs,
            "target": self.spec.target,
            "num_warps": self.spec.num_warps,
            "num_stages": self.spec.num_stages,
            "maxnreg": self.spec.maxnreg,
            "cluster_dims": self.spec.cluster_dims,
            "debug": self.spec.debug,
            "unmasked_accesses": self.unmasked_accesses,
        }


class KernelStore:
    """An LRU map kernel_id -> KernelRecord, safe to use from several threads."""

    def __init__(self, max_kernels: int = 512, max_bytes: int = 1 << 30) -> None:
        self.max_kernels = max_kernels
        self.max_bytes = max_bytes  # of the kept records' source and artifact text together
        self._records: OrderedDict[str, KernelRecord] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, kernel_id: str) -> KernelRecord | None:
        with self._lock:
            record = self._records.get(kernel_id)
            if record is not None:
                self._records.move_to_end(kernel_id)
            return record

    def put(self, record: KernelRecord, also: str | None = None) -> None:
        """Keep `record` under its kernel_id, and under `also` (the id of a request that resolved to
        the same compilation: its types given another way)."""
        with self._lock:
            for key in (also, record.kernel_id):
                if key is not None:
                    self._records[key] = record
                    self._records.move_to_end(key)
            while len(self._records) > self.max_kernels:
                self._records.popitem(last=False)
            # the least recently used go until the rest fit max_bytes (the newest stays, whatever its size)
            sizes = {id(r): _size(r) for r in self._records.values()}
            total = sum(sizes.values())
            while total > self.max_bytes and len(sizes) > 1:
                _, old = self._records.popitem(last=False)
                if all(r is not old for r in self._records.values()) and id(old) in sizes:
                    total -= sizes.pop(id(old))

    def recent(self) -> list[KernelRecord]:
        """Every record once, most recently used first (without changing the order)."""
        with self._lock:
            seen: set[int] = set()
            out = []
            for record in reversed(self._records.values()):
                if id(record) not in seen:
                    seen.add(id(record))
                    out.append(record)
            return out

    def __len__(self) -> int:
        with self._lock:
            return len({id(r) for r in self._records.values()})


def _size(record: KernelRecord) -> int:
    """Characters of a record's source and artifacts: what it holds in memory, roughly."""
    return len(record.spec.source) + sum(len(v) for v in record.asm.values())
