"""The serial port in its own process (hil/runtime/port_process.py): against the board emulator
on a real pty, emulator in a third process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import firmware_protocol.messages as M
from firmware_protocol.protocol_errors import DeviceError, LinkLostError
from hil.runtime.port_process import K_STATE_SEQ, PortLink, _Block, _block_offsets
from tests.conftest import wait_for

pytestmark = pytest.mark.slow


def newer_than(link: PortLink, seq: int):
    s = link.poll()
    return s if s is not None and s.seq != seq else None


def test_commands_go_out_and_states_come_back_through_the_port_process(emulator):
    emu = emulator("--kind", "puma6", "--noise-deg", "0", "--watchdog-ms", "1000")   # pauses of a busy machine
    link = PortLink(emu.path, 1_000_000, 0.25, 6, realtime=False)
    try:
        assert link.info.n_joints == 6 and link.info.kind_name == "PUMA6"
        assert link._proc.pid != os.getpid() and link._proc.is_alive()
        link.send_positions(np.zeros(6), hold=True)
        s0 = wait_for(link.poll)
        assert s0.state == M.BoardState.DISABLED and s0.q.shape == (6,)
        link.enable()  # a transaction: its ACK arrives while the port process keeps polling
        q0 = s0.q.copy()
        target = q0 + 0.05
        seqs = []
        for k in range(600):
            link.send_positions(q0 + 0.05 * min(1.0, k / 200))
            time.sleep(0.001)
            seqs.append(link.poll().seq)
        s = wait_for(lambda: newer_than(link, seqs[-1]))
        assert s.state == M.BoardState.ENABLED, s
        np.testing.assert_allclose(s.q, target, atol=2e-4)  # independent: the emulator's own servo model
        # fresh states kept coming, cycle after cycle: in each hundred commands, dozens (a busy
        # machine holds up this process and the port process, neither real-time here: 286 of 600
        # were fresh beside two CPU-bound jobs)
        assert all(len(set(seqs[k:k + 100])) > 20 for k in range(0, 600, 100)), seqs
        assert link.rejected_frames == 0
        link.estop()  # no waiting: the board confirms in its STATE
        assert wait_for(lambda: (lambda x: x if x.state == M.BoardState.ESTOP else None)(link.poll()),
                        timeout_s=0.5)
    finally:
        link.close()
    assert not link._proc.is_alive()


@pytest.mark.parametrize("bus", [None, "dynamixel2"])
def test_the_port_process_runs_at_the_helpers_priority_off_the_loop_s_cpu(emulator, bus):
    """One step below the loop (SCHED_FIFO 40), every thread of it, and never on the loop's CPU."""
    from hil import board_config, robots
    from hil.emulator_launch import start_bus_emulator
    from hil.runtime.realtime import HELPER_FIFO, loop_cpu_choice

    if os.geteuid() != 0:
        pytest.skip("real-time scheduling needs root or CAP_SYS_NICE")
    if bus is None:
        emu, config, n = emulator("--kind", "puma6", "--watchdog-ms", "1000"), None, 6
    else:
        model = robots.load("humanoid17")
        config = board_config.shipped(model, bus)
        emu, n = start_bus_emulator(config, model), model.n
    link = PortLink(emu.path, 1_000_000, 0.25, n, realtime=True, bus=config)
    try:
        pid = link._proc.pid
        loop_cpu = loop_cpu_choice()
        for tid in [int(t) for t in os.listdir(f"/proc/{pid}/task")]:
            assert os.sched_getscheduler(tid) == os.SCHED_FIFO, tid
            assert os.sched_getparam(tid).sched_priority == HELPER_FIFO
            assert loop_cpu is None or loop_cpu not in os.sched_getaffinity(tid)
    finally:
        link.close()
        if bus is not None:
            emu.stop()


def test_a_port_that_cannot_be_opened_fails_as_a_direct_connection_would(tmp_path):
    with pytest.raises(DeviceError) as e:
        PortLink(str(tmp_path / "ttyNONE"), 1_000_000, 0.25, 6, realtime=False)
    assert str(tmp_path / "ttyNONE") in str(e.value) and "no such port" in str(e.value)


def test_a_lost_board_and_a_dead_port_process_are_both_a_lost_link(emulator):
    emu = emulator("--kind", "puma6")
    link = PortLink(emu.path, 1_000_000, 0.25, 6, realtime=False)
    try:
        link.send_positions(np.zeros(6), hold=True)
        wait_for(link.poll)
        emu.kill()
        with pytest.raises(LinkLostError) as e:
            wait_for(lambda: link.send_positions(np.zeros(6), hold=True) or link.poll() and None, timeout_s=2.0)
        assert f"link to {emu.path} lost" in str(e.value)
    finally:
        link.close()

    emu = emulator("--kind", "puma6")
    link = PortLink(emu.path, 1_000_000, 0.25, 6, realtime=False)
    try:
        link.send_positions(np.zeros(6), hold=True)
        wait_for(link.poll)
        os.kill(link._proc.pid, signal.SIGKILL)
        with pytest.raises(LinkLostError) as e:
            wait_for(lambda: link.poll() and None, timeout_s=2.0)
        assert "the port process has not run for" in str(e.value)
    finally:
        link.close()


