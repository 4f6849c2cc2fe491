"""What the loop asks of the operating system, and its clock: SCHED_FIFO, CPU pinning, the CPU kept
out of idle states, the hypervisor's steal, the grid of deadlines and the sleep before each.

The loop, its port helpers (thread or process) and `hil rt-check` share these, so the check
measures exactly what the loop gets. Nothing here imports the rest of the runtime.
"""

from __future__ import annotations

import errno
import gc
import re
import stat
import fcntl
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hil.errors import HilError
from hil.process_life import real_time_gc
from hil.runtime.cpu_idle import hold_cpu_awake
from hil.runtime.misses import MissTracer


def next_deadline_after(deadline: float, now: float, period: float,
                        woke: float | None = None) -> tuple[float, int, float]:
    """After serving `deadline` (s, monotonic clock; the cycle woke at `woke` and ends at `now`):
    the next deadline on the loop's grid, how many grid deadlines are skipped, and the time to
    wake for it — the deadline, but never sooner than half a period after `woke`.

    Cycles never follow each other closer than half a period, and the loop never catches up by
    serving passed deadlines back to back: that sent the board a burst of commands (up to ten
    within a few hundred µs after a stall), each a full period's step of the motion, so the
    motion briefly ran several times its planned speed. A deadline that could only be served
    more than half a period late — a miss either way — is skipped instead (counted as missed; the
    motion pauses for it); none other is."""
    earliest = now if woke is None else max(now, woke + period / 2)
    passed = max(int((earliest - period / 2 - deadline) / period), 0)  # grid deadlines too far behind
    following = deadline + (passed + 1) * period
    return following, passed, max(following, earliest)


def freeze_heap(collect: bool = True) -> None:
    """Before a real-time process's first cycle: what it has built so far leaves the garbage
    collector's view. A full collection walks every object alive (numpy, Numba, the robot: over a
    hundred thousand), tens of milliseconds in which a cycle stands still, long enough for the
    board's command watchdog to latch; frozen, a collection walks only what the run itself makes.
    `collect=False` in a forked process: collecting first would write to every object its parent
    built, copying their pages; freezing alone moves them at once."""
    if collect:
        gc.collect()
    gc.freeze()
    real_time_gc()


def sleep_before(wake_at: float, spin_s: float, tracer: MissTracer) -> float | None:
    """Sleep until `spin_s` before `wake_at` (s, monotonic clock; the caller spins the rest),
    telling `tracer` what was asked and when the sleep ended. The loop and rt-check's floor both
    use it, so the floor measures the loop's own sleep. Returns how late the sleep ended (s), or
    None when there was no time to sleep."""
    start = time.monotonic()
    sleep_for = wake_at - start - spin_s
    tracer.sleeping(start, sleep_for)
    if sleep_for <= 0:
        tracer.awake(start)
        return None
    time.sleep(sleep_for)
    end = time.monotonic()
    tracer.awake(end)
    return end - start - sleep_for


SPIN_MIN_S = 150e-6    # the sized spin's floor: the loop rehearses its kernels in it when 100 µs are left
SPIN_MAX_S = 500e-6    # the most it grows to by itself (--spin-us may ask for more)
SPIN_SLEEPS = 512      # the sleeps the spin is sized on (about a second at 500 Hz)
# a dry run's loop does not spin: the emulated board moves its servos once a millisecond, so a
# cycle a few tens of microseconds late changes nothing it does, and the CPU a spin burns is the
# emulator's and the twin's (--spin-us still sets one)
DRY_RUN_SPIN_S = 0.0


