"""A running loop's run card: what a remote (`hil ctl`) needs to plan for it and to name, jog and
move its joints — its robot, bus map, compensation and pace, and the robot's joints, ranges and
poses as the loop checks them. Kept beside the loop's block in this user's private runtime folder;
read without loading the robot (or its compiled kernels), so that `hil ctl status` answers fast.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass

import numpy as np

from hil.errors import HilError
from hil.runtime.shared import attachment_path

FACTS, BUS = "card.json", "bus.pkl"


@dataclass(frozen=True)
class RobotFacts:
    """The loop's robot as it checks it (a board config's narrower ranges applied)."""

    name: str
    kind: str
    joint_names: tuple
    lower: np.ndarray
    upper: np.ndarray
    velocity_limit: np.ndarray
    poses: dict
    floating: bool    # stands on its feet, its base free in the world (the model says: RobotModel.floating)

    @classmethod
    def of(cls, model) -> "RobotFacts":
        return cls(model.name, model.kind, tuple(model.joint_names), model.lower.copy(), model.upper.copy(),
                   model.velocity_limit.copy(), {k: np.asarray(v, float).copy() for k, v in model.poses.items()},
                   bool(model.floating))

    @property
    def n(self) -> int:
        return len(self.joint_names)

    def joint_index(self, name: str) -> int:
        return self.joint_names.index(name)


def write(loop: str, model, robot: str, bus, compensate: bool, speed: float, strict: bool) -> None:
    """The card of the loop `loop` (written by the loop at its start)."""
    facts = RobotFacts.of(model)
    card = {"robot": robot, "compensate": compensate, "speed": speed, "strict": strict, "name": facts.name,
            "kind": facts.kind, "joints": list(facts.joint_names), "lower": facts.lower.tolist(),
            "upper": facts.upper.tolist(), "velocity": facts.velocity_limit.tolist(),
            "poses": {k: v.tolist() for k, v in facts.poses.items()}, "floating": facts.floating}
    _write(attachment_path(loop, 0, FACTS), json.dumps(card).encode())
    _write(attachment_path(loop, 0, BUS), pickle.dumps(bus))


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _read(path: str, loop: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            return f.read()
    except OSError as e:
        raise HilError(f"{loop}: its run card cannot be read ({e.strerror}); is it a loop of this hil version?") \
            from None


def read(loop: str) -> dict:
    """The card of `loop` (its settings; `facts()` for its robot)."""
    try:
        card = json.loads(_read(attachment_path(loop, 0, FACTS), loop))
    except ValueError:
        raise HilError(f"{loop}: its run card is not readable JSON") from None
    if not isinstance(card, dict) or "robot" not in card:
        raise HilError(f"{loop}: its run card says nothing of its robot")
    return card


def facts(loop: str) -> RobotFacts:
    c = read(loop)
    try:
        return RobotFacts(str(c["name"]), str(c["kind"]), tuple(c["joints"]), np.array(c["lower"], float),
                          np.array(c["upper"], float), np.array(c["velocity"], float),
                          {k: np.array(v, float) for k, v in c["poses"].items()}, bool(c["floating"]))
    except (KeyError, TypeError, ValueError):
        raise HilError(f"{loop}: its run card does not describe a robot") from None


def bus(loop: str):
    """The loop's bus map (hil.board_config.BusConfig), or None (our own protocol's board). Its
    folder holds nothing anyone else wrote (see runtime_dir): the pickle is the loop's own."""
    try:
        return pickle.loads(_read(attachment_path(loop, 0, BUS), loop))
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        raise HilError(f"{loop}: its bus map in the run card cannot be read") from None
