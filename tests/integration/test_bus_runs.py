"""`hil play/run --dry-run --bus KIND` end to end (the loop, its port process and the servo bus
emulator, each in its own process), and a fault named with its joint and servo id in the run's
events. The probe and the calibrations over a bus, which start no loop: test_bus_calibration.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from hil import board_config, robots
from hil.robots.servos import servo_table
from hil.runtime.recorder import load_recording
from tests.conftest import bus_emulator, motion_clock, played_motion, wait_for

pytestmark = pytest.mark.slow
from tests.launch import HIL, command_pid  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
MODEL = robots.load("humanoid17")


# a bus with measured positions and an open-loop one (every bus is driven through the same
# BusBoard in test_buses.py)
@pytest.mark.parametrize("bus", ["dynamixel2", "maestro"])
def test_a_motion_plays_to_the_end_on_each_bus(tmp_path, bus):
    rec = tmp_path / "wave.npy"
    r = subprocess.run(HIL + ["play", "examples/wave.toml", "--robot", "humanoid17", "--dry-run", "--bus", bus,
                              "--headless", "--record", str(rec)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "motion 'wave' done" in r.stdout and f"{bus} at " in r.stdout    # the bus's cycle is said at start
    # the maestro kit's servos end at 90°: the wave's 100° shoulder is named, and held there by the loop
    past = "asks past this kit's servo travel"
    assert (past in r.stdout and "r_shoulder_roll to +10" in r.stdout) == (bus == "maestro"), r.stdout
    data, meta = load_recording(str(rec))
    assert meta["position_estimated"] is (bus in ("ssc32", "maestro"))
    config = board_config.shipped(MODEL, bus)
    motion = played_motion("examples/wave.toml", MODEL, servo_table(MODEL, config.servo, config.source))
    clock = motion_clock(data, meta["rate_hz"])
    lo, hi = np.array([j.min_rad for j in config.joints]), np.array([j.max_rad for j in config.joints])
    for k in motion.keyframes[1:]:
        # the servos pass through each keyframe (within the bus's lag), as far as the config's limits let them
        near = np.abs(clock - k.time_s) < 0.15
        err = np.abs(data["q_meas"][near] - np.clip(k.q, lo, hi)).min(axis=0)
        assert err.max() < np.radians(3), (k.time_s, np.degrees(err))
    assert np.all(data["q_cmd"] <= hi + 1e-9) and np.all(data["q_cmd"] >= lo - 1e-9)   # never a goal past them
    if bus == "maestro":
        r = subprocess.run(HIL + ["play", "examples/wave.toml", "--robot", "humanoid17", "--dry-run", "--bus", bus,
                                  "--headless", "--strict", "--speed", "0.5"], capture_output=True, text=True,
                           timeout=180)
        assert r.returncode != 0 and f"refused (--strict): the motion {past}" in r.stderr, r.stdout + r.stderr


def test_an_overloaded_servo_is_named_in_the_run_and_the_run_holds(tmp_path):
    r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--bus", "dynamixel2", "--headless",
                              "--enable", "--motion", "examples/wave.toml", "--duration", "4",
                              "--fault", "overload:12@2"], capture_output=True, text=True, timeout=120)
    assert "board fault: l_shoulder_roll (id 12): overload shutdown" in r.stdout, r.stdout
    assert "FAULT" in r.stdout and "intent cleared" in r.stdout


def test_a_run_stopped_by_a_silent_servo_names_it_before_it_exits():
    """The run's answer to "why did it stop" comes before the run ends, not after."""
    r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--bus", "dynamixel2", "--headless",
                              "--enable", "--motion", "examples/wave.toml", "--speed", "0.2", "--exit-when-done",
                              # silent well after connect and enable, which a busy machine slows (past
                              # 4 s beside two CPU-bound jobs), and well before the motion's end (14 s)
                              "--fault", "silent:12@8"], capture_output=True, text=True, timeout=120)
    said = r.stdout + r.stderr
    assert r.returncode != 0, said
    assert "board reports FAULT (faults: servo bus; l_shoulder_roll silent)" in r.stdout, said
    assert "board fault: l_shoulder_roll (id 12): no answer" in r.stdout, said
    assert "l_shoulder_roll silent" in r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("bus", ["feetech", "dynamixel2"])
