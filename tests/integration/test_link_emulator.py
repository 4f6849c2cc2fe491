"""The serial link against the board emulators, through a real pty and pyserial, emulator in
another process."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import firmware_protocol.messages as M
from firmware_protocol.protocol_errors import DeviceError, HandshakeError, LinkLostError
from firmware_protocol.link import Link, probe
from tests.conftest import wait_for
from tests.launch import HIL

pytestmark = pytest.mark.slow


# How long a link may hear nothing before it counts as lost, in the tests not about losing it (the
# link's own default is for a real board on a machine that gives the loop its CPU): here the test's
# own process, not real-time, shares two CPUs with the other test worker and whatever else runs, and
# was seen not to hear its emulator for 252 ms beside two CPU-bound jobs; QEMU's processor, emulated
# on that host, stalls longer still
SILENCE_S = 1.0


def _stream(link, q, seconds, rate_hz=500.0):
    # (on QEMU's image more than it carries are lost, as a UART overrun loses them)
    n = int(seconds * rate_hz)
    for _ in range(n):
        link.send_positions(q)
        time.sleep(1.0 / rate_hz)


@pytest.mark.parametrize("kind,n", [("puma6", 6), ("humanoid17", 17)])
def test_handshake(emulator, kind, n):
    emu = emulator("--kind", kind, "--uid", "0123456789ABCDEF01234567")
    with Link.connect(emu.path) as link:
        info = link.info
        assert info.n_joints == n and info.kind_name == kind.upper().replace("6", "6")
        assert info.uid == "0123456789ABCDEF01234567" and info.firmware == "1.0.0" and info.boot_id != 0
        assert info.protocol == "1.0" and info.schema_hash == M.SCHEMA_HASH
        s = wait_for(link.latest)
        assert s.state == M.BoardState.DISABLED  # boots disabled
        assert s.q.shape == (n,)


def test_thousand_command_state_cycles(emulator):
    # the board's watchdog set long: this loop is plain Python, and on a busy machine it can stall
    # longer than the default allows, which stops the board short of the target (its own tests
    # are elsewhere)
    emu = emulator("--kind", "puma6", "--noise-deg", "0", "--watchdog-ms", "1000")
    with Link.connect(emu.path, link_timeout_s=SILENCE_S) as link:
        q0 = wait_for(link.latest).q.copy()
        link.enable()
        target = q0 + 0.02
        sent0, states0 = link.stats.tx_commands, link.stats.rx_states  # connect asks for a first STATE
        t0 = time.monotonic()
        # QEMU's USART passes a byte per pass of its main loop: a few hundred PUMA exchanges a second
        # (benchmarks/README.md), not the thousand a real UART at 1 Mbaud carries
        period = 0.008 if emulator.impl == "qemu" else 0.001
        for k in range(1000):
            link.send_positions(q0 + 0.02 * min(1.0, k / 200))
            time.sleep(period)
        elapsed = time.monotonic() - t0
        time.sleep(0.1)
        s = link.latest()
        print(f"1000 cycles in {elapsed:.2f} s, {link.stats.rx_states} states, decoder drops "
              f"{link.decoder.stats.dropped}")
        assert link.stats.tx_commands - sent0 == 1000
        # every command answered with a STATE — or, on QEMU, whose processor a busy host starves so
        # that its UART overruns as a real one would, dropped by the board and counted by it (a few
        # more go uncounted: an overrun that takes two frames' boundary makes one bad frame of them,
        # and its TX queue drops a STATE that would wait past 4 ms)
        dropped = 0
        if emulator.impl == "qemu":   # (asked with QEMU's patience: a starved processor answers late)
            pid = M.Param.RX_DROPPED
            dropped = int(link.transact(M.ParamGet(pid, M.JOINT_BOARD), lambda seq: ("param", pid, M.JOINT_BOARD),
                                        timeout_s=0.5).value)
        # (on QEMU beside other work, the relay standing in for its UART also overruns while QEMU's
        # processor is not scheduled: whole commands lost, 5 to 15 % of them beside two CPU hogs,
        # which the firmware never sees and cannot count)
        least = 800 if emulator.impl == "qemu" else 990
        assert link.stats.rx_states - states0 + dropped >= least, (link.stats.rx_states - states0, dropped)
        assert link.decoder.stats.dropped == 0 and link.decode_stats.bad_payload == 0
        assert s.state == M.BoardState.ENABLED, s
        np.testing.assert_allclose(s.q, target, atol=2e-4)


def test_a_clock_read_a_little_early_never_trips_the_watchdog(emulator):
    """A microcontroller's clock read that races its tick interrupt reads up to a millisecond early
    (QEMU makes it common: it takes interrupts only between translated blocks); a command stamped
    by a later read then looks newer than the board's next tick, and an age computed by unsigned
    subtraction wrapped to centuries: a watchdog FAULT in mid-motion. The C board's clock is read
    late at random here (its own fault, clocklag:US)."""
    if emulator.impl != "c":
        pytest.skip("a fault of the C core's host build: the Python board keeps its ages in floats")
    emu = emulator("--kind", "puma6", "--noise-deg", "0", "--watchdog-ms", "1000", "--fault", "clocklag:2000")
    with Link.connect(emu.path, link_timeout_s=SILENCE_S) as link:
        q0 = wait_for(link.latest).q.copy()
        link.enable()
        for k in range(300):
            link.send_positions(q0 + 0.01 * min(1.0, k / 100))
            time.sleep(0.002)
        time.sleep(0.05)
        s = link.latest()
        assert s.state == M.BoardState.ENABLED and not s.faults, (s.state, M.fault_names(s.faults))


def test_a_board_emulator_that_was_not_scheduled_still_answers_every_command(emulator):
    """The emulator's process stops for 30 ms (as on a busy machine) while the host streams at
    1 kHz: the commands wait in the pty, and a real board would have received them spread over that
    time and answered each on the wire; the emulator's burst of answers must not count as a
    full TX queue and drop STATEs."""
    if emulator.impl == "qemu":
        pytest.skip("on QEMU the process stopped would be the launcher relaying bytes, not the firmware; a "
                    "stopped processor is stall:S@T there (QEMU's own stop), tested with the others")
    emu = emulator("--kind", "puma6", "--noise-deg", "0", "--watchdog-ms", "1000")
    with Link.connect(emu.path, link_timeout_s=SILENCE_S) as link:
        q0 = wait_for(link.latest).q.copy()
        before = link.stats.rx_states
        for k in range(300):
            if k == 100:
                os.kill(emu.proc.pid, signal.SIGSTOP)
            if k == 130:
                os.kill(emu.proc.pid, signal.SIGCONT)
            link.send_positions(q0)
            time.sleep(0.001)
        wait_for(lambda: link.stats.rx_states - before >= 300, timeout_s=2.0)
        assert link.stats.rx_states - before >= 300, link.stats
        assert link.stats.seq_gaps == 0, link.stats


def test_watchdog_trips_when_host_goes_quiet_and_stays_latched(emulator):
    emu = emulator("--kind", "humanoid17", "--watchdog-ms", "50")   # (the QEMU board's own default is longer)
    rate = 100.0 if emulator.impl == "qemu" else 500.0   # what QEMU's USART carries (benchmarks/README)
    with Link.connect(emu.path) as link:
        q0 = wait_for(link.latest).q.copy()
        link.enable()
        _stream(link, q0, 0.1, rate)
        time.sleep(0.2)  # > 50 ms command timeout
        s = wait_for(lambda: (x := link.latest()) and x.state == M.BoardState.FAULT and x)
        assert s and s.faults & M.Fault.WATCHDOG
        # commands are ignored while latched
        before = link.latest().q.copy()
        _stream(link, q0 + 0.3, 0.2, rate)
        assert link.latest().state == M.BoardState.FAULT
        np.testing.assert_allclose(link.latest().q, before, atol=0.01)
        # clearing goes to DISABLED, never straight back to ENABLED
        link.clear_faults()
        s = wait_for(lambda: (x := link.latest()) and x.state == M.BoardState.DISABLED and x)
        assert s and not s.faults & M.Fault.WATCHDOG


def test_estop_stops_at_once(emulator):
    emu = emulator("--kind", "puma6")
    with Link.connect(emu.path, link_timeout_s=SILENCE_S) as link:
        q0 = wait_for(link.latest).q.copy()
        link.enable()
        # at a pace the board's UART carries: on QEMU's (a few hundred frames a second) 500 a second
        # overrun its receiver, which then loses the newest bytes, the e-stop among them (its
        # watchdog stops it then, later)
        period = 0.008 if emulator.impl == "qemu" else 0.002
        for k in range(100):
            link.send_positions(q0 + 0.001 * k)
            time.sleep(period)
        t0 = time.monotonic()
        link.estop()
        s = wait_for(lambda: (x := link.latest()) and x.state == M.BoardState.ESTOP and x, timeout_s=3.0)
        latency_ms = (time.monotonic() - t0) * 1e3
        print(f"e-stop confirmed by STATE after {latency_ms:.2f} ms")
        assert s and s.faults & M.Fault.ESTOP
        # loose: a loaded CI machine (QEMU's emulated processor, starved on it, slower still)
        assert latency_ms < (1000 if emulator.impl == "qemu" else 200)
        held = link.latest().q.copy()
        _stream(link, q0 + 0.5, 0.1)
        np.testing.assert_allclose(link.latest().q, held, atol=1e-3)  # e-stop is latched
        with pytest.raises(Exception, match="BAD_STATE"):
            link.enable()


@pytest.mark.parametrize("fault", ["drop:0.002", "corrupt:0.002", "garbage:0.05", "delay:20"])
def test_line_faults_are_counted_and_the_link_survives(emulator, fault):
    emu = emulator("--kind", "puma6", "--fault", fault)
    with Link.connect(emu.path, link_timeout_s=SILENCE_S) as link:
        q0 = wait_for(link.latest, timeout_s=3.0).q.copy()
        _stream(link, q0, 1.0)
        assert link.lost is None
        assert link.stats.rx_states > 100
        if fault.startswith(("drop", "corrupt", "garbage")):
            assert link.decoder.stats.dropped > 0
        print(fault, link.decoder.stats.as_dict(), "states", link.stats.rx_states)


def test_stall_is_detected_as_silence_and_the_link_recovers(emulator, tmp_path):
    port = str(tmp_path / "hil-test-stall")
    emulator("--kind", "puma6", "--fault", "stall:0.6@1.0", "--link", port)
    link = Link.connect(port, link_timeout_s=0.25)
    try:
        wait_for(link.latest)
        with pytest.raises(LinkLostError, match="hil-test-stall.*no valid frame"):
            for _ in range(400):
                link.latest()
                link.send_positions(np.zeros(6))
                time.sleep(0.005)
        info = link.reconnect(timeout_s=10.0)   # a bound (QEMU's handshake beside other work takes seconds)
        assert info.uid == link.info.uid
        assert wait_for(link.latest).state in (M.BoardState.DISABLED, M.BoardState.FAULT)
    finally:
        link.close()


def test_board_reboot_is_noticed_and_it_stays_disabled(emulator):
    emu = emulator("--kind", "humanoid17", "--fault", "reboot@0.8")
    with Link.connect(emu.path, link_timeout_s=SILENCE_S) as link:
        q0 = wait_for(link.latest).q.copy()
        link.enable()
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            link.send_positions(q0)
            time.sleep(0.004)
        assert link.stats.board_resets >= 1
        assert link.latest().state == M.BoardState.DISABLED  # never re-enabled by itself


def test_killed_emulator_raises_link_lost_and_restart_reconnects_disabled(emulator, tmp_path):
    uid, port = "A1B2C3D4E5F60718293A4B5C", str(tmp_path / "hil-test-replug")
    emu = emulator("--kind", "puma6", "--uid", uid, "--link", port)
    link = Link.connect(port)
    try:
        q0 = wait_for(link.latest).q.copy()
        link.enable()
        boot = link.info.boot_id
        emu.kill()
        with pytest.raises(LinkLostError, match="hil-test-replug"):
            for _ in range(200):
                link.send_positions(q0)
                link.latest()
                time.sleep(0.005)
        emulator("--kind", "puma6", "--uid", uid, "--link", port)
        info = link.reconnect(timeout_s=5.0)
        assert info.uid == uid and info.boot_id != boot
        s = wait_for(link.latest)
        assert s.state == M.BoardState.DISABLED
    finally:
        link.close()


def test_open_errors_name_the_port(emulator):
    emu = emulator("--kind", "puma6")
    with Link.connect(emu.path):
        with pytest.raises(DeviceError, match=f"cannot open {emu.path}: the port is busy"):
            Link.connect(emu.path)
    with pytest.raises(DeviceError, match="no such port.*hil ports"):
        Link.connect("/dev/ttyNOPE_hil")
    with pytest.raises(HandshakeError, match="reports 6 joints, the robot model has 17"):
        Link.connect(emu.path, expect_joints=17)
    assert probe(emu.path).n_joints == 6


def test_a_port_held_for_a_moment_is_waited_for_and_one_held_on_is_named(emulator):
    """A loop whose board went away probes its old path, and the kernel may have given that path
    to another device since (a new pty's number, a new adapter): the program it now belongs to
    met "busy" in that moment. An open waits up to BUSY_WAIT_S for the port to be let go, and
    says it is busy when it is not (naming the holder when it is another process)."""
    import threading

    import serial

    from firmware_protocol.serial_port import BUSY_WAIT_S

    emu = emulator("--kind", "puma6")
    holder = serial.Serial(emu.path, exclusive=True)
    threading.Timer(0.3, holder.close).start()
    t0 = time.monotonic()
    with Link.connect(emu.path) as link:
        assert link.info.n_joints == 6 and time.monotonic() - t0 >= 0.25
    holder = serial.Serial(emu.path, exclusive=True)
    try:
        t0 = time.monotonic()
        with pytest.raises(DeviceError, match=f"cannot open {emu.path}: the port is busy"):
            Link.connect(emu.path)
        assert time.monotonic() - t0 >= BUSY_WAIT_S
    finally:
        holder.close()


def test_transactions_params_and_time_sync(emulator):
    emu = emulator("--kind", "puma6")
    with Link.connect(emu.path) as link:
        assert link.param_get(M.Param.CMD_TIMEOUT_MS) == (200 if emulator.impl == "qemu" else 50)   # (the board's default)
        assert link.param_set(M.Param.CMD_TIMEOUT_MS, 200, type=M.PARAM_TYPE_U32) == 200
        assert link.param_get(M.Param.POS_MAX, joint=0) > 0
        with pytest.raises(Exception, match="OUT_OF_RANGE"):
            link.param_set(M.Param.CMD_TIMEOUT_MS, 5, type=M.PARAM_TYPE_U32)
        offset, rtt = link.time_sync()
        assert 0 < rtt < 0.05


def test_hil_ports_probe_names_the_board(emulator):
    import subprocess

    emu = emulator("--kind", "humanoid17", "--uid", "00112233445566778899AABB")
    r = subprocess.run([*HIL, "ports", "--probe", emu.path], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith(emu.path))
    assert "HUMANOID17 fw 1.0.0, 17 joints, uid 00112233445566778899AABB" in line


def test_round_trips_are_not_timed_against_a_state_already_under_way(emulator):
    """Behind a 16 ms adapter an idle-rate STATE (10 Hz while no commands come) can be under way
    when the timing starts; taken for the first answer, it shifted every trip by one answer
    (8–10 ms measured instead of ≥ 16). Started at eight phases of the idle STATEs' 100 ms."""
    emu = emulator("--kind", "puma6", "--latency-ms", "16")
    with Link.connect(emu.path, threaded=False, link_timeout_s=SILENCE_S) as link:
        for k in range(8):
            time.sleep(0.1 + k * 0.0125)  # idle: the board streams its 10 Hz STATEs meanwhile
            trips = link.round_trips_ms(4)
            # timed against a STATE under way, every trip is short; a busy machine that holds a command up
            # on its way past the board's 100 ms idle timer (QEMU's relay is a process of its own) makes
            # that trip's answer the board's own idle STATE: short, once in a while. Each one answered
            # (250 ms: none came).
            assert sorted(trips)[2] >= 16.0 and max(trips) < 250.0, (k, trips)


def _board_param(link, param_id):
    # a non-threaded link nobody else polls: the transaction reads the port itself
    return link.transact(M.ParamGet(param_id, M.JOINT_BOARD), lambda seq: ("param", param_id, M.JOINT_BOARD),
                         pump=True).value


def test_a_kept_board_parameter_is_set_at_connect_and_again_on_the_board_that_comes_back(emulator, tmp_path):
    from hil.runtime.transport import connect_board

    uid, path = "0A1B2C3D4E5F60718293A4B5", str(tmp_path / "hil-test-kept")
    emu = emulator("--kind", "puma6", "--uid", uid, "--link", path)
    link = connect_board(path, 1_000_000, 0.25, 6, watchdog_ms=700)
    try:
        assert _board_param(link, M.Param.CMD_TIMEOUT_MS) == 700
        emu.kill()   # the board restarts: back on its default
        emu = emulator("--kind", "puma6", "--uid", uid, "--link", path)
        link.reconnect(timeout_s=5.0)
        assert _board_param(link, M.Param.CMD_TIMEOUT_MS) == 700
    finally:
        link.close()
    with pytest.raises(Exception, match="refused CMD_TIMEOUT_MS = 5: OUT_OF_RANGE"):
        connect_board(path, 1_000_000, 0.25, 6, watchdog_ms=5)


def _autogroup_nice(pid: int | str) -> int | None:
    """The session group's nice value; None where the kernel does not group the process by its
    session (it prints nothing then, as on the CI machines)."""
    with open(f"/proc/{pid}/autogroup") as f:
        words = f.read().split()
    return int(words[-1]) if words else None


def test_an_emulator_s_session_gets_the_board_s_share(emulator):
    """Where the kernel shares the CPU by session first (autogroup), a nice value orders a process
    only within its session: each emulator (the tests' and the CLI's) leads a session of its own,
    and that session is raised; the session that started it is not."""
    from firmware_protocol.board_cpu import BOARD_NICE
    from hil import robots
    from hil.emulator_launch import start_emulator

    if not os.path.exists("/proc/self/autogroup") or os.geteuid() != 0:
        pytest.skip("needs the kernel's autogroup and root (a session's share is raised by root only)")
    ours = _autogroup_nice("self")
    if ours is None:
        pytest.skip("the kernel does not group this process by its session here (no autogroup)")
    emu = emulator("--kind", "puma6")
    launched = start_emulator(robots.load("puma560"))
    try:
        for proc in (emu.proc, launched.proc):
            assert os.getsid(proc.pid) == proc.pid and _autogroup_nice(proc.pid) == BOARD_NICE
            assert os.getpriority(os.PRIO_PROCESS, proc.pid) <= BOARD_NICE
        assert _autogroup_nice("self") == ours
    finally:
        launched.stop()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("bus", [None, "feetech"])
def test_hil_emulate_takes_its_link_away_and_says_which_signal_stopped_it(tmp_path, sig, bus):
    import subprocess
    import sys

    link = tmp_path / "by-id"
    argv = [sys.executable, "-m", "hil.cli", "emulate", "--robot", "so101" if bus else "puma560", "--link", str(link)]
    with subprocess.Popen(argv + (["--bus", bus] if bus else []), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True) as proc:
        try:
            pty = proc.stdout.readline().strip()
            assert pty.startswith("/dev/") and os.readlink(link) == pty, pty
            proc.send_signal(sig)
            assert proc.wait(timeout=30) == 128 + sig
            assert not os.path.lexists(link)
        finally:
            proc.kill()
