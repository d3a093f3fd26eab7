"""The second wall around worker processes: environment, memory, processes, sockets, file writes.

A worker compiles and runs native code built from text a client sent, so it is treated as
hostile once its first job arrives. Everything here is applied before the worker imports torch
or the compiler and before it reads a job:

- **Environment.** The worker is exec'ed with :func:`worker_environment` (an allow-list), so
  neither ``os.environ`` nor ``/proc/self/environ`` holds the server's tokens or secrets.
- **Memory.** ``RLIMIT_DATA`` (private writable memory: heap, anonymous mappings, thread stacks)
  when a limit is given; allocations past it fail (MemoryError, or torch's "can't allocate").
- **No new processes, no network.** A seccomp-BPF filter (x86_64 and aarch64): execve,
  execveat, fork, vfork, clone without CLONE_THREAD, ptrace, process_vm_readv/writev and
  io_uring_setup fail with EPERM; clone3 with ENOSYS (libc then uses clone, so threads work);
  socket() fails with EPERM except AF_UNIX in GPU workers. Syscalls of other ABIs (x32, or a
  foreign architecture) kill the process.
- **File writes.** Landlock: creating, writing, truncating, renaming, removing and linking files
  only under the compile cache and the worker's scratch directory (its TMPDIR), plus /dev/null
  and, for GPU workers, /dev/nvidia*; no exec of any file; no TCP (ABI 4+); no signals to and no
  abstract sockets of processes outside the worker (ABI 6+); no ptrace of them, so no reading
  the server's memory or /proc/<pid>/environ.

Where the kernel lacks seccomp or Landlock the worker still runs; :func:`apply` returns what is
in force, which the worker reports at start-up (server log, ``device_info``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import signal
import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SandboxConfig", "worker_environment", "apply", "cache_dir_of", "protect_server"]

# Variables a worker needs (exact names), and prefixes of families of them. Nothing else passes:
# in particular not ANVIL_TOKEN, cloud credentials, SSH agents or proxies.
_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "KMP_AFFINITY", "OMP_PROC_BIND", "OMP_PLACES", "TORCH_NUM_THREADS",
    "ANVIL_CACHE", "ANVIL_CACHE_DIR", "ANVIL_DEBUG", "ANVIL_CPU_THREADS", "ANVIL_CPU_CONCURRENT_PROGRAMS",
    "ANVIL_CPU_WAIT_TIMEOUT", "ANVIL_DUMP_IR", "ANVIL_DUMP_LLIR",
    "ANVIL_TRACEBACK", "ANVIL_CPU_TARGET", "ANVIL_NATIVE_LAUNCH", "ANVIL_WGMMA", "ANVIL_PIPELINE",
    "ANVIL_PTXAS", "ANVIL_NVJITLINK", "ANVIL_LIBDEVICE",
})
_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "HIP_", "ROCM_", "ROCR_", "HSA_")
# Never passed even when a prefix matches (CUDA_* is a family; a secret could hide in it).
_ENV_NEVER = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "_KEY", "AUTH")


def worker_environment(environ: Mapping[str, str], scratch: Path) -> dict[str, str]:
    """The environment a worker is started with: the allow-listed variables of ``environ``,
    TMPDIR pointing at the worker's scratch directory."""
    env: dict[str, str] = {}
    for name, value in environ.items():
        if any(bad in name.upper() for bad in _ENV_NEVER):
            continue
        if name in _ENV_NAMES or name.startswith(_ENV_PREFIXES):
            env[name] = value
    env["TMPDIR"] = env["TMP"] = env["TEMP"] = str(scratch)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # source trees are read-only to workers
    # numpy's OpenBLAS maps a buffer per thread when it loads (hundreds of MB on a many-core machine,
    # all counted by the workers' RLIMIT_DATA); workers do no numpy linear algebra, torch has its own
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return env


def cache_dir_of(environ: Mapping[str, str]) -> Path:
    """The compile cache a worker writes to (compiler/knobs.py: ANVIL_CACHE_DIR or ~/.cache/anvil)."""
    d = environ.get("ANVIL_CACHE_DIR")
    if d:
        return Path(d)
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".cache" / "anvil"