def test_knees_powered_up_at_the_encoder_wrap_are_never_jumped_and_calibrate_as_their_servos_allow(tmp_path, bus):
    """Two knees stand next to their encoders' wrap (4088 and 8 ticks): with the shipped config they
    read about ±180° and are never enabled. Feetech servos wrap their readings after the Homing
    Offset, so the calibration moves the wrap off the knees' ranges and a squat drives them; a
    Dynamixel reads encoder + offset (ROBOTIS), so no offset moves it: the calibration is refused,
    naming the knees and what to do, and saves nothing."""
    config = board_config.shipped(MODEL, bus)
    servos = board_config.emulated_servos(config, MODEL)
    knees = [MODEL.joint_index("l_knee"), MODEL.joint_index("r_knee")]
    for k, tick in zip(knees, (4088, 8)):
        del servos[k]["initial"]
        servos[k]["encoder"] = tick
    emu = bus_emulator(bus, servos, "--baud", str(config.baud))
    try:
        port = ["--robot", "humanoid17", "--port", emu.path]
        r = subprocess.run(HIL + ["run", *port, "--bus", bus, "--headless", "--duration", "2", "--enable"],
                           capture_output=True, text=True, timeout=120)
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode != 0 and "refused" in last and "l_knee reads" in last and "r_knee reads" in last, last
        cal = tmp_path / "cal.toml"
        r = subprocess.run(HIL + ["calibrate", *port, "--bus", bus, "--method", "reference", "--yes",
                                  "--headless", "--out", str(cal), "--samples", "20"],
                           capture_output=True, text=True, timeout=120)
        if bus == "dynamixel2":
            last = r.stderr.strip().splitlines()[-1]
            assert r.returncode == 2 and "l_knee: its range crosses its servo's encoder wrap" in last, r.stdout + last
            assert "r_knee: its range crosses" in last and "turn the horn" in last and not cal.exists(), last
            return
        assert r.returncode == 0 and "(written)" in r.stdout and "after: measured pose within 0.0" in r.stdout, \
            r.stdout + r.stderr
        calibrated = board_config.load(str(cal), MODEL)   # loading checks every range is inside one turn
        for k in knees:
            j = calibrated.joints[k]
            assert j.homing_offset != 0 and 0 <= j.ticks(j.min_rad) and j.ticks(j.max_rad) <= 4095
        rec = tmp_path / "squat.npy"
        r = subprocess.run(HIL + ["play", "examples/squat.toml", *port, "--board-config", str(cal), "--headless",
                                  "--record", str(rec)], capture_output=True, text=True, timeout=180)
        assert r.returncode == 0 and "motion 'squat' done" in r.stdout, r.stdout + r.stderr
        data, _ = load_recording(str(rec))
        bent = np.degrees(data["q_meas"][:, knees].max(axis=0))
        assert (bent > 40).all(), bent        # both knees bent as planned (50°), not one stuck at a limit
    finally:
        emu.stop()


def test_a_blocked_servo_stops_the_motion_names_its_joint_and_the_run_says_so(tmp_path):
    rec = tmp_path / "stall.npy"
    r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--bus", "dynamixel2", "--headless",
                              "--enable", "--motion", "examples/squat.toml", "--duration", "5", "--record", str(rec),
                              "--fault", "blocked:3@1.5"], capture_output=True, text=True, timeout=120)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and "a joint stalled (l_knee pushes with" in last, r.stdout + r.stderr
    assert "intent cleared" in r.stdout
    data, _ = load_recording(str(rec))
    knee = MODEL.joint_index("l_knee")
    stall = board_config.emulated_servos(board_config.shipped(MODEL, "dynamixel2"), MODEL)[knee]["stall_mA"]
    pushing = np.flatnonzero(np.abs(data["current_mA"][:, knee]) >= 0.85 * stall)
    assert len(pushing), "the recording has the servo's current"
    # from the first cycle it pushed with (nearly) all it has, its command comes to where it stands
    # within 0.2 s, and stays there (the push ends)
    t = data["t"]
    eased = np.flatnonzero((t > t[pushing[0]]) & (np.abs(data["q_cmd"][:, knee] - data["q_meas"][:, knee]) < 1e-3))
    assert len(eased) and t[eased[0]] - t[pushing[0]] <= 0.2 + 0.05, (t[pushing[0]], t[eased[0]])


