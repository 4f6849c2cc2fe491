"""Contours on any arm (hil.motion.path_ik through hil.motion.path): seed 001's three contours on
LeRobot's SO-101 (five joints: the tool's axis held, its roll free) and on example-robot-data's UR5
(six: its whole orientation held), checked with Pinocchio's kinematics, not hil's: the tool on the
path and its axis on the workpiece normal at every sample; and what cannot be done, refused naming
the line and what cannot be held."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hil import robots
from hil.errors import InputError
from hil.motion import gcode, path
from hil.motion.gcode import GCodeError
from hil.robots import urdf

pin = pytest.importorskip("pinocchio")
pytestmark = pytest.mark.slow

ERD = "package://example-robot-data/robots/"
CONTOURS = ("rounded_rect", "semicircle", "saddle")


def erd(ref: str) -> str:
    try:
        return str(urdf.resolve_file(ERD + ref, __file__))
    except FileNotFoundError:
        pytest.skip("example-robot-data is not installed (pip install -e '.[test]')")


ARMS = {  # robot, its URDF, its tool frame there, the program's scale (placed where hil path puts it)
    "so101": ("so101", "so_arm_description/urdf/so101.urdf", "gripper_frame_link", 0.4),
    "ur5": (None, "ur_description/urdf/ur5_robot.urdf", "tool0", 1.0),
}


def _program(name: str, scale: float) -> gcode.Program:
    with open(f"examples/{name}.nc") as f:
        return gcode.parse(f.read(), f"{name}.nc").scaled(scale)


def _pinocchio_tool(file: str, frame: str, model, Q: np.ndarray, tool: np.ndarray) -> np.ndarray:
    """The tool's pose (N, 4, 4) for each row of Q, by Pinocchio from the URDF itself."""
    pm = pin.buildModelFromUrdf(file)
    data = pm.createData()
    fid = pm.getFrameId(frame)
    out = np.empty((len(Q), 4, 4))
    for k, q in enumerate(Q):
        qp = pin.neutral(pm)
        for i, name in enumerate(model.joint_names):
            j = pm.joints[pm.getJointId(name)]
            if j.nq == 2:
                qp[j.idx_q:j.idx_q + 2] = math.cos(q[i]), math.sin(q[i])
            else:
                qp[j.idx_q] = q[i]
        pin.framesForwardKinematics(pm, data, qp)
        out[k] = data.oMf[fid].homogeneous @ tool
    return out


@pytest.mark.parametrize("contour", CONTOURS)
@pytest.mark.parametrize("arm", list(ARMS))
def test_seed_contours_on_any_arm_keep_the_tool_on_the_path_and_its_axis_normal(arm, contour, tmp_path):
    spec, ref, frame, scale = ARMS[arm]
    file = erd(ref)
    model = robots.load(spec or file)
    place = path.default_place(model)
    plan = path.plan_path(model, _program(contour, scale), path.placement(*place), np.eye(4), rate_hz=200.0)
    out = tmp_path / "traj.npz"
    plan.save(str(out))
    saved = np.load(out)
    T = _pinocchio_tool(file, frame, model, saved["q"], saved["tool_offset"])
    normal = -saved["workpiece_T"][:3, 2]
    reach = np.linalg.norm(T[:, :3, 3] - saved["p_prog"], axis=1)
    tilt = np.degrees(np.arccos(np.clip(T[:, :3, 2] @ normal, -1.0, 1.0)))
    assert reach.max() < 1e-5 and tilt.max() < 0.01, (reach.max(), tilt.max())   # 0.01 mm, 0.01°
    roll = np.degrees(np.arccos(np.clip(T[:, :3, 0] @ T[0, :3, 0], -1.0, 1.0)))
    if arm == "ur5":
        assert roll.max() < 0.01, roll.max()           # six joints: the whole orientation held
    # continuous: no sample's joints jump (a flip of configuration), from one to the next
    step = np.abs(np.diff(saved["q"], axis=0)).max(axis=0)
    assert np.all(step <= model.velocity_limit / 200.0 * 1.01), np.degrees(step)


def test_a_five_joint_arm_asked_for_the_tools_roll_is_refused_saying_what_it_can_hold():
    so101 = robots.load("so101")
    with pytest.raises(InputError, match=r"so101's arm has 5 joints .*not its roll too; use --orientation axis"):
        path.plan_path(so101, _program("semicircle", 0.4), path.placement(200, 0, 20, 0, 0, 0), np.eye(4),
                       orientation="full")


@pytest.mark.parametrize("place,what", [
    ((600, 0, 20, 0, 0, 0), "the tool cannot reach the point"),
    ((200, 0, 160, 0, 0, 0), "cannot be held normal to the workpiece|cannot reach the point"),
])
def test_a_contour_out_of_reach_or_dexterity_is_refused_naming_the_line(place, what):
    so101 = robots.load("so101")
    with pytest.raises(path.PlanError, match=rf"line \d+ .*({what})"):
        path.plan_path(so101, _program("rounded_rect", 0.4), path.placement(*place), np.eye(4), rate_hz=200.0)


def test_an_arc_whose_radius_does_not_match_is_refused_at_its_line():
    with pytest.raises(GCodeError, match=r"line 3, .*arc radius mismatch"):
        gcode.parse("G21 G90 G17\nG0 X10 Y0 Z0\nG2 X-12 Y0 I-10 J0 F600\n", "bad.nc")


def test_the_puma_keeps_its_closed_form_and_its_branch():
    puma = robots.load("puma560")
    tool = np.eye(4)
    tool[2, 3] = 0.15
    plan = path.plan_path(puma, _program("rounded_rect", 1.0), path.placement(200, 500, -300, 0, 0, 0), tool)
    assert plan.branch in ("right-up-noflip", "right-up-flip", "left-up-noflip", "left-up-flip", "right-down-noflip",
                           "right-down-flip", "left-down-noflip", "left-down-flip")
    assert plan.min_wrist_deg is not None and "branch" in plan.summary()
