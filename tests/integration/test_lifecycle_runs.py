"""The lifecycle through real processes: `hil run` (or play), the loop, the port process, an
emulator on a pty. Each test reproduces a way the runtime used to move a robot by itself, outlive
its parent or never end, and checks what happens now."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

import hil.robots as robots
from firmware_protocol.link import Link
from hil.emulator_launch import emulator_args
from hil.runtime.realtime import DRY_RUN_SPIN_S, SPIN_MIN_S
from hil.runtime.shared import LoopClient, LoopRequest, LoopWord, runtime_dir
from tests.conftest import dma_latency_before, dma_latency_given_back, process_tree, wait_for
from tests.integration.test_runtime import HIL, attach, finish, start_run
from tests.launch import FRESH_HIL, command_pid

pytestmark = pytest.mark.slow
ENABLED, ESTOP = 2, 4


def mode_of(flags: np.ndarray) -> np.ndarray:
    return flags >> 4  # the recording's loop_flags carry the lifecycle mode in bits 4–7


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().split(") ")[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return out


def child_named(pid: int, name: str) -> int | None:
    """The child of `pid` that `ps` calls `name` (a run's helpers name themselves: hil-twin, …)."""
    for child in children_of(pid):
        try:
            with open(f"/proc/{child}/comm", "rb") as f:
                if f.read().strip() == name.encode():
                    return child
        except OSError:
            pass
    return None


def test_after_a_reconnect_a_board_that_kept_running_is_disabled_not_driven(emulator, tmp_path):
    """Repro 1: a board with a 400 ms watchdog, silent for 0.3 s but still executing. The loop
    used to reconnect, ramp in and resume the motion by itself."""
    model = robots.load("puma560")
    emu = emulator(*emulator_args(model, faults=["mute:0.3@usr1"], watchdog_ms=400))
    rec = tmp_path / "r.npy"
    proc = start_run("--robot", "puma560", "--port", emu.path, "--headless", "--duration", "60", "--enable",
                     "--motion", "demo", "--record", str(rec))
    client = attach(proc, "puma560")
    assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=20)
    time.sleep(0.5)
    emu.proc.send_signal(signal.SIGUSR1)  # silent for 0.3 s from now, still executing
    assert client.wait(lambda s: s.mode == 0, timeout_s=10), "the link was never lost"
    assert client.wait(lambda s: s.mode == 1, timeout_s=20), "no reconnect"
    time.sleep(1.5)
    client.shutdown()
    client.close()
    out = finish(proc, timeout_s=60)
    # the run did not go as asked: it says what and when, last, and exits 1
    assert proc.returncode == 1, out
    assert "reconnected to board" in out, out
    assert out.strip().splitlines()[-1].startswith("hil run: link lost"), out
    assert "without anyone asking" in out.strip().splitlines()[-1], out
    r = np.load(rec)
    lost = np.flatnonzero(mode_of(r["loop_flags"]) == 0)
    assert len(lost), "the link was never lost"
    after = slice(lost[-1] + 1, None)
    # from the reconnect on: never enabled in the loop, never a position command (keep-alives only)
    assert not (r["loop_flags"][after] & 1).any(), out
    assert (r["board_state"][after] == ENABLED).any(), "the board did not come back enabled: no repro"
    assert r["board_state"][-1] != ENABLED, out  # disabled by the loop (or its watchdog), not driven
    assert out.count("motion 'demo' running") == 1, out


def test_an_estop_forgets_a_queued_jog(tmp_path):
    """Repro 2: a jog posted during ESTOP ran after clear-fault + enable."""
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "30", "--enable",
                     "--no-realtime")
    try:
        client = attach(proc, "puma560")
        assert client.wait(lambda s: s.mode == 4, timeout_s=10)
        q0 = client.snapshot().q_cmd.copy()
        client.estop()
        # (bounds: a loop without real-time scheduling beside other work ramps in slowly)
        assert client.wait(lambda s: s.board_state == ESTOP, timeout_s=15)
        client.jog(q0 + np.radians([20, -20, 20, 0, 0, 0]))  # posted during the e-stop
        client.clear_fault()
        assert client.wait(lambda s: s.board_state == 1 and s.mode == 1, timeout_s=15)
        client.enable()
        assert client.wait(lambda s: s.mode == 4, timeout_s=15)
        time.sleep(1.0)
        s = client.snapshot()
        assert np.abs(s.q_cmd - q0).max() < np.radians(0.5), np.degrees(s.q_cmd - q0)
        assert s.activity == 0  # idle: nothing queued survived
        client.shutdown()
    finally:
        out = finish(proc)
    assert "jog refused" in out, out


