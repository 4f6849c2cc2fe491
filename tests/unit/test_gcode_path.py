"""G-code reader and PUMA path planning: geometry against independent circle/line math, limits
computed back from the trajectory, errors at the right line."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest

import hil.robots as robots
from hil.motion import gcode, path
from hil.motion.gcode import GCodeError
from tests.launch import HIL


@pytest.fixture(scope="module")
def puma():
    return robots.load("puma560")


TOOL = np.eye(4)
TOOL[2, 3] = 0.15
PLACE = path.placement(200, 500, -300, 0, 0, 0)


def dist_to_program(p_mm: np.ndarray, prog: gcode.Program) -> float:
    """Distance (mm) from p to the nearest programmed move, computed here from the segment
    definitions (lines: projection; arcs: radial distance in the plane plus the helix height)."""
    best = math.inf
    for s in prog.segments:
        if s.kind == "arc":
            a, b, n = gcode.PLANES[s.plane]
            r = math.hypot(s.start[a] - s.centre[a], s.start[b] - s.centre[b])
            ang = math.atan2(p_mm[b] - s.centre[b], p_mm[a] - s.centre[a])
            a0 = math.atan2(s.start[b] - s.centre[b], s.start[a] - s.centre[a])
            swept = ((a0 - ang) if s.cw else (ang - a0)) % (2 * math.pi)
            if swept <= s.sweep + 1e-9:
                h = s.start[n] + (s.end[n] - s.start[n]) * swept / s.sweep
                d = math.hypot(math.hypot(p_mm[a] - s.centre[a], p_mm[b] - s.centre[b]) - r, p_mm[n] - h)
            else:
                d = min(np.linalg.norm(p_mm - s.start), np.linalg.norm(p_mm - s.end))
        else:
            v = s.end - s.start
            u = np.clip((p_mm - s.start) @ v / max(v @ v, 1e-18), 0, 1)
            d = np.linalg.norm(p_mm - (s.start + u * v))
        best = min(best, d)
    return best


def plan_and_check(puma, text, chord=0.05, place=PLACE):
    prog = gcode.parse(text, "test.nc")
    plan = path.plan_path(puma, prog, place, TOOL, chord, 500.0)
    tooled = puma.with_tool(TOOL)
    inv = np.linalg.inv(place)
    worst = 0.0
    for q in plan.q[::7]:
        p = tooled.fk(q)[:3, 3]
        p_mm = (inv[:3, :3] @ p + inv[:3, 3]) * 1e3
        worst = max(worst, dist_to_program(p_mm, prog))
    assert worst <= chord, worst
    dt = np.diff(plan.t)
    assert np.allclose(dt[:-1], 1 / 500.0)
    qd = np.diff(plan.q, axis=0) / 0.002
    qdd = np.diff(qd, axis=0) / 0.002
    assert np.all(np.abs(qd) <= puma.velocity_limit * 1.001)
    assert np.all(np.abs(qdd) <= puma.acceleration_limit * 1.02)
    # one branch throughout: no joint jumps between samples
    assert np.abs(np.diff(plan.q, axis=0)).max() < 0.01
    return prog, plan


def test_lines_and_arcs_in_all_three_planes(puma):
    text = """G21 G90
    G17 G0 X0 Y0 Z5
    G1 Z0 F3000
    G1 X30 Y0
    G2 X50 Y-20 I0 J-20      (XY, clockwise)
    G18 G3 X70 Z-3 R12        (ZX plane, R form)
    G19 G2 Y-10 Z-3 J5 K0     (YZ plane)
    G17 G1 X0 Y0 Z0
    M30"""
    prog, plan = plan_and_check(puma, text)
    assert [s.plane for s in prog.segments if s.kind == "arc"] == [17, 18, 19]


def test_r_form_incremental_and_inches(puma):
    text = """G20 G90 (inches)
    G0 X0 Y0 Z0.2
    G1 Z0 F60
    G91 G1 X1.0          (incremental: 25.4 mm)
    G3 X1.0 Y1.0 R1.0    (quarter circle, R > 0 is the short way)
    G2 X-1.0 Y1.0 R-1.0  (R < 0: the long way round)
    G90 G1 X0 Y0
    M2"""
    prog, plan = plan_and_check(puma, text)
    line, arc1, arc2 = prog.segments[2:5]
    assert line.end[0] == pytest.approx(25.4)
    assert arc1.sweep == pytest.approx(math.pi / 2)
    assert arc2.sweep == pytest.approx(3 * math.pi / 2)
    assert np.linalg.norm(arc1.centre[:2] - [25.4, 25.4]) < 1e-9


def test_full_circle_and_helix(puma):
    text = """G21 G90 G17
    G0 X40 Y0 Z0
    G2 X40 Y0 I-40 J0 F3000         (full circle)
    G3 X40 Y0 Z-6 I-40 J0           (one helical turn down 6 mm)
    M30"""
    prog, plan = plan_and_check(puma, text)
    assert prog.segments[1].sweep == pytest.approx(2 * math.pi)
    assert prog.segments[2].end[2] == pytest.approx(-6)


@pytest.mark.parametrize("text,line,col,what", [
    ("G21\nG1 X10 F100\nG2 X20 Y10\nM30", 3, 1, "G2 needs I/J/K or R"),
    ("G21\nG1 X10 F100\nG4 P1\n", 3, 1, "G4 is not supported"),
    ("G21 G17\nG1 X10 F100\nG3 X21 Y0 I5 J0\n", 3, 1, "radius mismatch"),
    ("G21\nG1 X10\n", 2, 1, "without a feed rate"),
    ("G21\nG1 X10 F100\nG1 X1Q\n", 3, 6, "'Q' is not followed by a number"),
    ("G21\nG1 X10 F100 (open comment\n", 2, 13, "not closed"),
    ("G21\nG1 X10 F100\nM3 S1000\n", 3, 1, "M3 is not supported"),
    ("G21\nG1 F100\n", 2, 1, "without an end point"),
    ("G21 G17\nG1 X1 F10\nG2 X2 Y0 K3\n", 3, 10, "not in the G17 plane"),
    ("G21\nG1 X1 Y2 X3 F10\n", 2, 10, "X appears twice"),
])
def test_malformed_programs_fail_at_the_right_line(text, line, col, what):
    with pytest.raises(GCodeError, match=what) as e:
        gcode.parse(text, "bad.nc")
    assert (e.value.line, e.value.column) == (line, col)
    assert f"bad.nc: line {line}, column {col}" in str(e.value)


def test_unreachable_contour_refused_before_motion(puma):
    text = "G21 G90\nG0 X0 Y0 Z0\nG1 X200 F600\nG1 X2500\nG1 X0\nM30"
    with pytest.raises(path.PlanError, match="line 4 sample [0-9]+: .*too far"):
        path.plan_path(puma, gcode.parse(text), PLACE, TOOL)


def test_contour_into_the_floor_refused(puma):
    low = path.placement(200, 500, -700, 0, 0, 0)
    text = "G21 G90\nG0 X0 Y0 Z0\nG1 X20 F600\nG1 Z-40\nM30"
    with pytest.raises(path.PlanError, match="line 4 sample [0-9]+: the tool tip .* below the floor"):
        path.plan_path(puma, gcode.parse(text), low, TOOL)


@pytest.mark.parametrize("name", ["rounded_rect", "semicircle", "saddle"])
def test_examples_plan(puma, name):
    with open(f"examples/{name}.nc") as f:
        prog = gcode.parse(f.read(), name)
    plan = path.plan_path(puma, prog, PLACE, TOOL, 0.05, 500.0)
    assert plan.duration > 5 and plan.min_wrist_deg > 2


def test_cli_writes_the_trajectory_file(tmp_path):
    out = tmp_path / "t.npz"
    prog = tmp_path / "p.nc"
    prog.write_text("G21 G90\nG0 X0 Y0 Z0\nG1 X40 F3000\nG3 X0 Y40 R40\nM30\n")
    r = subprocess.run([*HIL, "path", str(prog), "--robot", "puma560", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "branch" in r.stdout and "min wrist" in r.stdout
    with np.load(out) as f:
        assert f["q"].shape[1] == 6 and f["t"].shape == f["line"].shape == (f["q"].shape[0],)
        assert f["p_prog"].shape == (f["q"].shape[0], 3)
        assert set(np.unique(f["line"])) <= {3, 4}
    bad = tmp_path / "bad.nc"
    bad.write_text("G21\nG1 X10 F100\nG2 X20 Y10\n")
    r = subprocess.run([*HIL, "path", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "line 3, column 1: G2 needs I/J/K or R" in r.stderr


def test_arcs_are_sampled_on_the_arc_not_its_chords(puma):
    # a coarse chord tolerance puts the path points 0.5 mm inside the arc at mid-chord; the samples
    # between them are taken on the circle itself, so every one lies on the programmed arc
    text = "G21 G90\nG0 X20 Y0 Z5\nG1 Z0 F1200\nG2 X-20 Y0 I-20 J0 F1200\nG0 Z5\n"
    prog = gcode.parse(text, "arc.nc")
    plan = path.plan_path(puma, prog, PLACE, TOOL, 0.5, 500.0)
    tooled, inv = puma.with_tool(TOOL), np.linalg.inv(PLACE)
    arc = [k for k in range(len(plan.q)) if plan.line[k] == 4]
    off = [dist_to_program((inv[:3, :3] @ tooled.fk(plan.q[k])[:3, 3] + inv[:3, 3]) * 1e3, prog) for k in arc]
    assert len(arc) > 100 and max(off) < 1e-6, max(off)


def test_a_contour_near_the_wrist_singularity_is_planned_within_the_joint_limits(puma):
    # this line passes 0.36° from θ5 = 0: the wrist joints set the speed where they must, and
    # the plan is accepted with every sample on the line and within the joints' limits
    text = "G21 G90\nG0 X-100 Y-142 Z5\nG1 Z0 F6000\nG1 X50 F6000\nG0 Z5\n"
    prog, plan = plan_and_check(puma, text)
    assert plan.min_wrist_deg < 1.0
    assert "singularity" in plan.feed_note and "line 3" in plan.feed_note


def test_what_even_the_time_law_cannot_slow_enough_is_refused_naming_joint_and_line(puma):
    qd = np.zeros((5, 6))
    qd[3, 3] = puma.velocity_limit[3] * 1.5
    with pytest.raises(path.PlanError, match=r"line 7 sample 4: wrist_roll needs \d+ °/s \(limit \d+\)"):
        path._refuse_past_limits(puma, qd, np.zeros((4, 6)), np.full(6, 7))
