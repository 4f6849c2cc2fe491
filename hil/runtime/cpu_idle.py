"""Keep the CPUs out of idle states while the loop runs.

Between two cycles the loop sleeps, and the kernel may put its CPU into an idle state. Leaving
that state costs its exit latency on every wake-up: 50–200 µs for a deep C-state on a laptop,
and on a virtual machine a halted virtual CPU must be rescheduled by the hypervisor
(benchmarks/README.md has the figures). Holding the CPUs in their polling idle state removes
that cost, at the price of the cores not resting while the loop runs (cyclictest and real-time
Linux guides do the same for the same reason).

The request is `/dev/cpu_dma_latency` held open at 0 µs: the kernel drops it by itself when the
file is closed, however the process ends — a SIGKILL included — so nothing the run changes on the
machine outlives it. (Each CPU's own `power/pm_qos_resume_latency_us` would spare the other CPUs,
but the kernel keeps that value after the process dies, and a killed run would leave the CPU
polling until someone wrote it back.) It needs root, or a udev rule giving the user the file;
without it the loop runs anyway and says so.
"""

from __future__ import annotations

import os
import struct
from typing import Callable

DMA_LATENCY = "/dev/cpu_dma_latency"


def read_kernel_file(path: str) -> str | None:
    """A sysfs or procfs file's text, stripped; None when it is missing or unreadable."""
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def dma_latency_us() -> int | None:
    """The machine's current CPU latency limit (µs; 2 000 000 000 when nobody asks for one)."""
    try:
        with open(DMA_LATENCY, "rb") as f:
            return struct.unpack("=i", f.read(4))[0]
    except (OSError, struct.error):
        return None


def hold_cpu_awake(cpu: int | None = None) -> tuple[Callable[[], None], str]:
    """Keep the CPUs (the loop's `cpu` among them) in their polling idle state until the returned
    release is called or this process ends.

    Returns (release, note): release is idempotent and never raises; the note says what was
    obtained, for the loop's start-up message."""
    try:
        fd = os.open(DMA_LATENCY, os.O_WRONLY | os.O_CLOEXEC)
    except OSError as e:
        return (lambda: None), f"idle states allowed ({e.strerror.lower() if e.strerror else e})"
    try:
        os.write(fd, struct.pack("=i", 0))
    except OSError as e:
        os.close(fd)
        return (lambda: None), f"idle states allowed ({DMA_LATENCY}: {e.strerror})"
    closed = False

    def release() -> None:
        nonlocal closed
        if not closed:
            closed = True
            os.close(fd)

    where = "every cpu" if cpu is None else f"cpu {cpu} (and every other)"
    return release, f"{where} kept out of idle states (cpu_dma_latency 0, until the loop ends)"
