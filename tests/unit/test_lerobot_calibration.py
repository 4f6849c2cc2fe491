"""LeRobot calibration files ↔ board configs: a file comes back byte for byte through a board config
on disk, its ranges become the joints' ticks and limits, a config made by hil exports what hil
reads, and bad files are refused naming the motor and the key."""

from __future__ import annotations

import json
import math
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hil import board_config, robots
from hil.lerobot import motor_calibration as lerobot_calibration
from hil.errors import InputError
from tests.launch import HIL

SO101 = robots.load("so101")
TPR = 4096 / (2 * math.pi)
# a file as LeRobot writes it (draccus: json.dump, indent 4, no final newline) after calibrating an SO-101 follower
FILE = {
    "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1470, "range_min": 758, "range_max": 3292},
    "shoulder_lift": {"id": 2, "drive_mode": 0, "homing_offset": 157, "range_min": 612, "range_max": 3401},
    "elbow_flex": {"id": 3, "drive_mode": 1, "homing_offset": 1105, "range_min": 850, "range_max": 3107},
    "wrist_flex": {"id": 4, "drive_mode": 0, "homing_offset": -1247, "range_min": 826, "range_max": 3145},
    "wrist_roll": {"id": 5, "drive_mode": 0, "homing_offset": -1790, "range_min": 0, "range_max": 4095},
    "gripper": {"id": 6, "drive_mode": 0, "homing_offset": 1218, "range_min": 2023, "range_max": 3480},
}


def _write(tmp_path, data, name="cal.json") -> str:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data, indent=4))
    return str(p)


def _round_trip(tmp_path, data, bus=None) -> str:
    config = lerobot_calibration.import_file(SO101, _write(tmp_path, data), bus)
    toml = tmp_path / "so101.toml"
    toml.write_text(board_config.to_toml(config, "a note"))
    text, _ = lerobot_calibration.export_text(board_config.load(str(toml), SO101))
    return text


def test_a_lerobot_file_comes_back_byte_for_byte(tmp_path):
    assert _round_trip(tmp_path, FILE) == json.dumps(FILE, indent=4)


def test_the_ranges_become_ticks_and_limits(tmp_path):
    config = lerobot_calibration.import_file(SO101, _write(tmp_path, FILE))
    assert config.bus == "feetech" and config.baud == 1_000_000 and config.servo == {"preset": "STS3215"}
    for j in config.joints[:-1]:   # the gripper: below
        m = FILE[j.name]
        mid = (m["range_min"] + m["range_max"]) / 2
        assert j.servo_id == m["id"] and j.zero_tick == mid and j.ticks_per_rad == pytest.approx(TPR)
        # Feetech: LeRobot mirrors a drive_mode 1 motor on the host, so hil does too
        assert j.direction == (-1 if m["drive_mode"] else 1)
        assert j.rad(mid + 100) == pytest.approx(j.direction * 100 / TPR)
        i = SO101.joint_index(j.name)
        half = (m["range_max"] - m["range_min"]) / 2 / TPR
        # the recorded range, narrowed to the robot's own where the URDF is narrower
        assert j.min_rad == pytest.approx(max(-half, SO101.lower[i]))
        assert j.max_rad == pytest.approx(min(half, SO101.upper[i]))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_valid_file_round_trips(tmp_path_factory, data):
    ids = data.draw(st.lists(st.integers(0, 253), min_size=SO101.n, max_size=SO101.n, unique=True))
    motors = {}
    for name, sid in zip(SO101.joint_names, ids):
        lo = data.draw(st.integers(0, 4094))
        motors[name] = {"id": sid, "drive_mode": data.draw(st.integers(0, 1)),
                        "homing_offset": data.draw(st.integers(-2047, 2047)),
                        "range_min": lo, "range_max": data.draw(st.integers(lo + 1, 4095))}
    tmp = tmp_path_factory.mktemp("rt")
    assert _round_trip(tmp, motors) == json.dumps(motors, indent=4)


def test_the_gripper_keeps_its_whole_range_lerobots_0_to_100_on_the_robots_lower_to_upper(tmp_path):
    for drive_mode in (0, 1):   # (Feetech: LeRobot mirrors a drive_mode 1 motor, 0 % at range_max)
        file = _with("gripper", drive_mode=drive_mode)
        g = lerobot_calibration.import_file(SO101, _write(tmp_path, file)).joints[-1]
        i = SO101.joint_index("gripper")
        assert (g.min_rad, g.max_rad) == (SO101.lower[i], SO101.upper[i])
        closed, opened = (FILE["gripper"]["range_min"], FILE["gripper"]["range_max"])[::1 if drive_mode == 0 else -1]
        assert (g.ticks(SO101.lower[i]), g.ticks(SO101.upper[i])) == (closed, opened)


def test_a_koch_file_gets_each_joints_real_servo_and_its_middle_where_the_kit_has_it(tmp_path):
    """LeRobot's Koch follower (XL430-W250 ×2, XL330-M288 ×4) and leader (XL330-M077 ×6), each by
    the folder LeRobot keeps its file in; the middle of each range is the pose the kit's shipped
    config puts at tick 2048 (the middle of the URDF's range)."""
    koch = robots.load("koch")
    motors = {n: {"id": k + 1, "drive_mode": int(n == "elbow_flex"), "homing_offset": -1000 + 400 * k,
                  "range_min": 1000 + 10 * k, "range_max": 3000 - 10 * k} for k, n in enumerate(koch.joint_names)}
    for folder, role in (("robots/koch_follower", "follower"), ("teleoperators/koch_leader", "leader")):
        (tmp_path / folder).mkdir(parents=True)
        path = _write(tmp_path, motors, f"{folder}/arm.json")
        config = lerobot_calibration.import_file(koch, path)
        shipped = board_config.shipped(koch, "dynamixel2", role)
        assert config.role == role and [j.model for j in config.joints] == [j.model for j in shipped.joints]
        for j, s in zip(config.joints[:-1], shipped.joints):
            mid = (motors[j.name]["range_min"] + motors[j.name]["range_max"]) / 2
            assert j.rad(mid) == pytest.approx(s.rad(2048), abs=1e-9), j.name
        text, _ = lerobot_calibration.export_text(config)
        assert text == json.dumps(motors, indent=4)


