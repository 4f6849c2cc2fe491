"""Board configs (robot ↔ servo bus mapping): the shipped ones load, anything else is refused with
the file, the joint and the key — never a traceback."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_protocol.buses import BUSES
from firmware_protocol.buses.bus_board import cycle_note
from hil import board_config, robots
from hil.errors import InputError

MODEL = robots.load("humanoid17")


@pytest.mark.parametrize("bus", list(BUSES))
def test_every_bus_has_a_shipped_humanoid17_config_that_maps_every_joint(bus):
    c = board_config.shipped(MODEL, bus)
    assert c.bus == bus and c.shipped and [j.name for j in c.joints] == list(MODEL.joint_names)
    assert len({j.servo_id for j in c.joints}) == MODEL.n
    for j, lo, hi in zip(c.joints, MODEL.lower, MODEL.upper):
        assert lo <= j.min_rad < j.max_rad <= hi       # never wider than the robot
        assert j.rad(j.ticks(0.3)) == pytest.approx(0.3, abs=1 / j.ticks_per_rad)
    text, rate = cycle_note(c)
    assert f"{bus} at " in text and 10 < rate < 1000


@pytest.mark.parametrize("bus", list(BUSES))
def test_a_robot_without_a_map_gets_its_bus_usual_kit_which_the_shipped_kit_agrees_with(bus):
    """`generated` asks only the bus's registration (no template file): the usual servo, ticks,
    zero, first id and physics preset; humanoid17's shipped file of that bus is that kit."""
    from firmware_protocol.buses import bus_class, control_tables

    kit, cls = bus_class(bus).usual, bus_class(bus)
    arm = robots.load("so101")
    # a robot that declares its own servos keeps them (its makers' numbers); one that does not
    # gets the bus's usual servo
    assert board_config.generated(arm, bus).servo is None
    arm = copy.copy(arm)
    arm.meta = {k: v for k, v in arm.meta.items() if k != "servo"}
    made = board_config.generated(arm, bus)
    assert [j.servo_id for j in made.joints] == list(range(kit.first_id, kit.first_id + arm.n))
    assert made.baud == cls.default_baud and made.servo == {"preset": kit.servo_preset}
    for k, m in enumerate(made.joints):
        assert (m.model, m.zero_tick, m.ticks_per_rad) == (kit.model, kit.zero_tick, kit.ticks_per_rad)
        assert (m.min_rad, m.max_rad) == (arm.lower[k], arm.upper[k])
    kit_file = tomllib.loads(board_config.shipped_path("humanoid17", bus).read_text())   # its own joints aside
    defaults = kit_file["defaults"]
    assert kit_file["baud"] == cls.default_baud and kit_file["servo"] == made.servo
    assert min(j["servo_id"] for j in kit_file["joint"]) == kit.first_id
    assert (defaults.get("model"), defaults["zero_tick"]) == (kit.model, kit.zero_tick)
    # the ticks per radian of a model hil knows come from its resolution (control_tables), not the file
    known = control_tables.model_named(kit.model, bus)
    assert ("ticks_per_rad" in defaults) == (known is None)
    assert defaults.get("ticks_per_rad", known.ticks_per_rad if known else None) == pytest.approx(kit.ticks_per_rad,
                                                                                                  abs=1e-3)


def _base() -> dict:
    return tomllib.loads(board_config.shipped_path("humanoid17", "dynamixel2").read_text())


def _variant(change) -> dict:
    data = _base()
    change(data)
    return data


