"""A plan that takes a while says so while it runs (hil play, hil path, hil ctl play)."""

from __future__ import annotations

import time

import hil.cli.common as common


def test_a_long_plan_says_it_is_still_at_work(capsys, monkeypatch):
    monkeypatch.setattr(common, "PLANNING_TICK_S", 0.05)
    with common.planning("wave.toml for humanoid17"):
        time.sleep(0.18)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "planning wave.toml for humanoid17 …"
    assert len([line for line in lines if "s so far …" in line]) >= 2


def test_a_quick_plan_says_only_that_it_began(capsys):
    with common.planning("bow.toml"):
        pass
    assert capsys.readouterr().out.splitlines() == ["planning bow.toml …"]


def test_a_long_plan_says_what_it_is_at_and_how_far(capsys, monkeypatch):
    from hil.motion import progress

    monkeypatch.setattr(common, "PLANNING_TICK_S", 0.05)
    with common.planning("path.nc on so101"):
        tick = progress.reporting_every("the IK along the path", 4 * progress.EVERY)
        tick(progress.EVERY)
        time.sleep(0.18)
    ticks = [line for line in capsys.readouterr().out.splitlines() if "so far" in line]
    assert ticks and all(line.endswith("s so far, the IK along the path 25 % …") for line in ticks), ticks


def test_a_keyframe_plan_reports_its_stages_in_order(monkeypatch):
    """A real keyframe motion planned while listening: each stage reported, a sample loop's share
    rising through it."""
    from hil import robots
    from hil.motion import progress
    from hil.runtime.motion_sources import make_motion

    said: list[tuple[str, float | None]] = []

    class Kept(progress.Progress):
        def __setattr__(self, name, value):
            super().__setattr__(name, value)
            if name == "fraction":
                said.append((self.stage, value))

    monkeypatch.setattr(progress, "Progress", Kept)
    monkeypatch.setattr(progress, "EVERY", 64)
    with progress.listening():
        make_motion("examples/squat.toml", robots.load("humanoid17"))
    stages = list(dict.fromkeys(stage for stage, _ in said if stage))
    assert stages == ["sampling the keyframes", "the servos' torques", "the body's poses", "the left foot's forces",
                      "the right foot's forces", "checking every sample as the loop will"], stages
    poses = [f for stage, f in said if stage == "the body's poses"]
    assert len(poses) > 3 and poses == sorted(poses) and poses[0] == 0.0 and poses[-1] < 1.0, poses
def test_nothing_is_reported_where_nobody_listens():
    from hil.motion import progress

    progress.report("anything", 0.5)   # no listener: nothing kept
    with progress.listening() as p:
        progress.report("the IK along the path", 0.25)
        assert p.text() == "the IK along the path 25 %"
    progress.report("later", 1.0)
    assert p.stage == "the IK along the path"
