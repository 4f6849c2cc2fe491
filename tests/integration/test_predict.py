"""--predict: a motion rolled out in MuJoCo on varied robots before anything moves (hil.physics.predict)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from hil.errors import InputError
from tests.conftest import process_tree, wait_for

pytest.importorskip("mujoco")

from tests.launch import FRESH_HIL, HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)


def hil(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(HIL + list(args), capture_output=True, text=True, timeout=timeout)


def _tipping_motion(model):
    """Home, then both ankles pitched far over in half a second: a robot that cannot stay up."""
    lean = model.home.copy()
    for name in ("l_ankle_pitch", "r_ankle_pitch"):
        j = model.joint_names.index(name)
        lean[j] = 0.9 * model.upper[j]
    return np.array([0.0, 0.5, 1.0, 2.0]), np.array([model.home, model.home, lean, lean])


def test_a_walk_that_holds_is_predicted_to_stay_up_and_cover_its_distance():
    r = hil("walk", "--steps", "4", "--predict", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    line = next(s for s in r.stdout.splitlines() if s.startswith("predict: 4 rollouts"))
    assert "4 stay up (100 %), 0 fall" in line, line
    worst = float(re.search(r"worst tilt ([\d.]+)°", line).group(1))
    assert worst < 20.0, line
    median, least = map(int, re.search(r"median (\d+) %, least (\d+) %", line).groups())
    assert 90 <= least <= median <= 130, line


def test_a_motion_that_tips_the_robot_over_is_predicted_to_fall_every_time_and_refused():
    from hil import robots
    from hil.physics.predict import FALL_TILT_DEG, max_fall_share, predict, refuse_if_it_falls

    model = robots.load("humanoid17")
    t, q = _tipping_motion(model)
    pred = predict(model, t, q, 3, workers=1)
    assert pred.fell == 3 and all(r.max_tilt_deg >= FALL_TILT_DEG for r in pred.rollouts)
    # it falls after the lean starts, not on its stand
    assert all(0.5 <= r.fell_at_s <= 2.0 + 1.0 for r in pred.rollouts), pred.rollouts
    with pytest.raises(InputError, match=r"falls in 3 of 3 rollouts \(100 %, more than the 10 % allowed\): not run"):
        refuse_if_it_falls(pred, max_fall_share(None), "jolt")
    # the same motion standing still is predicted to stay up: the fall is the motion's
    still = predict(model, t, np.array([model.home] * 4), 2, workers=1)
    assert still.fell == 0 and still.worst.max_tilt_deg < 5.0


def test_rollouts_vary_the_robot_and_are_the_same_for_the_same_seed():
    from hil import robots
    from hil.physics.predict import Variation, predict

    model = robots.load("humanoid17")
    t, q = _tipping_motion(model)
    a = predict(model, t, q, 3, workers=1)
    b = predict(model, t, q, 3, workers=2)   # the same rollouts, whichever process ran each
    assert [r.fell_at_s for r in a.rollouts] == [r.fell_at_s for r in b.rollouts]
    # each rollout's robot differs: its fall comes at another moment; with no variation, none do
    assert len({round(r.fell_at_s, 6) for r in a.rollouts}) == 3
    none = predict(model, t, q, 3, workers=1, variation=Variation(0.0, 0.0, (1.0, 1.0), (0.0, 0.0)))
    assert len({round(r.fell_at_s, 9) for r in none.rollouts}) == 1


def test_the_rollout_processes_end_with_the_command_however_it_ends():
    """SIGKILL leaves a process no cleanup: its rollout workers still end at once (they asked the
    kernel), not when their rollout is done (a 30-step walk: several seconds each)."""
    proc = subprocess.Popen(FRESH_HIL + ["walk", "--steps", "30", "--predict", "64"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        line = wait_for(lambda: (lambda s: s if "rolled out" in s else None)(proc.stdout.readline()), timeout_s=300)
        assert line, "no prediction started"
        n = min(os.cpu_count() or 1, 64)
        workers = wait_for(lambda: (lambda w: w if len(w) >= n else None)(_forks_of(proc.pid)), timeout_s=60)
        assert workers
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        gone = wait_for(lambda: not any(os.path.exists(f"/proc/{p}") and _alive(p) for p in workers), timeout_s=2)
        assert gone, f"rollout workers outlived their command: {workers}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _forks_of(pid: int) -> set[int]:
    """The processes below `pid` that run its own command line: forks of it (the rollout workers)."""
    def cmdline(p: int) -> bytes:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""
    own = cmdline(pid)
    return {p for p in process_tree(pid) - {pid} if cmdline(p) == own}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


LUNGE = """name = "lunge"
robot = "humanoid17"
interpolation = "cubic"

[[keyframe]]
duration_s = 0.35
support = "both"
joints = { l_hip_pitch = 12.07, r_hip_pitch = 12.07 }

[[keyframe]]
duration_s = 0.35
joints = { l_hip_pitch = -7.93, r_hip_pitch = -7.93 }
"""


def test_a_motion_that_falls_is_planned_again_slower_until_it_stays_up_and_strict_refuses_it(tmp_path):
    """A 20° bow of the hips and back in 0.7 s throws humanoid17 over; at 75 % of its pace half the
    rollouts fall, at 56 % none: said at each step, and the slowest that stays up is the one kept."""
    path = tmp_path / "lunge.toml"
    path.write_text(LUNGE)
    r = hil("play", str(path), "--predict", "4", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    said = [s for s in r.stdout.splitlines() if s.startswith("predict: ")]
    again = [s for s in said if "planned again" in s]
    assert len(again) == 2 and "falls in 4 of 4 rollouts" in again[0] and again[0].endswith("at 75 % of its pace"), said
    assert again[1].endswith("at 56 % of its pace"), said
    assert "4 stay up (100 %), 0 fall" in said[-1], said
    assert "lunge, 1.24 s" in r.stdout, r.stdout   # the kept plan is the slowest
    strict = hil("play", str(path), "--predict", "4", "--strict", timeout=300)
    assert strict.returncode == 2 and "falls in 4 of 4 rollouts (100 %, more than the 10 % allowed): not run" \
        in strict.stderr, strict.stdout + strict.stderr
    assert "planned again" not in strict.stdout and "Traceback" not in strict.stderr