def test_a_shadow_that_was_not_run_for_a_while_starts_over_instead_of_blaming_the_robot(tmp_path):
    """The shadow's process stopped for 0.3 s mid-motion (what a busy machine does to it): it says
    so and starts over from the measured pose; nothing is diagnosed on a robot that did its job."""
    pytest.importorskip("mujoco")
    from tests.integration.test_lifecycle_runs import child_named
    from tests.integration.test_runtime import attach, finish, start_run

    rec = tmp_path / "run.npy"
    proc = start_run("--robot", "humanoid17", "--dry-run", "--bus", "dynamixel2", "--headless", "--enable",
                     "--motion", "examples/squat.toml", "--duration", "6", "--shadow", "--record", str(rec))
    try:
        client = attach(proc, "humanoid17")
        assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=30)
        shadow = wait_for(lambda: child_named(command_pid(proc), "hil-shadow"), timeout_s=10)
        # stopped once it steps (on a busy machine, building its model takes seconds: a stop before
        # its first step is no gap in its stepping)
        assert wait_for(lambda: _shadow_time(command_pid(proc)) > 0.0, timeout_s=30)
        time.sleep(0.2)
        os.kill(shadow, signal.SIGSTOP)
        time.sleep(0.3)
        os.kill(shadow, signal.SIGCONT)
    finally:
        out = finish(proc, timeout_s=60)
    assert re.search(r"shadow: not run for more than 50 ms \d+ time\(s\) \(the longest (\d+) ms", out), out
    assert int(re.search(r"the longest (\d+) ms", out).group(1)) >= 300
    assert "stall" not in out and not np.load(str(rec) + ".shadow.npy")["flags"].any(), out


def _shadow_time(run_pid: int) -> float:
    """The loop time of the shadow's last step (0: not stepped yet)."""
    from hil.runtime.shadow import ShadowBlock, block_path

    try:
        read = ShadowBlock(block_path(f"hil_humanoid17_{run_pid}"), MODEL.n).read()
    except (OSError, ValueError):
        return 0.0
    return read[0] if read is not None else 0.0


