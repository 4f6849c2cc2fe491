"""Floating base with support-foot root switching (Sun et al. 2007).

The humanoid's kinematic tree is rooted at the body, but in the world the robot stands on a
support foot that does not move. So the body's world pose follows from the support sole's:

    world_T_body = world_T_support · (body_T_support(q))⁻¹

(the paper's chain of inverted leg transforms), recomputed for every new q. When support changes,
the new support sole's world pose is frozen at its current value, so at the switch nothing moves.
Units: metres, radians.
"""

from __future__ import annotations

import numpy as np

from hil.errors import InputError
from hil.kinematics.ik import check_pose

FALL_TILT_DEG = 50.0   # a body leaning this far from upright has fallen (the loop from its IMU, physics from its body)


def tilt_of(R: np.ndarray) -> float:
    """How far a rotation's z axis leans from the world's vertical (rad)."""
    return float(np.arccos(np.clip(R[2, 2], -1.0, 1.0)))


_LAST_ROW = np.array([0.0, 0.0, 0.0, 1.0])


def inverse_transform(T: np.ndarray) -> np.ndarray:
    """Inverse of a rigid transform (4, 4), without a general matrix inverse (a walk's checks
    call it for every sample: filled in place, not from an identity)."""
    Rt = T[:3, :3].T
    out = np.empty((4, 4))
    out[:3, :3] = Rt
    out[:3, 3] = -(Rt @ T[:3, 3])
    out[3] = _LAST_ROW
    return out


def inverse_transforms(T: np.ndarray) -> np.ndarray:
    """`inverse_transform` of each of a stack of rigid transforms (..., 4, 4), at once."""
    Rt = np.swapaxes(T[..., :3, :3], -1, -2)
    out = np.zeros(T.shape)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -np.matmul(Rt, T[..., :3, 3:4])[..., 0]
    out[..., 3, 3] = 1.0
    return out


class FloatingBase:
    """World pose of a tree robot standing on one of its frames (the support).

    `support` is a frame name (e.g. "l_sole"); `world_T_support` its pose in the world. If not
    given, the support sole is put flat on the ground (z = 0) under its position at `q`, so the
    body starts above the world origin's neighbourhood at the right height.
    """

    def __init__(self, model, support: str, q=None, world_T_support=None) -> None:
        self.model = model
        self._support = model.frame_names[model.frame_index(support)]
        q = model.home if q is None else model._as_q(q)
        if world_T_support is None:
            body_T_support = model.fk_frame(q, self._support)
            world_T_support = np.eye(4)
            world_T_support[:2, 3] = body_T_support[:2, 3]
            yaw = np.arctan2(body_T_support[1, 0], body_T_support[0, 0])
            c, s = np.cos(yaw), np.sin(yaw)
            world_T_support[:2, :2] = [[c, -s], [s, c]]
        self._world_T_support = check_pose(world_T_support, "world_T_support").copy()
        self.switches = 0

    @property
    def support(self) -> str:
        """Name of the frame the robot currently stands on."""
        return self._support

    @property
    def world_T_support(self) -> np.ndarray:
        """World pose (4, 4) of the support frame (constant between switches)."""
        return self._world_T_support.copy()

    def body_pose(self, q) -> np.ndarray:
        """world_T_body (4, 4) at joint angles q."""
        body_T_support = self.model.fk_frame(q, self._support)
        return self._world_T_support @ inverse_transform(body_T_support)

    def frame_pose(self, q, frame: str | int) -> np.ndarray:
        """world_T_frame (4, 4) of any frame at q."""
        return self.body_pose(q) @ self.model.fk_frame(q, frame)

    def com(self, q, body_pose: np.ndarray | None = None) -> np.ndarray:
        """Centre of mass (3,) in the world at q (`body_pose`: this q's, if the caller has it)."""
        T = self.body_pose(q) if body_pose is None else body_pose
        return T[:3, :3] @ self.model.com(q) + T[:3, 3]

    def switch(self, support: str, q) -> None:
        """Make `support` the support frame, freezing its current world pose (computed at q)."""
        name = self.model.frame_names[self.model.frame_index(support)]
        if name == self._support:
            return
        new_pose = self.frame_pose(q, name)
        if not np.all(np.isfinite(new_pose)):
            raise InputError(f"cannot switch support to {name!r}: its pose is not finite")
        self._world_T_support = new_pose
        self._support = name
        self.switches += 1
