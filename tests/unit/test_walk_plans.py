"""Walk plans a robot can follow: support switches without a jump, feet that stay put while down,
the ZMP from the finest difference the samples allow, a 100-step walk that ends where it should,
and plans refused (never run) when a sample fails the loop's own checks."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hil.robots as robots
from hil.errors import InputError, UnreachableError
from hil.motion import walk_ik, walking
from hil.motion.limits import check_limits
from hil.safety import SafetyChecker


def test_support_switches_leave_the_feet_flat_and_still(walk6):
    # at each switch the new support sole keeps the pose it had on the ground: a sole frozen from
    # a sample in which the old support foot had begun to lift would tilt, and every contact after
    # it would be measured off the ground
    assert (np.diff(walk6.support) != 0).sum() >= 10
    assert walk6.contact_error <= 1e-8, walk6.contact_error
    # feet the plan has down do not move, the swing foot just before touchdown included
    assert walk6.slide <= 1e-8, walk6.slide


def test_a_foot_the_plan_has_down_that_moves_or_sinks_is_measured(hum, walk6):
    """The checks measure, from the joint angles alone: a right hip pitch that drifts while both
    soles are down moves one of them (the other is the root the body is placed from), which slides
    and leaves the floor."""
    from hil.motion import contacts

    p, (hl, hw) = walking.WalkParams(steps=6, stride=0.03), hum.sole_half
    both = np.flatnonzero([contacts.decode(int(c)) == (contacts.FLAT, contacts.FLAT) for c in walk6.support])
    first = both[np.flatnonzero(np.diff(both) > 1)[0] + 1]   # the first double support after a step
    window = np.arange(first, first + 20)
    assert all(k in both for k in window)
    Q = walk6.q.copy()
    Q[window, hum.joint_index("r_hip_pitch")] += np.linspace(0.0, 0.01, len(window))   # 0.01 rad: a few mm
    drifted = walking.check_walk(hum, walk6.t, Q, walk6.support, walk6.zmp_ref, p, hl, hw, 0.0, "drift")
    assert 1e-3 < drifted.slide < 1e-2 and walk6.slide <= 1e-8, drifted.slide
    assert drifted.contact_error > 1e-4 and walk6.contact_error <= 1e-8, drifted.contact_error


def test_the_zmp_comes_from_the_finest_central_difference(walk6):
    com, dt = walk6.com_w, walk6.t[1] - walk6.t[0]
    acc = (com[2:] - 2 * com[1:-1] + com[:-2]) / dt ** 2
    zmp = com[1:-1, :2] - com[1:-1, 2:3] * acc[:, :2] / (walking.G + acc[:, 2:3])
    np.testing.assert_allclose(walk6.zmp_w[1:-1], zmp, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("stretched", [False, True], ids=["bent-knee", "knee-stretched, feet rolling"])
def test_a_100_step_walk_ends_where_its_footsteps_say(hum, stretched):
    res = walking.plan(hum, walking.WalkParams(steps=100, stride=0.03, knee_stretched=stretched), say=lambda s: None)
    assert np.isfinite(res.margin).all() and res.margin.min() > 0.003
    moved = res.feet_w[-1, :, :3, 3] - res.feet_w[0, :, :3, 3]
    # the right foot starts with half a stride, the left ends with one: left 99 strides, right 98.5
    np.testing.assert_allclose(moved, [[0.03 * 99, 0, 0], [0.03 * 98.5, 0, 0]], atol=1e-8)
    tilt = np.abs(res.feet_w[-1, :, 2, 2] - 1.0).max()
    assert tilt < 1e-10
    assert res.contact_error <= 1e-8 and res.slide <= 1e-8


def test_a_walk_whose_feet_collide_is_refused_naming_the_sample(hum):
    with pytest.raises(UnreachableError, match=r"at t = [0-9.]+ s \(sample \d+\): self-collision: l_foot and r_foot"):
        walking.plan(hum, walking.WalkParams(steps=2, width=0.04), say=lambda s: None)


def test_a_plan_that_fails_the_zmp_check_is_refused(hum, walk6):
    bad = walking.WalkResult(**{**walk6.__dict__, "margin": walk6.margin.copy()})
    bad.margin[700] = -0.002
    with pytest.raises(UnreachableError, match=r"ZMP leaves .* \(-2.0 mm\) at t = 3.500 s"):
        walking.refuse_unsafe(hum, bad)
    slid = walking.WalkResult(**{**walk6.__dict__, "slide": 2e-4})
    with pytest.raises(UnreachableError, match="slides 0.200 mm"):
        walking.refuse_unsafe(hum, slid)


OPTIONS = [dict(), dict(stride=-0.02), dict(stride=0.0, side=0.02), dict(stride=0.0, side=-0.02),
           dict(stride=0.02, side=0.01), dict(lift=0.02), dict(period=0.6), dict(period=1.2, double_support=0.4),
           dict(steps=1), dict(steps=3, stride=0.05), dict(turn_deg=8.0), dict(stride=0.12, steps=2)]


GAITS = {"bent-knee": dict(), "knee-stretched": dict(knee_stretched=True), "heel-toe": dict(heel_toe=True)}


@pytest.mark.slow
@pytest.mark.parametrize("gait", GAITS)
@pytest.mark.parametrize("options", OPTIONS, ids=[",".join(f"{k}={v}" for k, v in o.items()) or "default"
                                                  for o in OPTIONS])
def test_every_walk_option_plans_safely_or_is_refused_clearly(hum, options, gait):
    try:
        res = walking.plan(hum, walking.WalkParams(**{"steps": 4, **options, **GAITS[gait]}), say=lambda s: None)
    except (UnreachableError, InputError) as e:
        assert "walk:" in str(e) and any(w in str(e) for w in ("try", "use", "needs")), e
        return
    # what is accepted passes every check the loop makes, on every sample
    bad, flags = SafetyChecker(hum, balance=False).check_path(res.q)
    assert bad == -1, SafetyChecker(hum).explain(int(flags[bad]), res.q[bad])
    assert check_limits(hum, res.t, res.q).time_scale <= 1.0
    assert res.margin.min() > 0 and res.contact_error <= 1e-8 and res.slide <= 1e-8 and res.min_foot_z >= -1e-9


def test_the_knees_are_found_by_the_tree_whatever_they_are_called(tmp_path):
    """A leg's knee is the middle of its three pitch joints between body and sole: humanoid17's
    l_knee, the G1's left_knee_joint, a four-joint MJCF leg's; a leg whose middle joint does not
    pitch has none, and --knee-stretched says so instead of walking."""
    from pathlib import Path

    from hil.robots.legs import legs

    g1 = robots.load("examples/robots/g1.toml")
    for model, knees in ((robots.load("humanoid17"), ("l_knee", "r_knee")),
                         (g1, ("left_knee_joint", "right_knee_joint"))):
        found = legs(model)
        assert (model.joint_names[found["l"].knee], model.joint_names[found["r"].knee]) == knees
        assert found["l"].hip_pitch < found["l"].knee < found["l"].ankle_pitch
    biped = Path(__file__).parent / "mjcf" / "biped.xml"
    rolled = tmp_path / "biped.xml"
    rolled.write_text(biped.read_text().replace('name="l_knee" axis="0 1 0"', 'name="l_knee" axis="1 0 0"'))
    model = robots.load(str(rolled))
    assert legs(model)["l"].knee is None and legs(model)["r"].knee is not None
    with pytest.raises(InputError, match="legs have no knee"):
        walking.generate(model, walking.WalkParams(steps=2, knee_stretched=True))


def test_a_leg_with_a_hip_yaw_keeps_the_lifted_foot_s_heading():
    """G1's legs have six joints: with the swing foot's heading left free, its hip yaw jumped 0.7°
    in one sample at touchdown (28 800 °/s²), and every walk was refused as one the joints cannot
    follow, however slow."""
    g1 = robots.load("examples/robots/g1.toml")
    assert walk_ik.leg_can_yaw(g1)
    res = walking.generate(g1, walking.WalkParams(steps=2))
    yaws = [g1.joint_index(n) for n in ("left_hip_yaw_joint", "right_hip_yaw_joint")]
    dt = res.t[1] - res.t[0]
    acc = np.abs(np.diff(res.q[:, yaws], 2, axis=0)) / dt ** 2
    assert np.degrees(acc.max()) < 0.5 * np.degrees(g1.acceleration_limit[yaws].min()), np.degrees(acc.max())


@pytest.mark.parametrize("options", [dict(), dict(knee_stretched=True), dict(stride=0.0, side=0.02),
                                     dict(turn_deg=8.0), dict(steps=1)], ids=["forward", "rolling", "sideways",
                                                                              "turning", "one step"])
def test_the_standing_lead_tried_on_two_steps_is_the_one_the_whole_walk_gives(hum, options):
    """The lead is tried on the walk's first steps only (`gait.LEAD_STEPS`): everything up to the
    end of the first shift, which the lead is judged on, is the same as the whole walk's."""
    from dataclasses import replace

    from hil.kinematics.floating import FloatingBase
    from hil.motion import gait as gait_mod

    p = walking.WalkParams(**{"steps": 6, **options})
    if p.knee_stretched:
        p = replace(p, double_support=0.4)
    p = replace(p, double_support=p.double_support or 0.25, crouch=0.008)
    q0 = hum.home.copy()
    base = FloatingBase(hum, "l_sole", q0)
    W_l, W_r = base.frame_pose(q0, "l_sole"), base.frame_pose(q0, "r_sole")
    steps = gait_mod.footsteps(p, W_l, W_r, float(np.linalg.norm(W_l[:3, 3] - W_r[:3, 3])))
    com0 = base.com(q0)
    hl, hw = hum.sole_half
    p_lead, got = gait_mod.standing_lead(p, steps, W_l, W_r, 0.005, hl, hw, float(com0[2]), com0)
    assert len(got.phases) == 2 * len(steps) + 1   # the gait returned is the whole walk's
    for stand in gait_mod.STANDS:
        whole = gait_mod.Gait(replace(p, stand=stand), steps, W_l, W_r, 0.005, hl, hw, com0)
        short = gait_mod.Gait(replace(p, stand=stand), steps[:gait_mod.LEAD_STEPS], W_l, W_r, 0.005, hl, hw, com0)
        n = int((whole.t < whole.times[1]).sum())
        assert short.times[1] == whole.times[1] and len(short.t) > n
        np.testing.assert_array_equal(short.zmp_ref[:n], whole.zmp_ref[:n])
        np.testing.assert_array_equal(short.contact[:n], whole.contact[:n])
        np.testing.assert_array_equal(short.sole[:n], whole.sole[:n])
    assert p_lead.stand in gait_mod.STANDS


