"""`hil ports --probe` and `hil calibrate` over each servo bus emulator (the probe's answer, zero
ticks, directions and ranges shown by hand, a calibration read back after a power cycle): the
commands start no loop, so they run beside the loop tests (tests/conftest.py's LOOP_CHAINS)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from calibration.procedures import read_samples
from firmware_protocol.buses.bus_board import BusBoard
from hil import board_config, robots
from tests.conftest import bus_emulator

pytestmark = pytest.mark.slow
from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
MODEL = robots.load("humanoid17")


@pytest.mark.parametrize("bus,expect", [("dynamixel2", "dynamixel2 at 1000000 baud: 17 servos (XM430-W350 ids 1–17)"),
                                        ("feetech", "feetech at 1000000 baud: 17 servos (STS3215 ids 1–17)"),
                                        ("kondo-ics", "kondo-ics at 115200 baud: 17 servos (ICS servo ids 0–16)")])
def test_ports_probe_finds_each_bus_its_rate_its_ids_and_models(bus, expect):
    config = board_config.shipped(MODEL, bus)
    emu = bus_emulator(bus, board_config.emulated_servos(config, MODEL), "--baud", str(config.baud),
                       *(("--echo",) if config.echo else ()))
    try:
        r = subprocess.run(HIL + ["ports", "--probe", emu.path], capture_output=True, text=True, timeout=60)
    finally:
        emu.stop()
    line = [ln for ln in r.stdout.splitlines() if ln.startswith(emu.path)][0]
    assert expect in line, line


@pytest.mark.parametrize("config,kit", [("koch-dynamixel2", "koch follower"), ("koch-leader-dynamixel2", "koch leader")])
def test_ports_probe_names_the_kit_its_servos_are(config, kit):
    """The Koch's follower and leader differ only in their servo models: the probe tells them apart."""
    koch = robots.load("koch")
    c = board_config.resolve(koch, None, config)
    emu = bus_emulator("dynamixel2", board_config.emulated_servos(c, koch), "--baud", str(c.baud))
    try:
        r = subprocess.run(HIL + ["ports", "--probe", emu.path], capture_output=True, text=True, timeout=60)
    finally:
        emu.stop()
    assert f"looks like: {kit} (--robot koch --board-config {config})" in r.stdout, r.stdout


def test_calibration_writes_the_zero_ticks_into_a_board_config(tmp_path):
    out = tmp_path / "calibrated.toml"
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "feetech", "--method",
                              "reference", "--emulate-offsets-deg", "l_knee=2.5,r_elbow=-4", "--samples", "20",
                              "--out", str(out), "--yes", "--headless"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    shipped = board_config.shipped(MODEL, "feetech")
    calibrated = board_config.load(str(out), MODEL)
    shift = {j.name: (c.zero_tick - j.zero_tick) * j.direction / j.ticks_per_rad
             for j, c in zip(shipped.joints, calibrated.joints)}
    one_tick = 1.0 / shipped.joints[0].ticks_per_rad
    assert abs(shift["l_knee"] - np.radians(2.5)) <= one_tick
    assert abs(shift["r_elbow"] - np.radians(-4)) <= one_tick
    assert all(abs(v) <= one_tick for k, v in shift.items() if k not in ("l_knee", "r_elbow"))
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "feetech", "--method",
                              "poses", "--out", str(out), "--yes"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "use reference" in r.stderr, r.stderr


@pytest.mark.parametrize("bus", ["dynamixel2", "feetech"])
def test_directions_by_hand_turn_the_servos_mounted_the_other_way_round(tmp_path, bus):
    """The emulator's hand moves every joint 20° the robot's positive way; two servos are mounted
    reversed (hidden): their readings go down, and only their directions turn."""
    out = tmp_path / "directions.toml"
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", bus, "--method", "directions",
                              "--emulate-reverse", "l_knee,r_elbow", "--sweep-s", "30", "--out", str(out), "--yes",
                              "--headless"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    shipped, found = board_config.shipped(MODEL, bus), board_config.load(str(out), MODEL)
    turned = {j.name for j, f in zip(shipped.joints, found.joints) if f.direction != j.direction}
    assert turned == {"l_knee", "r_elbow"}, r.stdout
    assert all(j.zero_tick == f.zero_tick for j, f in zip(shipped.joints, found.joints))
    assert "l_knee" in r.stdout and "reversed: direction turned" in r.stdout


