"""Servo models as data: what each joint's servo does, for physics and for plans.

A robot's TOML (or a URDF robot's side file) and a board config may carry a `[servo]` table:

    [servo]                          # every joint
    preset = "XL430-W250"            # a preset from data/servos/presets.toml, or the numbers themselves:
    kp_nm_per_rad = 20.0             # stiffness: torque = kp · (target − angle)
    damping_nms_per_rad = 0.1
    armature_kgm2 = 0.004            # the motor's inertia seen at the joint
    friction_nm = 0.05               # Coulomb friction
    torque_limit_nm = 1.5            # the most it gives (stall)
    torque_speed = [3.3, 10.0]       # optional: full torque up to 3.3 rad/s, none at 10 rad/s
    compensation_margin = 1.5        # optional: commands carry this × the sag τ/kp (default 1.5)

    [servo.joint.l_knee]             # one joint: the same keys, over the table above
    torque_limit_nm = 2.0

A robot without a table gets the `ideal` preset: a stiff servo that declares no stiffness, so
plans carry no compliance compensation for it (`ServoTable.declared`). Units SI.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hil.errors import ConfigError

PRESETS_FILE = Path(__file__).resolve().parent / "data" / "servos" / "presets.toml"
NUMBER_KEYS = ("kp_nm_per_rad", "damping_nms_per_rad", "armature_kgm2", "friction_nm", "torque_limit_nm")
OPTIONAL_KEYS = ("torque_per_amp_nm", "compensation_margin")
# A plan's commands carry its compliance compensation with a margin toward the stiff side: a robot
# that sags a little more than planned (its servos softer, its links heavier than the model says)
# lands its swing foot early and on an edge, which tips it, while one that stands a little taller
# does not. Measured in MuJoCo (docs/physics.md, "Compliance compensation"): humanoid17's walks
# stay up with servos 20 % softer or 25 % stiffer, links 15 % lighter or heavier, 30 % less
# friction at 1.5×, and fall with the softer or heavier robots at 1×. Servos whose makers
# identified them can be compensated as they are (`compensation_margin = 1`): a robot that stands
# taller than planned also steps shorter (the OP3's side file says how much).
COMPENSATION_MARGIN = 1.5
MARGIN_RANGE = (1.0, 3.0)
KEYS = {*NUMBER_KEYS, *OPTIONAL_KEYS, "preset", "torque_speed", "joint"}


@dataclass(frozen=True)
class Servo:
    """One joint's servo, SI units; `preset` names where the numbers came from."""

    kp_nm_per_rad: float
    damping_nms_per_rad: float
    armature_kgm2: float
    friction_nm: float
    torque_limit_nm: float
    torque_speed: tuple[float, float] | None = None   # (full torque up to, none at) rad/s
    preset: str = ""
    torque_per_amp_nm: float = 1.0   # the motor's torque constant at the joint (its current ↔ its torque)
    compensation_margin: float = COMPENSATION_MARGIN   # commands carry this × the sag τ/kp

    def available_torque(self, speed: float) -> float:
        """The most torque (N·m) the servo gives turning at `speed` rad/s (its torque–speed line)."""
        if self.torque_speed is None:
            return self.torque_limit_nm
        full, zero = self.torque_speed
        s = abs(speed)
        if s <= full:
            return self.torque_limit_nm
        return self.torque_limit_nm * max(0.0, (zero - s) / (zero - full))


@dataclass(frozen=True)
class ServoTable:
    """Every joint's servo, in the model's joint order; `declared`: from the robot's (or the
    board config's) own data, not the ideal default."""

    joint_names: tuple[str, ...]
    servos: tuple[Servo, ...]
    declared: bool
    source: str = ""

    def joint(self, i: int) -> Servo:
        return self.servos[i]

    def column(self, key: str) -> np.ndarray:
        return np.array([getattr(s, key) for s in self.servos], dtype=float)

    def stall_current_mA(self) -> np.ndarray:
        """Each joint's motor current at its servo's full torque."""
        return 1000.0 * self.column("torque_limit_nm") / self.column("torque_per_amp_nm")

    def summary(self) -> str:
        names = sorted({s.preset or "custom" for s in self.servos})
        return f"{', '.join(names)} ({self.source})" if self.source else ", ".join(names)