def test_requests_made_before_an_estop_are_dropped_not_carried_out(tmp_path):
    """Clear-fault and enable requests still waiting in the mailbox when the e-stop is pressed were
    made before it: the robot stays e-stopped (they would have cleared it and enabled it again)."""
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "30", "--enable",
                     "--no-realtime")
    try:
        client = attach(proc, "puma560")
        assert client.wait(lambda s: s.mode == 4, timeout_s=10)
        os.kill(client.pid, signal.SIGSTOP)   # the loop takes no request meanwhile
        try:
            for _ in range(5):                # posted, not waited for: the stopped loop answers none
                client.state.post(LoopRequest.CLEAR_FAULT)
                client.state.post(LoopRequest.ENABLE)
            client.state.ctrl[LoopWord.ESTOP] = 1    # the e-stop word: pressed last, seen first
        finally:
            os.kill(client.pid, signal.SIGCONT)
        assert client.wait(lambda s: s.mode == 7, timeout_s=5)
        time.sleep(1.0)
        s = client.snapshot()
        assert s.mode == 7 and s.board_state == ESTOP, (s.mode, s.board_state)
        client.shutdown()
    finally:
        out = finish(proc)
    # dropped by the e-stop; or, on a busy machine where the stopped loop's link timed out meanwhile,
    # already by the link's loss (the robot stays e-stopped either way: checked above)
    assert re.search(r"(e-stop|link lost): 10 requests to enable, clear a fault, jog or start, posted before it, "
                     r"dropped", out), out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_hil_alone_ends_the_run_like_ctrl_c(tmp_path, sig):
    """Repro 3: SIGTERM killed only `hil run`, SIGINT to it alone e-stopped but ran on."""
    rec = tmp_path / "r.npy"
    stats = tmp_path / "s.json"
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--enable", "--motion", "demo",
                     "--record", str(rec), "--stats-json", str(stats))
    client = attach(proc, "puma560")
    assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=10)
    loop_pid = client.pid
    helpers = children_of(command_pid(proc)) + children_of(loop_pid)
    client.close()
    proc.send_signal(sig)  # the process alone, not its group
    out = finish(proc, timeout_s=30)
    assert proc.returncode == 128 + sig, out
    assert f"E-STOP from {signal.Signals(sig).name}" in out, out
    r = np.load(rec)
    assert (r["board_state"][-20:] == ESTOP).any(), out
    s = json.loads(stats.read_text())
    assert s["stop_reason"] == f"{signal.Signals(sig).name} received"
    assert s["spin_us"] == DRY_RUN_SPIN_S * 1e6, s   # a dry run: no spin before the deadlines
    assert wait_for(lambda: not any(alive(p) for p in helpers + [loop_pid]), timeout_s=10), out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_run_s_whole_process_group_ends_it_as_asked(tmp_path, sig):
    """`timeout`, a service manager or `kill -- -PGID` signal every process of the run: the port
    process died of it under the loop, and the run ended on "link lost …, without anyone asking"."""
    stats = tmp_path / "s.json"
    proc = subprocess.Popen(FRESH_HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--enable",
                                         "--motion", "demo", "--stats-json", str(stats)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    client = attach(proc, "puma560")
    assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=10)
    client.close()
    os.killpg(proc.pid, sig)
    out = finish(proc, timeout_s=30)
    assert proc.returncode == 128 + sig, out
    assert "link lost" not in out and "without anyone asking" not in out, out
    assert f"E-STOP from {signal.Signals(sig).name}" in out, out
    assert json.loads(stats.read_text())["stop_reason"] == f"{signal.Signals(sig).name} received"


