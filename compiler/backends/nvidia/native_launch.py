"""A warm launch entry in native code: one small function per loaded kernel, generated with llvmlite
and called by CPython as a builtin (METH_FASTCALL), so a launch costs no Python frame, no
struct.pack_into, no lock and no ctypes call.

The function takes fastpath.py's entry arguments `(gx, gy, gz, r0, ..., r{R-1}, v0, ..., v{P-1})`,
converts the grid and the raw values the kernel takes with the C API (PyLong_AsLongLong,
PyLong_AsUnsignedLongLong, PyFloat_AsDouble) into a CUlaunchConfig and an argument block on its
own stack (so concurrent launches from several threads share nothing, and no lock is needed),
reads the stream by calling torch's getter, releases the GIL around cuLaunchKernelEx (the driver may
block while the launch queue is full) and returns the compiled kernel.

Anything unusual is handed to Python, so the errors stay those of the ctypes entry (driver.py):
a value that does not convert or does not fit its parameter type (the C API's exception is
cleared and the ctypes entry, whose struct.pack_into raises the LaunchError, is called with the
same arguments), an unexpected number of arguments (likewise), a failing stream read (its
exception propagates) and a driver error (CudaFunction._raise is called and raises).

Object references baked into the code (the result, the stream getter and its argument, the
fallback, the error reporter) are kept alive by the function object's `__module__` slot, which
holds a tuple of them and of the PyMethodDef; its `__self__` is the result.
"""

from __future__ import annotations

import ctypes
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from ...collector import collector_paused
from ..llvm.lock import llvm_lock

__all__ = ["native_entry", "supported", "build_later", "drain", "failures"]

_PTR = ir.PointerType()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F32 = ir.FloatType()
_F64 = ir.DoubleType()
_VOID = ir.VoidType()

# The C API functions the entry calls, registered with the JIT under a private prefix.
_API: dict[str, tuple[ir.Type, tuple[ir.Type, ...]]] = {
    "PyLong_AsUnsignedLongLong": (_I64, (_PTR,)),
    "PyLong_AsLongLong": (_I64, (_PTR,)),
    "PyFloat_AsDouble": (_F64, (_PTR,)),
    "PyErr_Occurred": (_PTR, ()),
    "PyErr_Clear": (_VOID, ()),
    "PyEval_SaveThread": (_PTR, ()),
    "PyEval_RestoreThread": (_VOID, (_PTR,)),
    "PyObject_Vectorcall": (_PTR, (_PTR, _PTR, _I64, _PTR)),
    "PyObject_CallOneArg": (_PTR, (_PTR, _PTR)),
    "PyLong_AsVoidPtr": (_PTR, (_PTR,)),
    "PyLong_FromLong": (_PTR, (_I64,)),  # C long is 64-bit on the LP64 hosts CUDA supports
    "Py_IncRef": (_VOID, (_PTR,)),
    "Py_DecRef": (_VOID, (_PTR,)),
}
_PREFIX = "__anvil_capi_"
# struct codes (driver.pack_codes) the entry converts: the LLVM type stored and the conversion
_CODES = {"Q": (_I64, "u64"), "q": (_I64, "i64"), "i": (_I32, "i32"), "I": (_I32, "u32"), "f": (_F32, "f32"),
          "d": (_F64, "f64")}
# CUlaunchConfig: grid xyz, block xyz, shared bytes, padding, stream, attrs, numAttrs, padding (56 bytes)
_CONFIG = ir.LiteralStructType([_I32] * 8 + [_PTR, _PTR, _I32, _I32])
_METH_FASTCALL = 0x0080

_lock = threading.Lock()
_api_registered = False
_ids = itertools.count()


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_jobs: queue.Queue[Callable[[], None]] = queue.Queue()
failures: list[str] = []  # why background builds failed (their kernels keep the ctypes entry)
_worker: threading.Thread | None = None


def _work() -> None:
    while True:
        job = _jobs.get()
        try:
            with collector_paused():  # as a compile: a full collection here would stall every thread
                job()
        except Exception as e:  # noqa: BLE001 - the ctypes entry already in place stays
            failures.append(f"{type(e).__name__}: {e}")
        finally:
            _jobs.task_done()


def build_later(job: Callable[[], None]) -> None:
    """Run `job` (building a native entry and installing it) on the background builder thread.
    Building one takes 10-25 ms of LLVM work, mostly outside the GIL: a kernel's first launch goes
    out through the ctypes entry at once instead of waiting for it, and later launches find the
    native entry once it is in place."""
    global _worker
    with _lock:
        if _worker is None:
            _worker = threading.Thread(target=_work, name="anvil-native-launch", daemon=True)
            _worker.start()
    _jobs.put(job)


