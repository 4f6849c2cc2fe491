"""The twin's side panel: the E-STOP, the lifecycle's buttons and their questions, the status
lines, the legend, the view's switches and the tabs (joints, Cartesian, plots, timing, board).
Widgets only: what they do is the app's (`twin.app.TwinApp`), which they call."""

from __future__ import annotations

import math

import dearpygui.dearpygui as dpg
import numpy as np

from hil.runtime.stall import STALL_LOAD
from twin import ground as G
from twin import scene as S
from twin.camera import PANEL_W, VIEWS, H, W

LOAD_W = 36          # a joint's load bar in the panel (px)
CHAR_W = 7           # pixels a character of DearPyGui's default font takes
PLOT_WINDOWS = (5.0, 10.0, 30.0, 60.0)   # seconds the plots can keep
# a load bar's colour by the fraction of its servo's stall current: easy, working hard, at the
# load where the loop watches for a stall (hil.runtime.stall)
LOAD_LEVELS = ((0.5, (70, 170, 90)), (STALL_LOAD, (225, 175, 45)), (math.inf, (220, 60, 50)))


def build_panel(app) -> list:
    """The panel's widgets, inside the current container: each calls the app, which sets them by
    their tags every frame. Returns the load bars' themes (one per LOAD_LEVELS row)."""
    _buttons(app)
    _questions(app)
    _lines()
    _legend(app)
    _switches(app)
    if app.load_replay():
        app.build_replay_bar()
    with dpg.tab_bar():
        with dpg.tab(label="Joints"):
            themes = _joints_tab(app)
        with dpg.tab(label="Cartesian"):
            _cartesian_tab(app)
        with dpg.tab(label="Plots"):
            _plots_tab(app)
        with dpg.tab(label="Timing"):
            _timing_tab()
        with dpg.tab(label="Board"):
            dpg.add_text("", tag="board")
    return themes


def _buttons(app) -> None:
    """The E-STOP, the lifecycle's requests, the preview's."""
    with dpg.theme() as red:
        with dpg.theme_component(dpg.mvButton):
            dpg.add_theme_color(dpg.mvThemeCol_Button, (190, 25, 25))
            dpg.add_theme_color(dpg.mvThemeCol_ButtonHovered, (230, 40, 40))
            dpg.add_theme_color(dpg.mvThemeCol_ButtonActive, (255, 60, 60))
    b = dpg.add_button(label="E-STOP  (space)", width=-1, height=64, callback=lambda *a: app.estop(), tag="estop")
    dpg.bind_item_theme(b, red)
    with dpg.group(horizontal=True):
        dpg.add_button(label="Enable...", callback=lambda *a: app.ask("confirm"))
        dpg.add_button(label="Disable", callback=lambda *a: app.ask("confirm_disable") if app.humanoid
                       else app.post("disable"))
        dpg.add_button(label="Clear fault", callback=lambda *a: app.post("clear_fault"))
        dpg.add_button(label="Start", callback=lambda *a: app.post("start_motion"))
        dpg.add_button(label="Stop", callback=lambda *a: app.post("stop_motion"))
    with dpg.group(horizontal=True):   # a pose dragged in the view or previewed in Cartesian: sent only from here
        dpg.add_button(label="Send preview", tag="send_preview", callback=lambda *a: app.cart_send())
        dpg.add_button(label="Drop preview", callback=lambda *a: app.drop_preview())


