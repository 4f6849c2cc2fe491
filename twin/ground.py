"""The marks a humanoid's twin draws on the floor: the support polygon, the centre of mass's
projection, the ZMP the motion asks for and, with the robot in physics, where the floor is
actually touched and the centre of pressure those contacts make.

The planned ZMP is the commanded pose's (the cart-table model on its centre of mass over the last
fraction of a second); the centre of pressure is measured (physics: `hil.physics.world`). Where the
two part, the robot is not balancing the way the plan does.
"""

from __future__ import annotations

import dearpygui.dearpygui as dpg
import numpy as np

SUPPORT = (250, 250, 120, 255)
COM = (255, 255, 255, 255)
ZMP = (80, 255, 255, 255)
COP = (200, 255, 0, 255)
CONTACT = (250, 250, 120, 255)
LEGEND = (("CoM", COM), ("planned ZMP", ZMP), ("CoP (physics)", COP), ("support", SUPPORT))
HISTORY_S = 0.3      # the centre of mass's history the ZMP is estimated over
LIFT = 0.001         # marks drawn this far above the floor, not inside it


def convex_hull(points: np.ndarray) -> np.ndarray:
    """The convex hull of 2-D points, counter-clockwise (Andrew's monotone chain)."""
    pts = sorted({(float(x), float(y)) for x, y in points})
    if len(pts) < 3:
        return np.array(pts).reshape(-1, 2)

    def half(seq):
        out: list[tuple[float, float]] = []
        for p in seq:
            while len(out) >= 2 and ((out[-1][0] - out[-2][0]) * (p[1] - out[-2][1])
                                     - (out[-1][1] - out[-2][1]) * (p[0] - out[-2][0])) <= 0:
                out.pop()
            out.append(p)
        return out[:-1]

    return np.array(half(pts) + half(pts[::-1]))


MIN_STEP_S = 0.02


class CartTableZmp:
    """The ZMP of a centre of mass seen over time: x − z/g·ẍ (the cart-table model), ẍ from the
    oldest, middle and newest of the last HISTORY_S seconds of positions."""

    def __init__(self) -> None:
        self.hist: list[tuple[float, np.ndarray]] = []

    def add(self, now: float, com: np.ndarray) -> np.ndarray:
        self.hist.append((now, com))
        self.hist = [h for h in self.hist if now - h[0] < HISTORY_S]
        if len(self.hist) >= 3:
            (t0, c0), (t1, c1), (t2, c2) = self.hist[0], self.hist[len(self.hist) // 2], self.hist[-1]
            # over a few frames at least: samples milliseconds apart (a screenshot's quick frames)
            # make an acceleration of their noise
            if t2 - t1 > MIN_STEP_S and t1 - t0 > MIN_STEP_S:
                acc = ((c2 - c1) / (t2 - t1) - (c1 - c0) / (t1 - t0)) / ((t2 - t0) / 2)
                return com[:2] - com[2] / 9.81 * acc[:2]
        return com[:2].copy()


def _cross(p, color, parent: str, d: float = 0.006) -> None:
    x, y = float(p[0]), float(p[1])
    dpg.draw_line([x - d, y, LIFT], [x + d, y, LIFT], color=color, thickness=2, parent=parent)
    dpg.draw_line([x, y - d, LIFT], [x, y + d, LIFT], color=color, thickness=2, parent=parent)


def draw(parent: str, support: np.ndarray, flagged_color, com: np.ndarray, zmp: np.ndarray,
         cop: np.ndarray | None = None, contacts: np.ndarray | None = None) -> None:
    """Everything on the floor, again (the node's old marks go): `support` the floor points the
    robot stands on (their hull is drawn; in `flagged_color` if given), `contacts` rows (x, y, z,
    N) drawn as dots that grow with their force."""
    dpg.delete_item(parent, children_only=True)
    ring = convex_hull(support) if len(support) >= 3 else np.zeros((0, 2))
    if len(ring) >= 3:
        pts = [[float(x), float(y), LIFT] for x, y in ring]
        for a, b in zip(pts, pts[1:] + pts[:1]):
            dpg.draw_line(a, b, color=flagged_color or SUPPORT, thickness=2, parent=parent)
    if contacts is not None:
        for x, y, z, force in contacts:
            r = 0.002 + min(max(force, 0.0), 20.0) * 0.0003   # 2 mm, up to 8 mm at 20 N
            dpg.draw_circle([float(x), float(y), LIFT], r, color=CONTACT, fill=CONTACT, parent=parent)
    _cross(com, COM, parent)
    _cross(zmp, ZMP, parent)
    if cop is not None:
        _cross(cop, COP, parent, d=0.009)