def drain() -> None:
    """Wait until every native entry asked for so far is built and installed."""
    _jobs.join()


def supported(codes: str) -> bool:
    """Whether the native entry converts every parameter type of a kernel with these struct codes."""
    return all(c in _CODES for c in codes)


def _register_api() -> None:
    """Make the C API functions known to the JIT (once) and prepare PyCFunction_NewEx."""
    global _api_registered
    if _api_registered:
        return
    for name in _API:
        llvm.add_symbol(_PREFIX + name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value or 0)
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
    _api_registered = True


def native_entry(codes: str, positions: list[int], n_raw: int, n_params: int, launch_ex: Any, handle: int,
                 threads: int, shared: int, stream: Callable[[Any], int], stream_arg: Any, result: Any,
                 fallback: Callable[..., Any], on_error: Callable[..., Any]) -> Callable[..., Any]:
    """The native entry for a kernel with parameter struct codes `codes` (one per kernel argument,
    found at raw position `positions[k]`), launched through `launch_ex` (a ctypes function with
    cuLaunchKernelEx's signature) on function `handle`. `fallback` takes the same arguments (the
    ctypes entry); `on_error(err, gx, gy, gz)` raises the driver error."""
    # deferred: start-up cost: the CPU backend's package (its host JIT) loads the CPU lowering
    from ..cpu import optimize_parsed
    from ..cpu.engine import jit_engine  # deferred: start-up cost, as the import above

    with llvm_lock:  # the host JIT's first use registers LLVM targets, as the NVPTX warm-up thread does
        engine = jit_engine()
    with _lock:
        _register_api()
        fid = next(_ids)
        symbol, launch_name = f"anvil_launch_{fid}", f"__anvil_launch_ex_{fid}"
        llvm.add_symbol(launch_name, ctypes.cast(launch_ex, ctypes.c_void_p).value or 0)
    module = ir.Module(name=symbol)
    _build(module, symbol, launch_name, codes, positions, 3 + n_raw + n_params, handle, threads, shared,
           [result, stream, stream_arg, fallback, on_error])
    addr, _ = engine.add(optimize_parsed(str(module)), symbol, f"anvil-native-launch-{symbol}", None)
    name = ctypes.create_string_buffer(symbol.encode())
    mdef = _MethodDef(ctypes.cast(name, ctypes.c_char_p), addr, _METH_FASTCALL, None)
    keep = (result, stream, stream_arg, fallback, on_error, mdef, name)
    fn: Callable[..., Any] = ctypes.pythonapi.PyCFunction_NewEx(ctypes.addressof(mdef), result, keep)
    return fn


