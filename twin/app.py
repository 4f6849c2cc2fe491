"""The DearPyGui digital twin: the robot in 3D (measured solid, commanded ghost, IK preview),
panels to jog, preview Cartesian targets, watch tracking and timing, and stop the robot.

It only reads the loop's shared snapshots and posts requests into its mailbox, so it can never
delay a control cycle. Run it with `hil twin` (attach) or from `hil run`; `hil twin --screenshot`
renders one frame to a PNG with no loop at all.
"""

from __future__ import annotations

import math
import time

import dearpygui.dearpygui as dpg
import numpy as np

from firmware_protocol.messages import fault_fixes, fault_names
from hil.kinematics.floating import FloatingBase
from hil.kinematics.rotations import rpy_angles, rpy_matrix
from hil.runtime.shared import BOARD_STATES, progress_text
from hil.safety import check_shapes, flag_names
from twin import ground as G
from twin import scene as S
from twin.intent import TwinIntent
from twin.camera import (ORTHOGRAPHIC, VIEW_H, VIEW_W, VIEWS, H, PANEL_W, W, camera_matrices, default_camera,
                         fitted, orbit, pan, robot_points, zoom)
from twin.meshes import link_meshes
from twin.panel import LOAD_LEVELS, PLOT_WINDOWS, build_panel
from twin.questions import Questions

GROUND_TOUCH = 0.0008   # a sole corner this low touches the ground (m): below a rolling sole's lifted corner
TRACK_TOLERANCE = math.radians(2.0)   # measured this far off its command: highlighted in the panel
NAME_COLOR = (235, 235, 240, 255)
NAME_PLATE = (20, 22, 28, 200)   # under a joint's name: it reads over a light part as over the floor
NAME_ROWS = 4                    # rows below its joint a name may move down to stay clear of others
NAME_ROW_H = 15                  # pixels
NAME_CHAR_W = 8                  # pixels a character of a name (size 14) takes
PICK_PX = 14                          # a click this close to a link's drawn axis picks its joint


def pick_joint(pixels: list, mouse: np.ndarray) -> int | None:
    """The joint whose link (origin to far end, in view pixels) passes nearest the mouse, if
    within PICK_PX; ties go to the joint further down the chain (the smaller link on top)."""
    best, best_d = None, PICK_PX
    for i, (a, b) in enumerate(pixels):
        ab = b - a
        t = float(np.clip((mouse - a) @ ab / max(ab @ ab, 1e-9), 0.0, 1.0))
        d = float(np.linalg.norm(mouse - (a + t * ab)))
        if d <= best_d:
            best, best_d = i, d
    return best
def set_text(tag: str, text: str) -> None:
    """A panel line that takes room only while it says something (an arrow as ASCII: the
    default font has no →)."""
    text = text.replace("→", "->")
    dpg.set_value(tag, text)
    dpg.configure_item(tag, show=bool(text))


SLIDER_OWN_S = 1.0   # after a user's drag, the sliders stay theirs this long before they follow the command
GHOST_APART_RAD = math.radians(0.2)   # the commanded pose is drawn where it is this far from the measured
REPLAY_SPEEDS = ("0.1×", "0.25×", "0.5×", "1×", "2×", "4×")


