"""Differential testing: the same kernel text run by Triton's interpreter and by Anvil's CPU backend.

A `Case` is kernel source text plus the arguments of one launch. Each test module builds its
cases at import time and registers them here; the first differential test to run starts ONE
interpreter subprocess (`diff_driver.py`, `TRITON_INTERPRET=1` set before `triton` is imported)
that runs the cases of every selected test, in test order, writing results in chunks while the
test process compiles and runs the Anvil side, and one subprocess that compiles Anvil kernels
ahead into Anvil's disk cache (see `_Session`).

Where Triton's interpreter is itself wrong (its bf16 arithmetic, for one), a case carries a torch
`reference` and a `reason`; the interpreter does not run it and Anvil is compared with torch.

Inputs are random but seeded per case (crc32 of its name). Outputs are poisoned (NaN, sentinel
integers) before each launch, and most outputs are longer than the masked range the kernel may
write, so a stray store shows up as a mismatch.

Test-only environment knobs:
- ANVIL_DIFF_SEED=<int> (default 0): reseed every case's inputs, to explore.
- ANVIL_DIFF_WARM=0 (default 1): do not compile ahead in a second process.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "Case",
    "register",
    "cases",
    "gen",
    "rand_tensor",
    "poison",
    "DTYPES",
    "HEADER",
    "run_anvil",
    "anvil_function",
    "compare",
    "session",
    "case_ids",
    "check_case",
]

HEADER = "import triton\nimport triton.language as tl\n\n"

DTYPES: dict[str, torch.dtype] = {
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "uint32": torch.uint32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}

_DRIVER = Path(__file__).with_name("diff_driver.py")
_CHUNK = 16  # cases per result file the driver writes


@dataclass
class Case:
    """One launch of one kernel, compared between the interpreter (or `reference`) and Anvil."""

    name: str
    source: str
    kernel: str
    args: list[Any]
    grid: tuple[int, ...]
    outputs: Sequence[int]
    meta: dict[str, Any] = field(default_factory=dict)
    # Per output (or one for all): None compares exactly (bitwise for floats, NaN == NaN),
    # (rtol, atol) compares with torch.testing.assert_close.
    tol: Any = None
    # A torch reference used instead of the interpreter, and why the interpreter cannot be used.
    reference: Callable[[list[Any]], list[torch.Tensor]] | None = None
    reason: str = ""
    # Both compilers must reject the kernel (the message is not compared).
    expect_error: bool = False
    # Output positions compared as multisets (sorted): only the set of values is deterministic.
    unordered: Sequence[int] = ()

    def __post_init__(self) -> None:
        if self.reference is not None and not self.reason:
            raise ValueError(f"{self.name}: a torch reference needs a reason")


_REGISTRY: dict[str, Case] = {}


def register(cs: Sequence[Case]) -> list[Case]:
    for c in cs:
        if c.name in _REGISTRY and _REGISTRY[c.name] is not c:
            raise ValueError(f"duplicate differential case {c.name}")
        _REGISTRY[c.name] = c
    return list(cs)


def cases() -> dict[str, Case]:
    return _REGISTRY


def case_ids(cs: Sequence[Case]) -> list[str]:
    return [c.name for c in cs]


# ---------------------------------------------------------------------------------- inputs
def gen(name: str) -> torch.Generator:
    """A generator seeded from the case name (and ANVIL_DIFF_SEED when set)."""
    seed = zlib.crc32(name.encode()) ^ int(os.environ.get("ANVIL_DIFF_SEED", "0"))
    return torch.Generator().manual_seed(seed)


def rand_tensor(
    shape: Sequence[int] | int,
    dtype: torch.dtype,
    g: torch.Generator,
    *,
    lo: float | None = None,
    hi: float | None = None,
    nonzero: bool = False,
    scale: float = 1.0,
) -> torch.Tensor:
    """Random values of `dtype`: integers over [lo, hi] (default: the whole range), floats normal*scale
    (or uniform over [lo, hi])."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        if lo is not None and hi is not None:
            x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
        else:
            x = torch.randn(shape, generator=g, dtype=torch.float64) * scale
        x = x.to(dtype)
        if nonzero:
            x = torch.where(x == 0, torch.ones((), dtype=dtype), x)
        return x
    info = torch.iinfo(dtype)
    a = int(info.min if lo is None else lo)
    b = int(info.max if hi is None else hi)
    if dtype == torch.uint32 or (dtype == torch.int64 and (a < -(2**62) or b > 2**62)):
        # torch.randint cannot span these ranges: draw the bits.
        bits = torch.randint(-(2**63), 2**63 - 1, shape, generator=g, dtype=torch.int64)
        span = b - a + 1
        if span >= 2**63:
            x = bits if dtype == torch.int64 else (bits & 0xFFFFFFFF)
        else:
            x = (bits.abs() % span) + a
        x = x.to(dtype) if dtype != torch.uint32 else x.to(torch.uint32)
    else:
        x = torch.randint(a, b + 1, shape, generator=g, dtype=torch.int64).to(dtype)
    if nonzero:
        x = torch.where(x == 0, torch.ones((), dtype=dtype), x)
    return x


