"""Keep the loop's CPU out of idle states while the loop runs.

Between two cycles the loop sleeps, and the kernel may put its CPU into an idle state. Leaving
that state costs its exit latency on every wake-up: 50–200 µs for a deep C-state on a laptop,
and on a virtual machine a halted virtual CPU must be rescheduled by the hypervisor, which
measured here as wake-ups late by 350–1000 µs at p99 (benchmarks/README.md). Holding the CPU in
its polling idle state removes that cost, at the price of that one core never resting while
the loop runs (cyclictest and real-time Linux guides do the same for the same reason).

Mechanism, most specific first:
1. The CPU's own resume-latency limit, ``/sys/devices/system/cpu/cpuN/power/
   pm_qos_resume_latency_us``: writing ``n/a`` allows no idle state with any exit latency on that
   CPU only. The kernel keeps it after the process ends, so the loop restores the old value on
   exit and the supervisor restores it again (`restore`) after the loop process is gone, however
   it ended.
2. Otherwise ``/dev/cpu_dma_latency`` held at 0 µs: every CPU stays out of idle states, and the
   kernel drops the request by itself when the file is closed, even on a crash.
Both need root (or a udev rule giving the user the files); without them the loop runs anyway
and says so.
"""

from __future__ import annotations

import os
import struct
from typing import Callable

_CPU_DIR = "/sys/devices/system/cpu"
DMA_LATENCY = "/dev/cpu_dma_latency"
NO_IDLE = "n/a"  # the sysfs spelling of "no exit latency allowed" (0 there means "no limit")


def resume_latency_path(cpu: int) -> str:
    """The sysfs file holding `cpu`'s resume-latency limit (µs, or n/a)."""
    return f"{_CPU_DIR}/cpu{cpu}/power/pm_qos_resume_latency_us"


def read_kernel_file(path: str) -> str | None:
    """A sysfs or procfs file's text, stripped; None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w") as f:
            f.write(value)
        return True
    except OSError:
        return False


def hold_cpu_awake(cpu: int | None) -> tuple[Callable[[], None], str]:
    """Keep `cpu` (None: every CPU) in its polling idle state until the returned release is called.

    Returns (release, note): release is idempotent and never raises; the note says what was
    obtained, for the loop's start-up message."""
    if cpu is not None:
        path = resume_latency_path(cpu)
        previous = read_kernel_file(path)
        if previous == NO_IDLE:
            # someone else holds it (another loop, or an administrator): theirs to give back
            return (lambda: None), f"cpu {cpu} kept out of idle states (it already was)"
        if previous is not None and _write(path, NO_IDLE):
            done = False

            def release() -> None:
                nonlocal done
                if not done:
                    done = True
                    _write(path, previous)

            return release, f"cpu {cpu} kept out of idle states"
    try:
        fd = os.open(DMA_LATENCY, os.O_WRONLY)
    except OSError as e:
        return (lambda: None), f"idle states allowed ({e.strerror.lower() if e.strerror else e})"
    try:
        os.write(fd, struct.pack("=i", 0))
    except OSError as e:
        os.close(fd)
        return (lambda: None), f"idle states allowed ({DMA_LATENCY}: {e.strerror})"
    closed = False

    def release_fd() -> None:
        nonlocal closed
        if not closed:
            closed = True
            os.close(fd)

    return release_fd, "every cpu kept out of idle states (cpu_dma_latency 0)"


def snapshot() -> dict[int, str]:
    """Every CPU's resume-latency limit as it is now (CPUs without the file are left out)."""
    found = {}
    for cpu in range(os.cpu_count() or 1):
        value = read_kernel_file(resume_latency_path(cpu))
        if value is not None:
            found[cpu] = value
    return found


def restore(before: dict[int, str]) -> list[int]:
    """Give back the limits of `snapshot` that are held now but were not then; returns those CPUs.

    For the supervisor, after the loop process has ended: a loop that was killed could not."""
    restored = []
    for cpu, value in before.items():
        path = resume_latency_path(cpu)
        if value != NO_IDLE and read_kernel_file(path) == NO_IDLE and _write(path, value):
            restored.append(cpu)
    return restored