BAD = [
    ("wrong robot", lambda d: d.update(robot="puma560"), "robot = 'puma560'"),
    ("unknown bus", lambda d: d.update(bus="canbus"), "bus = 'canbus'; buses are"),
    ("unknown key", lambda d: d.update(baudrate=1), "unknown key 'baudrate'"),
    ("baud text", lambda d: d.update(baud="fast"), "baud: 'fast' is not a number"),
    ("joint missing", lambda d: d["joint"].pop(3), "joints not mapped: l_ankle_pitch"),
    ("joint twice", lambda d: d["joint"].append(dict(d["joint"][0])), "'l_hip_roll' is mapped twice"),
    ("id twice", lambda d: d["joint"][1].update(servo_id=1), "servo_id 1 is used by both"),
    ("id out of range", lambda d: d["joint"][1].update(servo_id=300), "servo_id = 300 is outside 0 … 252"),
    ("id the header would read", lambda d: d["joint"][1].update(servo_id=253), "servo_id = 253 is outside 0 … 252"),
    ("a bool for an id", lambda d: d["joint"][1].update(servo_id=True), "servo_id"),
    ("bad direction", lambda d: d["joint"][0].update(direction=2), "direction = 2 must be 1 or -1"),
    ("zero ticks per rad", lambda d: d["defaults"].update(ticks_per_rad=0), "ticks_per_rad = 0 is outside"),
    ("NaN ticks per rad", lambda d: d["defaults"].update(ticks_per_rad=math.nan), "ticks_per_rad = nan is outside"),
    ("limits crossed", lambda d: d["joint"][2].update(min_deg=10, max_deg=5), "min_deg 10 must be below max_deg 5"),
    ("limits outside the robot", lambda d: d["joint"][2].update(min_deg=140, max_deg=150), "does not overlap"),
    ("unknown joint", lambda d: d["joint"][0].update(name="tail"), "name = 'tail' is not a joint"),
    ("joint key typo", lambda d: d["joint"][0].update(zero=2048), "unknown key 'zero'"),
    ("no joints", lambda d: d.pop("joint"), "no [[joint]] tables"),
    ("echo text", lambda d: d.update(echo="yes"), "echo = 'yes' must be true or false"),
    ("torque limit zero", lambda d: d["joint"][2].update(torque_limit_pct=0), "torque_limit_pct = 0 is outside 1 … 100"),
    ("torque limit text", lambda d: d["defaults"].update(torque_limit_pct="half"), "torque_limit_pct: 'half' is not"),
]


@pytest.mark.parametrize("what,change,message", BAD, ids=[b[0] for b in BAD])
def test_a_bad_config_is_refused_naming_what_and_where(what, change, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("(", r"\(")):
        board_config.parse(_variant(change), MODEL, "kit.toml")


def test_a_bus_that_disagrees_with_the_file_is_refused(tmp_path):
    f = tmp_path / "kit.toml"
    f.write_text(board_config.shipped_path("humanoid17", "feetech").read_text())
    with pytest.raises(InputError, match='--bus dynamixel2 but .* says bus = "feetech"'):
        board_config.resolve(MODEL, "dynamixel2", str(f))
    with pytest.raises(InputError, match="no shipped feetech config for puma560"):
        board_config.resolve(robots.load("puma560"), "feetech", None)


