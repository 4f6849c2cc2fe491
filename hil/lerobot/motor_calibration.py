"""LeRobot calibration files ↔ hil board configs.

LeRobot keeps one JSON file per robot: for each motor by name, `id`, `drive_mode`, `homing_offset`,
`range_min` and `range_max`. The ranges are *present* positions: what the servo reports with that
homing offset in its EEPROM (Feetech: present = actual − offset; Dynamixel: actual + offset), so a
board config made from the file reads the same ticks LeRobot does.

Which angle is which tick: LeRobot calibrates with each joint in the middle of its travel, so the
middle of a recorded range is the pose the shipped config for the kit puts at tick 2048 (zero on
the SO-101, the middle of the URDF's range on the SO-100 and the Koch). A gripper (LeRobot's
0 … 100 %) has its whole recorded range mapped onto the robot's: 0 % at the gripper's lower limit,
100 % at its upper, so every opening LeRobot can ask for is one hil can too.

    import_file(model, "so101.json", bus=None, role=None) → BusConfig (the shipped config's baud,
                                                             servo models, [servo]); role leader
                                                             for a leader arm's file
    export_text(config)                                   → the JSON LeRobot reads, and notes

The five values are kept in the board config's joint tables (`drive_mode`, `homing_offset`,
`range_min`, `range_max`) so that an imported file exports byte for byte as it came in. A config
made by hil (no such keys) exports its own ticks with no homing offset: LeRobot then writes a zero
offset and limits that match what hil reads.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from firmware_protocol.buses import BUSES, bus_class
from firmware_protocol.buses.bus_board import BusConfig, ServoJoint
from hil import board_config
from hil.errors import InputError
from hil.inputs import parse_json, read_text

KEYS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")
RESOLUTION = 4096          # ticks per turn of the servos LeRobot drives (STS3215, XL330, XL430)
MIDDLE_TICK = 2048         # where a shipped LeRobot kit's config puts the middle of each joint's travel
GRIPPERS = ("gripper",)    # LeRobot's RANGE_0_100 motors: their whole range maps onto the robot's
# the buses LeRobot drives, and per bus what its files may hold and how it mirrors a motor
# (ServoBus.lerobot_*): on some it mirrors a drive_mode 1 motor in software, on others the servo's
# own Drive Mode register does, so the present positions hil reads are already mirrored
LEROBOT_BUSES = [k for k in BUSES if bus_class(k).lerobot_homing_limit is not None]
HOMING_LIMIT = {k: bus_class(k).lerobot_homing_limit for k in LEROBOT_BUSES}
MIRRORED_BY_HOST = {k: bus_class(k).lerobot_mirrors_on_host for k in LEROBOT_BUSES}


def bus_for(model, bus: str | None) -> str:
    if bus is not None:
        if bus not in HOMING_LIMIT:
            raise InputError(f"--bus {bus}: LeRobot calibration files are for {' and '.join(LEROBOT_BUSES)} buses")
        return bus
    shipped = [b for b in HOMING_LIMIT if board_config.shipped_path(model.name, b).exists()]
    if len(shipped) == 1:
        return shipped[0]
    raise InputError(f"which bus are {model.name}'s servos on? Add --bus with one of {', '.join(LEROBOT_BUSES)} "
                     "(SO-100/SO-101: Feetech; Koch: Dynamixel 2.0)")


def _motor(name: str, row, where: str, bus: str, max_id: int) -> dict:
    if not isinstance(row, dict):
        raise InputError(f"{where}: motor {name!r} is {type(row).__name__}, not an object with {', '.join(KEYS)}")
    missing = [k for k in KEYS if k not in row]
    extra = sorted(set(row) - set(KEYS))
    if missing or extra:
        what = f"lacks {', '.join(missing)}" if missing else f"has unknown key {extra[0]!r}"
        raise InputError(f"{where}: motor {name!r} {what}; LeRobot's motors have exactly {', '.join(KEYS)}")
    for k in KEYS:
        if isinstance(row[k], bool) or not isinstance(row[k], int):
            raise InputError(f"{where}: {name}.{k} = {row[k]!r} must be a whole number")
    limits = {"id": (0, max_id), "drive_mode": (0, 1), "range_min": (0, RESOLUTION - 1),
              "range_max": (0, RESOLUTION - 1), "homing_offset": (-HOMING_LIMIT[bus], HOMING_LIMIT[bus])}
    for k, (lo, hi) in limits.items():
        if not lo <= row[k] <= hi:
            raise InputError(f"{where}: {name}.{k} = {row[k]} is outside {lo} … {hi} for a {bus} servo")
    if row["range_min"] >= row["range_max"]:
        raise InputError(f"{where}: {name}: range_min {row['range_min']} must be below range_max {row['range_max']}; "
                         "record the range again (LeRobot's calibrate)")
    return row


def role_of(path: str) -> str:
    """A leader arm's file sits under LeRobot's `teleoperators/` (`…/koch_leader/ID.json`)."""
    parts = [p.lower() for p in Path(path).parts]
    return "leader" if any("leader" in p or p == "teleoperators" for p in parts) else "follower"


def import_file(model, path: str, bus: str | None = None, role: str | None = None) -> BusConfig:
    """The board config a LeRobot calibration file describes, on the shipped config for `model` on
    `bus` in `role` (default: from the file's path; baud, each joint's servo model, physics);
    InputError naming the file, the motor and the key."""
    bus = bus_for(model, bus)
    role = role or role_of(path)
    data = parse_json(read_text(path, "LeRobot calibration file"), path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: a LeRobot calibration file is an object of motors by name, not "
                         f"{type(data).__name__}")
    unknown = [n for n in data if n not in model.joint_names]
    missing = [n for n in model.joint_names if n not in data]
    if unknown:
        raise InputError(f"{path}: motor {unknown[0]!r} is not a joint of {model.name} "
                         f"({', '.join(model.joint_names)}); is this the calibration of another robot?")
    if missing:
        raise InputError(f"{path}: no calibration for {', '.join(missing)} (every joint of {model.name} needs one)")
    base = board_config.shipped(model, bus, role)
    rows = []
    for j in base.joints:
        m = _motor(j.name, data[j.name], path, bus, bus_class(bus).max_id)
        direction = -1 if (m["drive_mode"] and MIRRORED_BY_HOST[bus]) else 1
        place = _gripper_place if j.name in GRIPPERS else _body_place
        rows.append({"name": j.name, "servo_id": m["id"], "direction": direction, "model": j.model,
                     **place(model, j, m, direction), **{k: m[k] for k in KEYS[1:]}})
    fields = {"robot": model.name, "bus": bus, "baud": base.baud, "role": role,
              "joint": _within_robot(model, rows, path)}
    if base.servo:
        fields["servo"] = base.servo
    return dataclasses.replace(board_config.parse(fields, model, path), source=str(path))


def _body_place(model, base: ServoJoint, m: dict, direction: int) -> dict:
    """The middle of the recorded range at the angle the kit's shipped config gives tick 2048;
    the servo's own resolution; limits the range."""
    tpr = RESOLUTION / (2 * math.pi)
    middle = base.rad(MIDDLE_TICK)
    zero = (m["range_min"] + m["range_max"]) / 2 - direction * middle * tpr
    ends = sorted(direction * (t - zero) / tpr for t in (m["range_min"], m["range_max"]))
    return {"ticks_per_rad": tpr, "zero_tick": zero, "min_deg": math.degrees(ends[0]), "max_deg": math.degrees(ends[1])}


