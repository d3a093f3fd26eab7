"""Debug-mode bounds checks in the NVIDIA backend (no GPU needed): every global load, store and
atomic of a debug kernel is checked against its tensor argument's bounds and predicated on the
check; non-debug kernels carry nothing of it; the PTX assembles with ptxas. The host side of the
error record gives the CPU backend's message (the record is simulated here; tests/gpu/
test_nvidia_debug.py runs the real thing)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import compiler.language as tl
from compiler import jit
from compiler.backends.nvidia import debug_host
from compiler.backends.nvidia.debug import DEBUG_LOCS, ERR_WORDS
from compiler.backends.nvidia.toolchain import find_ptxas
from compiler.errors import OutOfBoundsError
from compiler.runtime.launch import compile_for_signature

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (CUDA toolkit or triton package)")


@jit
def copy_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=-1.0) * 2, mask=offs < n)


@jit
def unmasked_k(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) + 1)


@jit
def rows_k(x_ptr, y_ptr, stride, M: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, M)[:, None]
    c = tl.arange(0, N)[None, :]
    tl.store(y_ptr + r * N + c, tl.load(x_ptr + r * stride + c))


@jit
def scalar_k(x_ptr, y_ptr, i):
    tl.store(y_ptr + i, tl.load(x_ptr + i) + 1)


@jit
def atomics_k(x_ptr, hist_ptr, lock_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_add(hist_ptr + (x & 15), 1, mask=offs < n)
    tl.atomic_cas(lock_ptr + (offs & 3), 0, 1)
    tl.atomic_cas(lock_ptr + 4, 0, 1)
    tl.atomic_max(total_ptr, tl.sum(x, axis=0))


@jit
def loop_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    p = x_ptr + tl.arange(0, BLOCK)
    for i in range(n):
        tl.store(y_ptr + i * BLOCK + tl.arange(0, BLOCK), tl.load(p))
        p += BLOCK


@jit
def swap_k(a_ptr, b_ptr, n):
    p = a_ptr
    for i in range(n):
        tl.store(p + i, 1.0)
        p = b_ptr


CASES: dict[str, tuple[Any, dict[str, str], dict[str, Any]]] = {
    "copy_fp32": (copy_k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32:16"}, {"BLOCK": 1024}),
    "copy_fp16": (copy_k, {"x_ptr": "*fp16", "y_ptr": "*fp16", "n": "i32"}, {"BLOCK": 256}),
    "copy_i8": (copy_k, {"x_ptr": "*i8", "y_ptr": "*i8", "n": "i32:16"}, {"BLOCK": 512}),
    "unmasked": (unmasked_k, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 512}),
    "rows": (rows_k, {"x_ptr": "*bf16", "y_ptr": "*bf16", "stride": "i32:16"}, {"M": 16, "N": 64}),
    "scalar": (scalar_k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "i": "i32"}, {}),
    "atomics": (atomics_k, {"x_ptr": "*i32", "hist_ptr": "*i32", "lock_ptr": "*i32", "total_ptr": "*i32",
                            "n": "i32"}, {"BLOCK": 256}),
    "loop": (loop_k, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32"}, {"BLOCK": 128}),
}


def _compile(name: str, debug: bool, arch: str = "sm_90a") -> Any:
    fn, sig, cx = CASES[name]
    return compile_for_signature(fn, sig, cx, f"cuda:{arch}", 4, 3, debug)


def _data_accesses(ptx: str) -> list[str]:
    """The global loads and stores of tensor data (not of the debug bounds table or error record)."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    return [ln for ln in lines if re.search(r"\b(ld|st)\.global", ln) and "__anvil_debug" not in ln]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_debug_kernels_assemble(name: str, arch: str) -> None:
    ck = _compile(name, True, arch)
    ptx = ck.asm["ptx"]
    assert ck.asm["cubin"][:4] == b"\x7fELF"
    nargs = len(ck.arg_types)
    assert f".visible .global .align 8 .b8 __anvil_debug_bounds[{32 * nargs}];" in ptx
    assert ".visible .global .align 8 .b8 __anvil_debug_err[64];" in ptx
    assert ck.metadata["debug"] is True
    assert "vprintf" not in ptx  # no call (device_assert prints; a bounds check only records)


