"""Servos that turn a joint through a transmission: a gear train's input, a linkage's plate, a
differential's two gears (each turned by both of the joints it drives). The host plans the joints
the mechanism outputs; the servos are told, and report, angles of their own:

    servo angle s = matrix · q + offset          (one row per servo, in the config's joint order)

A servo on a joint of its own is a row of the identity. The matrix is square and invertible (the
board config checks it: hil.board_config), so readings give q back.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class ServoMix:
    """Kept as tuples, a config is compared and written as plain data; the arrays are made once."""

    matrix: tuple[tuple[float, ...], ...]
    offset: tuple[float, ...]

    @classmethod
    def of(cls, matrix, offset) -> "ServoMix":
        return cls(tuple(tuple(float(x) for x in row) for row in np.asarray(matrix)),
                   tuple(float(x) for x in np.asarray(offset)))

    @cached_property
    def _m(self) -> np.ndarray:
        return np.array(self.matrix, dtype=np.float64)

    @cached_property
    def _inverse(self) -> np.ndarray:
        return np.linalg.inv(self._m)

    @cached_property
    def _offset(self) -> np.ndarray:
        return np.array(self.offset, dtype=np.float64)

    def mixed(self) -> list[int]:
        """The servos (rows) that are not a joint's own."""
        m = self._m
        return [k for k in range(len(m)) if not (m[k, k] == 1.0 and np.count_nonzero(m[k]) == 1
                                                 and self.offset[k] == 0.0)]

    def servo_angles(self, q: np.ndarray) -> np.ndarray:
        """A joint not commanded (NaN) leaves every servo that turns it uncommanded (NaN)."""
        m, q = self._m, np.asarray(q, dtype=np.float64)
        idle = ~np.isfinite(q)
        s = m @ np.where(idle, 0.0, q) + self._offset
        s[(m[:, idle] != 0.0).any(axis=1)] = np.nan
        return s

    def joint_angles(self, s: np.ndarray) -> np.ndarray:
        return self._inverse @ (np.asarray(s, dtype=np.float64) - self._offset)

    def servo_rates(self, qd: np.ndarray) -> np.ndarray:
        return self._m @ np.asarray(qd, dtype=np.float64)

    def joint_rates(self, sd: np.ndarray) -> np.ndarray:
        return self._inverse @ np.asarray(sd, dtype=np.float64)

    def matrix_t_times(self, forces: np.ndarray) -> np.ndarray:
        """The joints' torques from the servos' (virtual work: τ = Mᵀ · f)."""
        return self._m.T @ np.asarray(forces, dtype=np.float64)

    def driven_by(self, on: np.ndarray) -> np.ndarray:
        """Which joints are held, given which servos have their torque on: a joint is held where
        every servo that turns it is."""
        m = self._m != 0.0
        return np.array([bool(np.all(np.asarray(on)[m[:, j]])) for j in range(m.shape[1])])