ORPHAN = r"""
import sys, time
from hil.runtime.port_process import PortLink
link = PortLink(sys.argv[1], 1_000_000, 0.25, 6, realtime=False)
print(link._proc.pid, flush=True)
time.sleep(60)
"""


def test_the_port_process_ends_when_the_loops_process_dies(emulator):
    """The loop's process killed outright runs no clean-up: the port process must notice by itself
    (and then the board's watchdog holds the robot)."""
    emu = emulator("--kind", "puma6")
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN, emu.path], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        os.kill(child, 0)  # running
        parent.kill()
        parent.wait(timeout=5)

        def gone():
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return True
            with open(f"/proc/{child}/stat") as f:
                return f.read().split(")")[1].split()[0] == "Z"  # exited, awaiting its reaper
        assert wait_for(gone, timeout_s=3.0)
    finally:
        parent.kill()
        parent.stdout.close()


def test_the_state_slot_is_never_read_torn():
    """A writer process fills the slot with one value per write as fast as it can; every read
    must see a single value."""
    import mmap
    from multiprocessing import get_context

    n = 17
    buf = mmap.mmap(-1, _block_offsets(n)[2])
    block = _Block(buf, n)

    def writer():
        v = np.empty(block.state.size)
        for k in range(1, 200_000):
            v[:] = k
            block.write(K_STATE_SEQ, block.state, v)

    p = get_context("fork").Process(target=writer)
    p.start()
    out = np.empty(block.state.size)
    seen = set()
    gave_up = 0
    try:
        while p.is_alive() or not seen:
            if block.read(K_STATE_SEQ, block.state, out) < 0:
                gave_up += 1  # the writer never let go within the tries: no copy, and says so
                continue
            assert np.all(out == out[0]), out
            seen.add(out[0])
    finally:
        p.join()
    assert len(seen) > 10  # the reads did overlap the writes
    print(f"{len(seen)} consistent reads, {gave_up} given up")


def test_a_failure_inside_the_port_process_is_the_links_loss_reason(emulator, monkeypatch):
    """A bug in the port process must not leave the loop guessing: its error becomes the reason.
    The port process is forked from this one, so it inherits the broken poll()."""
    from firmware_protocol.link import Link

    calls = {"n": 0}
    real_poll = Link.poll

    def poll_then_fail(self):
        calls["n"] += 1
        if calls["n"] > 50:
            raise RuntimeError("decoder exploded")
        return real_poll(self)

    monkeypatch.setattr(Link, "poll", poll_then_fail)
    emu = emulator("--kind", "puma6")
    link = PortLink(emu.path, 1_000_000, 0.25, 6, realtime=False)
    try:
        with pytest.raises(LinkLostError) as e:
            wait_for(lambda: link.send_positions(np.zeros(6), hold=True) or link.poll() and None, timeout_s=2.0)
        assert "the port process failed: RuntimeError('decoder exploded')" in str(e.value)
    finally:
        link.close()


@pytest.mark.parametrize("bus", [None, "dynamixel2"])
def test_an_emulator_started_by_hand_is_scheduled_as_a_board_s_own_processor(bus):
    """`hil emulate` from a shell: the emulator it becomes gets the board's share too (at an
    ordinary share beside a busy machine's jobs, a physics emulator's servos went silent for 123 ms
    and the walk faulted); the shell's session is left as it was."""
    from firmware_protocol.board_cpu import BOARD_NICE

    if os.geteuid() != 0:
        pytest.skip("a raised share needs root or CAP_SYS_NICE")
    robot = ["--robot", "humanoid17", "--bus", bus] if bus else ["--robot", "puma560"]
    proc = subprocess.Popen([sys.executable, "-m", "hil.cli", "emulate", *robot], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("/dev/"), proc.stderr.read() if proc.poll() is not None else ""
        assert os.sched_getscheduler(proc.pid) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == BOARD_NICE
        assert os.getpriority(os.PRIO_PROCESS, 0) > BOARD_NICE
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


@pytest.mark.parametrize("impl", ["python", "c", "qemu"])
def test_a_dry_run_s_emulator_is_scheduled_as_a_board_s_own_processor(impl):
    """The emulator stands in for a board's own processor: a busy host must not starve it. It gets a
    raised share at ordinary scheduling (a real-time emulator starved the kernel's pty delivery),
    QEMU with its launcher (where root may ask)."""
    from firmware_protocol.board_cpu import BOARD_NICE
    from hil import robots
    from hil.emulator_launch import start_emulator
    from tests.conftest import HAVE_C_TOOLS, HAVE_QEMU_TOOLS

    if impl == "c" and not HAVE_C_TOOLS or impl == "qemu" and not HAVE_QEMU_TOOLS:
        pytest.skip(f"the {impl} emulator's tools are not installed")
    if os.geteuid() != 0:
        pytest.skip("a raised share needs root or CAP_SYS_NICE")
    emu = start_emulator(robots.load("puma560"), impl=impl)
    try:
        pid = emu.proc.pid
        kids = [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        assert bool(kids) == (impl == "qemu"), "QEMU is a child of its launcher"
        for p in (pid, *kids):
            assert os.sched_getscheduler(p) == os.SCHED_OTHER
            assert os.getpriority(os.PRIO_PROCESS, p) == BOARD_NICE
    finally:
        emu.stop()
