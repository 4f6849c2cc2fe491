"""The DearPyGui twin under Xvfb, always in child processes (DearPyGui aborts without a display).
PNGs are checked at the pixels where forward kinematics projects known points."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import hil.robots as robots
from tests.gui.png import read_png

pytestmark = [pytest.mark.slow, pytest.mark.gui]

from tests.launch import HIL  # noqa: E402 - the tests' way to start `hil` (tests/launch.py)
PAD = 8  # DearPyGui window padding: drawlist pixel (0, 0) is at image (8, 8)


def shot(tmp_path, robot, pose_deg=None, ghost_deg=None, name="shot.png", extra=()):
    out = tmp_path / name
    args = HIL + ["twin", "--screenshot", str(out), "--robot", robot, *extra]
    if pose_deg is not None:
        args += ["--pose-deg", *map(str, pose_deg)]
    if ghost_deg is not None:
        args += ["--ghost-deg", *map(str, ghost_deg)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return read_png(str(out))


def projector(robot):
    """Pixel of a world point, with the twin's own camera (the same matrices it gives DearPyGui)."""
    from twin import camera as C
    from twin import scene as S

    cam = C.default_camera(robots.load(robot))
    eye, target = S.orbit_view(cam["yaw"], cam["pitch"], cam["dist"], cam["target"])
    P = S.perspective(C.FOV, C.VIEW_W / C.VIEW_H, 0.05, 50.0)
    V = S.look_at(eye, target)

    def px(p):
        x, y = S.project(P, V, p, C.VIEW_W, C.VIEW_H)
        return int(round(x)) + PAD, int(round(y)) + PAD
    return px


def close_twin(twin) -> None:
    """Stop a live twin started by a test (None: it never started)."""
    if twin is not None:
        twin.terminate()
        twin.wait(timeout=10)
        twin.stdout.close()


def near(img, xy, color, radius=5, tol=40):
    """True if some pixel within `radius` of (x, y) is within `tol` of `color` (RGB)."""
    x, y = xy
    patch = img[max(0, y - radius):y + radius + 1, max(0, x - radius):x + radius + 1, :3].astype(int)
    d = np.abs(patch - np.array(color[:3])).max(axis=2)
    return bool((d <= tol).any())


def test_puma_drawn_where_its_fk_projects(xdisplay, tmp_path):
    from twin import scene as S

    pose = [60, -40, 120, 0, 30, 0]
    img = shot(tmp_path, "puma560", pose)
    m = robots.load("puma560")
    q = np.radians(pose)
    px = projector("puma560")
    F = m.fk_frames(q)
    # points on the solid links: the middle of the upper arm and the forearm, the shoulder
    upper_arm_mid = (F[m.frame_index("link2")] @ [0.25, 0, 0.15, 1])[:3]
    forearm_mid = (F[m.frame_index("link3")] @ [0.02, -0.2, 0, 1])[:3]
    for p in (upper_arm_mid, forearm_mid):
        assert near(img, px(p), S.MEASURED), (p, px(p))
    # a point well away from the arm, over the floor behind it, is background
    empty = np.array([0.9, -0.9, 0.6])
    assert not near(img, px(empty), S.MEASURED, radius=3)
    assert near(img, px(empty), S.BACKGROUND, radius=0, tol=10)


def test_ghost_and_measured_differ_when_they_should(xdisplay, tmp_path):
    from twin import scene as S

    meas = [90, -20, 110, 0, 0, 0]
    cmd = [30, -20, 110, 0, 0, 0]  # the waist is 60° behind: ghost and solid part ways
    img = shot(tmp_path, "puma560", meas, cmd)
    m = robots.load("puma560")
    px = projector("puma560")
    p_meas = (m.fk_frames(np.radians(meas))[m.frame_index("link3")] @ [0.02, -0.3, 0, 1])[:3]
    p_cmd = (m.fk_frames(np.radians(cmd))[m.frame_index("link3")] @ [0.02, -0.3, 0, 1])[:3]
    assert near(img, px(p_meas), S.MEASURED)
    assert near(img, px(p_cmd), S.GHOST, radius=7)
    assert not near(img, px(p_cmd), S.MEASURED, radius=2)
    same = shot(tmp_path, "puma560", meas, meas, name="same.png")
    assert not near(same, px(p_cmd), S.GHOST, radius=7)  # no ghost there when they agree


