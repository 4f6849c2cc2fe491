"""Holding a CPU out of idle states and giving it back (needs root for the kernel's files)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest

from hil.runtime import cpu_idle

CPU = max(os.sched_getaffinity(0))
PATH = cpu_idle.resume_latency_path(CPU)


def read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def writable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.W_OK)


def dma_latency_us() -> int:
    with open(cpu_idle.DMA_LATENCY, "rb") as f:
        return struct.unpack("=i", f.read(4))[0]


@pytest.mark.skipif(not writable(PATH), reason="no writable per-cpu resume latency (needs root on Linux)")
def test_one_cpu_is_held_and_given_back_as_it_was():
    before = read(PATH)
    release, note = cpu_idle.hold_cpu_awake(CPU)
    try:
        assert read(PATH) == cpu_idle.NO_IDLE
        assert note.startswith(f"cpu {CPU} kept out of idle states")
    finally:
        release()
    assert read(PATH) == before
    release()  # a second release changes nothing
    assert read(PATH) == before


@pytest.mark.skipif(not writable(PATH), reason="no writable per-cpu resume latency (needs root on Linux)")
def test_restore_puts_back_what_a_killed_holder_left():
    before = cpu_idle.snapshot()
    assert before[CPU] == read(PATH)
    release, _ = cpu_idle.hold_cpu_awake(CPU)  # never released: as if its process was killed
    assert read(PATH) != before[CPU]
    try:
        assert cpu_idle.restore(before) == [CPU]
        assert read(PATH) == before[CPU]
        assert cpu_idle.restore(before) == []  # nothing left to restore
    finally:
        with open(PATH, "w") as f:
            f.write(before[CPU])


@pytest.mark.skipif(not writable(PATH), reason="no writable per-cpu resume latency (needs root on Linux)")
def test_a_cpu_someone_else_holds_is_left_to_them():
    before = read(PATH)
    theirs, _ = cpu_idle.hold_cpu_awake(CPU)
    try:
        snap = cpu_idle.snapshot()
        mine, note = cpu_idle.hold_cpu_awake(CPU)
        assert note.endswith("(it already was)")
        mine()
        assert read(PATH) == cpu_idle.NO_IDLE  # still theirs
        assert cpu_idle.restore(snap) == []  # held when the snapshot was taken: not ours to undo
        assert read(PATH) == cpu_idle.NO_IDLE
    finally:
        theirs()
    assert read(PATH) == before


@pytest.mark.skipif(not writable(cpu_idle.DMA_LATENCY), reason="no writable /dev/cpu_dma_latency (needs root)")
def test_every_cpu_is_held_through_cpu_dma_latency_until_released():
    before = dma_latency_us()
    release, note = cpu_idle.hold_cpu_awake(None)
    try:
        assert dma_latency_us() == 0
        assert "cpu_dma_latency" in note
    finally:
        release()
    assert dma_latency_us() == before
    release()


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