def _build(m: ir.Module, symbol: str, launch_name: str, codes: str, positions: list[int], n_args: int,
           handle: int, threads: int, shared: int, objs: list[Any]) -> None:
    api = {n: ir.Function(m, ir.FunctionType(r, a), _PREFIX + n) for n, (r, a) in _API.items()}
    launch = ir.Function(m, ir.FunctionType(_I32, (_PTR, _PTR, _PTR, _PTR)), launch_name)
    fn = ir.Function(m, ir.FunctionType(_PTR, (_PTR, _PTR, _I64)), symbol)
    _self, args, nargs = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fallback_bb = fn.append_basic_block("fallback")
    null = ir.Constant(_PTR, None)
    i32 = lambda v: ir.Constant(_I32, v)  # noqa: E731
    result, stream_fn, stream_arg, fallback, on_error = (ir.Constant(_I64, id(o)).inttoptr(_PTR) for o in objs)
    argv_ty = ir.ArrayType(_PTR, max(1, len(codes)))
    vals_ty = ir.LiteralStructType([_CODES[c][0] for c in codes] or [_I64])

    def unless(cond: ir.Value, target: ir.Block) -> None:
        """Go to `target` if `cond`, else continue in a new block."""
        cont = fn.append_basic_block()
        b.cbranch(cond, target, cont)
        b.position_at_end(cont)

    def arg(i: int) -> ir.Value:
        return b.load(b.gep(args, [ir.Constant(_I64, i)], source_etype=_PTR), typ=_PTR)

    def checked(v: ir.Value, sentinel: ir.Value) -> ir.Value:
        """`v`, a C API result; to the fallback if it is the error value and an exception is set."""
        is_sentinel = b.fcmp_ordered("==", v, sentinel) if v.type == _F64 else b.icmp_signed("==", v, sentinel)
        check, cont = fn.append_basic_block(), fn.append_basic_block()
        b.cbranch(is_sentinel, check, cont)
        b.position_at_end(check)
        b.cbranch(b.icmp_unsigned("!=", b.call(api["PyErr_Occurred"], []), null), fallback_bb, cont)
        b.position_at_end(cont)
        return v

    unless(b.icmp_signed("!=", nargs, ir.Constant(_I64, n_args)), fallback_bb)
    cfg, vals, argv = (_stack(b, t) for t in (_CONFIG, vals_ty, argv_ty))
    bad: ir.Value = ir.Constant(ir.IntType(1), 0)
    minus1 = ir.Constant(_I64, -1)
    grid = [b.trunc(checked(b.call(api["PyLong_AsLongLong"], [arg(i)]), minus1), _I32) for i in range(3)]
    for k, (c, p) in enumerate(zip(codes, positions, strict=True)):
        how = _CODES[c][1]
        a = arg(3 + p)
        if how in ("u64", "u32"):
            v = checked(b.call(api["PyLong_AsUnsignedLongLong"], [a]), minus1)
            if how == "u32":
                bad = b.or_(bad, b.icmp_unsigned(">", v, ir.Constant(_I64, 2**32 - 1)))
                v = b.trunc(v, _I32)
        elif how in ("i64", "i32"):
            v = checked(b.call(api["PyLong_AsLongLong"], [a]), minus1)
            if how == "i32":
                bad = b.or_(bad, b.icmp_signed("<", v, ir.Constant(_I64, -(2**31))))
                bad = b.or_(bad, b.icmp_signed(">", v, ir.Constant(_I64, 2**31 - 1)))
                v = b.trunc(v, _I32)
        else:
            v = checked(b.call(api["PyFloat_AsDouble"], [a]), ir.Constant(_F64, -1.0))
            if how == "f32":
                v = b.fptrunc(v, _F32)  # as struct's native 'f': rounded, beyond range to inf
        field = b.gep(vals, [i32(0), i32(k)], source_etype=vals_ty)
        b.store(v, field)
        b.store(field, b.gep(argv, [i32(0), i32(k)], source_etype=argv_ty))
    unless(bad, fallback_bb)
    s = b.call(api["PyObject_CallOneArg"], [stream_fn, stream_arg])
    stream_failed = fn.append_basic_block("stream_failed")
    unless(b.icmp_unsigned("==", s, null), stream_failed)
    stream = b.call(api["PyLong_AsVoidPtr"], [s])
    b.call(api["Py_DecRef"], [s])
    fields = [*grid, i32(threads), i32(1), i32(1), i32(shared), i32(0), stream, null, i32(0), i32(0)]
    for i, v in enumerate(fields):
        b.store(v, b.gep(cfg, [i32(0), i32(i)], source_etype=_CONFIG))
    ts = b.call(api["PyEval_SaveThread"], [])
    err = b.call(launch, [cfg, ir.Constant(_I64, handle).inttoptr(_PTR), argv, null])
    b.call(api["PyEval_RestoreThread"], [ts])
    launch_failed = fn.append_basic_block("launch_failed")
    unless(b.icmp_signed("!=", err, i32(0)), launch_failed)
    b.call(api["Py_IncRef"], [result])
    b.ret(result)

    b.position_at_end(stream_failed)  # the stream read raised: its exception propagates
    b.ret(null)

    b.position_at_end(launch_failed)  # on_error(err, gx, gy, gz) raises the driver's error
    e = b.call(api["PyLong_FromLong"], [b.sext(err, _I64)])
    call_ty = ir.ArrayType(_PTR, 4)
    call_args = _stack(b, call_ty)
    for i, v in enumerate([e, arg(0), arg(1), arg(2)]):
        b.store(v, b.gep(call_args, [i32(0), i32(i)], source_etype=call_ty))
    r = b.call(api["PyObject_Vectorcall"], [on_error, call_args, ir.Constant(_I64, 4), null])
    b.call(api["Py_DecRef"], [e])
    raised, returned = fn.append_basic_block(), fn.append_basic_block()
    b.cbranch(b.icmp_unsigned("==", r, null), raised, returned)
    b.position_at_end(returned)  # on_error always raises; never reached in practice
    b.call(api["Py_DecRef"], [r])
    b.branch(raised)
    b.position_at_end(raised)
    b.ret(null)

    b.position_at_end(fallback_bb)  # the ctypes entry redoes the launch or raises its LaunchError
    b.call(api["PyErr_Clear"], [])
    b.ret(b.call(api["PyObject_Vectorcall"], [fallback, args, nargs, null]))


def _stack(b: ir.IRBuilder, ty: ir.Type) -> ir.Value:
    """An alloca of `ty` seen as an opaque `ptr` (llvmlite types an alloca's pointer, and would then
    refuse stores of the fields through GEPs of it)."""
    a = b.alloca(ty)
    a.type = _PTR
    return a