# a port that answers one Protocol 1.0 PING once, with the PING's own bytes (an echo, or another
# bus's late bytes that happen to frame), and never again
STRAY_ECHO = """
import os, select, sys
fd, buf, done = int(sys.argv[1]), b"", False
ping9 = bytes([0xFF, 0xFF, 0x09, 0x02, 0x01, 0xF3])
while True:
    if not select.select([fd], [], [], 0.5)[0]:
        continue
    try:
        buf = (buf + os.read(fd, 4096))[-64:]
    except OSError:
        break
    if not done and ping9 in buf:
        os.write(fd, ping9)
        done = True
"""


def test_a_reply_that_never_comes_again_is_not_a_servo():
    """`hil ports --probe` asks each id it heard from again: one stray reply (seen on a Kondo bus's
    pty while the baud rate changed: `dynamixel1 or feetech at 1000000 baud: 1 servo (unknown model
    ids 9)`) finds nothing."""
    import os

    master, slave = os.openpty()
    port = subprocess.Popen([sys.executable, "-c", STRAY_ECHO, str(master)], pass_fds=[master])
    try:
        r = subprocess.run(HIL + ["ports", "--probe", os.ttyname(slave)], capture_output=True, text=True,
                           timeout=120)
    finally:
        port.kill()
        port.wait()
        os.close(master)
        os.close(slave)
    assert "no answer from a hil board or any servo bus" in r.stdout and "ids 9" not in r.stdout, r.stdout


def test_a_range_swept_by_hand_narrows_the_limits_and_the_servos_limits(tmp_path):
    """The emulator's hand sweeps l_knee over -10 … 90° and r_elbow over -30 … 10° (the robot allows
    -26 … 130° and -5 … 150°), the rest over their whole ranges, again and again. The config keeps
    the narrower ends; the servos' Min/Max Position Limits are written to match (read back); a run
    with the config keeps its commands inside them."""
    out = tmp_path / "ranges.toml"
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "dynamixel2", "--method",
                              "range", "--emulate-range-deg", "l_knee=-10:90,r_elbow=-30:10", "--sweep-s", "10",
                              "--out", str(out), "--yes", "--headless"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    found = board_config.load(str(out), MODEL)
    limits = {j.name: np.degrees((j.min_rad, j.max_rad)) for j in found.joints}
    assert np.allclose(limits["l_knee"], (-10, 90), atol=1.0), limits["l_knee"]
    elbow = MODEL.joint_index("r_elbow")
    home = np.degrees(MODEL.home[elbow])   # the hand starts where the joint stands
    assert np.allclose(limits["r_elbow"], (np.degrees(MODEL.lower[elbow]), max(10, home)), atol=1.0)
    untouched = [k for k in limits if k not in ("l_knee", "r_elbow")]
    for k in untouched:
        i = MODEL.joint_index(k)
        assert np.allclose(limits[k], np.degrees((MODEL.lower[i], MODEL.upper[i])), atol=1e-6), k
    assert "narrowed to the sweep" in r.stdout and "went past the robot's range" in r.stdout


def test_ranges_and_directions_by_hand_are_refused_where_they_cannot_work(tmp_path):
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--method", "range", "--yes"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--method range records a servo bus kit's ranges" in r.stderr, r.stderr
    r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "dynamixel2", "--method",
                              "range", "--emulate-range-deg", "l_knee=90:10", "--out", str(tmp_path / "x.toml"),
                              "--yes"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "LO must be below HI" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.parametrize("bus,encoder,held", [("feetech", 4088, 0), ("dynamixel2", None, 1500)])
