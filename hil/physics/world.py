"""What the robot's body does in the physics emulator, published for the twin while it runs: where
the base is in the world (a fall is seen as a fall), where the robot touches the floor and with how
much force, and the centre of pressure those contacts make.

A seqlocked file (`hil.seqlock`), `<loop>.world` in the runtime folder: the supervisor names it
(`hil.physics.emulate --world FILE`), the physics plant writes it `WORLD_HZ` times a second, the
twin reads it when it is there (`hil.runtime.shadow` has the same arrangement for the shadow).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from hil.seqlock import SeqlockFile

MAX_CONTACTS = 16           # a humanoid on two flat soles touches with 8 corners; room for knees, hands
WORLD_HZ = 50.0
_HEAD = 1 + 3 + 9 + 1 + 1 + 3 + 1   # t, base position, base rotation, fell, tilt, CoP (x, y, valid), contacts
SIZE = _HEAD + 4 * MAX_CONTACTS


def world_path(runtime_dir: str, loop_name: str) -> str:
    return os.path.join(runtime_dir, f"{loop_name}.world")


@dataclass
class World:
    """One record: the base's pose, whether the body fell and its tilt, the floor contacts
    (rows x, y, z, normal force N) and their centre of pressure (None without floor contact)."""

    t: float
    base: np.ndarray            # (4, 4) world pose of the robot's base
    fell: bool
    tilt_deg: float
    cop: np.ndarray | None      # (2,) on the floor
    contacts: np.ndarray        # (k, 4)

    def pack(self) -> np.ndarray:
        v = np.zeros(SIZE)
        v[0] = self.t
        v[1:4] = self.base[:3, 3]
        v[4:13] = self.base[:3, :3].ravel()
        v[13], v[14] = float(self.fell), self.tilt_deg
        if self.cop is not None:
            v[15:17], v[17] = self.cop, 1.0
        k = min(len(self.contacts), MAX_CONTACTS)
        v[18] = k
        v[_HEAD:_HEAD + 4 * k] = np.asarray(self.contacts[:k], dtype=np.float64).ravel()
        return v

    @staticmethod
    def unpack(v: np.ndarray) -> "World":
        base = np.eye(4)
        base[:3, 3] = v[1:4]
        base[:3, :3] = v[4:13].reshape(3, 3)
        k = int(min(max(v[18], 0), MAX_CONTACTS))
        return World(float(v[0]), base, bool(v[13]), float(v[14]), v[15:17].copy() if v[17] else None,
                     v[_HEAD:_HEAD + 4 * k].reshape(k, 4).copy())


def centre_of_pressure(contacts: np.ndarray) -> np.ndarray | None:
    """Where the floor's normal forces balance: their force-weighted mean point (x, y); None when
    nothing presses on the floor."""
    if len(contacts) == 0:
        return None
    f = contacts[:, 3]
    total = float(f.sum())
    if total <= 1e-6:
        return None
    return (contacts[:, :2] * f[:, None]).sum(axis=0) / total


class WorldBlock:
    def __init__(self, path: str, create: bool = False) -> None:
        self.block = SeqlockFile(path, SIZE, create)

    def write(self, world: World) -> None:
        self.block.write(world.pack())

    def read(self) -> World | None:
        v = self.block.read()
        return None if v is None else World.unpack(v)

    def unlink(self) -> None:
        self.block.unlink()