def poison(shape: Sequence[int] | int, dtype: torch.dtype) -> torch.Tensor:
    """An output buffer filled with a value no kernel here computes by accident."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool)
    if dtype == torch.uint32:
        return torch.full(shape, 0x5A5A5A5A, dtype=torch.int64).to(torch.uint32)
    info = torch.iinfo(dtype)
    return torch.full(shape, info.min + 0x5A, dtype=dtype)


def _clone_args(args: Sequence[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


# ---------------------------------------------------------------------------------- the two sides
def _payload(c: Case) -> dict[str, Any]:
    return dict(
        name=c.name, source=c.source, kernel=c.kernel, args=c.args, grid=c.grid, meta=c.meta, outputs=list(c.outputs)
    )


class _Session:
    """The subprocesses of one test session, started when the first differential test runs.

    - the interpreter: runs the selected cases in test order and writes results in chunk files;
    - the warmer: compiles the Anvil kernels of the selected cases, last first, into Anvil's disk
      cache, until it meets the test process coming the other way (compiling, not the
      interpreter, is what takes time, and this spreads it over two cores).
    """

    def __init__(self, selected: Sequence[str]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="anvil-diff-"))
        chosen = [_REGISTRY[n] for n in selected if n in _REGISTRY]
        interp = [c for c in chosen if c.reference is None]
        self.order = {c.name: i for i, c in enumerate(interp)}
        self.anvil_order = {c.name: i for i, c in enumerate(chosen)}
        self.loaded: dict[int, dict[str, Any]] = {}
        torch.save([_payload(c) for c in interp], self.dir / "batch.pt")
        torch.save([_payload(c) for c in chosen if not c.expect_error], self.dir / "anvil.pt")
        self.err = open(self.dir / "stderr.txt", "w")  # noqa: SIM115 - lives as long as the processes
        self.proc = subprocess.Popen(
            [sys.executable, str(_DRIVER), "interpret", str(self.dir), str(_CHUNK)],
            stdout=self.err,
            stderr=self.err,
            env=dict(os.environ, TRITON_INTERPRET="1"),
        )
        self.warmer = None
        if (
            os.environ.get("ANVIL_CACHE", "1").lower() not in ("0", "false", "no", "off")
            and os.environ.get("ANVIL_DIFF_WARM", "1") != "0"
            and "PYTEST_XDIST_WORKER" not in os.environ  # a worker runs a subset: order unknown
        ):
            env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
            self.warmer = subprocess.Popen(
                [sys.executable, str(_DRIVER), "warm", str(self.dir)], stdout=self.err, stderr=self.err, env=env
            )
        atexit.register(self.close)

    def close(self) -> None:
        """Stop this session's subprocesses (the warmer may still be compiling) and remove files."""
        for p in (self.proc, self.warmer):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def started(self, name: str) -> None:
        """Tell the warmer where the test process is."""
        i = self.anvil_order.get(name)
        if i is not None and self.warmer is not None:
            tmp = self.dir / "progress.tmp"
            tmp.write_text(str(i))
            os.replace(tmp, self.dir / "progress")

    def result(self, name: str, timeout: float = 600.0) -> dict[str, Any]:
        k = self.order[name] // _CHUNK
        if k not in self.loaded:
            path = self.dir / f"chunk{k}.pt"
            deadline = time.monotonic() + timeout
            while not path.exists():
                if self.proc.poll() is not None and not path.exists():
                    raise RuntimeError(
                        f"the Triton interpreter driver exited ({self.proc.returncode}) "
                        f"before case {name}:\n{(self.dir / 'stderr.txt').read_text()[-4000:]}"
                    )
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no interpreter result for {name} after {timeout}s")
                time.sleep(0.01)
            self.loaded[k] = torch.load(path, weights_only=False)
        return self.loaded[k][name]