_PRESETS: dict | None = None


def presets() -> dict[str, Servo]:
    """The shipped presets by name."""
    global _PRESETS
    if _PRESETS is None:
        data = tomllib.loads(PRESETS_FILE.read_text())
        _PRESETS = {name: _servo(values, f"{PRESETS_FILE.name} [{name}]", name) for name, values in data.items()}
    return _PRESETS


def _number(value, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (key in ("kp_nm_per_rad", "torque_limit_nm") and v <= 0):
        need = ("a positive number" if key in ("kp_nm_per_rad", "torque_limit_nm") else
                "{:g} … {:g}".format(*MARGIN_RANGE) if key == "compensation_margin" else "a number ≥ 0")
        raise ConfigError(f"{where}: {key} = {value!r} must be {need} (SI units: see docs/physics.md)")
    return v


def _torque_speed(value, where: str) -> tuple[float, float]:
    if not (isinstance(value, list) and len(value) == 2):
        raise ConfigError(f"{where}: torque_speed must be [full torque up to (rad/s), no torque at (rad/s)]")
    a, b = (_number(v, "torque_speed", where) for v in value)
    if not a < b:
        raise ConfigError(f"{where}: torque_speed = {value}: the first speed must be below the second")
    return a, b


def _servo(values: dict, where: str, name: str = "", base: Servo | None = None) -> Servo:
    """A servo from a table's keys, over `base` (a preset the table names, or the level above)."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: must be a table of servo numbers")
    unknown = set(values) - KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}; keys are {', '.join(sorted(KEYS - {'joint'}))}")
    if "preset" in values:
        p = values["preset"]
        table = presets()
        if p not in table:
            raise ConfigError(f"{where}: preset {p!r} is not one of {', '.join(sorted(table))}")
        base = table[p]
    got = {k: _number(values[k], k, where) for k in (*NUMBER_KEYS, *OPTIONAL_KEYS) if k in values}
    if got.get("torque_per_amp_nm", 1.0) <= 0:
        raise ConfigError(f"{where}: torque_per_amp_nm must be positive")
    lo, hi = MARGIN_RANGE
    if not lo <= got.get("compensation_margin", lo) <= hi:
        raise ConfigError(f"{where}: compensation_margin = {values['compensation_margin']!r} must be {lo:g} … {hi:g} "
                          "(the commands carry this many times the sag τ/kp; 1: as the servo numbers say)")
    if base is None:
        missing = [k for k in NUMBER_KEYS if k not in got]
        if missing:
            raise ConfigError(f"{where}: needs {', '.join(missing)} (or a preset)")
        return Servo(**got, torque_speed=_torque_speed(values["torque_speed"], where) if "torque_speed" in values
                     else None, preset=name)
    out = replace(base, **got)
    if "torque_speed" in values:
        out = replace(out, torque_speed=_torque_speed(values["torque_speed"], where))
    if got and "preset" not in values:
        label = base.preset
        if label in ("", "ideal"):
            label = "custom"
        elif not label.endswith(" (adjusted)") and label != "custom":
            label += " (adjusted)"
        out = replace(out, preset=label)
    return out


def parse_table(data, joint_names, where: str, base: "ServoTable | None" = None) -> ServoTable:
    """A `[servo]` table over `base` (None: the ideal preset for every joint)."""
    ideal = presets()["ideal"]
    servos = list(base.servos) if base is not None else [ideal] * len(joint_names)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: [servo] must be a table")
    top = {k: v for k, v in data.items() if k != "joint"}
    if top:
        servos = [_servo(top, f"{where} [servo]", base=s if "preset" not in top else None) for s in servos]
    per = data.get("joint", {})
    if not isinstance(per, dict):
        raise ConfigError(f"{where}: [servo.joint.NAME] tables, one per joint")
    for jname, values in per.items():
        if jname not in joint_names:
            raise ConfigError(f"{where}: [servo.joint.{jname}]: no joint of that name ({', '.join(joint_names)})")
        k = list(joint_names).index(jname)
        servos[k] = _servo(values, f"{where} [servo.joint.{jname}]", base=servos[k] if "preset" not in values
                           else None)
    return ServoTable(tuple(joint_names), tuple(servos), True, where)


def through_transmission(values, multiplier: float):
    """A servo's table (`[servo.joint.NAME]` keys) as seen at the joint it turns through a gear train
    or a linkage, its own joint = multiplier · that joint + offset: torques × |multiplier|;
    stiffness, damping and armature × multiplier²; speeds ÷ |multiplier|. A preset is taken as its
    numbers first. Anything not a table is returned as it is (for `parse_table` to say so)."""
    if not isinstance(values, dict):
        return values
    values = dict(values)
    base = presets().get(values.get("preset")) if isinstance(values.get("preset"), str) else None
    if base is not None:
        del values["preset"]
        numbers = {k: getattr(base, k) for k in (*NUMBER_KEYS, "torque_per_amp_nm")}
        if base.torque_speed is not None:
            numbers["torque_speed"] = list(base.torque_speed)
        values = {**numbers, **values}
    m2, m1 = multiplier * multiplier, abs(multiplier)
    for key, scale in (("kp_nm_per_rad", m2), ("damping_nms_per_rad", m2), ("armature_kgm2", m2),
                       ("friction_nm", m1), ("torque_limit_nm", m1), ("torque_per_amp_nm", m1)):
        v = values.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            values[key] = v * scale
    speeds = values.get("torque_speed")
    if isinstance(speeds, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in speeds):
        values["torque_speed"] = [v / m1 for v in speeds]
    return values


SUMMED_KEYS = ("kp_nm_per_rad", "damping_nms_per_rad", "armature_kgm2", "friction_nm", "torque_limit_nm")


def together(tables: list):
    """Servos that turn one joint together (a differential's two, each `through_transmission`): their
    stiffness, damping, armature, friction and torque add up; the torque–speed line is the slower
    one's; the other keys are the first's. Anything not a list of tables is returned as it is."""
    if len(tables) == 1 or not all(isinstance(t, dict) for t in tables):
        return tables[0] if len(tables) == 1 else tables
    out = dict(tables[0])
    for key in SUMMED_KEYS:
        values = [t.get(key) for t in tables]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = sum(values)
    lines = [t.get("torque_speed") for t in tables]
    if all(isinstance(line, list) and len(line) == 2 for line in lines):
        out["torque_speed"] = [min(line[0] for line in lines), min(line[1] for line in lines)]
    return out


def over_actuators(actuators: dict, own) -> dict:
    """A side file's `[servo]` table over an MJCF's actuators' (`{"joint": {NAME: keys}}`): its
    keys, then its joints' keys, over each actuator's; a preset (for all, or for a joint) replaces
    the actuators' numbers where it is given. A table that is not one is left as it is, for
    `parse_table` to say so."""
    if not isinstance(own, dict) or "preset" in own or not isinstance(own.get("joint", {}), dict):
        return own
    top = {k: v for k, v in own.items() if k != "joint"}
    joints = {name: {**keys, **top} for name, keys in actuators.get("joint", {}).items()}
    for name, keys in own.get("joint", {}).items():
        replaces = not isinstance(keys, dict) or "preset" in keys or name not in joints
        joints[name] = keys if replaces else {**joints[name], **keys}
    return {**top, "joint": joints}


def servo_table(model, board_servo: dict | None = None, board_where: str = "") -> ServoTable:
    """The servo model of every joint: the robot's `[servo]` table, then a board config's over it."""
    data = model.meta.get("servo")
    if data is None and board_servo is None:
        return ServoTable(model.joint_names, tuple([presets()["ideal"]] * model.n), False, "")
    table = parse_table(data, model.joint_names, model.source or model.name) if data is not None else None
    if board_servo is not None:
        table = parse_table(board_servo, model.joint_names, board_where, table)
    return table

