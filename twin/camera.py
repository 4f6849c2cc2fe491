"""What the twin's 3D view shows and from where: the window's geometry, the orbit camera (a dict of
yaw, pitch, distance, target and, for a drawing's orthographic view, its height), its presets, a
camera fitted to the robot, and the camera's moves (orbit, pan, zoom) as the mouse asks. NumPy only:
`TwinApp` applies the matrices to DearPyGui's scene."""

from __future__ import annotations

import math

import numpy as np

from hil.display import screen_size
from hil.kinematics.floating import FloatingBase
from twin import scene as S
from twin.meshes import link_meshes

# the window: 1280×720, or the screen it opens on where that is smaller (placed at its top left)
W, H = (min(a, b) for a, b in zip((1280, 720), screen_size()))
# DearPyGui's clip-space mapping shows only half of the nominal field of view (see scene.project)
FOV = math.radians(75)
PANEL_W = 410
VIEW_W, VIEW_H = W - PANEL_W - 30, H - 40
# the camera's presets (yaw, pitch of an orbit camera, z up): side looks from −y toward +y (x to the
# right), front from +x back at the robot (y to the right), top down z (x right, y up); these three
# are orthographic, as drawings are, and iso a perspective from the front-right-above
VIEWS = {"front": (0.0, 0.0), "side": (-math.pi / 2, 0.0), "top": (-math.pi / 2, math.radians(89.9)),
         "iso": (math.radians(-45), math.radians(35.26))}
ORTHOGRAPHIC = ("front", "side", "top")
FIT_MARGIN = 0.9     # of the view the robot fills, at most

CAMERA = {"puma560": dict(yaw=math.radians(-50), pitch=math.radians(18), dist=3.6, target=(0.0, 0.25, -0.25)),
          "humanoid17": dict(yaw=math.radians(-35), pitch=math.radians(15), dist=1.1, target=(0.03, 0.0, 0.24))}


def default_camera(model, meshes: dict | None = None) -> dict:
    """The two shipped robots' views, set by hand; any other robot fitted whole at its home pose,
    seen from the front-right-above (`meshes`: what the twin draws of it, default its own)."""
    if model.name in CAMERA:
        return dict(CAMERA[model.name])
    meshes = link_meshes(model) if meshes is None else meshes
    Tw = FloatingBase(model, "l_sole", model.home).body_pose(model.home) if model.floating else np.eye(4)
    return fitted(robot_points(model, S.link_bounds(model, meshes), model.home, Tw),
                  math.radians(-40), math.radians(18), ortho=False)


def robot_points(model, bounds: dict, q: np.ndarray, Tw: np.ndarray) -> np.ndarray:
    """World points that bound the robot at pose q, its base at Tw (`bounds`: scene.link_bounds)."""
    F = model.fk_frames(q)
    return np.concatenate([pts @ (Tw @ F[link + 1])[:3, :3].T + (Tw @ F[link + 1])[:3, 3]
                           for link, pts in bounds.items()])


def fitted(points: np.ndarray, yaw: float, pitch: float, ortho: bool) -> dict:
    """A camera looking from (yaw, pitch) that shows all of `points`, filling FIT_MARGIN of the view."""
    eye, target = S.orbit_view(yaw, pitch, 1.0, (0.0, 0.0, 0.0))
    V = S.look_at(eye, target)
    right, up, back = V[0, :3], V[1, :3], V[2, :3]
    lo, hi = points.min(axis=0), points.max(axis=0)
    centre = (lo + hi) / 2
    d = points - centre
    x, y, z = np.abs(d @ right), np.abs(d @ up), d @ back
    aspect = VIEW_W / VIEW_H
    cam = dict(yaw=yaw, pitch=pitch, target=tuple(float(v) for v in centre))
    # (DearPyGui's clip space shows |x|, |y| ≤ 0.5, not ≤ 1: scene.project)
    if ortho:
        cam["ortho"] = max(float(y.max()), float(x.max()) / aspect, 0.01) / (0.5 * FIT_MARGIN)
        cam["dist"] = max(2.0 * float(np.linalg.norm(hi - lo)), 0.5)
    else:
        t = math.tan(FOV / 2) * 0.5 * FIT_MARGIN
        cam["dist"] = max(float(np.max(z + np.maximum(y / t, x / (t * aspect)))), 0.2)
    return cam


def camera_matrices(cam: dict) -> tuple[np.ndarray, np.ndarray]:
    """(projection, view) of a camera as NumPy matrices: what the view shows, and what tests project
    points with."""
    eye, target = S.orbit_view(cam["yaw"], cam["pitch"], cam["dist"], cam["target"])
    aspect = VIEW_W / VIEW_H
    if cam.get("ortho"):
        h = cam["ortho"]
        P = S.orthographic(h * aspect, h, 0.01, 4 * cam["dist"])
    else:
        P = S.perspective(FOV, aspect, 0.05, 50.0)
    return P, S.look_at(eye, target)


ORBIT_RAD_PER_PX = 0.008    # a drag turns the camera this much per pixel
PAN_PER_PX = 0.0015         # of the camera's distance, per pixel


def orbit(cam: dict, dx: float, dy: float) -> None:
    """Turn the camera about its target by a drag of (dx, dy) pixels (pitch kept off the poles)."""
    cam["yaw"] -= dx * ORBIT_RAD_PER_PX
    cam["pitch"] = min(1.5, max(-1.2, cam["pitch"] + dy * ORBIT_RAD_PER_PX))


def pan(cam: dict, dx: float, dy: float) -> None:
    """Move the camera's target across the view by a drag of (dx, dy) pixels."""
    k = cam["dist"] * PAN_PER_PX
    right = np.array([-math.sin(cam["yaw"]), math.cos(cam["yaw"]), 0.0])
    cam["target"] = tuple(np.asarray(cam["target"], float) - right * dx * k + np.array([0, 0, 1.0]) * dy * k)


def zoom(cam: dict, closer: bool) -> None:
    """One step of the wheel: 10 % closer or further (an orthographic view's height with it)."""
    cam["dist"] = min(20.0, max(0.2, cam["dist"] * (0.9 if closer else 1.1)))
    if cam.get("ortho"):
        cam["ortho"] *= 0.9 if closer else 1.1