_SESSION: _Session | None = None


def session(selected: Sequence[str]) -> _Session:
    """The session's subprocesses, started on first use with the selected case names."""
    global _SESSION
    if _SESSION is None:
        _SESSION = _Session(selected)
    return _SESSION


_ANVIL_FNS: dict[tuple[str, str], Any] = {}


def anvil_function(case: Case) -> Any:
    import compiler

    key = (case.source, case.kernel)
    fn = _ANVIL_FNS.get(key)
    if fn is None:
        fn = compiler.compile_source(case.source, kernel=case.kernel, filename=f"<diff:{case.name}>")
        _ANVIL_FNS[key] = fn
    return fn


def run_anvil(case: Case) -> list[torch.Tensor]:
    args = _clone_args(case.args)
    anvil_function(case)[case.grid](*args, **case.meta)
    return [args[i] for i in case.outputs]


# ---------------------------------------------------------------------------------- comparing
def _bits(t: torch.Tensor) -> torch.Tensor:
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width) if t.dtype != torch.bool else t


def compare(name: str, got: torch.Tensor, want: torch.Tensor, tol: Any) -> None:
    """Exact (bitwise for floats, NaN == NaN) when `tol` is None, else assert_close(rtol, atol)."""
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    if tol is None:
        if got.dtype.is_floating_point:
            gn, wn = got.isnan(), want.isnan()
            same = (_bits(got) == _bits(want)) | (gn & wn)
        else:
            same = _bits(got) == _bits(want)
        if not bool(same.all()):
            bad = (~same).nonzero()
            first = tuple(bad[0].tolist())
            raise AssertionError(
                f"{name}: {bad.shape[0]} of {got.numel()} elements differ; first at {first}: "
                f"anvil {got[first].item()!r} vs reference {want[first].item()!r}\n"
                f"anvil: {got.flatten()[:12].tolist()}\nref:   {want.flatten()[:12].tolist()}"
            )
        return
    rtol, atol = tol
    if got.dtype in (torch.uint32, torch.uint64):
        got, want = got.to(torch.float64), want.to(torch.float64)
    torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{name}: {m}")


def _sorted(t: torch.Tensor) -> torch.Tensor:
    wide = t.flatten().to(torch.int64) if t.dtype in (torch.uint32, torch.uint16) else t.flatten()
    return wide.sort().values.to(t.dtype)


def _tol(case: Case, i: int) -> Any:
    t = case.tol
    if isinstance(t, list):
        return t[i]
    return t


def check_case(case: Case, selected: Sequence[str]) -> None:
    """Run `case` on Anvil and compare with the interpreter (or the torch reference)."""
    sess = session(selected)
    sess.started(case.name)
    if case.expect_error:
        res = sess.result(case.name)
        assert "error" in res, f"{case.name}: Triton's interpreter accepted a kernel expected to be rejected"
        try:
            run_anvil(case)
        except Exception:  # noqa: BLE001 - any compile-time rejection will do
            return
        raise AssertionError(f"{case.name}: Anvil accepted a kernel Triton rejects ({res['error']})")
    if case.reference is not None:
        want = case.reference(_clone_args(case.args))
        label = f"{case.name} (vs torch: {case.reason})"
    else:
        res = sess.result(case.name)
        if "error" in res:
            raise AssertionError(f"{case.name}: Triton's interpreter failed: {res['error']}")
        want = res["outputs"]
        label = case.name
    got = run_anvil(case)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if i in case.unordered:
            g, w = _sorted(g), _sorted(w)
        compare(f"{label} output {i} (arg {case.outputs[i]})", g, w, _tol(case, i))