def _questions(app) -> None:
    """The confirmations torque asks for (decided in twin.questions)."""
    # not modal: a modal window takes every click, the E-STOP's too (SPACE alone got through)
    with dpg.window(label="Enable the robot?", show=False, tag="confirm", no_resize=True, no_collapse=True,
                    pos=(W // 2 - 160, H // 2 - 60), width=320):
        dpg.add_text("Torque on. The robot holds its measured pose\nand moves only when you ask.")
        with dpg.group(horizontal=True):
            dpg.add_button(label="Enable", callback=lambda *a: (app.post("enable"), app.close_question("confirm")))
            dpg.add_button(label="Cancel", callback=lambda *a: app.close_question("confirm"))
    with dpg.window(label="Disable the robot?", show=False, tag="confirm_disable", no_resize=True,
                    no_collapse=True, pos=(W // 2 - 180, H // 2 - 60), width=360):
        dpg.add_text("Torque off. A humanoid standing on its feet falls:\nlower it to the floor or hold it first.")
        with dpg.group(horizontal=True):
            dpg.add_button(label="Disable", callback=lambda *a: (app.post("disable"),
                                                                app.close_question("confirm_disable")))
            dpg.add_button(label="Cancel", callback=lambda *a: app.close_question("confirm_disable"))


def _lines() -> None:
    """Status, event, safety, shadow and physics lines."""
    # these lines take no room while they say nothing (set_text shows them)
    dpg.add_text("", tag="status", wrap=PANEL_W - 20, show=False)
    with dpg.tooltip("status", tag="status_tip"):
        dpg.add_text("", tag="faults_fix", wrap=PANEL_W)
    dpg.add_text("", tag="event", wrap=PANEL_W - 20, color=(255, 200, 120), show=False)
    dpg.add_text("", tag="safety_reason", wrap=PANEL_W - 20, color=S.COLLIDING[:3], show=False)
    dpg.add_text("", tag="shadow_text", wrap=PANEL_W - 20, color=S.SHADOW[:3], show=False)
    dpg.add_text("", tag="world_text", wrap=PANEL_W - 20, show=False)


def _legend(app) -> None:
    """What each colour in the 3D view is."""
    measured = ("measured (solid)", S.OWN_COLOURS) if app.meshes else ("measured", S.MEASURED)
    legend = (measured, ("commanded", S.GHOST), ("preview", S.PREVIEW),
              ("near limit", S.NEAR_LIMIT), ("at limit", S.AT_LIMIT), ("collision", S.COLLIDING))
    rows = (legend[:3], legend[3:]) + ((G.LEGEND,) if app.humanoid else ())
    for k, row in enumerate(rows):   # the legend, whole: what each colour in the 3D view is
        with dpg.group(horizontal=True):
            for text, color in row:
                dpg.add_text(text, color=color[:3])
            if k == 0:   # shown when the loop follows a leader arm (hil teleop)
                dpg.add_text("leader", tag="leader_legend", color=S.LEADER[:3], show=False)


def _switches(app) -> None:
    """The view's scale, overlays and cameras."""
    m = app.model
    with dpg.group(horizontal=True):
        dpg.add_text(f"grid squares {S.grid_step(m) * 100:.0f} cm", tag="scale", color=(160, 160, 170))
        dpg.add_checkbox(label="joint frames (xyz: rgb)", tag="frames_box",
                         default_value=app.show_frames, callback=lambda s, a: app.set_frames(a))
        dpg.add_checkbox(label="names", tag="names_box", default_value=app.show_names,
                         callback=lambda s, a: app.set_names(a))
    with dpg.group(horizontal=True):
        for name in VIEWS:
            dpg.add_button(label=name, tag=f"view_{name}", callback=lambda s, a, u: app.set_view(u),
                           user_data=name)
        dpg.add_button(label="fit (F)", tag="view_fit", callback=lambda *a: app.fit())
        if app.base is not None:
            dpg.add_checkbox(label="follow", tag="follow_box", default_value=app.follow_base,
                             callback=lambda s, a: setattr(app, "follow_base", a))
        dpg.add_checkbox(label="shapes", tag="shapes_box", default_value=app.show_shapes,
                         callback=lambda s, a: app.set_shapes(a))


def _cartesian_tab(app) -> None:
    """A frame's target in millimetres and degrees, previewed by IK, sent only from here."""
    m = app.model
    frames = [m.tool_frame] if not app.humanoid else [
        f for f in ("l_hand", "r_hand", "l_sole", "r_sole") if f in m.frame_names]
    dpg.add_combo(frames, default_value=frames[0], tag="cart_frame", width=150)
    for k in ("x", "y", "z"):
        dpg.add_input_float(label=f"{k} (mm)", tag=f"cart_{k}", width=150, step=5.0)
    if not app.humanoid:
        for k in ("roll", "pitch", "yaw"):
            dpg.add_input_float(label=f"{k} (deg)", tag=f"cart_{k}", width=150, step=5.0)
    with dpg.group(horizontal=True):
        dpg.add_button(label="From current", callback=lambda *a: app.cart_from_current())
        dpg.add_button(label="Preview IK", callback=lambda *a: app.cart_preview())
        dpg.add_button(label="Send", callback=lambda *a: app.cart_send())
    dpg.add_text("", tag="cart_msg", wrap=PANEL_W - 20)


def _plots_tab(app) -> None:
    """One joint's command and measurement, and the tracking error, over a chosen window."""
    m = app.model
    with dpg.group(horizontal=True):
        dpg.add_combo(list(m.joint_names), default_value=m.joint_names[0], tag="plot_joint", width=170,
                      callback=lambda s, a: setattr(app, "plot_joint", m.joint_names.index(a)))
        dpg.add_combo([f"{w:g} s" for w in PLOT_WINDOWS], default_value=f"{app.plot_window_s:g} s",
                      tag="plot_window", width=60,
                      callback=lambda s, a: setattr(app, "plot_window_s", float(a.split()[0])))
        dpg.add_checkbox(label="pause", tag="plot_pause",
                         callback=lambda s, a: setattr(app, "plots_paused", a))
    with dpg.plot(label="commanded vs measured (deg)", height=170, width=-1):
        dpg.add_plot_axis(dpg.mvXAxis, label="t (s)", tag="px")
        with dpg.plot_axis(dpg.mvYAxis, tag="py"):
            dpg.add_line_series([], [], label="commanded", tag="s_cmd")
            dpg.add_line_series([], [], label="measured", tag="s_meas")
    with dpg.plot(label="tracking error (deg)", height=140, width=-1):
        dpg.add_plot_axis(dpg.mvXAxis, label="t (s)", tag="ex")
        with dpg.plot_axis(dpg.mvYAxis, tag="ey"):
            dpg.add_line_series([], [], label="max |cmd - meas|", tag="s_err")


def _timing_tab() -> None:
    """The loop's timing figures and its period jitter."""
    dpg.add_text("", tag="timing")
    with dpg.plot(label="period jitter histogram (µs)", height=200, width=-1):
        dpg.add_plot_axis(dpg.mvXAxis, label="|period - T| (µs)")
        with dpg.plot_axis(dpg.mvYAxis, tag="hy"):
            dpg.add_bar_series(list(np.arange(20) * 100.0 + 50), [0.0] * 20, weight=80, tag="s_hist")


def _joints_tab(app) -> list:
    """Per joint: its measured angle, its load bar and its slider (the command; drag to jog)."""
    m = app.model
    # the sliders as wide as leaves the longest joint name whole beside them
    slider_w = max(70, min(200, PANEL_W - 108 - LOAD_W - CHAR_W * max(len(n) for n in m.joint_names)))
    themes = []
    for _, color in LOAD_LEVELS:
        with dpg.theme() as theme:
            with dpg.theme_component(dpg.mvProgressBar):
                dpg.add_theme_color(dpg.mvThemeCol_PlotHistogram, color)
        themes.append(theme)
    dpg.add_text("measured  load  commanded (drag to jog)", color=(160, 160, 170))
    for i, name in enumerate(m.joint_names):
        with dpg.group(horizontal=True):
            dpg.add_text(f"{math.degrees(m.home[i]):+7.1f}°", tag=f"meas{i}")
            dpg.add_progress_bar(tag=f"load{i}", width=LOAD_W, default_value=0.0, overlay="")
            with dpg.tooltip(f"load{i}"):
                dpg.add_text(f"{name}: the servo's current as a share of its stall current (its torque "
                             f"limit); red from {STALL_LOAD:.0%}, where the loop watches for a stall",
                             wrap=300)
            dpg.add_slider_float(label=name, tag=f"slider{i}", width=slider_w,
                                 min_value=math.degrees(m.lower[i]), max_value=math.degrees(m.upper[i]),
                                 default_value=math.degrees(m.home[i]), format="%.1f°",
                                 callback=app.on_slider)
    return themes