def _gripper_place(model, base: ServoJoint, m: dict, direction: int) -> dict:
    """The whole recorded range onto the robot's range: LeRobot's 0 % (range_min, or range_max where
    LeRobot mirrors the motor) at the lower limit, 100 % at the upper."""
    i = model.joint_index(base.name)
    lo, hi = float(model.lower[i]), float(model.upper[i])
    tpr = (m["range_max"] - m["range_min"]) / (hi - lo)
    zero = (m["range_min"] - tpr * lo) if direction > 0 else (m["range_max"] + tpr * lo)
    return {"ticks_per_rad": tpr, "zero_tick": zero, "min_deg": math.degrees(lo), "max_deg": math.degrees(hi)}


def _within_robot(model, rows: list[dict], path: str) -> list[dict]:
    """Each range must overlap the robot's own (the config keeps the narrower of the two)."""
    for row in rows:
        i = model.joint_index(row["name"])
        lo, hi = math.degrees(model.lower[i]), math.degrees(model.upper[i])
        if row["max_deg"] <= lo or row["min_deg"] >= hi:
            raise InputError(f"{path}: {row['name']}'s recorded range ({row['range_min']} … {row['range_max']}) is "
                             f"[{row['min_deg']:.1f}, {row['max_deg']:.1f}]° from its middle, outside the robot's "
                             f"[{lo:.1f}, {hi:.1f}]°; record the range again")
    return rows


def exported(j: ServoJoint, bus: str) -> dict:
    if j.range_min is not None:
        return {"id": j.servo_id, "drive_mode": j.drive_mode, "homing_offset": j.homing_offset,
                "range_min": j.range_min, "range_max": j.range_max}
    a, b = sorted((j.ticks(j.min_rad), j.ticks(j.max_rad)))
    if a < 0 or b > RESOLUTION - 1:
        raise InputError(f"{j.name}: its range [{math.degrees(j.min_rad):.1f}, {math.degrees(j.max_rad):.1f}]° is "
                         f"ticks {a} … {b}, past the servo's 0 … {RESOLUTION - 1} (it crosses the encoder's wrap); "
                         "calibrate with the joint's zero nearer tick 2048, then export")
    mirrored = j.direction < 0 and MIRRORED_BY_HOST[bus]
    return {"id": j.servo_id, "drive_mode": int(mirrored), "homing_offset": j.homing_offset or 0,
            "range_min": a, "range_max": b}


def export_text(config: BusConfig) -> tuple[str, list[str]]:
    """The LeRobot calibration JSON for a board config (motors in the robot's joint order), and
    notes on what LeRobot will read differently."""
    if config.bus not in HOMING_LIMIT:
        raise InputError(f"{config.source}: bus = {config.bus!r}; LeRobot drives {' and '.join(LEROBOT_BUSES)} servos")
    out, notes = {}, []
    for j in config.joints:
        out[j.name] = exported(j, config.bus)
        if j.direction < 0 and not MIRRORED_BY_HOST[config.bus] and j.range_min is None:
            notes.append(f"{j.name} turns against its servo's ticks (direction -1); on a Dynamixel bus LeRobot leaves "
                         "that to the servo's Drive Mode register, so its values for this joint run the other way")
    return json.dumps(out, indent=4), notes   # as LeRobot writes it (draccus: json.dump, indent 4, no final newline)