def test_humanoid_drawn_standing_on_its_sole(xdisplay, tmp_path):
    from hil.kinematics.floating import FloatingBase
    from twin import scene as S

    img = shot(tmp_path, "humanoid17")
    m = robots.load("humanoid17")
    base = FloatingBase(m, "l_sole", m.home)
    px = projector("humanoid17")
    torso = base.frame_pose(m.home, "body") @ [0.027, 0, 0.06, 1]
    head = (base.body_pose(m.home) @ m.fk_frames(m.home)[m.frame_index("head")] @ [0.002, 0, 0.05, 1])[:3]
    assert near(img, px(torso[:3]), S.MEASURED)
    assert near(img, px(head), S.MEASURED)
    assert near(img, px([0.2, 0.3, 0.45]), S.BACKGROUND, radius=0, tol=10)
    # a pelvis between the hips joins the torso to the legs (drawn only: not a collision shape)
    pelvis = base.frame_pose(m.home, "body") @ [0.028, 0, -0.055, 1]
    assert near(img, px(pelvis[:3]), S.MEASURED, radius=1)
    assert not any(sh.name.startswith("pelvis") for sh in m.shapes)


def test_the_support_polygon_joins_the_sole_corners_on_the_ground(xdisplay, tmp_path):
    # mid toe-off of the right foot in a knee-stretched walk: its heel is up, its inner toe corner
    # down; the polygon runs through that corner and not through the heel's (as the planner counts)
    from hil.kinematics.floating import FloatingBase
    from hil.motion import contacts, walking

    m = robots.load("humanoid17")
    res = walking.generate(m, walking.WalkParams(steps=2, knee_stretched=True))
    on_toe = np.flatnonzero(res.support == contacts.encode(contacts.FLAT, contacts.TOE))
    q = res.q[on_toe[len(on_toe) * 2 // 3]]
    img = shot(tmp_path, "humanoid17", np.degrees(q))
    T = FloatingBase(m, "l_sole", m.home).frame_pose(q, "r_sole")   # where the twin puts it
    hl, hw = m.sole_half
    px = projector("humanoid17")
    polygon = (250, 250, 120)

    def ground(x, y):
        p = T @ [x, y, 0, 1]
        assert p[2] > 0.001 or abs(p[2]) < 1e-9   # a heel corner up, the toe corner down
        return px([p[0], p[1], 0.001])
    assert near(img, ground(hl, hw), polygon, radius=2)            # the inner toe corner
    for y in (hw, -hw):                                            # the heel's corners
        assert not near(img, ground(-hl, y), polygon, radius=2)


def test_nothing_fills_the_window_or_the_panel_behind_what_they_show(xdisplay, tmp_path):
    # under software GL a filled background costs about 15 ns a pixel, every frame (half a frame
    # for the window's): the viewport's clear colour shows through both instead
    from twin import camera as C
    from twin import scene as S

    img = shot(tmp_path, "puma560")
    panel_x = C.VIEW_W + 2 * PAD + 40
    for xy in ((panel_x, C.H - 40), (panel_x + 200, C.H - 60), (C.W - 40, C.H // 2 + 80), (4, C.H - 4)):
        assert near(img, xy, S.BACKGROUND, radius=0, tol=2), (xy, img[xy[1], xy[0]])


def test_no_display_gives_a_clear_message(tmp_path):
    env = dict(os.environ)
    env.pop("DISPLAY", None)
    r = subprocess.run(HIL + ["twin", "--screenshot", str(tmp_path / "x.png"), "--robot", "puma560"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2, r.stdout + r.stderr  # an error exit, not an abort (134)
    assert "no display" in r.stderr and "xvfb-run" in r.stderr


def test_a_screenshot_that_cannot_be_written_is_an_error(tmp_path, xdisplay):
    r = subprocess.run(HIL + ["twin", "--screenshot", "/no/such/dir/x.png", "--robot", "puma560"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "does not exist" in r.stderr and "wrote" not in r.stdout, r.stdout + r.stderr


def test_a_urdf_robot_is_drawn_where_its_fk_projects(xdisplay, tmp_path):
    from twin import scene as S

    try:
        m = robots.load("so101")
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"so101 needs example-robot-data ({e})")
    pose = [30, 40, -30, 40, 0, 20]
    img = shot(tmp_path, "so101", pose)
    q = np.radians(pose)
    px = projector("so101")
    F = m.fk_frames(q)
    # each link's shapes are drawn around their capsules' middles, wherever the pose puts them
    from hil.safety import _collision_shapes

    caps, names = _collision_shapes(m)
    drawn = robot_mask(img)   # in the kit's own colours
    hits = 0
    for c in caps:
        T = F[1 + int(c[0])] if c[0] >= 0 else F[0]
        mid = T[:3, :3] @ ((c[1:4] + c[4:7]) / 2) + T[:3, 3]
        x, y = px(mid)
        hits += bool(drawn[y - PAD - 4:y - PAD + 5, x - PAD - 4:x - PAD + 5].any())
    assert hits >= 0.8 * len(caps), f"{hits} of {len(caps)} shapes drawn where FK puts them"
    # the background well above the arm is empty
    assert near(img, px(F[0, :3, 3] + [0, 0, 0.6]), S.BACKGROUND, radius=0, tol=10)


COLLIDING_POSE = [0.0, -7.9, -6.0, -1.9, 0.0, 0.0, -7.9, -6.0, -1.9, 0.0, 0.0, 8.0, 15.0, -15.4, -8.5, 42.9, 0.0]


def panel_pixels(img, color, tol=30):
    """How many pixels of the side panel are `color`."""
    from twin import camera as C

    panel = img[:, C.VIEW_W + 20:, :3].astype(int)
    return int((np.abs(panel - np.array(color[:3])).max(axis=2) <= tol).sum())


def test_measured_and_commanded_side_by_side_off_ones_highlighted(xdisplay, tmp_path):
    from twin import scene as S

    m = robots.load("humanoid17")
    home = np.degrees(m.home)
    cmd = home.copy()
    cmd[m.joint_index("r_elbow")] += 25.0           # the ghost is 25° ahead of the measured elbow
    off = shot(tmp_path, "humanoid17", list(home), list(cmd), name="off.png")
    same = shot(tmp_path, "humanoid17", list(home), list(home), name="same.png")
    assert panel_pixels(off, S.DIFFERS) > 40
    assert panel_pixels(same, S.DIFFERS) == 0


def test_a_collision_is_coloured_in_the_view_and_said_in_the_panel(xdisplay, tmp_path):
    from hil.kinematics.floating import FloatingBase
    from twin import scene as S

    m = robots.load("humanoid17")
    hit = shot(tmp_path, "humanoid17", COLLIDING_POSE, name="hit.png")
    clear_pose = list(COLLIDING_POSE)
    clear_pose[m.joint_index("r_shoulder_roll")] = 30.0   # the arm away from the body
    clear = shot(tmp_path, "humanoid17", clear_pose, name="clear.png")
    px = projector("humanoid17")
    for pose, img, color in ((COLLIDING_POSE, hit, S.COLLIDING), (clear_pose, clear, S.MEASURED)):
        q = np.radians(pose)
        torso = FloatingBase(m, "l_sole", q).frame_pose(q, "body") @ [0.027, 0, 0.06, 1]
        assert near(img, px(torso[:3]), color), color
    # the reason in words (and the legend's word "collision", in both)
    assert panel_pixels(hit, S.COLLIDING) > panel_pixels(clear, S.COLLIDING) + 100


def test_joint_frames_are_drawn_on_every_link_when_asked(xdisplay, tmp_path):
    from twin import scene as S

    plain = shot(tmp_path, "humanoid17", name="plain.png")
    framed = shot(tmp_path, "humanoid17", name="frames.png", extra=["--frames"])
    m = robots.load("humanoid17")
    from hil.kinematics.floating import FloatingBase

    base = FloatingBase(m, "l_sole", m.home)
    px = projector("humanoid17")
    green = S.AXIS_COLORS[1]
    # each link's y axis starts at its origin: there, green where frames are drawn, not without
    hits = [near(framed, px(base.frame_pose(m.home, m.link_names[i])[:3, 3]), green, radius=4, tol=25)
            for i in range(m.n)]
    misses = [near(plain, px(base.frame_pose(m.home, m.link_names[i])[:3, 3]), green, radius=4, tol=25)
              for i in range(m.n)]
    assert sum(hits) >= 0.7 * m.n and sum(misses) <= 2, (sum(hits), sum(misses))


def test_solid_links_are_shaded_by_how_their_faces_meet_the_light(xdisplay, tmp_path):
    from twin import camera as C
    from twin import scene as S

    img = shot(tmp_path, "humanoid17")[PAD:PAD + C.VIEW_H, PAD:PAD + C.VIEW_W, :3].astype(int)
    body = np.abs(img - np.array(S.MEASURED[:3])).max(axis=2) <= 45
    levels = img[body].sum(axis=1)
    lo, hi = np.percentile(levels, [5, 95])
    assert body.sum() > 2000 and hi - lo >= 25, (body.sum(), lo, hi)   # faces of several brightnesses


def test_balance_and_workspace_are_coloured_in_the_view(xdisplay, tmp_path):
    from twin import scene as S

    m = robots.load("humanoid17")
    leaning = list(np.degrees(m.home))
    for j in ("l_hip_pitch", "r_hip_pitch"):
        leaning[m.joint_index(j)] = -60.0          # the centre of mass far ahead of the feet
    tipping = shot(tmp_path, "humanoid17", leaning, name="tipping.png")
    standing = shot(tmp_path, "humanoid17", name="standing.png")
    view = slice(PAD, PAD + 680)

    def count(img, color):
        return int((np.abs(img[view, view, :3].astype(int) - np.array(color[:3])).max(axis=2) <= 30).sum())

    assert count(tipping, S.COLLIDING) > 30 and count(standing, S.COLLIDING) == 0   # the support polygon
    puma = robots.load("puma560")
    behind = [5.1, -193.7, 123.3, 107.5, 22.6, 222.0]   # the wrist behind the arm's workspace bound
    img = shot(tmp_path, "puma560", behind, name="behind.png")
    px = projector("puma560")
    F = puma.fk_frames(np.radians(behind))
    tool_link = int(puma.frame_link[puma.frame_index(puma.tool_frame)])
    tip = F[1 + tool_link, :3, 3]
    assert near(img, px(tip), S.COLLIDING, radius=6)


def test_the_humanoid_reads_as_one_body(xdisplay, tmp_path):
    """A neck joins the head to the torso and struts join the hips to it: the points between them,
    where the collision shapes leave a gap, are drawn in the robot's colour; the head is round."""
    from hil.kinematics.floating import FloatingBase
    from twin import scene as S

    img = shot(tmp_path, "humanoid17")
    m = robots.load("humanoid17")
    W = FloatingBase(m, "l_sole", m.home).body_pose(m.home)
    F = m.fk_frames(m.home)
    px = projector("humanoid17")

    def drawn(p):   # the robot's colour, shaded darker or lighter (or its ghost's edges), not the background
        x, y = px((W @ np.append(p, 1.0))[:3])
        c = img[y, x, :3].astype(int)
        solid = np.abs(c - np.array(S.BACKGROUND)).max() > 40 and c[2] > c[0] + 40
        return solid or np.abs(c - np.array(S.GHOST[:3])).max() <= 40, c
    neck = F[m.frame_index("head")][:3, 3] + [0, 0, 0.003]      # between the torso's top and the head
    hips = [F[m.link_names.index(f"{s}_hip") + 1][:3, 3] + [0, 0, 0.015] for s in "lr"]   # hip to torso
    crown = F[m.frame_index("head")] @ [0.002, 0, 0.036, 1]      # the dome above the head's cylinder
    for p in [neck, *hips, crown[:3]]:
        ok, c = drawn(np.asarray(p))
        assert ok, (p, c)


def test_capsules_are_closed_with_faces_pointing_out():
    from twin import scene as S

    for p0, p1, r in (([0, 0, 0], [0.1, 0.02, -0.03], 0.02), ([0.01, 0, 0], [0.01, 0, 0], 0.03)):
        tris, _ = S.capsule_mesh(p0, p1, r)
        a, b = np.asarray(p0, float), np.asarray(p1, float)
        for t in tris:
            t = np.asarray(t)
            c = t.mean(axis=0)
            ab = b - a
            axis_pt = a + np.clip((c - a) @ ab / max(ab @ ab, 1e-18), 0, 1) * ab
            n = np.cross(t[1] - t[0], t[2] - t[0])
            assert n @ (c - axis_pt) > 0   # counter-clockwise seen from outside
        pts = np.concatenate([np.asarray(t) for t in tris])
        far = np.max([np.linalg.norm(p - (a + np.clip((p - a) @ (b - a) / max((b - a) @ (b - a), 1e-18), 0, 1)
                                              * (b - a))) for p in pts])
        assert far == pytest.approx(r)   # every vertex on the capsule's surface, the domes included


def test_joint_names_are_shown_beside_their_joints_when_asked(xdisplay, tmp_path):
    from twin import app as A

    plain = shot(tmp_path, "puma560", name="plain.png")
    named = shot(tmp_path, "puma560", name="names.png", extra=["--names"])
    m = robots.load("puma560")
    px = projector("puma560")
    F = m.fk_frames(m.home)

    def text_pixels(img, x, y):   # the names' near-white, in the box a label starts at
        patch = img[y - 20:y + 2, x:x + 60, :3].astype(int)
        return int((np.abs(patch - np.array(A.NAME_COLOR[:3])).max(axis=2) <= 40).sum())
    x, y = px(F[1 + m.joint_index("elbow")][:3, 3])
    assert text_pixels(named, x, y) > 15 and text_pixels(plain, x, y) < 3


def robot_mask(img) -> np.ndarray:
    """The measured robot's pixels in the view, in any colour its file gives it at any shade the
    light gives it: off the background, less the one-pixel lines (floor grid, reach rings), which
    a 3 × 3 opening takes away."""
    from twin import camera as C
    from twin import scene as S

    view = img[PAD:PAD + C.VIEW_H, PAD:PAD + C.VIEW_W, :3].astype(int)
    off = np.abs(view - np.array(S.BACKGROUND)).max(axis=2) > 12
    eroded = off.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            eroded &= np.roll(np.roll(off, dy, axis=0), dx, axis=1)
    opened = eroded.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            opened |= np.roll(np.roll(eroded, dy, axis=0), dx, axis=1)
    return opened & off


def blue_mask(img) -> np.ndarray:
    """Pixels of the shapes' blue (a robot without meshes, measured), at any shade."""
    from twin import camera as C

    view = img[PAD:PAD + C.VIEW_H, PAD:PAD + C.VIEW_W, :3].astype(int)
    r, g, b = view[..., 0], view[..., 1], view[..., 2]
    return (b - r > 90) & (b - g > 40) & (b > 150)


def test_a_kit_is_drawn_in_its_makers_colours(xdisplay, tmp_path):
    """SO-101's URDF names its materials at the top (printed parts yellow, servos black): the
    measured robot is drawn in them, shaded, not in the shapes' blue."""
    try:
        robots.load("so101")
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"so101 needs example-robot-data ({e})")
    img = shot(tmp_path, "so101", [0] * 6, extra=("--view", "iso"))
    from twin import camera as C

    view = img[PAD:PAD + C.VIEW_H, PAD:PAD + C.VIEW_W, :3].astype(int)
    r, g, b = view[..., 0], view[..., 1], view[..., 2]
    yellow = (r > 150) & (g > 110) & (b < 0.45 * r) & (r - g < 80)
    servo = (np.abs(r - g) < 8) & (np.abs(g - b) < 8) & (r > 45) & (r < 110) & robot_mask(img)
    assert yellow.sum() > 8000, yellow.sum()
    assert servo.sum() > 300, servo.sum()
    assert blue_mask(img).sum() < 50
    shades = np.unique((r[yellow] // 16))
    assert len(shades) >= 4, shades   # lit and turned away: a solid, not a flat sticker


def test_a_pedestal_stands_on_the_floor_in_the_front_view(xdisplay, tmp_path):
    """The PUMA's pedestal ends flat on the floor line, no dome through it."""
    from twin import camera as C
    from twin import scene as S

    img = shot(tmp_path, "puma560", extra=("--view", "front"))
    view = img[PAD:PAD + C.VIEW_H, PAD:PAD + C.VIEW_W, :3].astype(int)
    grid = (np.abs(view - np.array(S.GROUND[:3])).max(axis=2) <= 6).sum(axis=1)
    floor = int(np.argmax(grid))      # seen from the front, the floor is one line across the view
    assert grid[floor] > 200, grid[floor]
    rows = np.nonzero(blue_mask(img).any(axis=1))[0]
    assert rows.max() <= floor + 1 < rows.max() + 40, (floor, rows.max())   # down to the floor, not past it


DEPTH_ORDER = r"""
import json, sys
import dearpygui.dearpygui as dpg
import hil.robots as robots
from twin import app as A
app = A.TwinApp(robots.load(sys.argv[1]), None)
app.build()
out = {}
for yaw in (90.0, 270.0):
    app.cam["yaw"] = yaw
    app._apply_camera()
    app.update_scene()
    dpg.render_dearpygui_frame()
    ids = {v if isinstance(v, int) else dpg.get_alias_id(v): k for k, v in app.meas.nodes.items()}
    out[str(yaw)] = [ids[c] for c in dpg.get_item_children(app.meas.parent, 2) if c in ids]
app.close()
print(json.dumps(out))
"""


def test_links_are_painted_far_to_near_from_wherever_the_camera_looks(xdisplay):
    """The 3D layer has no depth buffer: the measured robot's links are reordered each frame so
    that the nearest is painted last — from one side the far arm first, from the other side the
    other arm."""
    import json

    r = subprocess.run([sys.executable, "-c", DEPTH_ORDER, "humanoid17"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    m = robots.load("humanoid17")
    one, other = got["90.0"], got["270.0"]
    assert sorted(one) == sorted(other) and len(one) > m.n // 2
    left, right = m.joint_index("l_elbow"), m.joint_index("r_elbow")   # each lower arm: its elbow's link
    assert (one.index(left) < one.index(right)) != (other.index(left) < other.index(right)), (one, other)


def test_view_presets_look_from_where_they_say():
    from twin import camera as C
    from twin import scene as S

    pts = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]) * 0.1
    for name, right, up in (("side", 0, 2), ("front", 1, 2), ("top", 0, 1)):
        cam = C.fitted(pts, *C.VIEWS[name], ortho=True)
        P = S.orthographic(cam["ortho"] * C.VIEW_W / C.VIEW_H, cam["ortho"], 0.01, 4 * cam["dist"])
        V = S.look_at(*S.orbit_view(cam["yaw"], cam["pitch"], cam["dist"], cam["target"]))
        px = [np.array(S.project(P, V, p, C.VIEW_W, C.VIEW_H)) for p in pts]
        assert px[1 + right][0] - px[0][0] > 20, name          # that axis to the right
        assert px[0][1] - px[1 + up][1] > 20, name             # that one up (pixel y grows down)
        assert abs(px[1 + right][1] - px[0][1]) < 1 and abs(px[1 + up][0] - px[0][0]) < 1, name


def test_so101_side_view_is_the_silhouette_of_its_own_meshes(xdisplay, tmp_path):
    """At zero joint angles, from the side: the twin's drawing against the silhouette of SO-101's
    URDF meshes at full resolution (every triangle, placed by forward kinematics, projected with
    the view's own camera and filled)."""
    import trimesh
    from PIL import Image, ImageDraw


    from twin import camera as C
    from twin import scene as S
    from twin.meshes import link_meshes

    try:
        m = robots.load("so101")
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"so101 needs example-robot-data ({e})")
    img = shot(tmp_path, "so101", [0] * 6, extra=("--view", "side"))
    drawn = robot_mask(img)
    q = np.zeros(m.n)
    cam = C.fitted(C.robot_points(m, S.link_bounds(m, link_meshes(m)), q, np.eye(4)), *C.VIEWS["side"], ortho=True)
    P = S.orthographic(cam["ortho"] * C.VIEW_W / C.VIEW_H, cam["ortho"], 0.01, 4 * cam["dist"])
    V = S.look_at(*S.orbit_view(cam["yaw"], cam["pitch"], cam["dist"], cam["target"]))
    F = m.fk_frames(q)
    silhouette = Image.new("1", (C.VIEW_W, C.VIEW_H))
    pen = ImageDraw.Draw(silhouette)
    for link, file, scale, T, _ in m.meta["visual_meshes"]:
        mesh = trimesh.load(file, force="mesh", process=False)
        M = F[link + 1] @ np.asarray(T).reshape(4, 4)
        v = (np.asarray(mesh.vertices) * scale) @ M[:3, :3].T + M[:3, 3]
        h = (P @ V @ np.c_[v, np.ones(len(v))].T).T
        xy = np.c_[C.VIEW_W * h[:, 0] / h[:, 3] + C.VIEW_W / 2, C.VIEW_H / 2 - C.VIEW_H * h[:, 1] / h[:, 3]]
        for tri in np.asarray(mesh.faces):
            pen.polygon([tuple(p) for p in xy[tri]], fill=1)
    truth = np.array(silhouette, dtype=bool)
    iou = (drawn & truth).sum() / (drawn | truth).sum()
    print(f"IoU {iou:.3f}")
    assert iou > 0.8, iou
    ys, xs = np.nonzero(drawn)         # and all of it in view, filling it
    assert xs.min() > 2 and ys.min() > 2 and xs.max() < C.VIEW_W - 3 and ys.max() < C.VIEW_H - 3
    assert xs.max() - xs.min() > 0.7 * C.VIEW_W or ys.max() - ys.min() > 0.7 * C.VIEW_H


@pytest.mark.parametrize("view", [None, "front", "side", "iso"])
def test_the_g1_is_framed_whole(xdisplay, tmp_path, view):
    from twin import camera as C

    img = shot(tmp_path, "examples/robots/g1.toml", extra=("--view", view) if view else ())
    ys, xs = np.nonzero(robot_mask(img))
    assert len(xs) > 5000
    assert xs.min() > 2 and ys.min() > 2 and xs.max() < C.VIEW_W - 3 and ys.max() < C.VIEW_H - 3, (view, xs, ys)
    assert ys.max() - ys.min() > 0.55 * C.VIEW_H     # standing, head to feet over most of the view


PANEL_LAYOUT = r"""
import json, sys
import dearpygui.dearpygui as dpg
import hil.robots as robots
from twin import app as A
app = A.TwinApp(robots.load(sys.argv[1]), None)
app.build()
app.set_names(True)
for _ in range(4):
    app.update_scene()
    dpg.render_dearpygui_frame()
panel = dpg.get_item_rect_max("estop")[0]   # the e-stop button spans the panel's width
def right(tag):
    return dpg.get_item_rect_max(tag)[0]
out = {"panel_right": panel,
       "slider_right": max(right(f"slider{i}") for i in range(app.model.n)),
       "gap": dpg.get_item_rect_min("view_front")[1] - dpg.get_item_rect_max("send_preview")[1],
       "names": [[*dpg.get_item_configuration(f"jname{i}")["pos"], len(app.model.joint_names[i])]
                 for i in range(app.model.n) if dpg.get_item_configuration(f"jname{i}")["show"]],
       "n": app.model.n}
app.close()
print(json.dumps(out))
"""


@pytest.mark.parametrize("robot", ["examples/robots/g1.toml", "humanoid17", "puma560"])
def test_the_panel_shows_everything_whole_and_the_names_never_overlap(xdisplay, robot):
    import json

    from twin import app as A


    r = subprocess.run([sys.executable, "-c", PANEL_LAYOUT, robot], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["slider_right"] <= got["panel_right"], got           # every joint's name whole beside its slider
    assert got["gap"] < 100, got                                     # the legend rows and buttons, no empty band
    boxes = got["names"]
    assert len(boxes) >= 3
    if robot == "puma560":   # its wrist's three joints at one place: listed below each other, all named
        assert len(boxes) == got["n"], boxes
    for k, (x, y, n) in enumerate(boxes):                            # the names shown never cover each other
        for x2, y2, n2 in boxes[k + 1:]:
            apart = x + A.NAME_CHAR_W * n < x2 or x2 + A.NAME_CHAR_W * n2 < x or abs(y - y2) >= A.NAME_ROW_H
            assert apart, (x, y, n, x2, y2, n2)


def test_the_shapes_the_checks_use_are_drawn_over_the_robot_when_asked(xdisplay, tmp_path):
    """--shapes: every capsule of the collision checks, in cyan, where FK puts it, over the kit's own
    meshes; without it, none."""
    from hil.safety import check_shapes
    from twin import scene as S

    try:
        m = robots.load("so101")
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"so101 needs example-robot-data ({e})")
    pose = [30, 40, -30, 40, 0, 20]
    shown = shot(tmp_path, "so101", pose, name="shapes.png", extra=["--shapes"])
    plain = shot(tmp_path, "so101", pose, name="plain.png")

    def cyan(img):
        v = img[..., :3].astype(int)
        return (np.abs(v - np.array(S.CHECK_SHAPES[:3])).max(axis=2) <= 40)
    assert cyan(plain).sum() < 20 and cyan(shown).sum() > 500, (cyan(plain).sum(), cyan(shown).sum())
    px, F = projector("so101"), m.fk_frames(np.radians(pose))
    caps = check_shapes(m)
    hits = 0
    for c in caps:   # each capsule's ends, drawn in cyan within a few pixels (its outline passes by them)
        T = F[1 + c.link] if c.link >= 0 else F[0]
        ends = [T[:3, :3] @ np.asarray(p) + T[:3, 3] for p in (c.p0, c.p1)]
        hits += all(near(shown, px(p), S.CHECK_SHAPES, radius=int(12 + 400 * c.radius), tol=40) for p in ends)
    assert hits >= 0.8 * len(caps), f"{hits} of {len(caps)} check shapes drawn where FK puts them"


SHAPES_DRAWN = r"""
import json, sys
import numpy as np
import hil.robots as robots
from twin import app as A
app = A.TwinApp(robots.load(sys.argv[1]), None)
app.build()
app.set_shapes(True)
app.update_scene()
box = {str(k): [v.min(axis=0).tolist(), v.max(axis=0).tolist()] for k, v in app.shapes_drawing.box.items()}
shown = all(__import__("dearpygui.dearpygui", fromlist=["x"]).get_item_configuration(n)["show"]
            for n in app.shapes_drawing.nodes.values())
app.close()
print(json.dumps({"box": box, "shown": shown}))
"""


def test_a_box_is_shown_as_the_box_the_checks_use(xdisplay):
    """humanoid17's torso is a box (70 × 100 × 190 mm) and the collision checks use it as a box:
    --shapes draws it 70 mm deep, not as the 100 mm capsule that would hold it."""
    import json

    from hil.safety import check_shapes

    m = robots.load("humanoid17")
    torso = next(s for s in check_shapes(m) if s.name == "torso")
    assert torso.kind == "box"
    r = subprocess.run([sys.executable, "-c", SHAPES_DRAWN, "humanoid17"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "DISPLAY": xdisplay})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["shown"]
    lo, hi = (np.array(v) for v in got["box"]["-1"])   # the base link's: the torso
    np.testing.assert_allclose(hi - lo, 2 * np.abs(torso.rotation()) @ np.asarray(torso.half), atol=1e-6)


def test_the_views_a_run_offers_are_the_cameras_presets():
    """`--view`'s choices (hil.runtime.run_request.VIEWS: a layer below the twin) are exactly the
    presets the twin's camera has, in the order its buttons show them."""
    from hil.runtime.run_request import VIEWS
    from twin import camera as C

    assert tuple(C.VIEWS) == VIEWS and set(C.ORTHOGRAPHIC) <= set(VIEWS)