def test_killing_hil_run_outright_stops_the_board_and_leaves_nothing(emulator, tmp_path):
    """Repro 3: after SIGKILL of `hil run` the loop drove the robot on, the port process with it,
    the dry-run emulator stayed behind, and cpu 1's idle setting stayed changed."""
    model = robots.load("puma560")
    emu = emulator(*emulator_args(model))
    rec = tmp_path / "r.npy"
    before = dma_latency_before()
    proc = start_run("--robot", "puma560", "--port", emu.path, "--headless", "--enable", "--motion", "demo",
                     "--record", str(rec))
    client = attach(proc, "puma560")
    assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=10)
    time.sleep(0.5)
    name, loop_pid = client.name, client.pid
    helpers = children_of(loop_pid)
    run_pids = process_tree(command_pid(proc))
    client.close()
    proc.kill()
    proc.wait(timeout=10)
    assert wait_for(lambda: not alive(loop_pid) and not any(alive(p) for p in helpers), timeout_s=10)
    out = proc.stdout.read()
    proc.stdout.close()
    r = np.load(rec)  # readable, with the e-stop in it
    assert len(r) > 200 and mode_of(r["loop_flags"][-1]) == 7, (len(r), out)
    with Link.connect(emu.path, expect_joints=6) as link:  # the board: e-stopped by the dying loop
        state = wait_for(lambda: link.latest(), timeout_s=2)
        assert state is not None and state.state == ESTOP, state
    assert not os.path.exists(os.path.join(runtime_dir(), name))
    assert dma_latency_given_back(run_pids, before)
    # and a dry run's own emulator goes with it
    proc = start_run("--robot", "puma560", "--dry-run", "--headless")
    client = attach(proc, "puma560")
    emulators = [p for p in children_of(command_pid(proc)) if p != client.pid]
    assert emulators
    client.close()
    proc.kill()
    proc.wait(timeout=10)
    assert wait_for(lambda: not any(alive(p) for p in emulators), timeout_s=10)
    proc.stdout.close()


def test_a_motion_run_ends_with_the_reason_when_the_board_faults(tmp_path):
    """Repro 4: `hil play` sat at "FAULT | motion idle 15.2 %" until killed."""
    proc = start_run("--robot", "humanoid17", "--dry-run", "--headless", "--enable", "--motion", "examples/bow.toml",
                     "--exit-when-done", "--fault", "stall:0.15@usr1", "--watchdog-ms", "50")  # the board's own
    client = attach(proc, "humanoid17")
    assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=20)
    emulators = [p for p in children_of(command_pid(proc)) if p != client.pid]
    client.close()
    # the board freezes for 0.15 s: its watchdog latches (again every 0.5 s until the run ends: on
    # a busy machine one freeze can come after the motion was already done)
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        for pid in emulators:
            try:
                os.kill(pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
    out = finish(proc, timeout_s=60)
    assert proc.returncode == 1, out
    assert "the motion can no longer finish: board reports FAULT (faults: watchdog)" in out, out


def test_a_request_flood_changes_neither_threads_nor_state(tmp_path):
    """Repro 5: 4 400 ENABLE requests took the loop process to 3 836 threads."""
    # (long enough for the flood on a busy machine: each request waits for the loop's answer; the
    # test shuts it down itself; the board's watchdog with the margin a busy machine needs, as
    # documented: a loop without real-time scheduling, flooded, beside other work, stalls past 50 ms)
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "300", "--no-realtime",
                     "--watchdog-ms", "500")
    try:
        client = attach(proc, "puma560")

        def threads() -> int:
            with open(f"/proc/{client.pid}/status") as f:
                return int(next(line for line in f if line.startswith("Threads:")).split()[1])

        time.sleep(0.5)
        before = threads()
        refused = 0
        try:
            for _ in range(2_500):   # the repro grew a thread per request: 2 500 would be 2 500 threads
                try:
                    client.enable()
                except Exception:  # noqa: BLE001 - a full mailbox says so
                    refused += 1
            # enabled once — or, on a busy machine, disabled again by the loop itself for missed
            # deadlines (toward safety; nothing enables it after the flood)
            enabled = client.wait(lambda s: s.mode == 4, timeout_s=30)
            _, events = client.state.events_since(0)
            assert enabled or any("missed deadlines" in e for e in events), events
            assert threads() == before
            with pytest.raises(ValueError):
                client.state.post(5, [1.0, 2.0])  # a short JOG is refused when posted, not padded
        finally:
            client.shutdown()
    finally:
        out = finish(proc)
    # the flood enabled it once; on a busy machine the loop (without real-time scheduling) can miss
    # enough deadlines to disable itself, or its port process be starved past the link timeout, and
    # the flood, still running, then enables it once more: once after each such move toward safety
    enables = 0
    for line in out.splitlines():
        if "enable: DISABLED → ENABLING" in line:
            enables += 1
            assert enables == 1, out
        elif any(f"→ {mode}" in line for mode in ("DISABLED", "DISCONNECTED", "FAULT", "ESTOP")):
            enables = 0
    assert "enable: DISABLED → ENABLING" in out, out


