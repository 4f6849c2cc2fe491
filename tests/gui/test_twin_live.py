"""The twin beside a running loop, under Xvfb: it follows the loop, its buttons and drags reach it,
and it ends with the run. These tests start real-time loops (see `LOOP_MODULES` in conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import hil.robots as robots
from tests.conftest import wait_for
from tests.gui.png import read_png
from tests.gui.test_twin import HIL, PAD, close_twin, near, projector, robot_mask
from tests.integration.test_runtime import attach, finish, start_run
from tests.launch import command_pid

pytestmark = [pytest.mark.slow, pytest.mark.gui]


def twin_window(twin: subprocess.Popen, timeout_s: float = 60.0) -> list[str]:
    """The X window ids of the twin once it is up (a busy machine takes tens of seconds to start
    it); AssertionError with the twin's output if it ends first or does not come up in time."""
    def up():
        if twin.poll() is not None:
            return "gone"
        return subprocess.run(["xdotool", "search", "--name", "hil twin"], capture_output=True,
                              text=True).stdout.split()
    wid = wait_for(up, timeout_s=timeout_s, step_s=0.2)
    if not wid or wid == "gone":
        twin.terminate()
        out, _ = twin.communicate(timeout=10)
        raise AssertionError(f"the twin window did not appear within {timeout_s:.0f} s (twin exit code "
                             f"{twin.returncode}):\n{out}")
    return wid


