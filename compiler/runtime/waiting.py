"""CPU launches of kernels whose programs may wait for each other, run concurrently.

The usual CPU launch (launch.run_grid) gives each thread a range of program ids and runs them one
after another, so a program that waits for a later one of its own range waits forever. A kernel
with a loop that may wait (backends/cpu/waits.py: a `while` reading memory through an atomic or a
volatile load) is launched here instead, as a GPU runs a grid that fits on it at once:

- worker threads each run the grid function, which claims the next program id not yet started
  from the launch record (native code: no Python per program);
- the launching thread watches the record: when every running program waits (has polled many
  times without writing anything) and programs remain, it starts another worker, so that the
  program the others wait for gets to run, up to knobs.cpu_concurrent_programs() at once;
- when every running program waits, none can be started and none has stopped waiting for
  knobs.cpu_wait_timeout() seconds, it sets the record's abort flag (each waiting program returns)
  and raises DeadlockError naming the loop, instead of hanging the process.

Locks taken and released by programs that are running (a lock-protected reduction) need no
extra worker; a program waiting for a flag a later program sets (a stream-K fix-up, a barrier)
gets one per program waited for.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import errors as E
from .. import knobs
from ..backends.cpu.waits import ABORT, DONE, NEXT, RECORD_SLOTS, WAIT_LOC, WAITING
from ..ir.core import Location
from .launch import _threads

__all__ = ["new_record", "run_waiting"]

_POLL_S = 0.002  # the launching thread looks at the record this often
_STUCK_POLL_S = 0.0005  # ... and this often while every running program waits
_JOIN_AFTER_ABORT_S = 5.0


def new_record() -> Any:
    """A zeroed launch record (int64 slots; backends/cpu/waits.py gives their meaning)."""
    return (ctypes.c_int64 * RECORD_SLOTS)()


def run_waiting(run: Callable[[], None], total: int, record: Any, name: str, locs: list[Location],
                source_line: Callable[[Location], str]) -> None:
    """Run the `total` programs of a launch through `run()` (the grid function with `record`, which
    claims programs until none is left), starting workers as waiting programs need them."""
    limit = knobs.cpu_concurrent_programs()
    timeout = knobs.cpu_wait_timeout()
    workers: list[threading.Thread] = []

    def start() -> bool:
        t = threading.Thread(target=run, name=f"anvil-program-{len(workers)}", daemon=True)
        try:
            t.start()
        except RuntimeError:  # no more threads (memory limits): as if the limit were reached
            return False
        workers.append(t)
        return True

    for _ in range(max(1, min(_threads(), total, limit))):
        if not start():
            break
    if not workers:
        raise E.LaunchError(f"kernel {name}: could not start a thread to run its programs")
    stuck_since: float | None = None
    can_grow = True
    while True:
        alive = [t for t in workers if t.is_alive()]
        if not alive:
            return
        alive[0].join(_STUCK_POLL_S if stuck_since is not None else _POLL_S)
        claimed = min(record[NEXT], total)
        running = claimed - record[DONE]
        if running <= 0 or record[WAITING] < running:
            stuck_since = None
            continue
        if claimed < total and can_grow and len(workers) < limit:
            can_grow = start()
            if can_grow:
                stuck_since = None
                continue
        now = time.monotonic()
        if stuck_since is None:
            stuck_since = now
        elif now - stuck_since >= timeout:
            _abort(record, workers)
            raise _deadlock(name, record, running, total - claimed, len(workers), limit, timeout, locs, source_line)


def _abort(record: Any, workers: list[threading.Thread]) -> None:
    record[ABORT] = 1
    deadline = time.monotonic() + _JOIN_AFTER_ABORT_S
    for t in workers:
        t.join(max(0.0, deadline - time.monotonic()))


def _deadlock(name: str, record: Any, waiting: int, unstarted: int, workers: int, limit: int, timeout: float,
              locs: list[Location], source_line: Callable[[Location], str]) -> E.DeadlockError:
    loc_id = int(record[WAIT_LOC])
    loc = locs[loc_id - 1] if 0 < loc_id <= len(locs) else None
    where = f"{loc.file}:{loc.line}:{loc.col}" if loc is not None else "a loop of the kernel"
    line = f"\n    {source_line(loc).strip()}" if loc is not None else ""
    info: dict[str, Any] = {"kernel": name, "waiting_programs": waiting, "unstarted_programs": unstarted}
    if loc is not None:
        info.update(file=loc.file, line=loc.line, column=loc.col)
    if unstarted:
        what = (f"{waiting} programs wait in the loop at {where} for programs that have not started, and the "
                f"CPU backend runs at most {min(workers, limit)} programs of one launch at the same time")
        hint = ("hint: launch no more programs than can run at once (a persistent grid of as many programs as "
                "the device has cores, e.g. triton.runtime.driver's multiprocessor_count), or raise "
                "ANVIL_CPU_CONCURRENT_PROGRAMS; on a GPU too the programs a kernel waits for must be resident")
    else:
        what = (f"every running program ({waiting}) waits in the loop at {where}, and no program is left to "
                "start that could end the wait")
        hint = ("hint: a program waits for memory no program of the launch writes: check that every flag waited "
                "for is set, every lock taken is released, and the counters waited on reach their targets")
    return E.DeadlockError(f"kernel {name} stopped after {timeout:g} s without progress: {what}{line}\n{hint}",
                           **info)