def test_a_crc_valid_state_with_the_wrong_joint_count_is_counted_and_dropped(emulator, tmp_path):
    """Repro 6: one such STATE ended the session."""
    model = robots.load("puma560")
    # one a second from 2 s on: the loop may take seconds to start on a busy machine
    emu = emulator(*emulator_args(model, faults=[f"badstate@{t}" for t in range(2, 12)]))
    stats = tmp_path / "s.json"
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--port", emu.path, "--headless", "--duration", "6",
                              "--stats-json", str(stats)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    s = json.loads(stats.read_text())
    assert s["rejected_frames"] >= 1 and s["link_errors"] == 0, s
    assert s["spin_us"] >= SPIN_MIN_S * 1e6, s   # a board on a port: the spin sized as the loop runs


def test_loop_client_refuses_to_guess_between_two_loops():
    procs = [start_run("--robot", robot, "--dry-run", "--headless", "--duration", "30", "--no-realtime")
             for robot in ("puma560", "humanoid17")]
    try:
        for proc, robot in zip(procs, ("puma560", "humanoid17")):
            attach(proc, robot).close()
        with pytest.raises(Exception) as e:
            LoopClient()
        text = str(e.value)
        assert "more than one hil loop" in text and "puma560" in text and "humanoid17" in text, text
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
            finish(proc)


def test_the_shared_block_lives_in_a_private_folder_and_links_are_not_followed(tmp_path):
    folder = runtime_dir()
    assert os.stat(folder).st_mode & 0o777 == 0o700
    trap = os.path.join(folder, f"hil_trap_{os.getpid()}")
    target = tmp_path / "elsewhere"
    target.write_bytes(b"\0" * 4096)
    os.symlink(target, trap)
    try:
        with pytest.raises(Exception) as e:
            LoopClient(os.path.basename(trap))
        assert "cannot open" in str(e.value)
    finally:
        os.unlink(trap)


def test_trajectory_balance_claims_are_checked(tmp_path):
    from hil.errors import InputError
    from hil.robots.servos import parse_table
    from hil.runtime.motion_sources import make_motion

    model = robots.load("humanoid17")
    t = np.arange(0, 2, 0.005)
    q = np.repeat(model.home[None, :], len(t), axis=0)
    bad = q.copy()
    bad[:, model.joint_index("l_hip_pitch")] = np.radians(30 * np.sin(np.pi * t))  # leans far out
    bad[:, model.joint_index("r_hip_pitch")] = np.radians(30 * np.sin(np.pi * t))
    np.savez(tmp_path / "claim.npz", t=t, q=bad, dynamic_balance_checked=np.array(True))
    # no support annotation: the claim is not taken, the static check applies, and refuses it
    # (servos strong enough for it: its balance is what is under test)
    strong = parse_table({"preset": "XL430-W250", "torque_limit_nm": 20.0}, model.joint_names, "a test")
    with pytest.raises(InputError, match=r"refused before any motion: .*balance: the centre of mass"):
        make_motion(str(tmp_path / "claim.npz"), model, strong)
    np.savez(tmp_path / "claim2.npz", t=t, q=bad, support=np.zeros(len(t)), dynamic_balance_checked=np.array(True))
    with pytest.raises(InputError, match="ZMP leaves the support polygon"):
        make_motion(str(tmp_path / "claim2.npz"), model, strong)
    np.savez(tmp_path / "ok.npz", t=t, q=q, support=np.zeros(len(t)), dynamic_balance_checked=np.array(True))
    assert make_motion(str(tmp_path / "ok.npz"), model).dynamic_balance_checked