@pytest.mark.skipif(not __import__("shutil").which("xdotool"), reason="needs xdotool to click")
def test_estop_button_reaches_the_loop(xdisplay, tmp_path):
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "40", "--enable",
                     "--motion", "demo")
    twin = None
    try:
        client = attach(proc, "puma560")
        assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=8)
        twin = subprocess.Popen(HIL + ["twin", "--attach", client.name, "--robot", "puma560", "--duration", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wid = twin_window(twin)
        time.sleep(1.0)
        # the big red button sits at the top of the right-hand panel
        subprocess.run(["xdotool", "mousemove", "--window", wid[0], "1060", "48", "click", "1"], check=True)
        s = client.wait(lambda s: s.board_state == 4, timeout_s=5)
        assert s is not None, "the board did not reach ESTOP after the click"
        client.shutdown()
    finally:
        close_twin(twin)
        out = finish(proc)
    assert "E-STOP from a client (the twin, hil ctl or a script)" in out


@pytest.mark.skipif(not __import__("shutil").which("xdotool"), reason="needs xdotool to click")
def test_estop_button_works_while_the_enable_dialog_is_open(xdisplay, tmp_path):
    """The Enable dialog is open (asked, not answered): a click on E-STOP still reaches the loop."""
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "40")
    twin = None
    try:
        client = attach(proc, "puma560")
        twin = subprocess.Popen(HIL + ["twin", "--attach", client.name, "--robot", "puma560", "--duration", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wid = twin_window(twin)
        time.sleep(1.0)
        # "Enable..." under the E-STOP, at the panel's left; then the E-STOP itself
        subprocess.run(["xdotool", "mousemove", "--window", wid[0], "896", "93", "click", "1"], check=True)
        time.sleep(0.5)
        subprocess.run(["xdotool", "mousemove", "--window", wid[0], "1060", "48", "click", "1"], check=True)
        s = client.wait(lambda s: s.board_state == 4, timeout_s=5)
        assert s is not None, "the board did not reach ESTOP after the click with the dialog open"
        client.shutdown()
    finally:
        close_twin(twin)
        out = finish(proc)
    assert "E-STOP from a client (the twin, hil ctl or a script)" in out


def test_the_twin_opens_from_a_folder_that_shadows_the_package(tmp_path, xdisplay):
    """A `hil` folder in the current directory (a checkout in the home folder) used to shadow the
    installed package in the twin's process: it failed, and the run said "window open" and exited 0."""
    (tmp_path / "hil").mkdir()
    (tmp_path / "hil" / "__init__.py").write_text("raise ImportError('the shadowing folder was imported')\n")
    hil = os.path.join(os.path.dirname(sys.executable), "hil")
    r = subprocess.run([hil, "run", "--robot", "puma560", "--dry-run", "--duration", "6"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    out = r.stdout + r.stderr
    # exit 0 — or, on a machine busy enough to starve the emulator, the run's own account of its lost
    # link (exit 1, said last): what this test is about is the twin's window and its imports
    lost = r.returncode == 1 and "link lost" in r.stderr.strip().splitlines()[-1]
    assert r.returncode == 0 or lost, out
    assert "twin: window open" in out and "shadowing" not in out, out


def test_a_twin_that_dies_fails_the_run(tmp_path, xdisplay):
    """A run whose twin is gone has no e-stop button: it stops, with an error, instead of going on."""
    from tests.integration.test_lifecycle_runs import child_named

    proc = subprocess.Popen(HIL + ["run", "--robot", "puma560", "--dry-run", "--duration", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = attach(proc, "puma560")
    pid = wait_for(lambda: child_named(command_pid(proc), "hil-twin"), timeout_s=30, step_s=0.1)
    assert pid, "no twin process"
    client.close()
    os.kill(pid, 9)
    out = finish(proc, timeout_s=60)
    assert proc.returncode == 1 and "the twin failed (exit code -9)" in out, out


def test_a_urdf_robot_s_dry_run_is_drawn_live_by_the_twin(xdisplay, tmp_path):
    """SO-101 from its URDF on its emulated board: jogged to a pose through the loop, and the twin
    attached to that loop draws it where FK of the loop's measured joints puts it."""
    try:
        m = robots.load("so101")
    except Exception as e:   # noqa: BLE001 - the package is a test extra
        pytest.skip(f"so101 needs example-robot-data ({e})")
    proc = start_run("--robot", "so101", "--dry-run", "--headless", "--duration", "60", "--enable")
    try:
        client = attach(proc, "so101")
        assert client.wait(lambda s: s.enabled == 1.0, timeout_s=15)
        goal = np.radians([40, 35, -30, 45, 0, 30])
        client.jog(goal)
        # (a bound: beside other work the ramp's cycles come late, and the jog takes longer)
        s = client.wait(lambda s: np.abs(s.q_meas - goal).max() < np.radians(1.0), timeout_s=45)
        assert s is not None, "the arm did not reach the jogged pose"
        out = tmp_path / "live.png"
        r = subprocess.run(HIL + ["twin", "--attach", client.name, "--screenshot", str(out)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        q = client.snapshot().q_meas
        client.shutdown()
    finally:
        finish(proc)
    img = read_png(str(out))
    px = projector("so101")
    F = m.fk_frames(q)
    from hil.safety import _collision_shapes

    caps, _ = _collision_shapes(m)
    mids = [(F[1 + int(c[0])] if c[0] >= 0 else F[0]) for c in caps]
    drawn = robot_mask(img)   # the kit in its own colours

    def hit(p) -> bool:
        x, y = px(p)
        return bool(drawn[y - PAD - 4:y - PAD + 5, x - PAD - 4:x - PAD + 5].any())
    hits = sum(hit(T[:3, :3] @ ((c[1:4] + c[4:7]) / 2) + T[:3, 3]) for c, T in zip(caps, mids))
    assert hits >= 0.8 * len(caps), f"{hits} of {len(caps)} shapes drawn where the loop's joints put them"
    # far from the home pose, so the hits above are the loop's pose and not the power-on one
    tip = "gripper_frame_link"
    assert np.linalg.norm(m.fk_frame(q, tip)[:3, 3] - m.fk_frame(m.home, tip)[:3, 3]) > 0.05


def _drag_points(robot, joint):
    """Pixels on a joint's link as the twin draws it at home: a third of the way from its origin."""
    from twin import app as A

    m = robots.load(robot)
    px = projector(robot)
    T = m.fk_frames(m.home)[1 + m.joint_index(joint)]
    shapes = [s for s in m.shapes if s.link == m.joint_index(joint)]
    end = np.mean([(np.asarray(s.p0) + np.asarray(s.p1)) / 2 if s.kind == "capsule" else np.asarray(s.p0)
                   for s in shapes], axis=0)
    a = np.array(px(T[:3, 3]))
    b = np.array(px(T[:3, :3] @ end + T[:3, 3]))
    assert A.PICK_PX > 0
    return tuple(int(v) for v in a + (b - a) / 3)


@pytest.mark.skipif(not __import__("shutil").which("xdotool"), reason="needs xdotool to drag")
def test_hovering_names_a_joint_dragging_its_link_moves_the_preview_and_only_send_moves_the_robot(xdisplay, tmp_path):
    # (the board's watchdog with a busy machine's margin: this test is about the twin)
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "60", "--enable",
                     "--watchdog-ms", "300")
    twin = None
    try:
        client = attach(proc, "puma560")
        assert client.wait(lambda s: s.enabled == 1.0, timeout_s=15)
        before = client.snapshot().q_target.copy()
        twin = subprocess.Popen(HIL + ["twin", "--attach", client.name, "--duration", "40"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wid = twin_window(twin)
        time.sleep(1.5)
        x, y = _drag_points("puma560", "elbow")
        xd = ["xdotool", "mousemove", "--window", wid[0]]
        subprocess.run(xd + [str(x), str(y)], check=True)
        time.sleep(0.5)
        # hovering names the joint beside the mouse (read off the screen where the mouse is)
        from PIL import ImageGrab

        from twin import app as A
        where = subprocess.run(["xdotool", "getmouselocation"], capture_output=True, text=True).stdout.split()
        sx, sy = (int(w.split(":")[1]) for w in where[:2])
        grab = np.asarray(ImageGrab.grab(xdisplay=xdisplay).convert("RGB")).astype(int)
        label = grab[sy - 24:sy + 4, sx + 10:sx + 110]
        assert (np.abs(label - np.array(A.NAME_COLOR[:3])).max(axis=2) <= 40).sum() > 20, "no name on hover"
        subprocess.run(["xdotool", "mousedown", "1"], check=True)
        for k in range(1, 9):   # 40 px to the right, in steps the twin's frames can follow
            subprocess.run(xd + [str(x + 5 * k), str(y)], check=True)
            time.sleep(0.1)
        subprocess.run(["xdotool", "mouseup", "1"], check=True)
        time.sleep(1.0)
        # a preview only: the loop's target has not moved
        assert np.abs(client.snapshot().q_target - before).max() < 1e-9
        subprocess.run(xd + ["908", "117", "click", "1"], check=True)   # "Send preview"
        s = client.wait(lambda s: np.abs(s.q_target - before).max() > np.radians(5), timeout_s=5)
        assert s is not None, "Send did not reach the loop"
        moved = np.abs(s.q_target - before)
        m = robots.load("puma560")
        e = m.joint_index("elbow")
        # the preview starts from the measured pose: the other joints stay where they are measured
        assert moved.argmax() == e and np.delete(moved, e).max() < 1e-3, np.degrees(moved)
        assert np.radians(10) < moved[e] < np.radians(30)   # ½° a pixel, for a drag of 40 px or less
        client.shutdown()
    finally:
        close_twin(twin)
        finish(proc)


def _said(client) -> str:
    """What the loop says of itself: for a failing wait's message."""
    from hil.safety import flag_names

    s = client.snapshot()
    return (f"mode {int(s.mode)} activity {int(s.activity)} board {int(s.board_state)} safety "
            f"{flag_names(int(s.safety_flags))} misses {int(s.misses)}; last event: {s.event}")


def test_the_sliders_show_the_command_while_a_motion_or_jog_drives_it(xdisplay, tmp_path):
    """The panel's sliders are the commanded angles: during a jog's way there and after it they show
    where the loop commands the joints (they used to stay at the start pose)."""
    proc = start_run("--robot", "puma560", "--dry-run", "--headless", "--duration", "60", "--enable",
                     "--watchdog-ms", "300")
    try:
        client = attach(proc, "puma560")
        # ramped in (on a busy machine the ramp takes a while): the jog starts from the held pose
        assert client.wait(lambda s: s.enabled == 1.0 and not s.ramping, timeout_s=30), _said(client)
        goal = client.snapshot().q_cmd.copy()
        goal[0] += np.radians(30)
        goal[2] -= np.radians(20)
        assert client.jog(goal).ok
        assert client.wait(lambda s: np.abs(s.q_cmd - goal).max() < 1e-6, timeout_s=30), _said(client)
        out = tmp_path / "live.png"
        r = subprocess.run(HIL + ["twin", "--attach", client.name, "--screenshot", str(out)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        client.shutdown()
    finally:
        finish(proc)
    import json

    with open(str(out) + ".json") as f:
        panel = json.load(f)
    shown = np.array([panel["sliders_deg"][n] for n in robots.load("puma560").joint_names])
    assert np.abs(shown - np.degrees(goal)).max() < 0.1, (shown, np.degrees(goal))


REPLAY_TWIN = r"""
import json, sys, time
import dearpygui.dearpygui as dpg
import hil.robots as robots
from hil.runtime.shared import LoopClient
from twin import app as A
client = LoopClient(sys.argv[1])
app = A.TwinApp(robots.load("puma560"), client)
app.build()
client.replay_pause(True)
dpg.set_value("replay_time", 1.0)        # to 1.0 s of the recording, as a drag of the time bar does
app._on_replay_scrub("replay_time", 1.0)
for _ in range(200):
    app.poll_loop(); app.update_scene(); dpg.render_dearpygui_frame()
    if abs(client.replay_row - int(sys.argv[2])) <= 1:
        break
for _ in range(10):                      # the plots are drawn every fifth frame
    app.frames += 1
    app.poll_loop(); app.update_scene(); dpg.render_dearpygui_frame()
xs = dpg.get_value("s_cmd")[0]
print(json.dumps({"row": client.replay_row, "bar": dpg.get_value("replay_time"), "first": xs[0], "last": xs[-1],
                  "window": app.plot_window_s}))
app.close()
"""


def test_a_replays_time_bar_scrubs_it_and_the_plots_follow(xdisplay, tmp_path):
    import json

    rec = tmp_path / "r.npy"
    r = subprocess.run(HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "3", "--enable",
                              "--motion", "demo", "--record", str(rec)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    data = np.load(rec)
    t = data["t"]
    row = int(np.searchsorted(t, t[0] + 1.0))
    proc = subprocess.Popen(HIL + ["replay", str(rec), "--headless", "--loop"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        client = attach(proc, "puma560")
        name = client.name
        client.close()
        r = subprocess.run([sys.executable, "-c", REPLAY_TWIN, name, str(row)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout.strip().splitlines()[-1])
    finally:
        proc.send_signal(__import__("signal").SIGINT)
        finish(proc)
    assert abs(got["row"] - row) <= 1 and abs(got["bar"] - 1.0) < 0.01, got
    # the plots end at the moment shown and reach back the plots' window (from the recording's start)
    assert abs(got["last"] - t[row]) < 0.01 and got["first"] >= t[row] - got["window"] - 0.01, got


def _world(name: str):
    """The physics emulator's last record of the body (hil.physics.world), or None before it has one."""
    from hil.physics.world import WorldBlock, world_path
    from hil.runtime.shared import runtime_dir

    try:
        return WorldBlock(world_path(runtime_dir(), name)).read()
    except (OSError, ValueError):
        return None


def test_the_twin_draws_the_body_where_physics_has_it_standing_then_fallen(xdisplay, tmp_path):
    """A physics dry-run over a servo bus (no IMU: the loop runs on after a fall): standing, the
    twin marks the floor contacts and their centre of pressure where physics has them; disabled,
    the robot falls in physics and the twin draws it lying where physics put its base."""
    pytest.importorskip("mujoco")
    from twin import ground as G
    from twin import scene as S

    m = robots.load("humanoid17")
    px = projector("humanoid17")
    proc = start_run("--robot", "humanoid17", "--dry-run", "--physics", "--bus", "dynamixel2", "--headless",
                     "--enable", "--duration", "120")
    try:
        client = attach(proc, "humanoid17")
        assert client.wait(lambda s: int(s.mode) == 4, timeout_s=60), "never active"
        w = wait_for(lambda: (lambda w: w if w and len(w.contacts) >= 4 and w.t > 0 else None)(_world(client.name)),
                     timeout_s=30)
        assert w is not None and not w.fell, "the physics emulator published no standing body"
        time.sleep(1.0)   # off its stand
        standing = tmp_path / "standing.png"
        r = subprocess.run(HIL + ["twin", "--attach", client.name, "--screenshot", str(standing)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        w = _world(client.name)
        standing_load = np.abs(client.snapshot().load)
        client.disable()
        fallen = wait_for(lambda: (lambda w: w if w and w.fell else None)(_world(client.name)), timeout_s=30)
        assert fallen is not None, "disabled, the limp robot did not fall in physics"
        time.sleep(2.0)   # lying still
        lying = tmp_path / "fallen.png"
        r = subprocess.run(HIL + ["twin", "--attach", client.name, "--screenshot", str(lying)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        down, q = _world(client.name), client.snapshot().q_meas
        limp_load = np.abs(client.snapshot().load)
        client.shutdown()
    finally:
        finish(proc)
    # standing, the legs carry the body (their servos' currents, a share of their stall currents);
    # limp, nothing does; the panel's bars show the same shares, drawn in their colours
    legs = [m.joint_index(n) for n in ("l_knee", "r_knee", "l_ankle_pitch", "r_ankle_pitch")]
    assert standing_load[legs].max() > 0.02 and limp_load.max() < 0.01, (standing_load, limp_load)
    shown = json.loads((tmp_path / "standing.png.json").read_text())["load"]
    assert max(shown[m.joint_names[i]] for i in legs) > 0.02, shown
    img = read_png(str(standing))
    from twin.app import VIEW_W
    from twin.panel import LOAD_LEVELS
    panel = img[:, VIEW_W + 20:, :3].astype(int)
    bar_px = sum(int((np.abs(panel - np.array(c)).max(axis=2) <= 12).sum()) for _, c in LOAD_LEVELS)
    assert bar_px > 20, "no load bars drawn in the panel"
    assert w.cop is not None and near(img, px([*w.cop, G.LIFT]), G.COP, radius=6), "no centre of pressure drawn"
    dots = sum(near(img, px([x, y, G.LIFT]), G.CONTACT, radius=4) for x, y, _, _ in w.contacts)
    assert dots >= 0.75 * len(w.contacts), f"{dots} of {len(w.contacts)} floor contacts drawn"
    # fallen: the links where physics has the base, low over the floor (drawn standing, none would be)
    img = read_png(str(lying))
    from hil.safety import _collision_shapes

    caps, _ = _collision_shapes(m)
    F = m.fk_frames(q)
    mids = [down.base @ (F[1 + int(c[0])] if c[0] >= 0 else F[0]) for c in caps]
    points = [T[:3, :3] @ ((c[1:4] + c[4:7]) / 2) + T[:3, 3] for c, T in zip(caps, mids)]
    assert max(p[2] for p in points) < 0.2, "the body is not lying in physics"
    colours = (S.MEASURED, S.NEAR_LIMIT, S.AT_LIMIT)
    hits = sum(any(near(img, px(p), c, radius=4) for c in colours) for p in points)
    assert hits >= 0.7 * len(points), f"{hits} of {len(points)} shapes drawn where physics has the fallen body"


def test_the_twin_puts_the_body_where_the_world_block_says_not_where_its_soles_would(xdisplay, tmp_path):
    """The body's pose in the world comes from physics when a run has it: a world block placing the
    base 25 cm aside and lying on its side (as no sole-on-the-floor reasoning would) is where the
    twin draws the robot, and the standing place stays empty."""
    from hil.kinematics.floating import FloatingBase
    from hil.kinematics.rotations import rpy_matrix
    from hil.physics.world import World, WorldBlock, world_path
    from hil.runtime.shared import runtime_dir
    from hil.safety import _collision_shapes
    from twin import scene as S

    m = robots.load("humanoid17")
    proc = start_run("--robot", "humanoid17", "--dry-run", "--headless", "--duration", "60")
    block = None
    try:
        client = attach(proc, "humanoid17")
        base = np.eye(4)
        base[:3, :3] = rpy_matrix(np.radians(90.0), 0.0, 0.0)
        base[:3, 3] = 0.0, 0.25, 0.06
        block = WorldBlock(world_path(runtime_dir(), client.name), create=True)
        block.write(World(1.0, base, True, 90.0, None, np.zeros((0, 4))))
        out = tmp_path / "aside.png"
        r = subprocess.run(HIL + ["twin", "--attach", client.name, "--screenshot", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        q = client.snapshot().q_meas
        client.shutdown()
    finally:
        if block is not None:
            block.unlink()
        finish(proc)
    img, px = read_png(str(out)), projector("humanoid17")
    caps, _ = _collision_shapes(m)
    F = m.fk_frames(q)

    def pixels(Tw):
        frames = [Tw @ (F[1 + int(c[0])] if c[0] >= 0 else F[0]) for c in caps]
        return [px(T[:3, :3] @ ((c[1:4] + c[4:7]) / 2) + T[:3, 3]) for c, T in zip(caps, frames)]

    colours = (S.MEASURED, S.NEAR_LIMIT, S.AT_LIMIT)
    drawn = lambda p: any(near(img, p, c, radius=3) for c in colours)   # noqa: E731
    aside = pixels(base)
    standing = [p for p in pixels(FloatingBase(m, "l_sole", m.home).body_pose(q))
                if min(np.hypot(p[0] - a[0], p[1] - a[1]) for a in aside) > 30]
    assert sum(map(drawn, aside)) >= 0.8 * len(aside), "the body is not drawn where the world block puts it"
    assert len(standing) >= 5 and sum(map(drawn, standing)) <= 0.2 * len(standing), "drawn standing as well"


def test_calibration_by_eye_draws_the_reference_and_the_nudged_servos_over_it(tmp_path, xdisplay):
    """`hil calibrate --method eye` on PWM servos: the twin draws the reference pose solid and the
    pose the servos are sent (reference + the nudges) as the ghost; a nudge moves the ghost's foot
    away from the solid one, and `done` saves."""
    from twin import scene as S

    m = robots.load("humanoid17")
    out = tmp_path / "eye.toml"
    proc = subprocess.Popen(HIL + ["calibrate", "--robot", "humanoid17", "--dry-run", "--bus", "ssc32", "--method",
                                   "eye", "--headless", "--jog-speed-deg-s", "60", "--out", str(out),
                                   "--watchdog-ms", "1000"],   # a busy machine's margin: the session ends on a trip
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        from hil.runtime.shared import loop_name

        name = loop_name("humanoid17", command_pid(proc))
        proc.stdin.write("\nl_knee 25\n")   # go ahead, then bend the left knee 25° further
        proc.stdin.flush()
        from hil.runtime.shared import runtime_dir

        assert wait_for(lambda: os.path.exists(os.path.join(runtime_dir(), name)) or None, timeout_s=90), \
            "the calibration did not publish its view"
        time.sleep(3.0)                      # the ramp to the reference and the nudge (25° at 60°/s)
        shot = tmp_path / "eye.png"
        r = subprocess.run(HIL + ["twin", "--attach", name, "--robot", "humanoid17", "--screenshot", str(shot)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        proc.stdin.write("done\n")
        proc.stdin.close()
        said = proc.stdout.read()
        assert proc.wait(timeout=60) == 0, said
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        if not proc.stdin.closed:
            proc.stdin.close()
    assert "l_knee: +25.00° from the config's zero" in said and out.exists(), said
    img = read_png(str(shot))
    px = projector("humanoid17")
    q_ref = m.poses["home"]
    nudged = q_ref.copy()
    nudged[m.joint_index("l_knee")] += np.radians(25)
    # the twin stands each pose on its lower sole: both at home, the right one with the left knee bent
    from hil.kinematics.floating import FloatingBase

    solid_at = px(FloatingBase(m, "l_sole", m.home).frame_pose(q_ref, "l_foot")[:3, 3])
    ghost_at = px(FloatingBase(m, "r_sole", m.home).frame_pose(nudged, "l_foot")[:3, 3])
    assert np.hypot(solid_at[0] - ghost_at[0], solid_at[1] - ghost_at[1]) > 8, (solid_at, ghost_at)
    assert near(img, solid_at, S.MEASURED, radius=6), "the reference pose's foot is not drawn solid"
    assert near(img, ghost_at, S.GHOST, radius=6), "the nudged foot is not drawn as the ghost"


def test_the_twin_draws_the_leader_beside_the_follower_in_teleop(xdisplay, tmp_path):
    """`hil teleop`: the twin attached to the follower's loop draws the leader's pose (the loop's
    target) as a wireframe of its own colour, and says what it is in the legend."""
    from twin import scene as S

    proc = subprocess.Popen(HIL + ["teleop", "--robot", "koch", "--dry-run", "--headless", "--duration", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        client = attach(proc, "koch")
        assert client.wait(lambda s: s.motion_running == 1.0, timeout_s=45), "teleop never followed"
        out = tmp_path / "teleop.png"
        r = subprocess.run(HIL + ["twin", "--attach", client.name, "--screenshot", str(out)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        client.shutdown()
    finally:
        finish(proc, timeout_s=60)
    img = read_png(str(out))[:, :840, :3].astype(int)   # the 3D view
    leader = (np.abs(img - np.array(S.LEADER[:3])).sum(axis=2) <= 6).sum()
    assert leader > 200, f"{leader} pixels of the leader's colour"