@dataclass(frozen=True)
class SandboxConfig:
    """What one worker may do. Sent to the child as JSON (see :meth:`to_dict`)."""

    gpu: bool
    memory_bytes: int
    writable: tuple[str, ...]
    seccomp: bool = True
    landlock: bool = True
    allow_exec: bool = False  # only the ptxas process (server/assembler.py) runs programs

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "memory_bytes": self.memory_bytes, "writable": list(self.writable),
                "seccomp": self.seccomp, "landlock": self.landlock, "allow_exec": self.allow_exec}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SandboxConfig:
        return cls(gpu=bool(d["gpu"]), memory_bytes=int(d["memory_bytes"]), writable=tuple(d["writable"]),
                   seccomp=bool(d.get("seccomp", True)), landlock=bool(d.get("landlock", True)),
                   allow_exec=bool(d.get("allow_exec", False)))


def apply(config: SandboxConfig) -> dict[str, Any]:
    """Confine the calling process (which must still be single-threaded); return what is in force."""
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        raise RuntimeError("the sandbox must be applied before any thread starts (Landlock binds one thread)")
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # a worker never outlives the process it serves
    report: dict[str, Any] = {"environment": "allow-listed at exec"}
    if config.memory_bytes > 0:
        resource.setrlimit(resource.RLIMIT_DATA, (config.memory_bytes, config.memory_bytes))
        report["memory_limit_bytes"] = config.memory_bytes
    else:
        report["memory_limit_bytes"] = None
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash dump would hold the job's data
    report["capabilities"] = _drop_capabilities()
    report["landlock"] = _landlock(config) if config.landlock else "off (configured)"
    report["seccomp"] = _seccomp(config.gpu) if config.seccomp else "off (configured)"
    return report


# --- libc ---------------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_PR_SET_NO_NEW_PRIVS = 38


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _no_new_privs() -> None:
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def protect_server() -> bool:
    """Make the calling (server) process non-dumpable: then a process of the same user without
    CAP_SYS_PTRACE (every worker: :func:`apply` drops all capabilities) cannot read its memory or
    its /proc/<pid>/environ (Landlock stops ptrace, but not those reads). Side effect: debuggers
    and profilers need root to attach to the server. Returns whether it took effect."""
    return _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 47, 4
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
_CAP_VERSION_3 = 0x20080522


def _drop_capabilities() -> str:
    """Drop every capability (a worker of a server run as root keeps root's uid, not its powers)."""
    arch = platform.machine()
    with open("/proc/self/status", encoding="ascii") as f:
        held = next((int(line.split()[1], 16) for line in f if line.startswith("CapEff:")), 0)
    if held == 0:
        return "none held"
    if arch not in _SYS_CAPSET:
        return f"held (no capset for architecture {arch})"
    for cap in range(64):  # the bounding set first: dropping it needs CAP_SETPCAP, which goes next
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} sets, all zero
    _check(_libc.syscall(ctypes.c_long(_SYS_CAPSET[arch]), ctypes.byref(header), ctypes.byref(data)), "capset")
    return "all dropped"


# --- Landlock -----------------------------------------------------------------------------------------

