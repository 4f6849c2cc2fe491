"""Holding the CPUs out of idle states and giving them back (needs root for the kernel's file)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from hil.runtime import cpu_idle

CPU = max(os.sched_getaffinity(0))
needs_dma = pytest.mark.skipif(not (os.path.exists(cpu_idle.DMA_LATENCY) and os.access(cpu_idle.DMA_LATENCY, os.W_OK)),
                               reason="no writable /dev/cpu_dma_latency (needs root)")


@needs_dma
def test_held_through_cpu_dma_latency_until_released():
    before = cpu_idle.dma_latency_us()
    release, note = cpu_idle.hold_cpu_awake(CPU)
    try:
        assert cpu_idle.dma_latency_us() == 0
        assert f"cpu {CPU}" in note and "cpu_dma_latency" in note
    finally:
        release()
    assert cpu_idle.dma_latency_us() == before
    release()  # a second release changes nothing
    assert cpu_idle.dma_latency_us() == before


@needs_dma
def test_a_holder_killed_outright_leaves_nothing_behind():
    """The request dies with its process: SIGKILL runs no cleanup, and the kernel undoes it."""
    before = cpu_idle.dma_latency_us()
    code = ("from hil.runtime import cpu_idle\n"
            "r, note = cpu_idle.hold_cpu_awake(%d)\n"
            "print(note, flush=True)\n"
            "import time; time.sleep(60)\n" % CPU)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert "kept out of idle states" in proc.stdout.readline()
        assert cpu_idle.dma_latency_us() == 0
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
    deadline = time.monotonic() + 5
    while cpu_idle.dma_latency_us() != before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cpu_idle.dma_latency_us() == before


@pytest.mark.skipif(not os.path.exists(cpu_idle.DMA_LATENCY), reason="no cpu_dma_latency (not Linux)")
def test_without_permission_the_note_says_so():
    """As an ordinary user (root takes nobody's file-system identity in the child, after its imports):
    nothing is held, and the note says why."""
    code = ("import ctypes, os\n"
            "from hil.runtime import cpu_idle\n"
            "if os.geteuid() == 0:\n"
            "    ctypes.CDLL(None, use_errno=True).setfsuid(65534)\n"
            "r, note = cpu_idle.hold_cpu_awake(%d)\n"
            "r()\n"
            "print(note)\n" % CPU)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "idle states allowed (permission denied)"