def test_a_joint_map_folded_into_a_config_reads_as_the_map_says():
    c = board_config.shipped(MODEL, "dynamixel2")
    off, sign = np.linspace(-0.05, 0.05, MODEL.n), np.where(np.arange(MODEL.n) % 3 == 0, -1.0, 1.0)
    folded = board_config.with_joint_map(c, off, sign)
    again = board_config.parse(tomllib.loads(board_config.to_toml(folded, "a note")), MODEL, "x")
    assert again.joints == folded.joints
    for j, f, o, s in zip(c.joints, folded.joints, off, sign):
        q = 0.2
        assert j.rad(f.ticks(q)) == pytest.approx(s * q + o, abs=1.0 / j.ticks_per_rad)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_as_a_config_give_an_input_error_or_a_config(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("cfg") / "kit.toml"
    f.write_bytes(data)
    try:
        board_config.load(str(f), MODEL)
    except InputError as e:
        assert str(f) in str(e) or "kit.toml" in str(e)


def test_a_torque_limit_is_kept_written_back_and_makes_the_servo_weaker():
    data = _variant(lambda d: d["joint"][2].update(torque_limit_pct=40))
    config = board_config.parse(data, MODEL, "kit.toml")
    knee = MODEL.joint_index("l_knee")
    assert config.joints[knee].torque_limit == pytest.approx(0.4)
    again = board_config.parse(tomllib.loads(board_config.to_toml(config)), MODEL, "again.toml")
    assert again.joints[knee].torque_limit == pytest.approx(0.4)
    full = board_config.servos_of(MODEL, board_config.shipped(MODEL, "dynamixel2"))
    limited = board_config.servos_of(MODEL, config)
    assert limited.joint(knee).torque_limit_nm == pytest.approx(0.4 * full.joint(knee).torque_limit_nm)
    assert limited.joint(knee + 1) == full.joint(knee + 1)


def test_a_torque_limit_on_a_bus_whose_servos_take_none_is_refused():
    data = tomllib.loads(board_config.shipped_path("humanoid17", "ssc32").read_text())
    data["joint"][0]["torque_limit_pct"] = 50
    with pytest.raises(InputError, match="hil sets no torque limit on"):
        board_config.parse(data, MODEL, "kit.toml")


def test_a_bus_option_is_read_written_back_and_refused_on_another_bus(tmp_path):
    """`fast_sync_read` is Dynamixel 2.0's own key: read as true/false, written back by `to_toml`,
    handed to the driver as its keyword; in another bus's config it is refused, naming whose it is."""
    data = _base()
    data["fast_sync_read"] = True
    config = board_config.parse(data, MODEL, "kit.toml")
    assert config.options == {"fast_sync_read": True} and config.driver_options() == {"fast": True}
    (tmp_path / "again.toml").write_text(board_config.to_toml(config))
    assert board_config.load(str(tmp_path / "again.toml"), MODEL).options == {"fast_sync_read": True}
    data["fast_sync_read"] = "yes"
    with pytest.raises(InputError, match="kit.toml: fast_sync_read = 'yes' must be true or false"):
        board_config.parse(data, MODEL, "kit.toml")
    feetech = tomllib.loads(board_config.shipped_path("humanoid17", "feetech").read_text())
    feetech["fast_sync_read"] = True
    with pytest.raises(InputError, match="fast_sync_read is an option of the dynamixel2 bus, not of feetech"):
        board_config.parse(feetech, MODEL, "kit.toml")


KITS = sorted(board_config.BOARDS_DIR.glob("*.toml"))


@pytest.mark.parametrize("path", KITS, ids=[p.stem for p in KITS])
def test_every_shipped_kit_loads_for_its_robot_with_servo_models_hil_knows(path):
    from firmware_protocol.buses import control_tables

    data = tomllib.loads(path.read_text())
    model = robots.load(data["robot"])
    c = board_config.resolve(model, None, path.stem)   # by name, as --board-config takes it
    assert c.role == data.get("role", "follower") and [j.name for j in c.joints] == list(model.joint_names)
    for j in c.joints:
        assert j.model is None or control_tables.model_named(j.model, c.bus) is not None, j
    leader = board_config.shipped_path(data["robot"], data["bus"], "leader")
    if c.role == "follower" and leader.exists():   # a kit's two arms: the same joints on the same ids
        other = board_config.shipped(model, data["bus"], "leader")
        assert [(j.name, j.servo_id) for j in other.joints] == [(j.name, j.servo_id) for j in c.joints]


@pytest.mark.parametrize("robot,bus", [("koch", "dynamixel2"), ("so100", "feetech")])
def test_a_lerobot_kit_puts_tick_2048_mid_travel_where_lerobot_calibrates(robot, bus):
    """LeRobot's calibration pose, the middle of each joint's travel, reads tick 2048 on the
    shipped follower and leader alike (so a dry run and a real arm set up by LeRobot agree)."""
    model = robots.load(robot)
    for role in board_config.ROLES:
        for j, lo, hi in zip(board_config.shipped(model, bus, role).joints, model.lower, model.upper):
            assert j.rad(2048) == pytest.approx((lo + hi) / 2, abs=1.0 / j.ticks_per_rad), (role, j.name)


def test_the_kits_answering_a_probe_are_those_with_exactly_its_ids_and_models():
    follower = {1: "XL430-W250", 2: "XL430-W250", **{i: "XL330-M288" for i in range(3, 7)}}
    assert board_config.kits_answering("dynamixel2", follower) == \
        "koch follower (--robot koch --board-config koch-dynamixel2)"
    assert "koch leader" in board_config.kits_answering("dynamixel2", {i: "XL330-M077" for i in range(1, 7)})
    assert board_config.kits_answering("dynamixel2", {**follower, 7: "XL330-M288"}) == ""
    assert board_config.kits_answering("feetech", follower) == ""
    both = board_config.kits_answering("feetech", {i: "STS3215" for i in range(1, 7)})
    assert both.startswith("so100 or so101, follower or leader") and "so101-leader-feetech" in both


def _wide_arm(tmp_path, n: int = 3) -> str:
    """A URDF arm: a shoulder turning −90° … 180° (across a servo's wrap from its usual zero), an
    elbow without a range (continuous: ±360°), and plain joints to make up `n`."""
    joints = [("shoulder", 'type="revolute"', '<limit lower="-1.5708" upper="3.14159" velocity="3"/>'),
              ("elbow", 'type="continuous"', '<limit velocity="3"/>')]
    joints += [(f"j{k}", 'type="revolute"', '<limit lower="-1" upper="1" velocity="3"/>') for k in range(n - 2)]
    links = "".join(f'<link name="l{k}"><inertial><mass value="0.1"/><inertia ixx="1e-4" iyy="1e-4" izz="1e-4" '
                    f'ixy="0" ixz="0" iyz="0"/></inertial></link>' for k in range(n + 1))
    body = "".join(f'<joint name="{name}" {kind}><parent link="l{k}"/><child link="l{k + 1}"/>'
                   f'<origin xyz="0 0 0.1"/><axis xyz="0 1 0"/>{limit}</joint>'
                   for k, (name, kind, limit) in enumerate(joints))
    path = tmp_path / "wide.urdf"
    path.write_text(f'<robot name="wide">{links}{body}</robot>')
    return str(path)


def test_a_generated_map_keeps_every_range_inside_one_turn(tmp_path):
    """The shoulder's range is centred on the turn; the continuous elbow is narrowed to one turn
    about home; the map loads (every range off the encoder's wrap)."""
    arm = robots.load(_wide_arm(tmp_path))
    made = board_config.generated(arm, "dynamixel2")
    shoulder, elbow, plain = made.joints
    for j in made.joints:
        ends = sorted(j.zero_tick + j.direction * j.ticks_per_rad * np.array([j.min_rad, j.max_rad]))
        assert 0 <= ends[0] and ends[1] <= 4095
    assert (shoulder.min_rad, shoulder.max_rad) == pytest.approx((arm.lower[0], arm.upper[0]))
    assert shoulder.zero_tick != 2048 and plain.zero_tick == 2048
    assert elbow.max_rad - elbow.min_rad == pytest.approx(4079 / elbow.ticks_per_rad, abs=1e-3)
    assert elbow.min_rad < arm.home[1] < elbow.max_rad


def test_a_range_of_more_than_a_turn_is_said_so():
    data = _variant(lambda d: d["defaults"].update(ticks_per_rad=5000.0))
    with pytest.raises(InputError) as e:
        board_config.parse(data, robots.load("humanoid17"), "kit.toml")
    assert "more than one turn of the servo" in str(e.value) and "min_deg and max_deg" in str(e.value)


def test_a_dry_run_of_a_robot_too_large_for_hils_board_goes_over_a_servo_bus(tmp_path, capsys):
    from firmware_protocol.messages import MAX_JOINTS
    from hil.cli.common import dry_run_bus

    big = robots.load(_wide_arm(tmp_path, MAX_JOINTS + 1))
    assert dry_run_bus(big, True, None, None, "run") == "dynamixel2"
    assert f"{big.n} joints, more than hil's own board carries ({MAX_JOINTS})" in capsys.readouterr().out
    assert dry_run_bus(big, True, "feetech", None, "run") == "feetech"
    assert dry_run_bus(big, False, None, None, "run") is None   # a real robot: its board or bus is the user's
    assert dry_run_bus(robots.load("humanoid17"), True, None, None, "run") is None


TRANSMISSIONS = str(Path(__file__).resolve().parent / "mjcf" / "transmissions.xml")


def _on_gears(model, rows: list[dict]) -> dict:
    return {"robot": model.name, "bus": "dynamixel2", "defaults": {"model": "XM430-W350", "zero_tick": 2048},
            "joint": [{"servo_id": k + 1, **row} for k, row in enumerate(rows)]}


@pytest.mark.usefixtures("own_robot_cache")
def test_a_hand_written_map_puts_servos_on_a_differentials_gears_and_checks_they_cover_every_joint():
    pytest.importorskip("mujoco")
    m = robots.load(TRANSMISSIONS)
    turn = {"min_deg": -170, "max_deg": 170}   # (the gears' ±255° would cross the encoder's wrap)
    rows = [{"name": "act2", **turn}, {"name": "hip"}, {"name": "act1", **turn}, {"name": "knee_act"}]
    c = board_config.parse(_on_gears(m, rows), m, "gears.toml")
    # each gear in the slot of a joint it turns, in the robot's joint order
    assert [j.name for j in c.joints] == ["act2", "act1", "hip", "knee_act"]
    gears = {f.name: f for f in m.followers}
    q = np.array([0.2, -0.1, 0.3, -0.4])
    assert c.mix.servo_angles(q) == pytest.approx([gears["act2"].angle(q), gears["act1"].angle(q), 0.3, -0.4])
    assert c.mix.joint_angles(c.mix.servo_angles(q)) == pytest.approx(q)
    # a joint not commanded leaves both gears uncommanded, and only them
    idle = c.mix.servo_angles(np.array([np.nan, -0.1, 0.3, -0.4]))
    assert np.isnan(idle[:2]).all() and idle[2:] == pytest.approx([0.3, -0.4])
    with pytest.raises(InputError, match=r"joints not mapped: roll .*act2"):
        board_config.parse(_on_gears(m, rows[1:]), m, "gears.toml")
    with pytest.raises(InputError, match=r"'act1' is a transmission's, turning roll and yaw, and each"):
        board_config.parse(_on_gears(m, [{"name": "yaw"}, {"name": "roll"}] + rows[1:]), m, "gears.toml")
    with pytest.raises(InputError, match=r"'wheel' is not a joint .*or a transmission's.*act1"):
        board_config.parse(_on_gears(m, rows[:3] + [{"name": "wheel"}]), m, "gears.toml")
    # a gear's range that leaves out where home turns it (0° here) would leave its joints no room
    with pytest.raises(InputError, match=r"act1 \(servo 3\) ranges over \[10.0, 170.0\]°, but the robot's home "
                                         r"turns it to 0.0°"):
        board_config.parse(_on_gears(m, rows[:2] + [{"name": "act1", "min_deg": 10, "max_deg": 170}] + rows[3:]), m,
                           "gears.toml")


@pytest.mark.usefixtures("own_robot_cache")
def test_a_differentials_servo_range_narrows_both_its_joints_to_a_box_inside_it():
    pytest.importorskip("mujoco")
    import itertools

    m = robots.load(TRANSMISSIONS)
    c = board_config.generated(m, "dynamixel2")   # the gears' ±4.5 rad do not fit in a turn: narrowed
    assert board_config.geared_servos(c, m) == [   # (`hil robots --bus` prints these)
        "act1 (servo 1) sits on a transmission: it is told act1 = 2.4 · yaw − 1.714 · roll",
        "act2 (servo 2) sits on a transmission: it is told act2 = 2.4 · yaw + 1.714 · roll"]
    narrowed = board_config.within_config(m, c)
    assert narrowed.upper[0] < m.upper[0] and narrowed.upper[1] < m.upper[1]
    for corner in itertools.product(*zip(narrowed.lower, narrowed.upper)):
        s = c.mix.servo_angles(np.array(corner))
        for k, j in enumerate(c.joints):
            assert j.min_rad - 1e-9 <= s[k] <= j.max_rad + 1e-9
    # the box touches the band: no wider than it must be
    assert max(abs(c.mix.servo_angles(np.array(corner))[0]) for corner in
               itertools.product(*zip(narrowed.lower, narrowed.upper))) == pytest.approx(c.joints[0].max_rad)


@pytest.mark.usefixtures("own_robot_cache")
def test_a_joint_map_folds_into_servos_on_gears_through_their_ratios():
    pytest.importorskip("mujoco")
    m = robots.load(TRANSMISSIONS)
    c = board_config.generated(m, "dynamixel2")
    offsets, signs = np.array([0.05, -0.03, 0.02, 0.0]), np.ones(4)
    folded = board_config.with_joint_map(c, offsets, signs)
    b = np.array([0.2, -0.1, 0.3, -0.4])   # what the board reads through `c`: q + offset
    ticks = [j.ticks(s) for j, s in zip(c.joints, c.mix.servo_angles(b))]
    read = folded.mix.joint_angles([j.rad(t) for j, t in zip(folded.joints, ticks)])
    assert read == pytest.approx(b - offsets, abs=3 / c.joints[0].ticks_per_rad)
    with pytest.raises(InputError, match="act1 .* sits on a transmission: a calibration that reverses"):
        board_config.with_joint_map(c, offsets, np.array([-1.0, 1, 1, 1]))


def test_a_joint_turned_by_two_servos_is_held_only_while_both_are():
    """The physics bridge drives a joint only where every servo that turns it has its torque on:
    a differential's roll and yaw go limp with either gear's servo."""
    from firmware_protocol.servo_mix import ServoMix

    mix = ServoMix.of([[2.4, -1.7, 0.0], [2.4, 1.7, 0.0], [0.0, 0.0, 1.0]], [0.0, 0.0, 0.0])
    assert mix.mixed() == [0, 1]
    assert list(mix.driven_by(np.array([True, True, False]))) == [True, True, False]
    assert list(mix.driven_by(np.array([True, False, True]))) == [False, False, True]
    s = mix.servo_angles(np.array([0.1, 0.2, 0.3]))
    assert mix.joint_angles(s) == pytest.approx([0.1, 0.2, 0.3])
    assert mix.joint_rates(mix.servo_rates(np.array([1.0, -2.0, 0.5]))) == pytest.approx([1.0, -2.0, 0.5])