def test_a_walk_stands_still_before_its_first_shift_and_after_its_last(walk6):
    """Preview control starts the COM the moment the first shift comes into view: with none ahead
    of it, humanoid17's COM went from rest to 1.6 m/s² in 15 ms, ten times what the shift itself
    needs, and G1's (0.67 m up) ZMP went 0.7 m out of its feet (every G1 walk refused). A walk now
    stands until the kick is no harder than the shift. At the end the COM lags the last shift as
    much: G1's walk ended with its COM still moving 62 mm/s and a joint 7°/s, which the loop's
    hold of the last sample stops in one cycle (the Booster T1's was refused for it); it now
    stands as long after the last shift as before the first."""
    from hil.motion.gait import KICK_S

    g1 = robots.load("examples/robots/g1.toml")
    res = walking.generate(g1, walking.WalkParams(steps=2))
    assert res.params.stand > 0 and res.margin.min() > 0, (res.params.stand, res.margin.min())
    walking.refuse_unsafe(g1, res)
    for r in (res, walk6):
        dt = r.t[1] - r.t[0]
        still = r.t < r.params.stand
        assert np.abs(r.zmp_ref[still] - r.zmp_ref[0]).max() < 1e-12   # the reference waits while it stands
        after = r.t > r.t[-1] - r.params.stand
        assert np.abs(r.zmp_ref[after] - r.zmp_ref[-1]).max() < 1e-12   # and stays once the last shift is over
        acc = np.linalg.norm(np.diff(r.com_ref[:, :2], 2, axis=0), axis=1) / dt ** 2
        kick = int(round(KICK_S / dt))
        assert acc[:kick].max() <= acc[kick:len(r.t) // 2].max(), (acc[:kick].max(), acc[kick:].max())
        com_speed = np.linalg.norm(r.com_w[-1] - r.com_w[-2]) / dt
        joint_speed = np.abs(r.q[-1] - r.q[-2]).max() / dt
        assert com_speed < 0.02 and np.degrees(joint_speed) < 2.0, (com_speed, np.degrees(joint_speed))


def test_a_joint_both_legs_hang_from_is_the_body_s_and_keeps_its_pose(tmp_path):
    """The Booster T1's hips hang from a waist joint under its trunk. Taken for a joint of each leg
    (every joint the soles' Jacobians move), the walk's IK turned it one way, then the other
    within a sample (9 100 °/s²) and took its yaw for the legs'. Here the small six-joint biped's
    legs hang from such a joint: the walk plans, and that joint never leaves its home angle."""
    from pathlib import Path

    pytest.importorskip("mujoco")
    text = (Path(__file__).parent / "mjcf" / "biped6.xml").read_text()
    start, end = text.index('      <body name="l_thigh"'), text.index("    </body>\n  </worldbody>")
    legs_xml = "".join("  " + line + "\n" if line else "\n" for line in text[start:end].split("\n"))[:-1]
    hips = ('      <body name="hips" pos="0 0 -0.005">\n        <joint name="hips_yaw" axis="0 0 1" range="-45 45"/>\n'
            '        <inertial pos="0 0 0" mass="0.05" diaginertia="0.00002 0.00002 0.00002"/>\n')
    (tmp_path / "hips.xml").write_text(text[:start] + hips + legs_xml.rstrip(" ") + "      </body>\n" + text[end:])
    side = tmp_path / "hips.toml"
    side.write_text('[robot]\nmjcf = "hips.xml"\n[poses]\nhome = { l_hip_pitch = -20, l_knee = 40, l_ankle = -20, '
                    'r_hip_pitch = -20, r_knee = 40, r_ankle = -20 }\n')
    model = robots.load(str(side))
    shared = model.joint_index("hips_yaw")
    assert shared not in walk_ik.leg_joints(model) and not walk_ik.leg_can_yaw(model)
    res = walking.plan(model, walking.WalkParams(steps=2), say=lambda s: None)
    assert np.abs(res.q[:, shared] - model.home[shared]).max() < 1e-9


def test_a_robot_its_servos_cannot_hold_up_is_refused_at_once():
    """G1 on the XM430s of a generated Dynamixel config was planned again and again at ever slower
    paces (a 7 355 s step) until the command was killed: no pace makes 1.86 N·m hold a 35 kg robot."""
    from hil.robots.servos import servo_table

    g1 = robots.load("examples/robots/g1.toml")
    weak = servo_table(g1, {"preset": "XM430-W350"}, "a test's board config")
    said = []
    with pytest.raises(UnreachableError, match=r"needs \d+\.\d+ N·m to hold the robot up standing still, more than "
                                               r"its servo gives \(1\.86 N·m"):
        walking.plan(g1, walking.WalkParams(steps=2), say=said.append, servo=weak)
    assert not said   # refused before any slower plan


def test_a_limit_a_slower_pace_does_not_bring_down_is_refused_without_more_tries(hum):
    """A plan that jumps somewhere exceeds the joints' acceleration at any pace: it is not planned
    again slower and slower, but refused saying so."""
    said = []
    with pytest.raises(UnreachableError, match="and no less at a slower pace: the plan jumps there"):
        walking.plan(hum, walking.WalkParams(steps=4, stride=0.0, side=0.02, knee_stretched=True), say=said.append)
    assert 1 <= len(said) < 5, said   # (it was planned again six times, to a longer and longer step)


@pytest.mark.parametrize("bus", ["dynamixel2", "dynamixel1", "feetech", "kondo-ics", "ssc32", "maestro"])
def test_a_walk_plans_on_every_shipped_bus_with_its_servos_compensation(hum, bus):
    """The compensated commands turn where the torques turn, smoothly: a corner in the averaged
    torques became an ankle command 2300 °/s² past the limit on softer servos, and every walk on
    those buses was refused."""
    from hil import board_config

    servo = board_config.servos_of(hum, board_config.shipped(hum, bus))
    tried = []
    res = walking.plan(hum, walking.WalkParams(steps=2), say=tried.append, servo=servo)
    assert res.torques.compensated and not tried, tried
    assert np.abs(res.q_cmd - res.q).max() > np.radians(1.0)   # the servos sag: there is something to carry
    report = check_limits(hum, res.t, res.q_cmd)
    assert report.time_scale <= 1.0, report.worst


def test_each_joint_s_commands_carry_its_servo_s_own_compensation_margin(hum):
    """`compensation_margin` per servo: the commands are the plan plus that many times the sag
    τ/kp, joint by joint, and the plan's line says which margins it used."""
    from hil.robots.servos import parse_table

    said = []
    knee = hum.joint_index("l_knee")
    servo = {m: parse_table({"preset": "STS3215", "compensation_margin": m,
                             "joint": {"l_knee": {"compensation_margin": 2.0}}}, hum.joint_names, "t")
             for m in (1.0, 1.5)}
    res = {m: walking.plan(hum, walking.WalkParams(steps=2), say=said.append, servo=servo[m]) for m in servo}
    np.testing.assert_allclose(res[1.0].q, res[1.5].q)
    sag = res[1.0].q_cmd - res[1.0].q
    sag[:, knee] /= 2.0
    inside = (res[1.5].q_cmd > hum.lower + 1e-9) & (res[1.5].q_cmd < hum.upper - 1e-9)
    inside[:, knee] = False
    np.testing.assert_allclose((res[1.5].q_cmd - res[1.5].q)[inside], 1.5 * sag[inside], atol=1e-9)
    np.testing.assert_allclose((res[1.5].q_cmd - res[1.5].q)[:, knee], 2.0 * sag[:, knee], atol=1e-9)
    assert np.abs(sag).max() > np.radians(0.5)
    assert "targets + 1–2 × τ/kp" in res[1.0].torques.summary()
    assert "targets + 1.5–2 × τ/kp" in res[1.5].torques.summary()


@pytest.mark.parametrize("rate", [333.0, 500.0])
def test_a_walk_sampled_finer_than_the_loop_s_rate_plans_too(hum, rate):
    """The compensated commands' corners grew with the sample rate: at 333 Hz and above every
    walk was refused (the ankle roll 6 900 °/s² at 333 Hz, 15 000 at 500 Hz)."""
    tried = []
    res = walking.plan(hum, walking.WalkParams(steps=2, rate_hz=rate), say=tried.append)
    assert res.torques.compensated and not tried, tried
    assert check_limits(hum, res.t, res.q_cmd).time_scale <= 1.0


def test_servos_too_soft_to_hold_the_robot_by_position_are_said_at_once_not_planned_slower(hum):
    """The Berkeley Humanoid's knee actuators (kp 1 N·m/rad) would sag hundreds of degrees under
    the robot's weight: refused naming the joint, its stiffness and the sag, with no slower tries."""
    from hil.robots.servos import parse_table

    said = []
    soft = parse_table({"preset": "STS3215", "kp_nm_per_rad": 1.0}, hum.joint_names, "t")
    with pytest.raises(UnreachableError) as e:
        walking.plan(hum, walking.WalkParams(steps=2), say=said.append, servo=soft)
    assert re.search(r"walk: refused: \w+'s servo \(kp 1 N·m/rad\) would sag \d+° under the [0-9.]+ N·m it gives at "
                     r"t = [0-9.]+ s, more than 30°: too soft", str(e.value)), str(e.value)
    assert not said
    firm = parse_table({"preset": "STS3215"}, hum.joint_names, "t")
    res = walking.plan(hum, walking.WalkParams(steps=2), say=said.append, servo=firm)
    assert np.degrees(res.torques.softest()[2]) < 30


def test_a_leg_held_at_a_stop_is_named_when_the_walk_cannot_be_solved(tmp_path):
    """The Berkeley Humanoid's ankle pitch stops 10° past its home angle, and its default lift takes
    more (here: the OP3 stand-in's right leg made to hardly fold): the IK's failure names the joint,
    its stop and when it got there."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "robotis_op3").mkdir()
    (tmp_path / "robotis_op3" / "op3.xml").write_text((root / "tests" / "unit" / "mjcf" / "op3like.xml").read_text())
    side = (root / "examples" / "robots" / "op3.toml").read_text()
    for name, home in (("r_knee", -40), ("r_ank_pitch", -20)):
        old = f"[joints.{name}]\n"
        side = side[:side.index(old)] + side[side.index(old):].split("\n", 3)[3]
        side += f"\n[joints.{name}]\nlower_deg = {home - 2}\nupper_deg = {home + 2}\n"
    (tmp_path / "op3.toml").write_text(side)
    stiff = robots.load(str(tmp_path / "op3.toml"))
    with pytest.raises(UnreachableError) as e:
        walking.generate(stiff, walking.WalkParams(steps=2, stride=0.03))
    assert re.search(r"r_(knee|ank_pitch) at its (lower|upper) stop \(-?\d+°\) from t = [0-9.]+ s",
                     str(e.value)), str(e.value)


def test_a_hip_roll_stopped_short_of_the_sway_is_named_with_the_sway_not_the_stride(tmp_path):
    """The Booster T1's hip rolls stop 11.5° inward, short of what carrying its body over each
    foot takes: the walk said "use a shorter stride", which no stride fixes. Here the OP3 stand-in's
    hip rolls are stopped at ±3°: the error names the joint and the sway, and what would help."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "robotis_op3").mkdir()
    (tmp_path / "robotis_op3" / "op3.xml").write_text((root / "tests" / "unit" / "mjcf" / "op3like.xml").read_text())
    side = (root / "examples" / "robots" / "op3.toml").read_text()
    for name in ("l_hip_roll", "r_hip_roll"):
        side = side.replace(f"[joints.{name}]\nlower_deg = -45\nupper_deg = 45\n",
                            f"[joints.{name}]\nlower_deg = -3\nupper_deg = 3\n")
    (tmp_path / "op3.toml").write_text(side)
    narrow = robots.load(str(tmp_path / "op3.toml"))
    assert np.degrees(narrow.upper[narrow.joint_index("l_hip_roll")]) == pytest.approx(3.0)
    for stride in (0.03, 0.0):
        with pytest.raises(UnreachableError) as e:
            walking.generate(narrow, walking.WalkParams(steps=2, stride=stride))
        said = str(e.value)
        assert re.search(r"[lr]_hip_roll at its (lower|upper) stop \(-?3°\) from t = [0-9.]+ s", said), said
        assert "over each foot" in said and "[poses] home" in said and "shorter stride" not in said, said


def test_a_robot_standing_straight_legged_is_told_to_bend_its_knees_not_to_shorten_its_stride(hum):
    """An MJCF's zero pose is often straight-legged (the OP3 stand-in's, as Menagerie's): a walk
    that cannot be solved from it says the knees are the cause and how to bend them."""
    from pathlib import Path

    from hil.robots.legs import knee_bend_deg

    straight = robots.load(str(Path(__file__).parent / "mjcf" / "op3like.xml"))
    assert max(knee_bend_deg(straight).values()) < 1 and min(knee_bend_deg(hum).values()) > 25
    with pytest.raises(UnreachableError) as e:
        walking.generate(straight, walking.WalkParams(steps=2, stride=0.03))
    said = str(e.value)
    assert "knees (nearly) straight at home (bent l_knee 0°, r_knee 0°)" in said and "[poses] home" in said, said
    assert "shorter stride" not in said


def test_a_leg_without_an_ankle_roll_is_refused_naming_it():
    """The Open Duck Mini's legs (hip yaw, roll, pitch, knee, ankle pitch) and this biped's have no
    ankle roll: the walk (body upright, soles flat) cannot carry the body over a foot with them.
    Said before any IK, naming the leg and its joints — not as a stride to shorten."""
    from pathlib import Path

    biped = robots.load(str(Path(__file__).parent / "mjcf" / "biped.xml"))
    with pytest.raises(InputError) as e:
        walking.generate(biped, walking.WalkParams(steps=2, stride=0.0))
    said = str(e.value)
    assert "left leg (l_hip_roll, l_hip_pitch, l_knee, l_ankle) has one joint that rolls (l_hip_roll)" in said
    assert "stride" not in said
    from hil.robots.legs import legs

    g1 = robots.load("examples/robots/g1.toml")   # its hip roll turned 30° at home by the hip pitch: still a roll
    assert all(len(leg.roll) == 2 for leg in legs(g1).values())


def test_the_default_gait_is_scaled_to_the_legs():
    """humanoid17's legs keep its 3 cm in 0.8 s; the G1's, 3.6 times as long, step 3.6 times as far
    and lift their feet as much higher, in √3.6 times the time (a pendulum's); the leg is found by
    the tree, so an MJCF biped gets its own."""
    from pathlib import Path

    h17 = walking.default_gait(robots.load("humanoid17"))
    assert (h17["stride"], h17["period"], h17["lift"]) == (0.03, 0.8, 0.012)
    g1 = walking.default_gait(robots.load("examples/robots/g1.toml"))
    k = g1["leg_m"] / walking.GAIT_LEG_M
    assert 3.0 < k < 4.0
    assert g1["stride"] == pytest.approx(0.03 * k, abs=6e-4) and g1["lift"] == pytest.approx(0.012 * k, abs=6e-4)
    assert g1["period"] == pytest.approx(0.8 * np.sqrt(k), abs=6e-3)
    biped = walking.default_gait(robots.load(str(Path(__file__).parent / "mjcf" / "biped.xml")))
    assert h17["stride"] < biped["stride"] < g1["stride"]


def test_hil_walk_says_the_gait_it_chose_and_keeps_what_it_was_told(capsys):
    from hil.cli import main

    assert main(["walk", "--robot", "examples/robots/g1.toml", "--steps", "1", "--stride", "0.05"]) == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("walk: for legs"))
    assert "period 1.5" in line and "lift 4" in line and "stride" not in line, line
    assert "1 steps of 5.0 cm forward" in out or "1 step of 5.0 cm forward" in out, out


