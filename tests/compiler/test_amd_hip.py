"""The HIP launcher's host side, up to the driver call: a recording stand-in for libamdhip64 takes
the calls a real runtime would, and the tests read back what a launch passes (the code object, the
kernel's name, grid, block, stream and each argument's bytes). No AMD GPU is needed."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

import compiler
from compiler import errors
from compiler.backends.amd import hip
from compiler.backends.amd.toolchain import find_linker

needs_linker = pytest.mark.skipif(find_linker() is None, reason="no ld.lld (install the amd extra: ziglang)")

SRC = '''
import triton
import triton.language as tl


@triton.jit
def scale_add(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha + 1.0, mask=mask)
'''
SIG = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "alpha": "fp32"}


class FakeHip:
    """libamdhip64's launch functions, recording what they are given (0 = hipSuccess)."""

    def __init__(self, fail: dict[str, int] | None = None) -> None:
        self.fail = fail or {}
        self.images: list[bytes] = []
        self.names: list[str] = []
        self.launches: list[dict[str, Any]] = []
        self.types: list[Any] = []

    def hipModuleLoadData(self, module: Any, image: Any) -> int:  # noqa: N802 - the C name
        self.images.append(bytes(image.raw))
        module.contents.value = 0x1000
        return self.fail.get("load", 0)

    def hipModuleGetFunction(self, fn: Any, module: Any, name: bytes) -> int:  # noqa: N802
        assert module.value == 0x1000
        self.names.append(name.decode())
        fn.contents.value = 0x2000
        return self.fail.get("function", 0)

    def hipModuleLaunchKernel(self, fn: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, shared: int,  # noqa: N802
                              stream: Any, params: Any, extra: Any) -> int:
        assert fn.value == 0x2000 and extra is None
        args = [ctypes.cast(params[i], ctypes.POINTER(t)).contents.value for i, t in enumerate(self.types)]
        self.launches.append({"grid": (gx, gy, gz), "block": (bx, by, bz), "shared": shared,
                              "stream": stream.value, "args": args})
        return self.fail.get("launch", 0)

    def hipGetErrorString(self, err: int) -> bytes:  # noqa: N802
        return {1: b"invalid argument", 98: b"invalid device function"}.get(err, b"unknown error")


@pytest.fixture(scope="module")
def kernel() -> Any:
    return compiler.compile_source(SRC, kernel="scale_add").compile(SIG, {"BLOCK": 256}, target="amd:gfx942",
                                                                    num_warps=4)


@needs_linker
def test_load_and_launch_pass_the_code_object_and_every_argument(kernel: Any) -> None:
    fake = FakeHip()
    fake.types = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_float]
    fn = hip.HipFunction.load(hip.HipApi(fake), kernel.binary, "gfx942:sramecc+:xnack-")
    assert fake.images == [kernel.asm["hsaco"]] and fake.names == [kernel.binary.symbol]
    fn.launch((5, 1, 1), 0x7777, (0xDEAD0000, 0xBEEF0000, 1234, 0.5))
    assert fake.launches == [{"grid": (5, 1, 1), "block": (256, 1, 1), "shared": 0, "stream": 0x7777,
                              "args": [0xDEAD0000, 0xBEEF0000, 1234, 0.5]}]


@needs_linker
def test_the_arguments_are_checked_before_the_driver_call(kernel: Any) -> None:
    fake = FakeHip()
    fn = hip.HipFunction.load(hip.HipApi(fake), kernel.binary, "gfx942")
    with pytest.raises(errors.ArgumentOverflowError, match=r"argument 2 \(n\) = 4294967296 does not fit .*i32"):
        fn.launch((1, 1, 1), 0, (1, 2, 1 << 32, 1.0))
    with pytest.raises(errors.LaunchError, match=r"argument 0 \(x_ptr\) = 1.5 is not an integer"):
        fn.launch((1, 1, 1), 0, (1.5, 2, 3, 1.0))
    with pytest.raises(errors.LaunchError, match=r"argument 3 \(alpha\) = 'x' is not a value of .*fp32"):
        fn.launch((1, 1, 1), 0, (1, 2, 3, "x"))
    with pytest.raises(errors.LaunchError, match="3 arguments given, the kernel takes 4"):
        fn.launch((1, 1, 1), 0, (1, 2, 3))
    with pytest.raises(errors.LaunchError, match="grid"):
        fn.launch((1 << 31, 1, 1), 0, (1, 2, 3, 1.0))
    assert fake.launches == []


