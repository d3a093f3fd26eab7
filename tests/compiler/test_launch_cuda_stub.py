"""The CUDA warm launch path without a GPU: kernels compiled for sm_90a, 'loaded' with a stand-in
for cuLaunchKernelEx (a ctypes callback) that decodes the CUlaunchConfig and the kernel parameters
it receives, so each launch's grid, block, stream and argument values can be checked. Both entries
run: the native one (native_launch.py) and the ctypes one (driver.py, ANVIL_NATIVE_LAUNCH=0)."""

from __future__ import annotations

import ctypes
import itertools
import random
import struct
import threading
from typing import Any

import pytest
import torch

import compiler.language as tl
from compiler import errors as E
from compiler import jit


@jit
def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m) * alpha + tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, v, mask=m)


class _Config(ctypes.Structure):
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("pad", ctypes.c_uint), ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p),
                ("num_attrs", ctypes.c_uint)]


_CTYPES = {"Q": ctypes.c_uint64, "q": ctypes.c_int64, "i": ctypes.c_int32, "I": ctypes.c_uint32,
           "f": ctypes.c_float, "d": ctypes.c_double}


class FakeDriver:
    """Records every launch as (handle, grid, block, shared, stream, values); `fail` makes the next
    launches return that CUresult. One per process: loaded kernels keep its callback's address."""

    def __init__(self) -> None:
        self.records: list[tuple[Any, ...]] = []
        self.codes: dict[int, str] = {}
        self.fail = 0
        self.lock = threading.Lock()
        self.handles = itertools.count(0x1000, 0x10)
        self.callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_void_p)(self._launch)

    def _launch(self, cfg: int, handle: int, argv: int, extra: int | None) -> int:
        c = _Config.from_address(cfg)
        codes = self.codes[handle]
        ptrs = (ctypes.c_void_p * max(1, len(codes))).from_address(argv)
        values = tuple(_CTYPES[code].from_address(ptrs[k]).value for k, code in enumerate(codes))
        with self.lock:
            self.records.append((handle, tuple(c.grid), tuple(c.block), c.shared, c.stream or 0, values))
        assert c.attrs is None and c.num_attrs == 0 and extra is None
        return self.fail

    def load(self, cubin: bytes, symbol: str, arg_types: list[Any], num_warps: int, shared: int,
             name: str) -> Any:
        from compiler.backends.nvidia import driver

        fn = driver.CudaFunction.__new__(driver.CudaFunction)
        fn.registers = 0
        handle = next(self.handles)
        fn.prepare(handle, self.callback, arg_types, num_warps, shared, name)
        self.codes[handle] = fn.codes
        return fn


FAKE = FakeDriver()
STREAM = [0]  # the stand-in for torch's current stream, read by every launch