@pytest.mark.parametrize("name", sorted(CASES))
def test_non_debug_kernels_carry_no_checks(name: str) -> None:
    ptx = _compile(name, False).asm["ptx"]
    assert "__anvil_debug" not in ptx and "vprintf" not in ptx


@pytest.mark.parametrize("name", ["copy_fp32", "copy_fp16", "copy_i8", "unmasked", "rows", "scalar", "loop"])
def test_every_data_access_is_predicated_on_its_check(name: str) -> None:
    """Element by element (no vectors: an access partly outside its tensor still does the inside
    part) and each under a predicate that includes the bounds check."""
    ptx = _compile(name, True).asm["ptx"]
    acc = _data_accesses(ptx)
    assert acc, "the kernel accesses global memory"
    assert not [a for a in acc if re.search(r"\.v[248]\.", a)], "debug accesses are element by element"
    assert all(a.startswith("@") for a in acc), [a for a in acc if not a.startswith("@")]


def test_non_debug_accesses_stay_vectorized() -> None:
    acc = _data_accesses(_compile("unmasked", False).asm["ptx"])
    assert acc and all(".v4." in a and not a.startswith("@") for a in acc)


def _bounds_offsets(ptx: str) -> set[int]:
    return {int(m or 0) for m in re.findall(r"\[__anvil_debug_bounds(?:\+(\d+))?\]", ptx)}


@pytest.mark.parametrize("name,args", [("copy_fp32", {0, 1}), ("atomics", {0, 1, 2, 3}), ("scalar", {0, 1}),
                                       ("loop", {0, 1})])
def test_bounds_of_each_accessed_tensor_are_loaded_once(name: str, args: set[int]) -> None:
    ptx = _compile(name, True).asm["ptx"]
    offsets = _bounds_offsets(ptx)
    assert offsets == {32 * a + k for a in args for k in (0, 8)}
    assert len(re.findall(r"\[__anvil_debug_bounds", ptx)) == len(offsets)


def test_each_access_records_its_own_location() -> None:
    ck = _compile("atomics", True)
    locs = DEBUG_LOCS[ck.binary.symbol]
    assert len({loc.line for loc in locs}) == len(locs) == 5, locs  # load, atomic_add, two atomic_cas, atomic_max
    assert all(loc.file == __file__ for loc in locs)
    assert len(re.findall(r"atom(\.\w+)*\.cas\.b64\s+%rd\d+, \[__anvil_debug_err\]", ck.asm["ptx"])) == 5


def test_a_pointer_swapped_for_another_tensor_in_a_loop_is_checked_against_every_tensor() -> None:
    """Its provenance is ambiguous (a_ptr, then b_ptr): checking it against either alone would be
    wrong, so it must lie inside one of the kernel's tensors (or a host descriptor's tensor)."""
    ptx = compile_for_signature(swap_k, {"a_ptr": "*fp32", "b_ptr": "*fp32", "n": "i32"}, {}, "cuda:sm_90a", 4, 3,
                                True).asm["ptx"]
    assert _bounds_offsets(ptx) == {32 * a + k for a in (0, 1) for k in (0, 8, 16, 24)}
    ptx = _compile("loop", True).asm["ptx"]  # p += BLOCK keeps x_ptr's provenance: its own range only
    offsets = _bounds_offsets(ptx)
    assert 0 in offsets and all(o % 32 in (0, 8) for o in offsets)  # no union: no descriptor ranges read


@jit
def forged_k(addr, val):
    p = addr.to(tl.int64).to(tl.pointer_type(tl.int32), bitcast=True)
    tl.store(p, tl.load(p + 1) + val)
    tl.atomic_add(p + 2, val)


def test_a_pointer_made_from_an_integer_with_no_tensor_to_be_inside_is_never_accessed() -> None:
    """No tensor argument: no address is inside one, so each access is recorded as out of bounds
    and not performed (predicated on a constant false, or gone), rather than performed unchecked."""
    ptx = compile_for_signature(forged_k, {"addr": "i64", "val": "i32"}, {}, "cuda:sm_90a", 4, 3, True).asm["ptx"]
    assert len(re.findall(r"cas\.b64\s+%rd\d+, \[__anvil_debug_err\]", ptx)) == 3  # load, store, atomic_add
    never = set(re.findall(r"mov\.pred\s+(%p\d+), 0;", ptx))
    data = [ln for ln in ptx.splitlines() if re.search(r"\b(ld|st|atom|red)\.(\w+\.)*global", ln)
            and "__anvil_debug_err" not in ln and "ld.param" not in ln]
    assert data and all(re.match(r"\s*@(%p\d+) ", ln) and re.match(r"\s*@(%p\d+) ", ln)[1] in never  # type: ignore[index]
                        for ln in data), data