class SpinWindow:
    """How long the loop busy-waits before each deadline (s, `seconds`): the user's figure when
    given (`--spin-us`); otherwise sized to the sleep's own lateness, 1.25 × its 99th percentile
    over the last SPIN_SLEEPS sleeps plus 20 µs, kept within SPIN_MIN_S … SPIN_MAX_S, and resized
    every half window. It starts at the most: the first second is covered while it learns.

    A spin shorter than the sleep's lateness costs jitter; a longer one costs only CPU, all of
    it burned while the loop has nothing to do (with SCHED_FIFO, taken from every other process
    on its CPU). A fixed 500 µs spent a quarter of a 500 Hz loop's CPU where the sleep's 99th
    percentile is about 100 µs."""

    def __init__(self, fixed_s: float | None) -> None:
        self.fixed = fixed_s is not None
        self.seconds = fixed_s if fixed_s is not None else SPIN_MAX_S
        self._late = np.zeros(SPIN_SLEEPS)
        self._n = 0

    def slept(self, late_s: float | None) -> None:
        """After a sleep that ended `late_s` late (None: there was none)."""
        if self.fixed or late_s is None:
            return
        self._late[self._n % SPIN_SLEEPS] = late_s
        self._n += 1
        if self._n % (SPIN_SLEEPS // 2) == 0:
            n = min(self._n, SPIN_SLEEPS)
            k = int(0.99 * (n - 1))
            p99 = float(np.partition(self._late[:n], k)[k])
            self.seconds = min(SPIN_MAX_S, max(SPIN_MIN_S, 1.25 * p99 + 20e-6))


def cpu_times(cpu: int | None) -> tuple[int, int] | None:
    """(steal, total) clock ticks of one CPU (None: all CPUs) from /proc/stat, or None off Linux.

    Steal is time the hypervisor ran something else while this virtual CPU wanted to run: on a
    VM it shows up as late wake-ups no scheduling policy inside the guest can prevent."""
    key = "cpu" if cpu is None else f"cpu{cpu}"
    try:
        with open("/proc/stat") as f:
            for line in f:
                parts = line.split()
                if parts and parts[0] == key:
                    ticks = [int(x) for x in parts[1:9]]  # user nice system idle iowait irq softirq steal
                    return ticks[7], sum(ticks)
    except (OSError, ValueError, IndexError):
        pass
    return None


def steal_fraction(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """Share of the CPU's time taken by the hypervisor between two `cpu_times` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


@dataclass
class RealtimeGrant:
    """What the calling process obtained: SCHED_FIFO, the CPU it is pinned to, a note for the user
    saying all of it, and `release` giving the CPU its idle states back (idempotent)."""
    sched_fifo: bool
    cpu: int | None
    note: str
    cpu_idle_note: str
    release: Callable[[], None]


LOOP_CPU_ENV = "HIL_LOOP_CPU"   # the CPU a loop reserved, for its port process (inherited)
LOOP_FIFO = 50     # the loop's SCHED_FIFO priority
HELPER_FIFO = 40   # its helpers' (the port process or thread): one below it
_reserved: dict[str, object] = {}   # this process's reservation: cpu, the held lock's fd, a note


def memory_folder() -> str:
    """Where the runtime's per-machine files go: /dev/shm (memory, gone at reboot), else the
    temporary folder."""
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def private_folder(path: str, where: str, fix: str) -> str:
    """`path`, a folder only this user can enter: made 0700 if missing; HilError when it is anything
    else (a symlink, another user's, open to others), so that nothing hil writes into a shared
    place like /dev/shm can be redirected or read by someone else."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise HilError(f"cannot create {where}: {e.strerror}: {fix}") from None
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise HilError(f"{where} is not a private folder of this user (a symlink, another owner, or open to "
                       f"others): {fix}")
    return path


def user_folder() -> str:
    """This user's private folder in memory, /dev/shm/hil-<uid>: the loops' blocks (unless
    HIL_RUNTIME_DIR names another folder for them) and the CPU reservations (always here: they are
    the machine's, whichever folder a loop's block is in)."""
    path = os.path.join(memory_folder(), f"hil-{os.getuid()}")
    return private_folder(path, path, "remove it and start again")


def _lock_path(cpu: int) -> str:
    return os.path.join(user_folder(), f"loop-cpu{cpu}.lock")


class NoFreeCpuError(HilError, OSError):
    """Every CPU this process may use already runs a hil loop pinned to it."""


def _loop_cpus() -> list[int]:
    """The CPUs a loop may be pinned to: those this process may use, when there are two or more."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return []
    return cpus if len(cpus) > 1 else []


def _try_cpu(cpu: int) -> int | None:
    """The reservation of `cpu` (an open fd holding its lock), or None when another loop holds it.
    Raises OSError when no lock file can be made here."""
    fd = os.open(_lock_path(cpu), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(errno.EPERM, f"{_lock_path(cpu)} is not this user's file")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


_HOLDER = re.compile(r"pid (\d{1,9})(?:, ([\w./:-][\w./: -]{0,159}))?")


def _holder(cpu: int) -> str:
    """Who holds a CPU's reservation ("pid 1234, puma560"): only the pid and the robot's name, read
    as such from the lock file (never its text as it stands), else "a hil loop"."""
    try:
        fd = os.open(_lock_path(cpu), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            text = os.read(fd, 200).decode("ascii", "replace")
        finally:
            os.close(fd)
    except (OSError, HilError):
        return "a hil loop"
    m = _HOLDER.fullmatch(text.strip())
    if m is None:
        return "a hil loop"
    return f"pid {m.group(1)}" + (f", {m.group(2)}" if m.group(2) else "")


def check_a_loop_cpu_is_free() -> None:
    """Before anything starts: NoFreeCpuError when every CPU already has a hil loop pinned to it.
    A loop sharing a CPU with another would disturb it (both spinning before their deadlines use
    up the kernel's real-time budget on that CPU, and the kernel then stops both for the rest of
    that second, longer than a board's watchdog), so the newcomer does not start."""
    cpus = _loop_cpus()
    held = []
    for cpu in cpus:
        try:
            fd = _try_cpu(cpu)
        except OSError:
            return   # no lock files here: nothing to tell
        if fd is not None:
            os.close(fd)
            return
        held.append(f"cpu {cpu}: {_holder(cpu)}")
    if held:
        raise NoFreeCpuError(errno.EBUSY, f"every CPU already runs a hil loop ({'; '.join(held)}): a loop "
                                          "sharing a CPU would make the other miss its deadlines. Stop one of "
                                          "them, or start this one with --no-realtime (no CPU of its own, no "
                                          "real-time priority)")


def reserve_loop_cpu(owner: str = "") -> int | None:
    """The CPU this process's loop will be pinned to, reserved for as long as the process lives:
    the last allowed CPU whose reservation no other loop holds (an `flock` the kernel drops when
    the process ends, however it ends), counting down; `owner` is written into the lock file for
    a later loop's refusal to name. NoFreeCpuError when every CPU is held (see
    `check_a_loop_cpu_is_free`); None with one CPU."""
    if "cpu" in _reserved:
        return _reserved["cpu"]
    cpus = _loop_cpus()
    cpu, note = (cpus[-1] if cpus else None), ""
    for candidate in reversed(cpus):
        try:
            fd = _try_cpu(candidate)
        except OSError:
            break   # no lock files here: the last CPU, as without reservations
        if fd is None:
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}{', ' + owner if owner else ''}".encode())
        _reserved["fd"] = fd
        cpu = candidate
        if candidate != cpus[-1]:
            note = f" (cpu {cpus[-1]} has another hil loop)"
        break
    else:
        if cpus:
            check_a_loop_cpu_is_free()   # raises, naming the loops
    _reserved.update(cpu=cpu, note=note)
    if cpu is not None:
        os.environ[LOOP_CPU_ENV] = str(cpu)
    return cpu


def loop_cpu_choice() -> int | None:
    """The CPU the loop is (or will be) pinned to: the one it reserved (`reserve_loop_cpu`, also
    told to its port process through the environment), else the last one this process may use
    (None with one)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        return None
    chosen = os.environ.get(LOOP_CPU_ENV, "")
    if chosen.isdigit() and int(chosen) in cpus and len(cpus) > 1:
        return int(chosen)
    return cpus[-1] if len(cpus) > 1 else None


def leave_the_loop_cpu(loop_cpu: int | None, fifo: bool) -> None:
    """For a helper of the loop (the port thread or process), in the calling thread: SCHED_FIFO 40
    when `fifo` (one step below the loop: it holds the port, and an ordinary process preempting it
    there would hold the loop up behind it), and every CPU but the loop's — a helper of equal
    priority stuck in a system call on the loop's CPU would delay the loop's wake-up. What is
    refused is left as it was."""
    if fifo:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(HELPER_FIFO))
        except (PermissionError, OSError, AttributeError):
            pass
    if loop_cpu is not None:
        try:
            others = set(range(os.cpu_count() or 1)) - {loop_cpu}
            if others:
                os.sched_setaffinity(0, others)
        except (OSError, AttributeError):
            pass


def claim_realtime(realtime: bool, keep_cpu_awake: bool = True) -> RealtimeGrant:
    """Ask for what the loop runs with: SCHED_FIFO 50, pinning to a CPU of its own (see
    `reserve_loop_cpu`: the last allowed one unless another loop has it), and that CPU
    kept out of idle states (see cpu_idle.py). Whatever is refused is said in the note; nothing
    raises. Changes the calling process's scheduling: call it in the process that will run."""
    notes = []
    fifo = False
    cpu = None
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(LOOP_FIFO))
            fifo = True
            notes.append(f"SCHED_FIFO {LOOP_FIFO} granted")
        except (PermissionError, OSError, AttributeError) as e:
            notes.append(f"SCHED_FIFO not permitted ({e.__class__.__name__}); normal scheduling")
        try:
            cpu = reserve_loop_cpu()
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
                notes.append(f"pinned to cpu {cpu}{_reserved.get('note', '')}")
        except (OSError, AttributeError):
            cpu = None
            notes.append("cpu affinity not permitted")
    else:
        notes.append("realtime scheduling not requested")
    release, idle_note = (lambda: None), "idle states allowed (not requested)"
    if realtime and keep_cpu_awake:
        release, idle_note = hold_cpu_awake(cpu)
        notes.append(idle_note)
    return RealtimeGrant(fifo, cpu, ", ".join(notes), idle_note, release)
