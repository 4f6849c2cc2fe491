"""Humanoid motions: walking checked from the joint motion it produces, motion files, playback."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hil.errors import ConfigError, UnreachableError
from hil.motion import keyframes, walking
from hil.safety import SafetyChecker


def check_gait(hum, r, margin_mm=3.0):
    assert np.all(np.isfinite(r.q))
    assert np.all(r.q >= hum.lower - 1e-9) and np.all(r.q <= hum.upper + 1e-9)
    # the ZMP, from the COM of the joint motion, inside the soles on the ground, with a margin
    assert r.margin.min() >= margin_mm * 1e-3, r.margin.min()
    assert r.slide <= 1e-3, r.slide                       # support feet slide ≤ 1 mm
    assert r.min_foot_z >= -1e-4, r.min_foot_z            # no sole corner below the floor
    assert r.max_speed_ratio <= 1.0                       # joint speeds within the limits


def test_walk_keeps_zmp_inside_support_and_feet_still(hum, walk6):
    check_gait(hum, walk6)
    # and it really walks: the step centres advance ½ + 4 × 1 + ½ strides; the last two feet land
    # half a stride apart, so their mean ends ¼ stride short of that
    forward = walk6.feet_w[-1, :, 0, 3].mean() - walk6.feet_w[0, :, 0, 3].mean()
    assert forward == pytest.approx(0.03 * 5 - 0.0075, abs=1e-3)
    assert (walk6.support == 1).any() and (walk6.support == 2).any()


def test_zmp_check_is_independent_of_the_plan(hum, walk6):
    # the ZMP in the check comes from forward kinematics of q alone: perturbing q breaks it
    t, Q = walk6.t, walk6.q.copy()
    Q[300:310, hum.joint_index("l_hip_roll")] += np.radians(4) * np.sin(np.linspace(0, np.pi, 10))
    foot = next(s for s in hum.shapes if s.name == "l_foot")
    hl, hw = sorted(foot.half, reverse=True)[:2]
    bad = walking.check_walk(hum, t, Q, walk6.support, walk6.zmp_ref, walking.WalkParams(), hl, hw, 0.0, "x")
    assert bad.margin.min() < walk6.margin.min() - 0.005 or bad.slide > walk6.slide + 5e-4


def _support_knee_through_mid_stance(hum, r, share=0.3) -> float:
    """The support knee's largest angle from straight over the middle `share` of each stance (deg)."""
    from hil.motion import contacts

    single = np.array([contacts.AIR in contacts.decode(int(c)) for c in r.support]).astype(int)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], single, [0]])))
    worst = 0.0
    for a, b in zip(edges[::2], edges[1::2]):
        side = "l" if contacts.decode(int(r.support[(a + b) // 2]))[0] != contacts.AIR else "r"
        j = hum.joint_index(f"{side}_knee")
        mid = slice(a + int((0.5 - share / 2) * (b - a)), a + int((0.5 + share / 2) * (b - a)))
        worst = max(worst, float(np.degrees(r.q[mid, j] - hum.lower[j]).max()))
    return worst


def test_knee_stretched_gait(hum, walk6, walk_rolling):
    r = walk_rolling
    check_gait(hum, r)
    # the support knee within a few degrees of straight at every mid-stance and through the middle
    # of each stance (the bent-knee gait: far from it), the leg at full extension, and the COM
    # rising and falling with the legs
    assert r.knee_mid_stance_deg < 4.0 and walk6.knee_mid_stance_deg > 30, (r.knee_mid_stance_deg,
                                                                           walk6.knee_mid_stance_deg)
    assert _support_knee_through_mid_stance(hum, r) < 8.0 < 30 < _support_knee_through_mid_stance(hum, walk6)
    assert r.leg_short_mm < 0.1
    assert np.ptp(r.com_w[100:-100, 2]) > 0.004
    assert r.contact_error <= 1e-8 and r.slide <= 1e-8
    # and a robot can follow it: slowed to the joints' limits, not by a factor of several
    assert r.t[-1] < 2 * walk6.t[-1]
    assert "knee" in r.summary()


def test_side_stepping(hum):
    r = walking.generate(hum, walking.WalkParams(steps=2, stride=0.0, side=0.015))
    check_gait(hum, r)
    assert r.feet_w[-1, :, 1, 3].mean() - r.feet_w[0, :, 1, 3].mean() > 0.02


def test_turning_is_refused_for_legs_without_hip_yaw(hum):
    from hil.errors import InputError
    with pytest.raises(InputError, match="no hip-yaw joint"):
        walking.generate(hum, walking.WalkParams(steps=4, stride=0.02, turn_deg=8.0))


def test_too_long_stride_is_refused_clearly(hum):
    with pytest.raises(UnreachableError, match="stride"):
        walking.generate(hum, walking.WalkParams(steps=2, stride=0.12))


def test_preview_control_tracks_a_zmp_step():
    dt, zc = 0.005, 0.25
    t = np.arange(800) * dt
    ref = np.zeros((800, 2))
    ref[t > 1.0, 0] = 0.02
    c = walking.preview_com(ref, dt, zc, np.zeros(2))
    acc = (c[2:] - 2 * c[1:-1] + c[:-2]) / dt ** 2
    zmp = c[1:-1] - zc / 9.81 * acc
    assert abs(zmp[-50:, 0] - 0.02).max() < 1e-4  # settles on the new reference
    assert c[150, 0] > 0.001  # and starts moving before the step (preview)


# ----------------------------------------------------------------------------- motion files
WAVE = """
name = "t"
robot = "humanoid17"
interpolation = "{interp}"
[[keyframe]]
duration_s = 0.5
support = "both"
joints = {{ r_shoulder_roll = 60.0, r_elbow = 30.0 }}
[[keyframe]]
duration_s = 0.4
joints = {{ r_elbow = 70.0 }}
"""


@pytest.mark.parametrize("interp", ["linear", "cubic"])
def test_playback_hits_keyframes_at_their_times(hum, tmp_path, interp):
    f = tmp_path / "m.toml"
    f.write_text(WAVE.format(interp=interp))
    m = keyframes.load_motion(f, hum)
    assert [k.time_s for k in m.keyframes] == pytest.approx([0.5, 0.9])
    for k in m.keyframes:
        np.testing.assert_allclose(m.sample(k.time_s), k.q, atol=1e-12)
    r_elbow = hum.joint_index("r_elbow")
    assert math.degrees(m.keyframes[1].q[r_elbow]) == pytest.approx(70.0)
    assert math.degrees(m.keyframes[1].q[hum.joint_index("r_shoulder_roll")]) == pytest.approx(60.0)  # kept
    t, Q = m.trajectory(200.0)
    for k in m.keyframes:  # the resampled trajectory passes through every keyframe at its time
        i = int(round(k.time_s * 200))
        assert t[i] == pytest.approx(k.time_s)
        np.testing.assert_allclose(Q[i], k.q, atol=1e-9)


def test_mirroring(hum, tmp_path):
    f = tmp_path / "m.toml"
    f.write_text(WAVE.format(interp="cubic").replace('interpolation = "cubic"', 'interpolation = "cubic"\nmirror = true'))
    m = keyframes.load_motion(f, hum)
    assert math.degrees(m.keyframes[0].q[hum.joint_index("l_shoulder_roll")]) == pytest.approx(60.0)
    assert m.keyframes[0].q[hum.joint_index("r_shoulder_roll")] == pytest.approx(hum.home[hum.joint_index("r_shoulder_roll")])
    g = tmp_path / "b.toml"
    g.write_text('[[keyframe]]\nduration_s = 1\njoints = { l_knee = 30 }\nmirror_to = "right"\n')
    m2 = keyframes.load_motion(g, hum)
    q = m2.keyframes[0].q
    assert q[hum.joint_index("r_knee")] == q[hum.joint_index("l_knee")] == pytest.approx(math.radians(30))
    # mirrored poses are mirror images: the soles mirror across the x-z plane
    S = np.diag([1.0, -1, 1, 1])
    np.testing.assert_allclose(hum.fk_frame(q, "r_sole"), S @ hum.fk_frame(q, "l_sole") @ S, atol=1e-12)


@pytest.mark.parametrize("body,msg", [
    ('[[keyframe]]\nduration_s = 1\njoints = { l_kneee = 3 }\n', "keyframe 1: unknown joint 'l_kneee'"),
    ('[[keyframe]]\nduration_s = 1\njoints = { l_knee = 3 }\n[[keyframe]]\nduration_s = 1\njoints = { l_knee = 300 }\n',
     r"keyframe 2: joint l_knee = 300° is outside its range"),
    ('[[keyframe]]\njoints = { l_knee = 3 }\n', "keyframe 1: needs duration_s"),
    ('[[keyframe]]\nduration_s = -1\n', "keyframe 1: duration_s must be positive"),
    ('[[keyframe]]\nduration_s = 1\njoints = { l_knee = "x" }\n', "l_knee = 'x' is not a number"),
    ('robot = "puma560"\n[[keyframe]]\nduration_s = 1\n', "written for robot 'puma560'"),
    ('interpolation = "spline"\n[[keyframe]]\nduration_s = 1\n', "interpolation must be"),
    ('[[keyframe]\nduration_s = 1\n', "m.toml"),
    ('name = "x"\n', "needs at least one"),
    ('dynamic = true\n[[keyframe]]\nduration_s = 1\n', "support annotation in every keyframe"),
])
def test_malformed_motion_files_are_rejected(hum, tmp_path, body, msg):
    f = tmp_path / "m.toml"
    f.write_text(body)
    with pytest.raises(ConfigError, match=msg):
        keyframes.load_motion(f, hum)


@pytest.mark.parametrize("name", ["bow", "wave", "squat"])
def test_example_motions_are_statically_safe(hum, name):
    m = keyframes.load_motion(f"examples/{name}.toml", hum)
    t, Q = m.trajectory(200.0)
    first, flags = SafetyChecker(hum).check_path(Q)
    assert first == -1, SafetyChecker(hum).explain(int(flags[first]), Q[first])


def test_side_step_example_is_dynamically_checked(hum):
    m = keyframes.load_motion("examples/side_step.toml", hum)
    assert m.dynamic
    m.check_dynamic(hum, 200.0)
    # and the check is real: the same frames with their support dropped to "both" moments only fail
    broken = keyframes.KeyframeMotion(m.name, m.robot, m.interpolation,
                                      [keyframes.Keyframe(k.time_s, k.q, "both") for k in m.keyframes], m.q_start, True)
    with pytest.raises(ConfigError, match="ZMP leaves the support polygon|slides"):
        broken.check_dynamic(hum, 200.0)


def test_saved_motion_round_trips(hum, tmp_path):
    m = keyframes.load_motion("examples/wave.toml", hum)
    out = tmp_path / "w.toml"
    keyframes.save_motion(out, m, hum)
    back = keyframes.load_motion(out, hum)
    for a, b in zip(m.keyframes, back.keyframes):
        assert a.time_s == pytest.approx(b.time_s, abs=1e-6)
        np.testing.assert_allclose(a.q, b.q, atol=1e-6)