def test_the_shadow_twin_runs_beside_the_robot_and_names_a_stall(tmp_path):
    """--shadow: physics driven with the run's commands; the blocked knee is a residual that grows
    while its model moves on, said in the run, kept beside the recording and drawn by hil plot."""
    pytest.importorskip("mujoco")
    from hil.runtime.shadow import STALL

    rec = tmp_path / "run.npy"
    # the loop's own stall watch stops the motion within 0.1 s of the block, and the shadow sees the
    # knee's residual grow until its model stops too (0.2 s later): a shadow not run for 50 ms in that
    # time starts over and says so (a busy machine): then, and only then, the run is tried again
    for _ in range(3):
        r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--bus", "dynamixel2", "--headless",
                                  "--enable", "--motion", "examples/squat.toml", "--duration", "5", "--shadow",
                                  "--record", str(rec), "--fault", "blocked:3@1.5"], capture_output=True, text=True,
                           timeout=180)
        assert "shadow: humanoid17 in MuJoCo beside the run" in r.stdout, r.stdout + r.stderr
        if "shadow: l_knee: stall" in r.stdout:
            break
        assert "shadow: not run for more than 50 ms" in r.stdout, r.stdout
    assert "shadow: l_knee: stall" in r.stdout, r.stdout
    shadow = np.load(str(rec) + ".shadow.npy")
    knee = MODEL.joint_index("l_knee")
    assert (shadow["flags"][:, knee] & STALL).any() and len(shadow) > 100
    # the other joints track their model: not flagged, their residuals small; the knee's is not
    others = np.arange(MODEL.n) != knee
    flagged = {MODEL.joint_names[j]: int(np.count_nonzero(shadow["flags"][:, j])) for j in np.flatnonzero(others)
               if shadow["flags"][:, j].any()}
    assert not flagged, (flagged, r.stdout)
    assert np.percentile(np.abs(shadow["residual"][:, others]), 95) < np.radians(3)
    assert np.abs(shadow["residual"][:, knee]).max() > np.radians(5)
    out = tmp_path / "run.png"
    p = subprocess.run(HIL + ["plot", str(rec), "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "shadow residuals" in p.stdout, p.stdout + p.stderr
    left = subprocess.run(["pgrep", "-f", "hil.runtime.shadow"], capture_output=True, text=True).stdout.split()
    assert not left, "the shadow outlived its run"


def test_a_knee_powered_up_outside_its_range_is_brought_in_slowly_when_asked(tmp_path):
    """l_knee stands 15° below its range. Without --bring-in the enable is refused and says the option;
    with it, the knee is commanded from where it stands inward at no more than the ramp-in speed,
    never further out, and its servo follows (no goal at the end of the range at once)."""
    config = board_config.shipped(MODEL, "dynamixel2")
    servos = board_config.emulated_servos(config, MODEL)
    k = MODEL.joint_index("l_knee")
    j = config.joints[k]
    start = MODEL.lower[k] - np.radians(15)
    servos[k]["initial"] = j.ticks(start)
    servos[k]["lo"], servos[k]["hi"] = 0, 4095   # its own Min/Max Position Limits as they come from the factory
    emu = bus_emulator("dynamixel2", servos, "--baud", str(config.baud))
    try:
        run = HIL + ["run", "--robot", "humanoid17", "--port", emu.path, "--bus", "dynamixel2", "--headless",
                     "--duration", "3", "--enable"]
        r = subprocess.run(run, capture_output=True, text=True, timeout=120)
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode != 0 and "l_knee reads" in last and "--bring-in" in last, r.stdout + r.stderr
        rec = tmp_path / "in.npy"
        r = subprocess.run(run + ["--bring-in", "--record", str(rec)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "bringing in from where it stands (--bring-in)" in r.stdout, r.stdout + r.stderr
    finally:
        emu.stop()
    data, meta = load_recording(str(rec))
    # from the ramp-in's first command (the cycles before send holds, which a board does not apply)
    ramping = np.flatnonzero((data["board_state"] == 2) & (data["q_cmd"][:, k] < MODEL.lower[k] - 1e-3))[0]
    cmd, meas = data["q_cmd"][ramping:, k], data["q_meas"][ramping:, k]
    ramp = MODEL.velocity_limit[k] * 0.25        # the ramp-in speed
    assert cmd.min() >= start - np.radians(0.5) and np.all(np.diff(cmd) >= -1e-9)   # inward only
    assert np.diff(cmd).max() <= ramp / meta["rate_hz"] * 1.001    # a cycle's step at the ramp-in speed
    assert cmd[-1] == pytest.approx(MODEL.lower[k], abs=1e-6) and meas[-1] == pytest.approx(MODEL.lower[k], abs=0.01)
    # the servo went no faster than the command it was given: never ahead of it (a goal at the range's
    # end would take it there at its full speed, 15° ahead). Its speed over a few cycles is no measure
    # on a busy machine: a reading delayed for a while comes in all at once
    assert np.all(meas <= cmd + np.radians(1.0)), np.degrees((meas - cmd).max())


def test_a_joint_outside_its_servos_own_limits_is_never_enabled_even_when_brought_in():
    """l_knee stands 10° below its range, and its servo's own Min/Max Position Limits are the range
    (as `hil calibrate` writes them): with torque on, the servo would drive itself to its limit at
    full speed whatever goal it got, so even --bring-in must not enable it; the run says which joint,
    its tick, its servo's limits and what to do."""
    config = board_config.shipped(MODEL, "dynamixel2")
    servos = board_config.emulated_servos(config, MODEL)
    k = MODEL.joint_index("l_knee")
    j = config.joints[k]
    servos[k]["initial"] = j.ticks(MODEL.lower[k] - np.radians(10))
    emu = bus_emulator("dynamixel2", servos, "--baud", str(config.baud))
    try:
        r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--port", emu.path, "--bus", "dynamixel2",
                                  "--headless", "--duration", "2", "--enable", "--bring-in"],
                           capture_output=True, text=True, timeout=120)
    finally:
        emu.stop()
    said = r.stdout + r.stderr
    assert r.returncode != 0 and "l_knee (id 3) stands at tick" in said and "outside its servo's own limits" in said, said
    assert "Traceback" not in said


def test_a_torque_limit_in_the_config_is_written_to_the_servo_and_the_stall_watch_knows_it(tmp_path):
    """l_knee's servo capped at 50 % of its torque (torque_limit_pct): written into its PWM Limit at
    connect, the emulated servo pushes no harder than that when blocked, and the loop's stall watch,
    which counts the limit, still stops the motion and names the joint."""
    import dataclasses

    config = board_config.shipped(MODEL, "dynamixel2")
    k = MODEL.joint_index("l_knee")
    joints = list(config.joints)
    joints[k] = dataclasses.replace(joints[k], torque_limit=0.5)
    path = tmp_path / "limited.toml"
    path.write_text(board_config.to_toml(dataclasses.replace(config, joints=tuple(joints))))
    rec = tmp_path / "stall.npy"
    r = subprocess.run(HIL + ["run", "--robot", "humanoid17", "--dry-run", "--board-config", str(path), "--headless",
                              "--enable", "--motion", "examples/squat.toml", "--duration", "5", "--record", str(rec),
                              "--fault", "blocked:3@1.5"], capture_output=True, text=True, timeout=120)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and "a joint stalled (l_knee pushes with" in last, r.stdout + r.stderr
    data, _ = load_recording(str(rec))
    full = board_config.emulated_servos(config, MODEL)[k]["stall_mA"]
    pushed = np.abs(data["current_mA"][:, k]).max()
    assert 0.4 * full < pushed <= 0.5 * full + 1, (pushed, full)   # its whole (limited) torque, and no more


def test_servo_limits_narrower_than_the_config_are_found_at_connect_and_calibration_fixes_them(tmp_path):
    """l_knee's servo holds a Max Position Limit 300 ticks short of the config's range (left by another
    tool): the run refuses at connect, naming the joint, both ranges and the fix, instead of driving a
    knee that stops short unseen; after `hil calibrate --method reference` wrote the limits, it runs."""
    config = board_config.shipped(MODEL, "dynamixel2")
    servos = board_config.emulated_servos(config, MODEL)
    k = MODEL.joint_index("l_knee")
    servos[k]["hi"] -= 300
    emu = bus_emulator("dynamixel2", servos, "--baud", str(config.baud))
    try:
        port = ["--robot", "humanoid17", "--port", emu.path]
        r = subprocess.run(HIL + ["run", *port, "--bus", "dynamixel2", "--headless", "--duration", "1"],
                           capture_output=True, text=True, timeout=120)
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode != 0 and "l_knee (id 3): its servo's limits are ticks" in last, r.stdout + r.stderr
        assert "r_knee" not in last and "hil calibrate --method reference" in last and "Traceback" not in r.stderr
        cal = tmp_path / "cal.toml"
        r = subprocess.run(HIL + ["calibrate", *port, "--bus", "dynamixel2", "--method", "reference", "--yes",
                                  "--headless", "--out", str(cal), "--samples", "20"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        r = subprocess.run(HIL + ["run", *port, "--board-config", str(cal), "--headless", "--duration", "1"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        emu.stop()


def test_a_dry_run_of_a_robot_too_large_for_hils_board_goes_over_an_emulated_servo_bus(tmp_path):
    """The G1's 29 joints are more than hil's own board carries (22): without --bus the dry run
    goes over an emulated Dynamixel bus with a generated map, says so, and runs."""
    stats = tmp_path / "stats.json"
    r = subprocess.run(HIL + ["run", "--robot", "examples/robots/g1.toml", "--dry-run", "--headless", "--duration", "2",
                              "--stats-json", str(stats)], capture_output=True, text=True, timeout=120)
    if "example-robot-data" in r.stderr and "pip install" in r.stderr:
        pytest.skip("g1 needs example-robot-data")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "29 joints, more than hil's own board carries (22): the dry run goes over an emulated dynamixel2 bus" \
        in r.stdout and "dynamixel2 at " in r.stdout
    assert "Traceback" not in r.stderr and stats.exists()
