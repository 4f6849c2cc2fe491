"""LeRobot calibration files ↔ hil board configs.

LeRobot keeps one JSON file per robot: for each motor by name, `id`, `drive_mode`, `homing_offset`,
`range_min` and `range_max`. The ranges are *present* positions: what the servo reports with that
homing offset in its EEPROM (Feetech: present = actual − offset; Dynamixel: actual + offset), so a
board config made from the file reads the same ticks LeRobot does, and its zero tick sits in the
middle of the range, where LeRobot's own degrees put zero.

    import_file(model, "so101.json", bus=None)   → BusConfig (the shipped config's baud, servos, [servo])
    export_text(config)                           → the JSON LeRobot reads, and notes

The five values are kept in the board config's joint tables (`drive_mode`, `homing_offset`,
`range_min`, `range_max`) so that an imported file exports byte for byte as it came in. A config
made by hil (no such keys) exports its own ticks with no homing offset: LeRobot then writes a zero
offset and limits that match what hil reads.
"""

from __future__ import annotations

import dataclasses
import json
import math

from firmware_protocol.buses import BUSES, bus_class
from firmware_protocol.buses.board import BusConfig, ServoJoint
from hil import board_config
from hil.errors import InputError
from hil.inputs import parse_json, read_text

KEYS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")
RESOLUTION = 4096          # ticks per turn of the servos LeRobot drives (STS3215, XL330, XL430)
# the buses LeRobot drives, and per bus what its files may hold and how it mirrors a motor
# (ServoBus.lerobot_*): on some it mirrors a drive_mode 1 motor in software, on others the servo's
# own Drive Mode register does, so the present positions hil reads are already mirrored
LEROBOT_BUSES = [k for k in BUSES if bus_class(k).lerobot_homing_limit is not None]
HOMING_LIMIT = {k: bus_class(k).lerobot_homing_limit for k in LEROBOT_BUSES}
MIRRORED_BY_HOST = {k: bus_class(k).lerobot_mirrors_on_host for k in LEROBOT_BUSES}


def _bus_for(model, bus: str | None) -> str:
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


def import_file(model, path: str, bus: str | None = None) -> BusConfig:
    """The board config a LeRobot calibration file describes, on the shipped config for `model` on
    `bus` (baud, servo models, physics); InputError naming the file, the motor and the key."""
    bus = _bus_for(model, bus)
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
    base = board_config.shipped(model, bus)
    tpr = RESOLUTION / (2 * math.pi)
    rows = []
    for j in base.joints:
        m = _motor(j.name, data[j.name], path, bus, bus_class(bus).max_id)
        direction = -1 if (m["drive_mode"] and MIRRORED_BY_HOST[bus]) else 1
        zero = (m["range_min"] + m["range_max"]) / 2
        ends = sorted(direction * (t - zero) / tpr for t in (m["range_min"], m["range_max"]))
        rows.append({"name": j.name, "servo_id": m["id"], "ticks_per_rad": tpr, "zero_tick": zero,
                     "direction": direction, "min_deg": math.degrees(ends[0]), "max_deg": math.degrees(ends[1]),
                     "model": j.model, **{k: m[k] for k in KEYS[1:]}})
    fields = {"robot": model.name, "bus": bus, "baud": base.baud, "joint": _within_robot(model, rows, path)}
    if base.servo:
        fields["servo"] = base.servo
    return dataclasses.replace(board_config.parse(fields, model, path), source=str(path))


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


def _exported(j: ServoJoint, bus: str) -> dict:
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
        out[j.name] = _exported(j, config.bus)
        if j.direction < 0 and not MIRRORED_BY_HOST[config.bus] and j.range_min is None:
            notes.append(f"{j.name} turns against its servo's ticks (direction -1); on a Dynamixel bus LeRobot leaves "
                         "that to the servo's Drive Mode register, so its values for this joint run the other way")
    return json.dumps(out, indent=4) + "\n", notes