def test_a_config_made_by_hil_exports_what_hil_reads():
    config = board_config.shipped(SO101, "feetech")
    text, notes = lerobot_calibration.export_text(config)
    out = json.loads(text)
    assert list(out) == list(SO101.joint_names) and not notes
    for j in config.joints:
        m = out[j.name]
        assert m["id"] == j.servo_id and m["homing_offset"] == 0 and m["drive_mode"] == 0
        assert (m["range_min"], m["range_max"]) == tuple(sorted((j.ticks(j.min_rad), j.ticks(j.max_rad))))


def test_a_range_across_the_encoder_wrap_is_not_exported():
    config = board_config.shipped(SO101, "feetech")
    j = config.joints[0]
    wrapped = type(config.joints[0])(**{**j.__dict__, "zero_tick": 100})   # −110° lands below tick 0
    config = type(config)(**{**config.__dict__, "joints": (wrapped,) + config.joints[1:]})
    with pytest.raises(InputError, match="shoulder_pan.*crosses the encoder's wrap"):
        lerobot_calibration.export_text(config)


def test_a_dynamixel_drive_mode_is_left_to_the_servo(tmp_path):
    # on Dynamixel the servo's Drive Mode register mirrors its readings: hil reads them as they are
    koch_like = {**FILE, "elbow_flex": {**FILE["elbow_flex"], "homing_offset": 40000}}
    config = lerobot_calibration.import_file(SO101, _write(tmp_path, koch_like), "dynamixel2")
    assert config.bus == "dynamixel2" and all(j.direction == 1 for j in config.joints)
    assert _round_trip(tmp_path, koch_like, "dynamixel2") == json.dumps(koch_like, indent=4)


def _with(motor: str, **change) -> dict:
    return {**FILE, motor: {**FILE[motor], **change}}


BAD = [
    ("{", "not valid JSON"),
    ("[1, 2]", "an object of motors by name, not list"),
    ({k: v for k, v in FILE.items() if k != "gripper"}, "no calibration for gripper"),
    ({**FILE, "base_yaw": FILE["gripper"]}, "'base_yaw' is not a joint of so101"),
    ({**FILE, "gripper": 7}, "motor 'gripper' is int"),
    ({**FILE, "gripper": {"id": 6}}, "lacks drive_mode, homing_offset"),
    (_with("gripper", norm_mode="degrees"), "unknown key 'norm_mode'"),
    (_with("gripper", id=True), "gripper.id = True must be a whole number"),
    (_with("gripper", range_min=1.5), "gripper.range_min = 1.5 must be a whole number"),
    (_with("gripper", id=254), "gripper.id = 254 is outside 0 … 253"),
    (_with("gripper", range_max=4096), "gripper.range_max = 4096 is outside 0 … 4095"),
    (_with("gripper", homing_offset=2114), "gripper.homing_offset = 2114 is outside -2047 … 2047"),
    (_with("gripper", drive_mode=2), "drive_mode = 2 is outside 0 … 1"),
    (_with("gripper", range_min=3000, range_max=3000), "range_min 3000 must be below range_max 3000"),
    (_with("gripper", id=1), "servo_id 1 is used by both shoulder_pan and gripper"),
]


@pytest.mark.parametrize("data, message", BAD, ids=[m for _, m in BAD])
def test_bad_files_are_refused_naming_motor_and_key(tmp_path, data, message):
    path = _write(tmp_path, data)
    with pytest.raises(InputError) as e:
        lerobot_calibration.import_file(SO101, path)
    assert message in str(e.value) and path in str(e.value)


def test_the_lerobot_values_in_a_board_config_are_checked(tmp_path):
    text = board_config.to_toml(lerobot_calibration.import_file(SO101, _write(tmp_path, FILE)))
    with pytest.raises(InputError, match="has drive_mode but not range_min, range_max"):
        board_config.parse(_toml_without(text, "range_min", "range_max"), SO101, "x.toml")


def _toml_without(text: str, *keys) -> dict:
    import tomllib
    data = tomllib.loads(text)
    for k in keys:
        del data["joint"][0][k]
    return data


def _hil(*args):
    return subprocess.run([*HIL, "calibrate", "--robot", "so101", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_command_line_converts_both_ways_and_refuses_cleanly(tmp_path):
    src, toml, back = _write(tmp_path, FILE), tmp_path / "c.toml", tmp_path / "back.json"
    r = _hil("--import-lerobot", src, "--out", str(toml))
    assert r.returncode == 0 and f"--board-config {toml}" in r.stdout, r.stderr
    r = _hil("--board-config", str(toml), "--export-lerobot", str(back))
    assert r.returncode == 0, r.stderr
    assert back.read_text() == (tmp_path / "cal.json").read_text()
    for args, message in ((["--import-lerobot", src], "needs --out CONFIG.toml"),
                          (["--export-lerobot", str(back)], "needs --board-config"),
                          (["--import-lerobot", src, "--out", str(toml), "--port", "/dev/null"], "connect to nothing"),
                          (["--import-lerobot", str(tmp_path / "none.json"), "--out", str(toml)], "none.json"),
                          ([], "needs --method")):
        r = _hil(*args)
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
