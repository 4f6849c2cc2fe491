"""Plans a robot can follow: speeds and accelerations checked sample by sample; a keyframe motion
over a limit is slowed until it holds, a trajectory over one is refused naming where, and a walk
is planned again with a longer step."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from hil import robots
from hil.errors import InputError
from hil.motion.limits import check_limits
from hil.runtime.motion_sources import make_motion

MODEL = robots.load("humanoid17")


def test_speed_and_acceleration_of_a_sine_are_found():
    t = np.linspace(0.0, 2.0, 2001)
    Q = np.tile(MODEL.home, (len(t), 1))
    j = MODEL.joint_index("r_elbow")
    amp, w = 0.3, 2 * math.pi * 2.0
    Q[:, j] += amp * np.sin(w * t)
    r = check_limits(MODEL, t, Q)
    assert r.speed_ratio == pytest.approx(amp * w / MODEL.velocity_limit[j], rel=1e-3)
    assert r.accel_ratio == pytest.approx(amp * w * w / MODEL.acceleration_limit[j], rel=1e-3)
    assert "r_elbow" in r.worst


def test_a_keyframe_motion_over_the_acceleration_limit_is_slowed_until_it_holds():
    rate = MODEL.meta["default_rate_hz"]
    from hil.motion.keyframes import load_motion

    written = load_motion("examples/wave.toml", MODEL)
    t, q = written.trajectory(rate)
    assert check_limits(MODEL, t, q).accel_ratio > 1.0            # as written: too sharp for the servos
    motion = make_motion("examples/wave.toml", MODEL)
    assert "slowed to" in motion.note and "°/s²" in motion.note
    after = check_limits(MODEL, motion.t, motion.q)
    assert after.time_scale <= 1.0 and after.first_over_t is None
    assert motion.duration > written.duration
    bow = make_motion("examples/bow.toml", MODEL)                  # within the limits: left as written
    assert bow.note == ""


def test_a_trajectory_over_the_limits_is_refused_naming_where(tmp_path):
    t = np.linspace(0.0, 1.0, 201)
    q = np.tile(MODEL.home, (len(t), 1))
    j = MODEL.joint_index("l_knee")
    q[100:, j] += np.radians(20)                                 # a step: infinite acceleration
    path = tmp_path / "jump.npz"
    np.savez(path, t=t, q=q)
    with pytest.raises(InputError, match=r"refused: from t = 0\.49\d s .*l_knee"):
        make_motion(str(path), MODEL)


@pytest.mark.slow
def test_a_walk_is_planned_again_until_the_joints_can_follow_it(tmp_path):
    out = tmp_path / "walk.npz"
    r = subprocess.run([sys.executable, "-m", "hil.cli", "walk", "--steps", "6", "--stride", "0.03", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    with np.load(out) as f:
        rep = check_limits(MODEL, f["t"], f["q"])
    assert rep.time_scale <= 1.0, rep.worst
    assert "planned again" in r.stdout          # the 0.8 s default step is too sharp for the knees (3541 °/s²)