@pytest.mark.parametrize("case, said", [
    ("nofree", "Its MJCF's root body has no <freejoint/>: give it one"),
    ("broken", "MuJoCo cannot read it: XML Error: bad format in attribute 'size' Element 'geom', line"),
    ("bad_soles", "a humanoid needs [soles] left"),
    ("passive_knee", "left leg has joints no actuator of its MJCF moves (l_knee: a linkage's passive joints"),
])
def test_a_kit_that_cannot_walk_is_one_line_before_anything_starts(tmp_path, capsys, case, said):
    """An MJCF without a free joint, one MuJoCo cannot compile, a side file naming a foot that is
    not there, a knee no actuator moves (a linkage's, as ToddlerBot's): one line each, before
    anything starts (legs whose rocking walk falls: tests/integration/test_rocking_physics.py)."""
    from pathlib import Path

    from hil.cli import main

    here = Path(__file__).parent / "mjcf"
    text = (here / "biped6.xml").read_text()
    robot = {"nofree": tmp_path / "nofree.xml", "broken": tmp_path / "broken.xml",
             "bad_soles": tmp_path / "soles.toml",
             "passive_knee": tmp_path / "passive.xml"}[case]
    (tmp_path / "passive.xml").write_text(text.replace('<position name="l_knee" joint="l_knee"/>', ""))
    (tmp_path / "nofree.xml").write_text(text.replace("<freejoint/>", ""))
    (tmp_path / "broken.xml").write_text(text.replace('size="0.05 0.07 0.03"', 'size="0.05 abc 0.03"'))
    (tmp_path / "biped6.xml").write_text(text)
    (tmp_path / "soles.toml").write_text('[robot]\nmjcf = "biped6.xml"\nkind = "humanoid"\n'
                                         '[soles]\nleft = "no_such_link"\nright = "r_foot"\n')
    assert main(["walk", "--robot", str(robot), "--steps", "2"]) != 0
    out, err = capsys.readouterr()
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "walk: for legs" not in out and "planning" not in out, out
    if case == "passive_knee":   # `hil robots` says it too; a joint an equality ties to another is not one
        assert main(["robots", "--robot", str(robot)]) == 0
        line = next(s for s in capsys.readouterr().out.splitlines() if "moved by no actuator" in s)
        assert "l_knee" in line and "neck_follow" not in line and "r_knee" not in line, line