def test_hil_ctl_drives_a_headless_loop():
    # (the board's watchdog with a busy machine's margin: this loop runs without real-time scheduling,
    # at 100 Hz: at 500 Hz a busy machine made it miss 51 deadlines in a row, and it disabled itself as
    # it must, in a test about `hil ctl`; the test shuts the loop down itself: its duration is only a
    # cap, long enough for each `hil ctl` to take seconds on a busy machine)
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "300", "--no-realtime",
                     "--rate", "100", "--watchdog-ms", "300")
    try:
        client = attach(proc, "puma560")
        name = client.name

        def ctl(*args: str, code: int = 0) -> str:
            r = subprocess.run(HIL + ["ctl", *args, "--loop", name], capture_output=True, text=True, timeout=60)
            assert r.returncode == code, r.stdout + r.stderr
            return r.stdout + r.stderr

        assert "DISABLED" in ctl("status")
        assert "enable: accepted (DISABLED → ENABLING)" in ctl("enable")
        assert client.wait(lambda s: s.mode == 4, timeout_s=10)
        # the loop's answer, not "sent": a jog into the floor is refused with the reason, by the loop
        down = client.snapshot().q_meas.copy()
        down[1] = np.radians(44)   # the shoulder down: the forearm into the pedestal's floor
        answer = client.jog(down)
        assert not answer.ok and "jog refused" in answer and "floor" in answer, answer
        assert ctl("estop").strip().endswith("e-stop: ESTOP sent to the board")
        assert client.wait(lambda s: s.mode == 7 and s.board_state == ESTOP, timeout_s=10)
        assert "faults estop" in ctl("status")
        refused = ctl("enable", code=1)   # in e-stop: refused, and said so with the reason
        assert "enable refused: the board is in ESTOP: clear the fault first" in refused, refused
        ctl("clear-fault")
        assert client.wait(lambda s: s.mode == 1 and s.board_state == 1, timeout_s=10)
        assert name in subprocess.run(HIL + ["ctl", "list"], capture_output=True, text=True, timeout=60).stdout
        bad = subprocess.run(HIL + ["ctl", "status", "--loop", "hil_nothing_1"], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode == 2 and "no running hil loop named 'hil_nothing_1'" in bad.stderr, bad.stderr
        ctl("shutdown")
    finally:
        out = finish(proc)
    assert proc.returncode == 0, out


def test_a_run_whose_board_faulted_by_itself_exits_1_and_says_what_and_when(tmp_path):
    """The board's watchdog latches at 5 s of the emulator's clock (it stalls past it; on a busy
    machine the loop may take seconds to start, and a disabled board has no watchdog to trip); the
    run goes on to its end, then says so last, and exits 1 (it used to exit 0)."""
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "6", "--enable",
                              "--motion", "demo", "--fault", "stall:0.3@5", "--stats-json", str(stats),
                              "--watchdog-ms", "50"],   # the board's own (the suite's runs have more)
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("hil run: ") and "at t = " in last and "without anyone asking" in last, r.stderr
    assert "watchdog" in last or "link lost" in last, last
    with open(stats) as f:
        data = json.load(f)
    assert data["verdict"] != "as asked" and data["incidents"]


def test_a_joint_powered_up_outside_its_range_is_never_enabled(emulator, tmp_path):
    """The shoulder reads 15° past its range (powered up there, or a zero across an encoder's
    wrap): enabled, the board's clamp would have sent it to the end of its range at once."""
    model = robots.load("puma560")
    offsets = np.zeros(model.n)
    offsets[1] = np.degrees(model.lower[1]) - 15.0        # home reads 15° below the range
    emu = emulator(*emulator_args(model, offsets_deg=offsets))
    rec = tmp_path / "run.npy"
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--port", emu.path, "--headless", "--duration", "3",
                              "--enable", "--motion", "demo", "--record", str(rec)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stdout + r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "refused" in last and "shoulder reads -240.0°" in last and "by hand" in last, last
    data = np.load(rec)
    assert not np.any(data["board_state"] == ENABLED)
    with Link.connect(emu.path) as link:            # and the board never saw a goal
        assert link.wait_state().state != ENABLED