def test_a_calibrated_knee_reads_its_reference_after_a_power_cycle(tmp_path, bus, encoder, held):
    """The servo keeps its EEPROM across a power cycle (the emulator's --eeprom) and reads the way
    its maker documents: a knee calibrated in the reference pose reads that pose, within a degree,
    when the servos are powered up again in it. (Feetech: a knee at the wrap; Dynamixel: one whose
    old Homing Offset put its readings a turn off.)"""
    config = board_config.shipped(MODEL, bus)
    servos = board_config.emulated_servos(config, MODEL)
    knee = MODEL.joint_index("l_knee")
    home = servos[knee].pop("initial")       # None: the encoder where the shipped config has the knee at home
    servos[knee].update(encoder=home if encoder is None else encoder, homing=held)
    eeprom = tmp_path / "eeprom.json"
    cal = tmp_path / "cal.toml"
    emu = bus_emulator(bus, servos, "--baud", str(config.baud), "--eeprom", str(eeprom))
    try:
        r = subprocess.run(HIL + ["calibrate", "--robot", "humanoid17", "--port", emu.path, "--bus", bus,
                                  "--method", "reference", "--yes", "--headless", "--out", str(cal), "--samples", "20"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "(written)" in r.stdout, r.stdout + r.stderr
    finally:
        emu.stop()
    servos[knee]["homing"] = 0   # what it was powered up with before: the EEPROM file says what it holds now
    emu = bus_emulator(bus, servos, "--baud", str(config.baud), "--eeprom", str(eeprom))   # powered up again
    try:
        calibrated = board_config.load(str(cal), MODEL)
        with BusBoard.connect(emu.path, calibrated, expect_joints=MODEL.n) as board:
            board.start_cycling()
            q = read_samples(board, 20).mean(axis=0)
        assert abs(np.degrees(q[knee] - MODEL.home[knee])) < 1.0, np.degrees(q[knee] - MODEL.home[knee])
    finally:
        emu.stop()


@pytest.mark.usefixtures("own_robot_cache")
def test_a_differentials_zero_errors_are_found_in_its_gears_servos_through_the_ratios(tmp_path):
    """The waist's yaw and roll read 3° and −2° off (hidden in the emulated gears' ticks through the
    ratios): the reference calibration moves each gear's zero by what both errors make of it, and
    reads the reference pose back; the one-servo-a-joint methods are refused, naming the gears."""
    import dataclasses

    from tests.unit.test_linkages import _DIFFERENTIAL, _TENDONS

    (tmp_path / "diff.xml").write_text(_DIFFERENTIAL.replace("TENDONS", _TENDONS))
    (tmp_path / "diff.toml").write_text('[robot]\nmjcf = "diff.xml"\n')
    model = robots.load(str(tmp_path / "diff.toml"))
    made = board_config.generated(model, "dynamixel2")
    # the gears' range kept off the encoder's wrap with room for a zero error
    gears = tuple(dataclasses.replace(j, min_rad=np.radians(-150), max_rad=np.radians(150), zero_tick=2048)
                  if j.name.startswith("act") else j for j in made.joints)
    mapped = tmp_path / "map.toml"
    mapped.write_text(board_config.to_toml(dataclasses.replace(made, joints=gears)))
    out = tmp_path / "calibrated.toml"
    r = subprocess.run(HIL + ["calibrate", "--robot", str(tmp_path / "diff.toml"), "--dry-run", "--board-config",
                              str(mapped), "--method", "reference", "--emulate-offsets-deg", "yaw=3,roll=-2",
                              "--samples", "20", "--out", str(out), "--yes", "--headless"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    before, after = board_config.load(str(mapped), model), board_config.load(str(out), model)
    shift = {j.name: (c.zero_tick - j.zero_tick) * j.direction / j.ticks_per_rad
             for j, c in zip(before.joints, after.joints)}
    want = before.mix.servo_angles(np.radians([3.0, -2.0, 0.0]))
    one_tick = 1.0 / before.joints[0].ticks_per_rad
    assert abs(shift["act1"] - want[0]) <= one_tick and abs(shift["act2"] - want[1]) <= one_tick
    assert abs(shift["act1"] - np.radians(3.0)) > np.radians(5)   # not the yaw's error as a servo of its own
    r = subprocess.run(HIL + ["calibrate", "--robot", str(tmp_path / "diff.toml"), "--dry-run", "--board-config",
                              str(mapped), "--method", "directions", "--out", str(tmp_path / "x.toml"), "--yes"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "act1, act2 sit on transmissions" in r.stderr and "Traceback" not in r.stderr