# ---------------------------------------------------------------- host side, simulated record

@jit(debug=True)
def _sim_oob_store(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0)


@jit(debug=True)
def _oob_second(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + 3, tl.load(x_ptr + offs))


class _Loaded:
    module = None  # no module: write_debug_bounds keeps the table on the host


def _simulate(monkeypatch: pytest.MonkeyPatch, ck: Any, params: list[Any], words: list[int]) -> OutOfBoundsError:
    monkeypatch.setattr(debug_host, "_global", lambda module, name="": None)
    monkeypatch.setattr(debug_host, "read_debug_record", lambda kernel, clear=True: words)
    monkeypatch.setattr(ck.launcher, "_fn", _Loaded())
    debug_host.write_debug_bounds(ck, params)
    with pytest.raises(OutOfBoundsError) as info:
        debug_host.check_debug_record(ck)
    return info.value


def _record(ck: Any, op_line: int, pid: tuple[int, int, int], addr: int, arg: int) -> list[int]:
    locs = DEBUG_LOCS[ck.binary.symbol]
    loc_id = next(i + 1 for i, loc in enumerate(locs) if loc.line == op_line)
    return [1 << 32 | loc_id, *pid, addr, arg + 1] + [0] * (ERR_WORDS - 6)


def test_recorded_violation_gives_the_cpu_backends_error(monkeypatch: pytest.MonkeyPatch) -> None:
    backing = torch.zeros(40)
    x = backing[:10]
    with pytest.raises(OutOfBoundsError) as cpu:
        _sim_oob_store[(1,)](x, 10, BLOCK=16)
    ck = compile_for_signature(_sim_oob_store, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 16}, "cuda:sm_90a", 4, 3, True)
    (store,) = DEBUG_LOCS[ck.binary.symbol]  # the kernel's one access
    gpu = _simulate(monkeypatch, ck, [x, 10, 16], _record(ck, store.line, (0, 0, 0), x.data_ptr() + 40, 0))
    assert str(gpu) == str(cpu.value)
    assert "10 elements from the start of 'x_ptr' (which holds 10 elements)" in str(gpu)
    table = list(debug_host._LAUNCHES[ck].table)
    # per argument: its range, then a host descriptor's tensor's (none here); n is no tensor
    assert table == [x.data_ptr(), x.data_ptr() + 40, 0, 0, 0, 2**64 - 1, 0, 0]


def test_message_names_the_tensor_the_pointer_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = torch.randn(8), torch.zeros(8)
    ck = compile_for_signature(_oob_second, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 8}, "cuda:sm_90a", 4, 3,
                               True)
    locs = DEBUG_LOCS[ck.binary.symbol]
    store_line = max(loc.line for loc in locs)
    err = _simulate(monkeypatch, ck, [x, y, 8], _record(ck, store_line, (0, 0, 0), y.data_ptr() + 8 * 4, 1))
    msg = str(err)
    assert "8 elements from the start of 'y_ptr' (which holds 8 elements)" in msg
    assert "test_ptx_debug.py:" in msg and "tl.store(y_ptr + offs + 3, tl.load(x_ptr + offs))" in msg
    assert "program id (0, 0, 0)" in msg and f"address 0x{y.data_ptr() + 32:x}" in msg


def test_a_views_bounds_are_what_its_shape_and_strides_reach() -> None:
    base = torch.arange(24.0)
    v = base.view(4, 6)[1:3, ::2]  # rows 1-2, columns 0, 2, 4: elements 6 .. 16
    assert debug_host.tensor_extent(v) == (base.data_ptr() + 6 * 4, base.data_ptr() + 17 * 4)
    t = base.view(4, 6).t()  # strides (1, 6): still the whole buffer
    assert debug_host.tensor_extent(t) == (base.data_ptr(), base.data_ptr() + 24 * 4)
    e = base[5:5]
    assert debug_host.tensor_extent(e) == (e.data_ptr(), e.data_ptr())  # nothing may be accessed
    assert debug_host.tensor_extent(3) is None