_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE = 1 << 0, 1 << 1
_FS_REMOVE_DIR, _FS_REMOVE_FILE, _FS_MAKE_CHAR, _FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_FS_MAKE_REG, _FS_MAKE_SOCK, _FS_MAKE_FIFO, _FS_MAKE_BLOCK, _FS_MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # ABI 2, 3, 5
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV  # rights a rule on a file may hold


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers (0: none)."""
    abi = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(0, int(abi))


def _writable_paths(config: SandboxConfig) -> Iterable[tuple[str, bool]]:
    """(path, is_device) pairs a worker may write."""
    for p in config.writable:
        yield p, False
    yield "/dev/null", True
    if config.gpu:
        # The CUDA driver writes files of its own process under /proc/<pid> when it starts (without it,
        # cuInit fails with "OS call failed"); the rule covers this process's entries only.
        yield f"/proc/{os.getpid()}", False
        for name in sorted(os.listdir("/dev")):
            if name.startswith(("nvidia", "kfd", "dri")):
                yield f"/dev/{name}", True


def _landlock(config: SandboxConfig) -> str:
    abi = landlock_abi()
    if abi < 1:
        return "unavailable (the kernel has no Landlock, or it is disabled)"
    write = (_FS_WRITE_FILE | _FS_REMOVE_DIR | _FS_REMOVE_FILE | _FS_MAKE_CHAR | _FS_MAKE_DIR | _FS_MAKE_REG
             | _FS_MAKE_SOCK | _FS_MAKE_FIFO | _FS_MAKE_BLOCK | _FS_MAKE_SYM)
    if abi >= 2:
        write |= _FS_REFER
    if abi >= 3:
        write |= _FS_TRUNCATE
    handled = write | (0 if config.allow_exec else _FS_EXECUTE) | (_FS_IOCTL_DEV if abi >= 5 else 0)
    attr = _RulesetAttr(handled, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                        (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _check(_libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    granted: list[str] = []
    try:
        for path, device in _writable_paths(config):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                is_dir = os.path.isdir(path) and not device
                rights = (write if is_dir else write & _FILE_RIGHTS) | (_FS_IOCTL_DEV if abi >= 5 and device else 0)
                rule = _PathBeneathAttr(rights & handled, fd)
                _check(_libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                                     ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
                granted.append(path)
            finally:
                os.close(fd)
        _no_new_privs()
        _check(_libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)
    extra = (", no TCP" if abi >= 4 else "") + (", no signals or abstract sockets outside" if abi >= 6 else "")
    exec_ = "" if config.allow_exec else "; no exec"
    return f"on (ABI {abi}): writes only under {', '.join(granted)}{exec_}{extra}"


# --- seccomp ------------------------------------------------------------------------------------------

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# name -> syscall number per architecture (aarch64 has no fork/vfork: its libc uses clone).
_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {"seccomp": 317, "execve": 59, "execveat": 322, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435,
               "socket": 41, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
               "io_uring_setup": 425},
    "aarch64": {"seccomp": 277, "execve": 221, "execveat": 281, "clone": 220, "clone3": 435, "socket": 198,
                "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "io_uring_setup": 425},
}
_DENIED = ("execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup")
_CLONE_THREAD = 0x00010000
_AF_UNIX = 1
_X32_BIT = 0x40000000

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # struct seccomp_data; the low word of args[0] (little-endian)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program(arch: str, *, allow_unix_sockets: bool) -> list[bytes]:
    """The BPF program: a list of 8-byte sock_filter instructions."""
    nr = _SYSCALLS[arch]
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    prog = [_insn(_LD_W_ABS, _OFF_ARCH), _insn(_JEQ_K, _AUDIT_ARCH[arch], jt=1), _insn(_RET_K, _RET_KILL_PROCESS),
            _insn(_LD_W_ABS, _OFF_NR)]
    if arch == "x86_64":  # x32 syscalls reach the same kernel code under other numbers
        prog += [_insn(_JGE_K, _X32_BIT, jf=1), _insn(_RET_K, _RET_KILL_PROCESS)]
    for name in _DENIED:
        if name in nr:
            prog += [_insn(_JEQ_K, nr[name], jf=1), _insn(_RET_K, eperm)]
    prog += [_insn(_JEQ_K, nr["clone3"], jf=1), _insn(_RET_K, enosys)]
    # clone: a thread (CLONE_THREAD set) passes; a new process does not.
    prog += [_insn(_JEQ_K, nr["clone"], jf=4), _insn(_LD_W_ABS, _OFF_ARG0), _insn(_JSET_K, _CLONE_THREAD, jt=1),
             _insn(_RET_K, eperm), _insn(_RET_K, _RET_ALLOW)]
    if allow_unix_sockets:
        prog += [_insn(_JEQ_K, nr["socket"], jf=4), _insn(_LD_W_ABS, _OFF_ARG0), _insn(_JEQ_K, _AF_UNIX, jf=1),
                 _insn(_RET_K, _RET_ALLOW), _insn(_RET_K, eperm)]
    else:
        prog += [_insn(_JEQ_K, nr["socket"], jf=1), _insn(_RET_K, eperm)]
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp(gpu: bool) -> str:
    arch = platform.machine()
    if arch not in _SYSCALLS:
        return f"unavailable (no filter for architecture {arch})"
    prog = seccomp_program(arch, allow_unix_sockets=gpu)
    buf = ctypes.create_string_buffer(b"".join(prog))
    fprog = _SockFprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    _no_new_privs()
    set_mode_filter, tsync = 1, 1
    result = _libc.syscall(ctypes.c_long(_SYSCALLS[arch]["seccomp"]), ctypes.c_uint(set_mode_filter),
                           ctypes.c_uint(tsync), ctypes.byref(fprog))
    if result != 0:
        return f"unavailable (seccomp: {os.strerror(ctypes.get_errno())})"
    sockets = "AF_UNIX only" if gpu else "none"
    return f"on ({arch}): no exec, fork, ptrace or io_uring; threads only; sockets: {sockets}"