@pytest.fixture(params=["native", "ctypes"])
def cuda_stub(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    from compiler.backends.nvidia import driver
    from compiler.runtime import compiled, cuda, launch

    monkeypatch.setenv("ANVIL_NATIVE_LAUNCH", "1" if request.param == "native" else "0")
    monkeypatch.setattr(driver, "load_cubin", FAKE.load)
    monkeypatch.setattr(cuda, "_stream", (STREAM.__getitem__, 0))
    monkeypatch.setattr(launch, "_target_for", lambda vals, name: "cuda:sm_90a")
    monkeypatch.setattr(compiled, "_MEMORY", {})  # fresh kernel objects: loaded with this test's settings
    monkeypatch.setattr(scale_add, "_launcher", None)
    FAKE.records.clear()
    FAKE.fail = 0
    STREAM[0] = 0
    return str(request.param)


def _f32(v: float) -> float:
    return float(struct.unpack("f", struct.pack("f", v))[0])


def _tensors(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(n), torch.randn(n), torch.full((n,), float("nan"))


def test_values_grid_block_and_stream_reach_the_driver(cuda_stub: str) -> None:
    x, y, out = _tensors(1000)
    alpha = random.uniform(-3, 3)
    ck = scale_add[(3, 2)](x, y, out, 1000, alpha, BLOCK=256, num_warps=2)
    ck2 = scale_add[(3, 2)](x, y, out, 1000, alpha, BLOCK=256, num_warps=2)  # the warm path
    assert ck2 is ck
    from compiler.backends.nvidia import native_launch

    native_launch.drain()  # the second launch had the native entry built in the background
    assert not native_launch.failures
    entry = next(iter(scale_add.launcher.fast.values()))
    assert (type(entry).__name__ == "builtin_function_or_method") == (cuda_stub == "native")
    STREAM[0] = 0x7F00DEAD0  # a capture or `torch.cuda.stream(...)` changes torch's current stream
    x2, y2, out2 = _tensors(1000)
    scale_add[(7,)](x2, y2, out2, 1000, 0.5, BLOCK=256, num_warps=2)
    want = (x.data_ptr(), y.data_ptr(), out.data_ptr(), 1000, _f32(alpha))
    fn = ck.function
    assert FAKE.records == [
        (fn._handle_int, (3, 2, 1), (64, 1, 1), fn.shared, 0, want),
        (fn._handle_int, (3, 2, 1), (64, 1, 1), fn.shared, 0, want),
        (fn._handle_int, (7, 1, 1), (64, 1, 1), fn.shared, 0x7F00DEAD0,
         (x2.data_ptr(), y2.data_ptr(), out2.data_ptr(), 1000, 0.5)),
    ]


def test_constant_arguments_are_left_out(cuda_stub: str) -> None:
    x, y, out = _tensors(64)
    for _ in range(2):
        ck = scale_add[(1,)](x, y, out, 1, 2.0, BLOCK=64)  # n == 1 is compiled in
    assert ck.arg_index == [0, 1, 2, 4]
    assert [r[5] for r in FAKE.records] == [(x.data_ptr(), y.data_ptr(), out.data_ptr(), 2.0)] * 2


def test_grid_forms(cuda_stub: str) -> None:
    x, y, out = _tensors(300)
    for grid in ([3], (3.0,), lambda meta: (triton_cdiv(meta["n"], meta["BLOCK"]),), (3, 1, 1)):
        for _ in range(2):
            scale_add[grid](x, y, out, 300, 1.0, BLOCK=128)
    assert [r[1] for r in FAKE.records] == [(3, 1, 1)] * 8
    FAKE.records.clear()
    scale_add[(0,)](x, y, out, 300, 1.0, BLOCK=128)
    scale_add[(2, 0)](x, y, out, 300, 1.0, BLOCK=128)
    assert FAKE.records == []
    with pytest.raises(E.LaunchError, match="grid dimensions must be non-negative"):
        scale_add[(-1,)](x, y, out, 300, 1.0, BLOCK=128)
    with pytest.raises(E.LaunchError, match="grid dimension too large"):
        scale_add[(2**31,)](x, y, out, 300, 1.0, BLOCK=128)


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def test_driver_errors_and_float_range(cuda_stub: str) -> None:
    x, y, out = _tensors(100)
    scale_add[(1,)](x, y, out, 100, 1.0, BLOCK=128)
    scale_add[(1,)](x, y, out, 100, 1e300, BLOCK=128)  # as struct's native 'f': beyond fp32 is inf
    FAKE.fail = 1
    with pytest.raises(E.LaunchError, match=r"launching kernel scale_add failed: .*\(grid \(5, 1, 1\)"):
        scale_add[(5,)](x, y, out, 100, 1.0, BLOCK=128)
    FAKE.fail = 0
    scale_add[(1,)](x, y, out, 100, 2.0, BLOCK=128)
    assert [r[5][4] for r in FAKE.records] == [1.0, float("inf"), 1.0, 2.0]


def test_entry_fallback_keeps_the_ctypes_errors(cuda_stub: str) -> None:
    """Values the native entry does not convert go to the ctypes entry, whose struct.pack_into
    raises the LaunchError (the front never passes such values: called directly here)."""
    x, y, out = _tensors(100)
    ck = scale_add[(1,)](x, y, out, 100, 1.0, BLOCK=128)
    entry = next(iter(scale_add.launcher.fast.values()))
    ptrs = (x.data_ptr(), y.data_ptr(), out.data_ptr())
    params = (x, y, out, 100, 1.0, 128)
    assert entry(2, 1, 1, *ptrs, 100, 3.0, *params) is ck
    for bad in ((*ptrs[:2], -5, 100, 3.0), (*ptrs, 2**31, 3.0), (*ptrs, 100, "3")):
        with pytest.raises(E.LaunchError, match="does not fit its parameter type"):
            entry(2, 1, 1, *bad, *params)
    assert [r[5] for r in FAKE.records] == [(*ptrs, 100, 1.0), (*ptrs, 100, 3.0)]


def test_native_entry_converts_like_struct() -> None:
    """The native entry against struct.pack_into's native codes, value by value: what converts is
    passed on, the rest goes to the fallback with the same arguments."""
    from compiler.backends.nvidia import native_launch

    got: list[tuple[Any, ...]] = []
    codes = "QqiIfd"

    def record(cfg: int, handle: int, argv: int, extra: int | None) -> int:
        ptrs = (ctypes.c_void_p * len(codes)).from_address(argv)
        got.append(tuple(_CTYPES[c].from_address(ptrs[k]).value for k, c in enumerate(codes)))
        return 0

    cb = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(record)
    fallback_calls: list[tuple[Any, ...]] = []
    entry = native_launch.native_entry(codes, [5, 4, 3, 2, 1, 0], 6, 1, cb, 0x1000, 128, 0, int, 0, "done",
                                       lambda *a: fallback_calls.append(a) or "fallback", print)
    packer = struct.Struct(codes)
    rng = random.Random(0)
    cases = [(2**64 - 1, -(2**63), -(2**31), 2**32 - 1, 1e300, -0.0), (0, 2**63 - 1, 2**31 - 1, 0, 1.5, 7),
             (1, 2, 3, 4, True, 5.25), (-1, 0, 0, 0, 0.0, 0.0), (0, 2**63, 0, 0, 0.0, 0.0),
             (0, 0, 2**31, 0, 0.0, 0.0), (0, 0, 0, 2**32, 0.0, 0.0), (0, 0, 0, 0, "x", 0.0), (0, 0, 0, -1, 0.0, 0.0)]
    cases += [(rng.getrandbits(64), rng.getrandbits(63), rng.randint(-(2**31), 2**31 - 1), rng.getrandbits(32),
               rng.uniform(-1e6, 1e6), rng.uniform(-1e300, 1e300)) for _ in range(20)]
    for case in cases:
        raw = tuple(reversed(case))  # positions [5..0]: the kernel's arguments in reverse raw order
        got.clear()
        fallback_calls.clear()
        r = entry(3, 2, 1, *raw, "param")
        try:
            want = packer.unpack(packer.pack(*case))
        except (struct.error, TypeError):
            assert r == "fallback" and fallback_calls == [(3, 2, 1, *raw, "param")] and not got, case
            continue
        assert r == "done" and got == [want] and not fallback_calls, case
    assert entry(3, 2, 1) == "fallback" and fallback_calls[-1] == (3, 2, 1)  # wrong argument count


def test_launches_from_threads_do_not_mix(cuda_stub: str) -> None:
    sets = [_tensors(128) for _ in range(4)]
    scale_add[(1,)](*sets[0], 128, 1.0, BLOCK=128)
    FAKE.records.clear()

    def work(t: int) -> None:
        for i in range(150):
            scale_add[(1 + t,)](*sets[t], 128, float(i), BLOCK=128)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    seen: dict[int, list[float]] = {t: [] for t in range(4)}
    for _, grid, _, _, _, vals in FAKE.records:
        t = grid[0] - 1
        x, y, out = sets[t]
        assert vals[:4] == (x.data_ptr(), y.data_ptr(), out.data_ptr(), 128)
        seen[t].append(vals[4])
    assert all(v == [float(i) for i in range(150)] for v in seen.values())