class TwinApp:
    def __init__(self, model, client=None, path: np.ndarray | None = None, workpiece=None,
                 title: str = "hil twin", view: str | None = None) -> None:
        self.model = model
        self.meshes = link_meshes(model)      # a URDF robot's own meshes ({}: its shapes are drawn)
        self._bounds = S.link_bounds(model, self.meshes)
        self.view = view
        self.follow_base = False
        self._ghost_shown = True
        self.client = client
        self.path = path
        self.workpiece = workpiece
        self.title = title
        self.cam = default_camera(model, self.meshes)
        self.humanoid = model.floating   # (its data file says so; a humanoid has l_sole and r_sole)
        self.base = None
        if self.humanoid:
            self.base = FloatingBase(model, "l_sole", model.home)
        self.q_meas = model.home.copy()
        self.q_cmd = model.home.copy()
        self.intent = TwinIntent(model, client)   # what is previewed, judged and asked of the loop
        self.history: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.plot_window_s = PLOT_WINDOWS[0]   # the plots keep this many seconds
        self.plots_paused = False
        self.replay = None                     # a replay's recording (hil replay): its rows, for the time bar
        self.shadow = None                     # the shadow twin's block (hil run --shadow), once it is there
        self._shadow_looked = 0.0
        self.world_block = None                # the physics emulator's (hil run --dry-run --physics), once there
        self._world_looked = 0.0
        self.world = None                      # its last record: the base where physics has it, the contacts
        self.plot_joint = 0
        self.frames = 0
        self.estimated: bool | None = None   # are measured positions estimates? (the loop says, once connected)
        self.fps = 0.0
        self._cmd_zmp = G.CartTableZmp()       # the commanded pose's: the ZMP the plan asks for
        self.messages: list[str] = []
        self.show_frames = False           # a small x y z frame on every link (seed 001's joint frames)
        self.show_names = False            # every joint's name beside it in the view
        self.show_shapes = False           # the shapes the checks use, as wireframes over the robot
        self.q_target = None               # the loop's target (what its safety checks judged), when attached
        self.leader_shown = False          # teleop: the target is a leader arm's pose, drawn (white wireframe)
        self.questions = Questions(lambda dialog, shown: dpg.configure_item(dialog, show=shown), self._message)
        self.balance_flagged = False
        self.safety_flags = 0
        self._link_ends = {}
        for i in range(model.n):   # where each link's geometry is, in its own frame
            centres = [np.asarray(sh.p0) if sh.kind == "box" else (np.asarray(sh.p0) + np.asarray(sh.p1)) / 2
                       for sh in model.shapes if sh.link == i]
            if centres:
                self._link_ends[i] = np.mean(centres, axis=0)

    # ------------------------------------------------------------------ build
    def build(self) -> None:
        self._build_window()
        floor = self._build_static_scene()
        self._build_drawings(None if self.humanoid else floor)
        self._build_overlays()
        self._bind_input()
        self._drag_prev = None
        if self.view is not None:
            self.set_view(self.view)
        self._apply_camera()
        dpg.show_viewport()

    def _build_window(self) -> None:
        """The viewport, the 3-D view (its scene and world nodes) and the side panel."""
        dpg.create_context()
        dpg.create_viewport(title=self.title, width=W, height=H, x_pos=0, y_pos=0, vsync=False)
        dpg.setup_dearpygui()
        # software GL fills every pixel itself, at about 15 ns a pixel for a filled shape, while the
        # viewport's clear costs almost nothing: the window and the side panel have no filled
        # background (the clear colour shows through, the panel keeps its border), and edges are
        # not anti-aliased (benchmarks/bench_twin_frame.py)
        dpg.configure_app(anti_aliased_lines=False, anti_aliased_fill=False)
        dpg.set_viewport_clear_color(S.BACKGROUND)
        with dpg.theme() as unfilled:
            with dpg.theme_component(dpg.mvAll):
                dpg.add_theme_color(dpg.mvThemeCol_ChildBg, (0, 0, 0, 0))
        with dpg.window(tag="main", no_title_bar=True, no_scrollbar=True, no_move=True):
            with dpg.group(horizontal=True):
                with dpg.drawlist(width=VIEW_W, height=VIEW_H, tag="view"):
                    with dpg.draw_layer(tag="scene", depth_clipping=True, perspective_divide=True,
                                        cull_mode=dpg.mvCullMode_Front):
                        with dpg.draw_node(tag="world"):
                            pass
                with dpg.child_window(width=PANEL_W, height=VIEW_H, tag="panel", border=True):
                    self._load_themes = build_panel(self)
        dpg.bind_item_theme("panel", unfilled)
        dpg.set_primary_window("main", True)
        dpg.configure_item("main", no_background=True)   # set after: the primary window brings its own
        dpg.set_clip_space("scene", 0, 0, VIEW_W, VIEW_H, -1.0, 1.0)

    def _build_static_scene(self) -> float:
        """What does not move: the floor's grid, the base's axes, an arm's reach, the workpiece and
        the planned path; the floor's height."""
        floor = float(self.model.meta.get("floor_z_m", 0.0)) if not self.humanoid else 0.0
        step = S.grid_step(self.model)
        S.add_grid("world", half=10 * step if step < 0.1 else 6 * step, step=step, z=floor, seg=step)
        S.add_axes("world", 0.25 if step > 0.1 else 0.08, 0.0 if not self.humanoid else 0.001)
        if not self.humanoid and "workspace" in self.model.meta:
            reach = self.intent.checker.reach_m   # its sphere, drawn as two great circles
            S.add_ring("world", (0, 0, 0), reach, (0, 0, 1), (110, 110, 170, 255))
            S.add_ring("world", (0, 0, 0), reach, (1, 0, 0), (110, 110, 170, 255))
        if self.workpiece is not None:
            self._draw_workpiece()
        if self.path is not None and len(self.path) > 1:
            S.add_polyline("world", np.asarray(self.path), (255, 210, 80, 255), 2, 0.02)
        return floor

    def _build_drawings(self, fixed_floor: float | None) -> None:
        """The robot as measured (solid), commanded (ghost), previewed, in the shadow twin's physics,
        as the leader arm stands, and as the checks' shapes."""
        # the solid robot and the marks on the floor under it in a node of their own: painted in
        # depth order among themselves each frame (RobotDrawing.order_by_depth)
        dpg.add_draw_node(parent="world", tag="solid")
        if self.humanoid:
            with dpg.draw_node(tag="ground_marks", parent="solid"):
                pass
        self.meas = S.RobotDrawing(self.model, "solid", S.MEASURED, True, "meas", meshes=self.meshes,
                                   floor_z=fixed_floor)
        self.ghost = S.RobotDrawing(self.model, "world", S.GHOST, False, "ghost", floor_z=fixed_floor)
        self.prev = S.RobotDrawing(self.model, "world", S.PREVIEW, False, "prev", floor_z=fixed_floor)
        self.shadow_drawing = S.RobotDrawing(self.model, "world", S.SHADOW, False, "shadow", floor_z=fixed_floor)
        self.shadow_drawing.show(False)
        self.leader_drawing = S.RobotDrawing(self.model, "world", S.LEADER, False, "leader", floor_z=fixed_floor)
        self.leader_drawing.show(False)
        self.prev.show(False)
        # the shapes as the collision and workspace checks see them: no joins, no floor cut
        self.shapes_drawing = S.RobotDrawing(self.model, "world", S.CHECK_SHAPES, False, "shapes", joins=False,
                                             shapes=check_shapes(self.model))
        self.shapes_drawing.show(self.show_shapes)

    def _build_overlays(self) -> None:
        """Each link's frame, and each joint's name on a plate (2-D, over the 3-D layer)."""
        size = 0.6 * S.grid_step(self.model)
        for i in range(self.model.n):   # each link's own frame: its joint turns about one of these axes
            node = dpg.add_draw_node(parent="world", tag=f"jframe{i}", show=self.show_frames)
            S.add_axes(node, size, 0.0, thickness=2)
        for i, name in enumerate(self.model.joint_names):   # 2-D, over the 3-D layer, on a plate
            dpg.draw_rectangle([0, 0], [1, 1], color=NAME_PLATE, fill=NAME_PLATE, parent="view", tag=f"jplate{i}",
                               show=self.show_names)
            dpg.draw_text([0, 0], name, size=14, color=NAME_COLOR, parent="view", tag=f"jname{i}",
                          show=self.show_names)
        dpg.draw_text([0, 0], "", size=14, color=NAME_COLOR, parent="view", tag="hover_name", show=False)

    def _bind_input(self) -> None:
        """Mouse: pick, drag, pan, zoom; keys: space e-stops, F fits the view, R resets it."""
        with dpg.handler_registry():
            dpg.add_mouse_click_handler(button=dpg.mvMouseButton_Left, callback=self._on_click)
            dpg.add_mouse_drag_handler(button=dpg.mvMouseButton_Left, callback=self._on_drag)
            dpg.add_mouse_drag_handler(button=dpg.mvMouseButton_Right, callback=self._on_pan)
            dpg.add_mouse_release_handler(callback=self._on_release)
            dpg.add_mouse_wheel_handler(callback=self._on_wheel)
            dpg.add_key_press_handler(key=dpg.mvKey_Spacebar, callback=lambda *a: self.estop())
            dpg.add_key_press_handler(key=dpg.mvKey_F, callback=lambda *a: self.fit())
            dpg.add_key_press_handler(key=dpg.mvKey_R, callback=lambda *a: self.set_view(self.view or "iso"))

    # --------------------------------------------------------------- the shadow twin
    def _show_shadow(self) -> None:
        """The shadow's predicted pose (orange wireframe) and its residual and diagnosis, when the
        run has a shadow (its block appears a moment after the loop starts)."""
        from hil.runtime import shadow as sh   # lazy: only a run with --shadow has one

        if self.shadow is None:
            if time.monotonic() - self._shadow_looked < 1.0 or not hasattr(self.client, "state"):
                return
            self._shadow_looked = time.monotonic()
            try:
                self.shadow = sh.ShadowBlock(sh.block_path(self.client.name), self.model.n)
            except (OSError, ValueError):
                return
            self.shadow_drawing.show(True)
        got = self.shadow.read()
        if got is None:
            return
        _, pred, residual, flags = got
        self.shadow_q = pred
        worst = int(np.argmax(np.abs(residual)))
        lines = sh.describe(self.model.joint_names, residual, flags)
        set_text("shadow_text", f"shadow: measured − predicted ≤ {math.degrees(abs(residual[worst])):.1f}° "
                                f"({self.model.joint_names[worst]})" + "".join("\n" + ln for ln in lines))
    # --------------------------------------------------------------- the body in physics
    def _show_world(self) -> None:
        """Where physics has the body (a physics dry-run publishes it a moment after it starts):
        the robot is then drawn at its base's physical pose, on the contacts it really has."""
        from hil.physics import world as W   # lazy: only a physics run has one
        from hil.runtime.shared import runtime_dir

        if not self.humanoid or not hasattr(self.client, "state"):
            return
        if self.world_block is None:
            if time.monotonic() - self._world_looked < 1.0:
                return
            self._world_looked = time.monotonic()
            try:
                self.world_block = W.WorldBlock(W.world_path(runtime_dir(), self.client.name))
            except (OSError, ValueError):
                return
        self.world = self.world_block.read() or self.world
        w = self.world
        if w is not None:
            state = f"FELL (tilted {w.tilt_deg:.0f}°)" if w.fell else f"up, tilt {w.tilt_deg:.1f}°"
            set_text("world_text", f"physics: {state}, {len(w.contacts)} floor contacts"
                                   + ("" if w.cop is None else f", CoP ({w.cop[0] * 1000:.0f}, {w.cop[1] * 1000:.0f}) mm"))
            dpg.configure_item("world_text", color=S.AT_LIMIT[:3] if w.fell else (200, 220, 200))

    def load_replay(self) -> bool:
        """The recording a replay plays (its block says which), for the time bar and the plots."""
        if self.client is None or not getattr(self.client, "replay_rows", 0):
            return False
        from hil.runtime.recorder import open_run   # lazy: only a replay's twin reads a recording

        try:
            self.replay = open_run(self.client.info()["replay"])[0]
        except (KeyError, OSError, ValueError) as e:
            self._message(f"replay: the recording cannot be read here ({e}); no time bar")
            return False
        return True

    def build_replay_bar(self) -> None:
        t = self.replay["t"]
        with dpg.group(horizontal=True):
            dpg.add_checkbox(label="pause", tag="replay_pause", callback=lambda s, a: self.client.replay_pause(a))
            dpg.add_combo(REPLAY_SPEEDS, default_value="1×", tag="replay_speed", width=70,
                          callback=lambda s, a: self.client.replay_speed(float(a[:-1])))
            dpg.add_slider_float(tag="replay_time", width=-1, min_value=0.0, max_value=float(t[-1] - t[0]),
                                 format="%.2f s", callback=self._on_replay_scrub)

    def _on_replay_scrub(self, sender, value) -> None:
        t = self.replay["t"]
        self.client.replay_seek(int(np.searchsorted(t, t[0] + value)))
        self._scrubbed_at = time.monotonic()

    def _progress(self, s) -> str:
        """A live motion's progress; a replay's motion is the recording's (its bar says where it is)."""
        if self.replay is not None:
            return "(recorded)" if s.motion_running else ""
        return progress_text(s.motion_progress)

    def _replay_bar(self) -> None:
        """The bar follows the replay (a user's scrub wins for a moment); the plots show the
        recording's last window up to the moment shown, wherever the scrub took it."""
        data, k = self.replay, min(self.client.replay_row, len(self.replay) - 1)
        t = data["t"]
        if time.monotonic() - getattr(self, "_scrubbed_at", -1e9) > SLIDER_OWN_S:
            dpg.set_value("replay_time", float(t[k] - t[0]))
        lo = int(np.searchsorted(t, t[k] - self.plot_window_s))
        step = max(1, (k + 1 - lo) // 500)          # at most 500 points a series
        rows = data[lo:k + 1:step]
        self.history = [(float(r["t"]), r["q_cmd"], r["q_meas"]) for r in rows]

    # --------------------------------------------------------------- camera
    def _apply_camera(self) -> None:

        P, V = self.camera_matrices()
        dpg.apply_transform("world", dpg.mvMat4(*P.ravel()) * dpg.mvMat4(*V.ravel()))

    def camera_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """(projection, view) as NumPy matrices: what the view shows, and tests project points with."""
        return camera_matrices(self.cam)

    def robot_points(self) -> np.ndarray:
        """World points that bound the robot as it stands now (its base where the feet put it)."""
        Tw = self.base.body_pose(self.q_meas) if self.base is not None else np.eye(4)
        return robot_points(self.model, self._bounds, self.q_meas, Tw)

    def fit(self) -> None:
        """All of the robot in view, seen from where the camera looks from now."""
        c = self.cam
        self.cam = fitted(self.robot_points(), c["yaw"], c["pitch"], bool(c.get("ortho")))
        self._apply_camera()

    def set_view(self, name: str) -> None:
        """A preset (VIEWS), the robot fitted in it."""
        self.view = name
        self.cam["yaw"], self.cam["pitch"] = VIEWS[name]
        self.cam["ortho"] = 1.0 if name in ORTHOGRAPHIC else 0.0
        self.fit()

    def _over_view(self) -> bool:

        return dpg.is_item_hovered("view")

    def _view_mouse(self) -> tuple[float, float]:
        """The mouse in the view's pixels (0, 0 at its top left)."""
        mx, my = dpg.get_mouse_pos(local=False)
        x0, y0 = dpg.get_item_rect_min("view")
        return mx - x0, my - y0

    def _joint_pixels(self, q: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per joint: its origin and its link's far end (the mean of its shapes' centres, else the
        origin), in view pixels, as the camera shows them."""
        F = self.model.fk_frames(q)
        Tw = self.base.body_pose(q) if self.base is not None else np.eye(4)
        P, V = self.camera_matrices()
        out = []
        for i in range(self.model.n):
            T = Tw @ F[i + 1]
            ends = self._link_ends.get(i)
            tip = T[:3, :3] @ ends + T[:3, 3] if ends is not None else T[:3, 3]
            out.append(tuple(np.array(S.project(P, V, p, VIEW_W, VIEW_H)) for p in (T[:3, 3], tip)))
        return out

    def _place_names(self, pixels) -> None:
        """Each joint's name beside it; one that would cover a name already placed goes below it
        (joints at one place — a wrist's three — read as a list), and only a name that finds no
        free row within NAME_ROWS is left out (hovering its joint names it)."""
        placed: list[tuple[float, float, float]] = []
        for i, (origin, _) in enumerate(pixels):
            x, y0 = float(origin[0]) + 6.0, float(origin[1]) - 16.0
            w = NAME_CHAR_W * len(self.model.joint_names[i])
            for row in range(NAME_ROWS):
                y = y0 + NAME_ROW_H * row
                if all(x + w < px or px + pw < x or abs(y - py) >= NAME_ROW_H for px, py, pw in placed):
                    placed.append((x, y, w))
                    dpg.configure_item(f"jname{i}", pos=[x, y], show=True)
                    dpg.configure_item(f"jplate{i}", pmin=[x - 2, y], pmax=[x + w + 2, y + NAME_ROW_H - 1], show=True)
                    break
            else:
                dpg.configure_item(f"jname{i}", show=False)
                dpg.configure_item(f"jplate{i}", show=False)

    def _hover_name(self, pixels) -> None:
        """The joint under the mouse, named beside it with its measured angle (`pixels`: the
        joints' `_joint_pixels` this frame, None when the mouse is not over the view)."""
        j = None
        if self.intent.drag_joint is None and pixels is not None and self._over_view():
            mouse = np.array(self._view_mouse())
            j = pick_joint(pixels, mouse)
        if j is None:
            dpg.configure_item("hover_name", show=False)
            return
        dpg.configure_item("hover_name", show=True, pos=[float(mouse[0]) + 14, float(mouse[1]) - 20],
                           text=f"{self.model.joint_names[j]} {math.degrees(self.q_meas[j]):+.1f}°")

    def _on_click(self, sender, app_data) -> None:
        """A click on a link starts dragging its joint (the preview follows; nothing is sent)."""
        if not self._over_view():
            return
        q0 = self.intent.preview_q if self.intent.preview_q is not None else self.q_meas
        j = pick_joint(self._joint_pixels(q0), np.array(self._view_mouse()))
        if j is not None:
            self.intent.start_drag(j, self.q_meas)

    def _say(self, said) -> None:
        """A decision's words where they go, and the preview drawn while there is one."""
        if said.panel is not None:
            dpg.set_value("cart_msg", said.panel)
        if said.event is not None:
            self._message(said.event)
        self.prev.show(self.intent.preview_q is not None)

    def _on_drag(self, sender, app_data) -> None:
        if self.intent.drag_joint is not None:
            self._say(self.intent.drag(app_data[1]))
            return
        if not self._over_view() and self._drag_prev is None:
            return
        _, dx, dy = app_data
        px, py = self._drag_prev or (0.0, 0.0)
        self._drag_prev = (dx, dy)
        if self.cam.get("ortho"):
            self.cam["ortho"] = 0.0
            self.fit()
        orbit(self.cam, dx - px, dy - py)
        self._apply_camera()

    def _on_pan(self, sender, app_data) -> None:
        if not self._over_view() and self._drag_prev is None:
            return
        _, dx, dy = app_data
        px, py = self._drag_prev or (0.0, 0.0)
        self._drag_prev = (dx, dy)
        pan(self.cam, dx - px, dy - py)
        self._apply_camera()

    def _on_release(self, sender, app_data) -> None:
        self._drag_prev = None
        if self.intent.drag_joint is not None:
            self._say(self.intent.release())

    def _on_wheel(self, sender, app_data) -> None:
        if not self._over_view():
            return
        zoom(self.cam, closer=app_data > 0)
        self._apply_camera()

    # -------------------------------------------------------------- requests
    def estop(self) -> None:
        self.questions.estop()
        self._message(self.intent.estop())

    def ask(self, dialog: str) -> None:
        self.questions.ask(dialog)

    def close_question(self, dialog: str) -> None:
        self.questions.close(dialog)

    def post(self, what: str) -> None:
        self._message(self.intent.post(what))

    def _message(self, text: str) -> None:

        self.messages.append(text)
        if dpg.does_item_exist("event"):
            set_text("event", text)

    def _slider_q(self) -> np.ndarray:

        return np.radians([dpg.get_value(f"slider{i}") for i in range(self.model.n)])

    def on_slider(self, sender, app_data) -> None:
        q = self._slider_q()
        self.q_cmd_preview = q
        now = time.monotonic()
        self._slider_touched = now
        refused = self.intent.jog_sliders(q, now)
        if refused:
            self._message(refused)

    def cart_from_current(self) -> None:

        frame = dpg.get_value("cart_frame")
        T = self.model.fk_frame(self.q_meas, frame)
        for k, v in zip("xyz", T[:3, 3]):
            dpg.set_value(f"cart_{k}", float(v * 1e3))
        if not self.humanoid:
            for k, v in zip(("roll", "pitch", "yaw"), rpy_angles(T[:3, :3])):
                dpg.set_value(f"cart_{k}", math.degrees(v))

    def _cart_target(self) -> np.ndarray:

        T = np.eye(4)
        T[:3, 3] = [dpg.get_value(f"cart_{k}") * 1e-3 for k in "xyz"]
        if not self.humanoid:
            T[:3, :3] = rpy_matrix(*np.radians([dpg.get_value(f"cart_{k}") for k in ("roll", "pitch", "yaw")]))
        return T

    def cart_preview(self) -> None:
        self._say(self.intent.preview_target(dpg.get_value("cart_frame"), self._cart_target(), self.q_meas))

    def drop_preview(self) -> None:
        self.intent.drop()
        self.prev.show(False)
        dpg.set_value("cart_msg", "")

    def cart_send(self) -> None:
        self._say(self.intent.send())

    # ---------------------------------------------------------------- frames
    def set_pose(self, q_meas: np.ndarray, q_cmd: np.ndarray | None = None) -> None:

        self.q_meas = np.asarray(q_meas, float)
        self.q_cmd = self.q_meas if q_cmd is None else np.asarray(q_cmd, float)
        for i in range(self.model.n):
            if dpg.does_item_exist(f"slider{i}"):
                dpg.set_value(f"slider{i}", math.degrees(self.q_cmd[i]))
        self._show_measured()

    def set_names(self, visible: bool) -> None:

        self.show_names = bool(visible)
        for i in range(self.model.n):
            for tag in (f"jname{i}", f"jplate{i}"):
                if dpg.does_item_exist(tag):
                    dpg.configure_item(tag, show=self.show_names)
        if dpg.does_item_exist("names_box"):
            dpg.set_value("names_box", self.show_names)

    def set_shapes(self, visible: bool) -> None:
        """The shapes the collision and workspace checks use, drawn over the robot (or not)."""
        self.show_shapes = bool(visible)
        if hasattr(self, "shapes_drawing"):
            self.shapes_drawing.show(self.show_shapes)
        if dpg.does_item_exist("shapes_box"):
            dpg.set_value("shapes_box", self.show_shapes)

    def set_frames(self, visible: bool) -> None:

        self.show_frames = bool(visible)
        for i in range(self.model.n):
            if dpg.does_item_exist(f"jframe{i}"):
                dpg.configure_item(f"jframe{i}", show=self.show_frames)
        if dpg.does_item_exist("frames_box"):
            dpg.set_value("frames_box", self.show_frames)

    def _show_measured(self) -> None:
        """Each joint's measured angle beside its commanded slider; off by more than the tolerance: coloured."""

        for i in range(self.model.n):
            if dpg.does_item_exist(f"meas{i}"):
                off = abs(self.q_meas[i] - self.q_cmd[i]) > TRACK_TOLERANCE
                dpg.set_value(f"meas{i}", f"{math.degrees(self.q_meas[i]):+7.1f}°")
                dpg.configure_item(f"meas{i}", color=S.DIFFERS if off else (230, 230, 230))

    def _flagged_links(self) -> set[int]:
        """Links to colour as the safety checks flag them — the two in a self-collision, the tool's
        when it leaves the workspace — judged on the loop's target when the loop flags something,
        on the shown pose without a loop; also whether balance is flagged (the support polygon turns
        that colour) and the last reason in the panel."""


        flagged = self.intent.flagged(self.q_meas, self.q_target, self.safety_flags)
        self.balance_flagged = flagged.balance
        if flagged.reason is not None:
            set_text("safety_reason", flagged.reason)
        return flagged.links

    def _limit_color(self, i: int, q: np.ndarray):
        m = self.model
        span = m.upper[i] - m.lower[i]
        d = min(q[i] - m.lower[i], m.upper[i] - q[i]) / span
        if d < 0.01:
            return S.AT_LIMIT
        if d < 0.08:
            return S.NEAR_LIMIT
        return None   # its own colours

    def update_scene(self) -> None:

        m = self.model
        Fm = m.fk_frames(self.q_meas)
        Fc = m.fk_frames(self.q_cmd)
        Tw = None
        if self.base is not None:
            # support-foot root switching: stand on whichever sole is lower
            other = "r_sole" if self.base.support == "l_sole" else "l_sole"
            if self.base.frame_pose(self.q_meas, other)[2, 3] < self.base.frame_pose(self.q_meas, self.base.support)[2, 3] - 0.002:
                self.base.switch(other, self.q_meas)
            Tw = self.base.body_pose(self.q_meas) if self.world is None else self.world.base
        self.meas.set_poses(Fm, Tw)
        self.ghost.set_poses(Fc, Tw)
        apart = bool(np.max(np.abs(self.q_cmd - self.q_meas)) > GHOST_APART_RAD)
        if apart != self._ghost_shown:   # the command drawn where it is not the measurement
            self.ghost.show(apart)
            self._ghost_shown = apart
        if self.follow_base and Tw is not None:   # the camera goes where the body goes, at its height
            t = self.cam["target"]
            self.cam["target"] = (float(Tw[0, 3]), float(Tw[1, 3]), t[2])
            self._apply_camera()
        eye, target = S.orbit_view(self.cam["yaw"], self.cam["pitch"], self.cam["dist"], self.cam["target"])
        self.meas.order_by_depth(Fm, Tw, eye, np.asarray(target, dtype=np.float64) - eye,
                                 "ground_marks" if self.humanoid else None)
        if self.intent.preview_q is not None:
            self.prev.set_poses(m.fk_frames(self.intent.preview_q), Tw)
        if getattr(self, "shadow_q", None) is not None:
            self.shadow_drawing.set_poses(m.fk_frames(self.shadow_q), Tw)
        if self.leader_shown and self.q_target is not None:
            self.leader_drawing.set_poses(m.fk_frames(self.q_target), Tw)
        if self.show_shapes:
            self.shapes_drawing.set_poses(Fm, Tw)
        for i in range(m.n):
            self.meas.set_link_color(i, self._limit_color(i, self.q_meas))
        self.meas.set_link_color(-1, None)
        if self.show_frames:
            for i in range(m.n):
                T = Fm[1 + i] if Tw is None else Tw @ Fm[1 + i]
                dpg.apply_transform(f"jframe{i}", S.mat(T))
        # the joints' pixels, once a frame, only when something here needs them
        pixels = self._joint_pixels(self.q_meas) if self.show_names or self._over_view() else None
        self._hover_name(pixels)
        if self.show_names:
            self._place_names(pixels)
        for link in self._flagged_links():
            self.meas.set_link_color(link, S.COLLIDING)
        if self.base is not None:
            self._ground_marks(Tw)

    def _ground_marks(self, Tw: np.ndarray) -> None:
        """Support polygon, COM, the planned ZMP and, with physics, the contacts and the CoP
        (twin.ground). Without physics the support is the sole corners on the ground (a foot
        rolling on its toe or heel touches with one)."""
        m, now = self.model, time.monotonic()
        com = Tw[:3, :3] @ m.com(self.q_meas) + Tw[:3, 3]
        planned = self._cmd_zmp.add(now, Tw[:3, :3] @ m.com(self.q_cmd) + Tw[:3, 3])
        if self.world is not None:
            w = self.world
            G.draw("ground_marks", w.contacts[:, :2], None, com, planned, w.cop, w.contacts)
            return
        hl, hw = m.sole_half
        pts = []
        for sole in ("l_sole", "r_sole"):
            T = self.base.frame_pose(self.q_meas, sole)
            for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                corner = T @ [sx * hl, sy * hw, 0, 1]
                if corner[2] < GROUND_TOUCH:
                    pts.append(corner[:2])
        G.draw("ground_marks", np.array(pts).reshape(-1, 2), S.COLLIDING if self.balance_flagged else None, com, planned)

    def _draw_workpiece(self) -> None:

        T, half = self.workpiece
        tris, edges = S.box_mesh([0, 0, 0], half)
        with dpg.draw_node(parent="world", tag="workpiece") as node:
            for a, b in edges:
                dpg.draw_line(list(a), list(b), color=(200, 160, 110, 255), thickness=2)
        dpg.apply_transform(node, S.mat(T))

    def poll_loop(self) -> None:

        if self.client is None:
            return
        try:
            s = self.client.snapshot()
        except Exception as e:  # noqa: BLE001 - the loop may be gone
            set_text("status", f"loop not readable: {e}")
            return
        self.q_meas = s.q_meas
        self.q_cmd = s.q_cmd
        self.q_target = s.q_target
        self._follow_command(s.q_cmd)
        if self.frames % 3 == 0:
            self._show_load(s.load)
        self.safety_flags = int(s.safety_flags)
        self.questions.seen((int(s.board_state), int(s.mode)))
        self._show_measured()
        if self.safety_flags:   # the last reason stays shown until another one comes
            set_text("safety_reason", "safety: " + ", ".join(flag_names(self.safety_flags)))
        t = s.t
        self._show_shadow()
        self._show_world()
        if self.replay is not None:
            self._replay_bar()
        elif self.history and t < self.history[-1][0]:
            self.history = []     # the loop's clock started again
        if self.replay is None:
            self.history.append((t, s.q_cmd.copy(), s.q_meas.copy()))
            self.history = [h for h in self.history if t - h[0] <= max(PLOT_WINDOWS)]
        st = BOARD_STATES.get(int(s.board_state), "?")
        if self.frames % 30 == 0 and self.estimated is None:
            self._check_estimated()
        estimate = "\nmeasured = ESTIMATE (open-loop servos: the commanded pulse)" if self.estimated else ""
        faults = int(s.faults)
        set_text("status", f"board {st}  faults: {fault_names(faults)}  link {'ok' if s.link_ok else 'LOST'}"
                           f"{estimate}\nmotion {'running' if s.motion_running else ('ramp-in' if s.ramping else 'idle')} "
                           f"{self._progress(s)}   safety: "
                           f"{', '.join(flag_names(int(s.safety_flags))) or 'ok'}"
                           + (f"\ntwin {self.fps:.0f} fps" if self.fps > 0 else ""))
        if faults != getattr(self, "_faults_shown", None):   # what to do about each, on hovering the status
            self._faults_shown = faults
            dpg.set_value("faults_fix", fault_fixes(faults) or "no faults")
        if s.event:
            set_text("event", s.event)
        dpg.set_value("timing", f"rate {s.rate_hz:.1f} Hz   jitter p50 {s.jitter_p50_us:.1f} µs  p99 "
                                f"{s.jitter_p99_us:.1f} µs  max {s.jitter_max_us:.0f} µs\n"
                                f"cycle p50 {s.cycle_p50_us:.1f} µs  p99 {s.cycle_p99_us:.1f} µs\n"
                                f"missed deadlines {int(s.misses)}   stale states {int(s.stale_total)}   "
                                f"link errors {int(s.link_errors)}   decoder drops {int(s.decoder_drops)}\n"
                                f"SCHED_FIFO {'yes' if s.sched_fifo else 'no'}  cpu {int(s.cpu)}")
        dpg.set_value("s_hist", [list(np.arange(20) * 100.0 + 50), list(s.jitter_hist)])
        dpg.set_value("board", f"{self.client.name}\nstate {st}\nfaults: {fault_names(faults)}\n{fault_fixes(faults)}")
        if self.frames % 5 == 0 and self.history and not self.plots_paused:
            shown = [h for h in self.history if t - h[0] <= self.plot_window_s]
            ts = [h[0] for h in shown]
            j = self.plot_joint
            dpg.set_value("s_cmd", [ts, [math.degrees(h[1][j]) for h in shown]])
            dpg.set_value("s_meas", [ts, [math.degrees(h[2][j]) for h in shown]])
            dpg.set_value("s_err", [ts, [math.degrees(float(np.max(np.abs(h[1] - h[2])))) for h in shown]])
            for ax in ("px", "py", "ex", "ey"):
                dpg.fit_axis_data(ax)
            dpg.fit_axis_data("hy")

    def _follow_command(self, q_cmd: np.ndarray) -> None:
        """The sliders show what is commanded (a motion's or a jog's way there included), except
        for a while after the user moved one: their own drag wins."""
        if time.monotonic() - getattr(self, "_slider_touched", -1e9) < SLIDER_OWN_S:
            return
        shown = getattr(self, "_slider_shown", None)
        if shown is None:
            shown = self._slider_shown = np.full(self.model.n, np.nan)
        deg = np.degrees(q_cmd)
        for i in np.flatnonzero(~(np.abs(deg - shown) < 0.05)):   # (NaN: never shown)
            if dpg.does_item_exist(f"slider{i}"):
                dpg.set_value(f"slider{i}", float(deg[i]))
                shown[i] = deg[i]

    def _show_load(self, load: np.ndarray) -> None:
        """Each joint's load bar: how much of its servo's torque it uses, coloured by LOAD_LEVELS."""
        shown = getattr(self, "_load_level", None)
        if shown is None:
            shown = self._load_level = [-1] * self.model.n
        frac = np.nan_to_num(np.abs(load), nan=0.0, posinf=1.0)
        for i, f in enumerate(frac):
            if not dpg.does_item_exist(f"load{i}"):
                continue
            dpg.set_value(f"load{i}", float(min(f, 1.0)))
            dpg.configure_item(f"load{i}", overlay=f"{f:.0%}" if f >= 0.005 else "")
            level = next(k for k, (top, _) in enumerate(LOAD_LEVELS) if f < top)
            if level != shown[i]:
                dpg.bind_item_theme(f"load{i}", self._load_themes[level])
                shown[i] = level

    def panel_values(self) -> dict:
        """What the panel shows (degrees): each joint's slider (the command) and its measured angle."""
        sliders = {name: dpg.get_value(f"slider{i}") for i, name in enumerate(self.model.joint_names)
                   if dpg.does_item_exist(f"slider{i}")}
        loads = {name: dpg.get_value(f"load{i}") for i, name in enumerate(self.model.joint_names)
                 if dpg.does_item_exist(f"load{i}")}
        return {"sliders_deg": sliders, "load": loads,
                "measured_deg": {name: math.degrees(float(self.q_meas[i])) for i, name in enumerate(self.model.joint_names)}}

    def _check_estimated(self) -> None:
        """Once the loop says so: are measured positions estimates? Then the plots say it too."""

        info = self.client.info()
        if info.get("leader") and not self.leader_shown:   # teleop: the leader's pose the follower follows
            self.leader_shown = True
            self.leader_drawing.show(True)
            dpg.configure_item("leader_legend", show=True)
        if "position_estimated" in info:
            self.estimated = bool(info["position_estimated"])
            if self.estimated:
                dpg.set_item_label("s_meas", "estimated (commanded pulse)")

    def run(self, max_fps: float = 60.0, duration_s: float | None = None) -> None:

        t0 = time.monotonic()
        total = 0
        last = t0
        count = 0
        period = 1.0 / max_fps
        due = t0   # frames are due on one clock, so a sleep's overshoot is not lost from every frame
        self.frame_times: list[float] = []   # s per frame: reading the loop, the scene and rendering
        while dpg.is_dearpygui_running():
            start = time.monotonic()
            self.poll_loop()
            self.update_scene()
            dpg.render_dearpygui_frame()
            self.frame_times.append(time.monotonic() - start)
            self.frames += 1
            count += 1
            total += 1
            if total == 1:  # said once the window really is there, not when the process was started
                print("twin: window open — press SPACE for e-stop", flush=True)
            now = time.monotonic()
            if now - last >= 1.0:
                self.fps = count / (now - last)
                count = 0
                last = now
            if duration_s is not None and now - t0 > duration_s:
                break
            due = max(due + period, now - period)   # a frame late by more than a period is not caught up
            if due > now:
                time.sleep(due - now)
        elapsed = time.monotonic() - t0
        print(f"twin: {total} frames in {elapsed:.1f} s ({total / max(elapsed, 1e-9):.1f} fps average)", flush=True)

    def screenshot(self, path: str, frames: int = 4) -> None:
        """Render a few frames and write the viewport to a PNG."""

        for k in range(frames):
            self.update_scene()
            if k == frames - 2:
                dpg.output_frame_buffer(file=path)
            dpg.render_dearpygui_frame()

    def close(self) -> None:

        dpg.destroy_context()