@needs_linker
def test_a_code_object_for_another_architecture_is_refused(kernel: Any) -> None:
    fake = FakeHip()
    with pytest.raises(errors.LaunchError, match="compiled for gfx942, but the current device is gfx950"):
        hip.HipFunction.load(hip.HipApi(fake), kernel.binary, "gfx950:sramecc+:xnack-")
    assert fake.images == []


@needs_linker
def test_a_stale_argument_layout_is_refused(kernel: Any) -> None:
    b = kernel.binary
    stale = type(b)(**{**vars(b), "kernel": {**b.kernel, "args": b.kernel["args"][:-1]}})
    with pytest.raises(errors.LaunchError, match="declares 3 arguments, the kernel has 4"):
        hip.HipFunction.load(hip.HipApi(FakeHip()), stale, "gfx942")


@needs_linker
def test_driver_errors_name_the_call_and_the_runtime_message(kernel: Any) -> None:
    function_failed = r"hipModuleGetFunction\(anvil_scale_add_\w+\) failed: invalid device function"
    with pytest.raises(errors.LaunchError, match=function_failed):
        hip.HipFunction.load(hip.HipApi(FakeHip({"function": 98})), kernel.binary, "gfx942")
    fn = hip.HipFunction.load(hip.HipApi(FakeHip({"launch": 1})), kernel.binary, "gfx942")
    with pytest.raises(errors.LaunchError, match="launching scale_add failed: invalid argument"):
        fn.launch((1, 1, 1), 0, (1, 2, 3, 1.0))


@needs_linker
def test_a_launch_through_the_kernel_reaches_the_driver(kernel: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """kernel.launch -> the backend's launcher -> load (on first use) -> the driver, on torch's stream."""
    fake = FakeHip()
    fake.types = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_float]
    monkeypatch.setattr(hip, "hip_api", lambda: hip.HipApi(fake))
    monkeypatch.setattr(hip, "device_arch", lambda: "gfx942:sramecc+:xnack-")
    monkeypatch.setattr("compiler.runtime.cuda.current_stream", lambda: 0x55)

    class Tensor:
        def __init__(self, addr: int) -> None:
            self.addr = addr

        def data_ptr(self) -> int:
            return self.addr

    ck = compiler.compile_source(SRC, kernel="scale_add").compile(SIG, {"BLOCK": 128}, target="amd:gfx942",
                                                                  num_warps=2)
    ck.launch((3, 1, 1), [Tensor(0x1000), Tensor(0x2000), 300, 2.0])
    ck.launch((0, 1, 1), [Tensor(0x1000), Tensor(0x2000), 0, 2.0])  # an empty grid launches nothing
    assert fake.launches == [{"grid": (3, 1, 1), "block": (128, 1, 1), "shared": 0, "stream": 0x55,
                              "args": [0x1000, 0x2000, 300, 2.0]}]


def test_no_runtime_is_a_launch_error_that_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hip, "_api", None)
    monkeypatch.setattr(hip, "find_hip_runtime", lambda: None)
    with pytest.raises(errors.LaunchError, match="no HIP runtime found: .*ROCm build of torch"):
        hip.hip_api()


def test_the_runtime_is_searched_where_rocm_puts_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    lib = tmp_path / "lib" / "libamdhip64.so"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    assert hip.find_hip_runtime() == str(lib)


def test_rocm_tensors_pick_the_amd_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ROCm build of torch calls its devices "cuda": their tensors launch for amd:<the device's gfx>."""
    import torch

    from compiler.runtime.launch import _target_for
    from tools import executor

    class Props:
        gcnArchName = "gfx950:sramecc+:xnack-"

    class OnGpu:
        device = torch.device("cuda", 0)

        def data_ptr(self) -> int:
            return 0x1000

    monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    assert _target_for([OnGpu(), 3], "k") == "amd:gfx950"
    monkeypatch.setattr(executor, "gpu_available", lambda: True)
    assert executor.resolve_target("auto") == "amd"
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert executor.resolve_target("auto") == "cuda"