def test_a_default_step_the_legs_cannot_reach_is_planned_smaller_and_said(tmp_path, capsys):
    """biped6 with its ankles stopped at −27°: the default 4 cm stride takes an ankle to its stop. Chosen
    by hil, the step is tried smaller (said) before any error; chosen by the user, it is the user's
    stride the error names."""
    import shutil
    from pathlib import Path

    from hil.cli import main

    here = Path(__file__).parent / "mjcf"
    shutil.copy(here / "biped6.xml", tmp_path / "biped6.xml")
    side = (here / "biped6.toml").read_text().replace("acceleration_deg_s2 = 2750",
                                                      "acceleration_deg_s2 = 2750\nlower_deg = -27")
    (tmp_path / "narrow.toml").write_text(side)
    out = tmp_path / "walk.npz"
    assert main(["walk", "--robot", str(tmp_path / "narrow.toml"), "--steps", "4", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "r_ankle at its lower stop (-27°)" in said and "planned again with stride" in said, said
    plan = next(line for line in said.splitlines() if line.startswith("plan: 4 steps of "))
    assert float(plan.split("steps of ")[1].split(" cm")[0]) < 4.0, plan
    assert main(["walk", "--robot", str(tmp_path / "narrow.toml"), "--steps", "4", "--stride", "0.04"]) == 2
    err = capsys.readouterr().err
    assert "shorter stride (now 4.0 cm)" in err and "Traceback" not in err, err
    # stopped at −22°, no smaller step walks either: the error says so, and asks for no shorter step
    (tmp_path / "narrower.toml").write_text(side.replace("lower_deg = -27", "lower_deg = -22"))
    assert main(["walk", "--robot", str(tmp_path / "narrower.toml"), "--steps", "4"]) == 2
    err = capsys.readouterr().err
    assert "r_ankle at its lower stop (-22°)" in err and "also at 60% and 36% of the default step" in err, err
    assert "a shorter step does not help" in err and "use a shorter stride" not in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_a_roll_joint_the_sway_takes_to_its_stop_is_named_with_what_helps(tmp_path, capsys):
    """biped6 with its hip rolls stopped 2° inward (as the Booster T1's stop 11.5° in): the sway over
    each foot, whatever the stride, takes one to its stop; the error says so and what helps — a
    shorter period sways the body less, and does here — not a shorter stride."""
    import re
    import shutil
    from pathlib import Path

    from hil.cli import main

    here = Path(__file__).parent / "mjcf"
    shutil.copy(here / "biped6.xml", tmp_path / "biped6.xml")
    (tmp_path / "stopped.toml").write_text((here / "biped6.toml").read_text() + "[joints.l_hip_roll]\nlower_deg = -2\n"
                                           "[joints.r_hip_roll]\nupper_deg = 2\n")
    residual = {}
    for period in ("0.9", "0.5"):
        assert main(["walk", "--robot", str(tmp_path / "stopped.toml"), "--steps", "4", "--period", period]) == 2
        err = capsys.readouterr().err
        assert "l_hip_roll at its lower stop (-2°)" in err and "whatever the stride" in err, err
        assert f"a shorter --period sways the body less (now {period} s)" in err and "shorter stride" not in err, err
        residual[period] = float(re.search(r"residual ([0-9.e-]+)", err).group(1))
    assert residual["0.5"] < residual["0.9"], residual
