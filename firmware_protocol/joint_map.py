"""Board frame ↔ joint frame: a board's zero error and direction per joint, as calibration finds them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class JointMap:
    """Board frame ↔ joint frame (radians). Measurements: q = sign · (b − offset); commands:
    b = q + offset. `offset` is the board's zero error; `sign` −1 marks a joint whose measurement
    runs against its command (a reversed encoder or a servo mounted the other way round)."""

    offset: np.ndarray
    sign: np.ndarray

    @classmethod
    def identity(cls, n: int) -> "JointMap":
        return cls(np.zeros(n), np.ones(n))

    def to_joint(self, b: np.ndarray) -> np.ndarray:
        """A board reading (rad) as a joint angle."""
        return self.sign * (b - self.offset)

    def to_board(self, q: np.ndarray) -> np.ndarray:
        """A joint target as the board's command (rad)."""
        return q + self.offset

    def reading(self, q: np.ndarray) -> np.ndarray:
        """What the board reads with the joint at q: the inverse of `to_joint`."""
        return self.sign * q + self.offset

    def velocity_to_joint(self, v_board: np.ndarray) -> np.ndarray:
        """A board velocity reading (rad/s) in the joint frame."""
        return self.sign * v_board
