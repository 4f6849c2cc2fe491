"""Roll, pitch and yaw: the one convention used at the boundary (CLI, twin, G-code placement),
R = Rz(yaw) · Ry(pitch) · Rx(roll). Radians here; the callers convert degrees."""

from __future__ import annotations

import math

import numpy as np


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Rotation Rz(yaw) @ Ry(pitch) @ Rx(roll) (3×3)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr]])


def rpy_angles(R) -> tuple[float, float, float]:
    """(roll, pitch, yaw) of R = Rz(yaw) Ry(pitch) Rx(roll); at gimbal lock all of it in yaw."""
    pitch = math.atan2(-R[2][0], math.hypot(R[0][0], R[1][0]))
    if abs(math.cos(pitch)) < 1e-9:
        return 0.0, pitch, math.atan2(-R[0][1], R[1][1])
    return math.atan2(R[2][1], R[2][2]), pitch, math.atan2(R[1][0], R[0][0])


def axis_angle_matrix(rotvec) -> np.ndarray:
    """Rotation by |rotvec| radians about rotvec's direction (Rodrigues; 3×3, identity for zero)."""
    v = np.asarray(rotvec, dtype=np.float64)
    angle = float(np.linalg.norm(v))
    if angle < 1e-15:
        return np.eye(3)
    k = v / angle
    K = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    return np.eye(3) + math.sin(angle) * K + (1.0 - math.cos(angle)) * (K @ K)
