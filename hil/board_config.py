"""Robot ↔ servo bus mapping as data: a `--board-config` TOML file names the robot, the bus, its
baud rate, and per joint the servo id, ticks per radian, zero tick, direction and limits.

    robot = "humanoid17"
    bus = "…"               # a kind firmware_protocol.buses registers (hil --help lists them)
    baud = 1000000

    [defaults]              # any joint key, for every joint that does not set it
    model = "XM430-W350"    # its resolution gives ticks_per_rad (firmware_protocol.buses.control_tables)
    zero_tick = 2048

    [[joint]]
    name = "l_hip_roll"
    servo_id = 1
    direction = -1          # +1: the servo's ticks grow with the joint angle
    min_deg = -25           # optional: default the robot's own limits
    max_deg = 45

Configs for the kits we know ship in hil/robots/data/boards/ (`shipped(robot, bus)`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np

from firmware_protocol.buses import BUSES, bus_class, control_tables, model_numbers
from firmware_protocol.buses.bus_board import BusConfig, ServoJoint
from firmware_protocol.servo_mix import ServoMix
from hil.errors import InputError, did_you_mean
from hil.inputs import parse_toml, read_text
from hil.robots import servos as servo_tables
from hil.robots.servos import servo_table

BOARDS_DIR = Path(__file__).resolve().parent / "robots" / "data" / "boards"
TOP_KEYS = {"robot", "bus", "baud", "role", "echo", "reply_timeout_ms", "return_delay_us", "watchdog_ms",
            "command_timeout_ms", "max_step_deg", "stale_cycles", "description", "defaults", "joint", "servo"}
JOINT_KEYS = {"name", "servo_id", "id", "ticks_per_rad", "zero_tick", "direction", "min_deg", "max_deg", "model",
              "homing_offset", "drive_mode", "range_min", "range_max", "torque_limit_pct"}
LEROBOT_RANGE_KEYS = ("drive_mode", "range_min", "range_max")   # from a LeRobot file: hil.lerobot.motor_calibration
ROLES = ("follower", "leader")   # a follower is driven; a leader is an arm a hand moves (`hil teleop`)


def resolve(model, bus: str | None, path: str | None) -> BusConfig | None:
    """The servo bus mapping `--bus`/`--board-config` name (None: neither, our own protocol)."""
    if path is None and bus is None:
        return None
    if path is None:
        return shipped(model, bus)
    if not path.endswith(".toml") and "/" not in path and (BOARDS_DIR / f"{path}.toml").is_file():
        path = str(BOARDS_DIR / f"{path}.toml")   # a shipped config by name: `--board-config koch-leader-dynamixel2`
    config = load(path, model)
    if bus is not None and bus != config.bus:
        raise InputError(f"--bus {bus} but {path} says bus = \"{config.bus}\"; leave out --bus or fix the file")
    return config


def shipped_path(robot: str, bus: str, role: str = "follower") -> Path:
    return BOARDS_DIR / (f"{robot}-{bus}.toml" if role == "follower" else f"{robot}-{role}-{bus}.toml")


def kits_answering(bus: str, servos: dict[int, str]) -> str:
    """The shipped kits whose servos are exactly these (id → model name) on `bus`, said as
    "koch leader (--robot koch --board-config koch-leader-dynamixel2)" ("" for none): what
    `hil ports --probe` says it found."""
    kits = []
    for path in sorted(BOARDS_DIR.glob("*.toml")):
        data = parse_toml(read_text(str(path), "board config"), str(path))
        if data.get("bus") != bus:
            continue
        default = data.get("defaults", {}).get("model")
        if {row.get("servo_id"): row.get("model", default) for row in data.get("joint", [])} == servos:
            kits.append((data["robot"], data.get("role", "follower"), path.stem))
    if len(kits) == 1:
        robot, role, stem = kits[0]
        return f"{robot} {role} (--robot {robot} --board-config {stem})"
    if not kits:
        return ""
    robots = " or ".join(dict.fromkeys(k[0] for k in kits))
    roles = " or ".join(dict.fromkeys(k[1] for k in kits))
    return f"{robots}, {roles} (--board-config {', '.join(k[2] for k in kits)})"


def shipped(model, bus: str, role: str = "follower") -> BusConfig:
    """The config we ship for this robot on this bus (what `--dry-run --bus` uses); `role` leader:
    the robot's leader arm (`hil teleop`)."""
    if bus not in BUSES:
        raise InputError(f"--bus {bus!r}: buses are {', '.join(BUSES)}")
    path = shipped_path(model.name, bus, role)
    if not path.exists() and model.board == "servos":
        return dataclasses.replace(generated(model, bus), role=role)   # a robot from its URDF: a map made from it
    if not path.exists():
        have = sorted(p.stem for p in BOARDS_DIR.glob(f"{model.name}-*.toml"))
        raise InputError(f"no shipped {bus} config for {model.name} "
                         f"({'shipped: ' + ', '.join(have) if have else 'none shipped for this robot'}); "
                         "write one and pass it with --board-config (see docs/buses.md)")
    return dataclasses.replace(load(str(path), model), shipped=True)


def generated(model, bus: str) -> BusConfig:
    """A servo map for a robot none is shipped for: the bus's usual kit (its `usual`: servo model,
    ticks, zero, first id, physics preset) at its usual baud rate, ids counted up in the robot's
    joint order, the robot's own limits. What `--bus` uses without `--board-config`; `hil robots
    --robot R --bus B` prints it to start a real one from."""
    cls = bus_class(bus)
    kit = cls.usual
    if kit.first_id + model.n - 1 > cls.max_id:
        raise InputError(f"{model.name} has {model.n} joints, more than a {bus} bus addresses "
                         f"({cls.max_id - kit.first_id + 1})")
    defaults = {"ticks_per_rad": kit.ticks_per_rad, "zero_tick": kit.zero_tick}
    if kit.model is not None:
        defaults["model"] = kit.model
    # the kit's servos as a physics model, where the robot declares none of its own (its MJCF's
    # actuators, a side file's [servo]: its makers' numbers win over a bus's usual servo)
    own = model.meta.get("servo") is not None
    servos = _servos_where_the_file_puts_them(model)
    data = {"robot": model.name, "bus": bus, "baud": cls.default_baud,
            **({} if own else {"servo": _usual_servo_felt(kit.servo_preset, model, servos)}), "defaults": defaults,
            "joint": [{"name": name, "servo_id": kit.first_id + i, **_within_a_turn(cls, kit, _servo_range(model, name))}
                      for i, name in enumerate(servos)]}
    where = f"the generated {bus} map for {model.name} (`hil robots --robot {model.spec} --bus {bus}` prints it)"
    return dataclasses.replace(parse(data, model, where), shipped=True, generated=True)


TURN_EDGE_TICKS = 8   # a generated range keeps this far from the encoder's wrap


def _servos_where_the_file_puts_them(model) -> list[str]:
    """The joint each servo turns, one per planned joint in its order: the joint itself, or where
    the robot's file puts its actuator, on a transmission's input (a gear, a linkage's plate:
    meta `transmission_inputs`) or on a differential's gear (`differential_inputs`, each gear in
    the slot of one of the joints it turns)."""
    on = {output: servo for servo, output in model.meta.get("transmission_inputs", {}).items()}
    for gear, outputs in sorted(model.meta.get("differential_inputs", {}).items()):
        free = [n for n in model.joint_names if n in outputs and n not in on]
        if free:
            on[free[0]] = gear
    return [on.get(name, name) for name in model.joint_names]


def _usual_servo_felt(preset: str, model, servos: list[str]) -> dict:
    """The bus's usual servo as each joint feels it: through the transmission its servo sits on
    (hil.robots.servos.through_transmission; a differential's two `together`), as itself elsewhere."""
    followers = {f.name: f for f in model.followers}
    felt: dict[str, list] = {}
    for name in servos:
        if name in followers:
            for lead, multiplier in followers[name].leaders():
                felt.setdefault(model.joint_names[lead], []).append(
                    servo_tables.through_transmission({"preset": preset}, multiplier))
    joints = {joint: servo_tables.together(entries) for joint, entries in felt.items()}
    return {"preset": preset, **({"joint": joints} if joints else {})}


def _within_a_turn(cls, kit, servo_range: tuple[float, float, float]) -> dict:
    """A generated row's keys that keep its servo's range (lower, upper, home) inside one turn of
    the usual servo: none where the usual zero does; else the range centred on the turn
    (zero_tick), and a range wider than a turn narrowed to one about home (min_deg, max_deg:
    `hil robots --bus` prints them)."""
    turn = cls.turn_ticks(kit.model)
    if turn is None:
        return {}
    tpr, (lo, hi, home) = kit.ticks_per_rad, servo_range
    if kit.zero_tick + tpr * lo >= TURN_EDGE_TICKS and kit.zero_tick + tpr * hi <= turn - 1 - TURN_EDGE_TICKS:
        return {}
    half = (turn - 1 - 2 * TURN_EDGE_TICKS) / (2 * tpr)   # the most a turn holds, either side of its middle
    out = {}
    if hi - lo > 2 * half:
        centre = min(max(home, lo + half), hi - half)
        lo, hi = centre - half, centre + half
        out = {"min_deg": round(math.degrees(lo), 3), "max_deg": round(math.degrees(hi), 3)}
    return {"zero_tick": round((turn - 1) / 2 - tpr * (lo + hi) / 2, 3), **out}


def load(path: str, model) -> BusConfig:
    """Read and check a board config for `model`; InputError naming the file, the joint and the key."""
    return parse(parse_toml(read_text(path, "board config"), path), model, path)


def _num(value, where: str, lo: float, hi: float, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {value!r} is not a number")
    if not math.isfinite(value) or not lo <= value <= hi:
        raise InputError(f"{where} = {value!r} is outside {lo:g} … {hi:g}")
    if integer and value != int(value):
        raise InputError(f"{where} = {value!r} must be a whole number")
    return float(value)


def parse(data: dict, model, path: str = "board config") -> BusConfig:
    owners = {key: kind for kind in BUSES for key in bus_class(kind).options}   # the buses' own keys
    unknown = set(data) - TOP_KEYS - set(owners)
    if unknown:
        raise InputError(f"{path}: unknown key {sorted(unknown)[0]!r}; keys are {', '.join(sorted(TOP_KEYS))} "
                         f"(and each bus's own: {', '.join(f'{k} ({b})' for k, b in owners.items())})")
    robot = data.get("robot")
    if robot is None:
        raise InputError(f"{path}: no robot key; a board config names the robot it maps: "
                         f"robot = \"{model.name}\" (`hil robots --robot {model.spec} --bus BUS` prints a whole one)")
    if not isinstance(robot, str):
        raise InputError(f"{path}: robot = {robot!r} is not a robot's name; set robot = \"{model.name}\"")
    if robot != model.name:
        raise InputError(f"{path}: robot = {robot!r}, but the run is for {model.name!r}; "
                         f"set robot = \"{model.name}\" or run with --robot {robot}")
    bus = data.get("bus")
    if bus not in BUSES:
        raise InputError(f"{path}: bus = {bus!r}; buses are {', '.join(BUSES)}")
    cls = bus_class(bus)
    baud = int(_num(data.get("baud", cls.default_baud), f"{path}: baud", 300, 20_000_000, integer=True))
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise InputError(f"{path}: [defaults] must be a table")
    rows = data.get("joint")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{path}: no [[joint]] tables; map each of {model.name}'s {model.n} joints "
                         f"({', '.join(model.joint_names)})")
    by_name: dict[str, ServoJoint] = {}
    for k, row in enumerate(rows):
        j = _joint({**defaults, **row}, model, cls, f"{path}: joint {k + 1}")
        if j.name in by_name:
            raise InputError(f"{path}: joint {j.name!r} is mapped twice")
        by_name[j.name] = j
    slots, mix = _slots(by_name, model, path)
    ids: dict[int, str] = {}
    for j in by_name.values():
        if j.servo_id in ids:
            raise InputError(f"{path}: servo_id {j.servo_id} is used by both {ids[j.servo_id]} and {j.name}")
        ids[j.servo_id] = j.name
    echo = data.get("echo")
    if echo is not None and not isinstance(echo, bool):
        raise InputError(f"{path}: echo = {echo!r} must be true or false (leave it out: found out at connect)")
    extra = {}
    for key, lo, hi in (("reply_timeout_ms", 0.5, 1000), ("return_delay_us", 0, 508), ("watchdog_ms", 0, 2540),
                        ("command_timeout_ms", 10, 5000), ("stale_cycles", 1, 1000)):
        if key in data:
            extra[key] = _num(data[key], f"{path}: {key}", lo, hi)
    if "stale_cycles" in extra:
        extra["stale_cycles"] = int(extra["stale_cycles"])
    if "max_step_deg" in data:
        extra["max_step_rad"] = math.radians(_num(data["max_step_deg"], f"{path}: max_step_deg", 0.1, 90))
    extra["options"] = _options(data, bus, owners, path)
    role = data.get("role", "follower")
    if role not in ROLES:
        raise InputError(f"{path}: role = {role!r}; roles are {', '.join(ROLES)}")
    extra["role"] = role
    joints = tuple(by_name[n] for n in slots)
    if mix is not None:
        _home_within_geared_ranges(joints, mix, model, path)
        extra["mix"] = mix
    if "servo" in data:   # the kit's servos as a physics model (hil.robots.servos): checked now
        servo_table(model, data["servo"], str(path))
        extra["servo"] = data["servo"]
    return BusConfig(model.name, bus, baud, joints, echo=echo, source=str(path), **extra)


def _slots(by_name: dict, model, path: str) -> tuple[list[str], ServoMix | None]:
    """Each of the robot's joints' servo, in its joint order: its own [[joint]], or a servo that
    turns it through a transmission (a row naming the gear, plate or differential gear the servo
    sits on: a follower, hil.robots.model.Follower); and the mix of those (None: none)."""
    followers = {f.name: f for f in model.followers}
    slots: dict[str, str] = {n: n for n in model.joint_names if n in by_name}
    for name in by_name:
        if name not in followers:
            continue
        drives = [model.joint_names[lead] for lead, _ in followers[name].leaders()]
        free = [n for n in model.joint_names if n in drives and n not in slots]
        if not free:
            raise InputError(f"{path}: joint {name!r} is a transmission's, turning {' and '.join(drives)}, and "
                             f"{'each of them has' if len(drives) > 1 else 'it has'} a servo already; map each joint "
                             "once: its own servo, or the servo on the gear that turns it")
        slots[free[0]] = name
    missing = [n for n in model.joint_names if n not in slots]
    if missing:
        turning = sorted({f.name for f in followers.values() for lead, _ in f.leaders()
                          if model.joint_names[lead] in missing})
        raise InputError(f"{path}: joints not mapped: {', '.join(missing)} (every joint of {model.name} needs a "
                         "[[joint]]" + (f", or one for the servo that turns it: {', '.join(turning)}" if turning else "")
                         + ")")
    order = [slots[n] for n in model.joint_names]
    if all(n == slot for n, slot in zip(model.joint_names, order)):
        return order, None
    matrix, offset = np.eye(model.n), np.zeros(model.n)
    for k, name in enumerate(order):
        if name in followers:
            matrix[k, k] = 0.0
            for lead, multiplier in followers[name].leaders():
                matrix[k, lead] += multiplier
            offset[k] = followers[name].offset
    if np.linalg.cond(matrix) > 1e8:
        geared = [n for n in order if n in followers]
        raise InputError(f"{path}: the servos on {', '.join(geared)} do not tell the joints they turn apart (their "
                         "transmissions turn them together the same way); map another servo")
    return order, ServoMix.of(matrix, offset)


def _home_within_geared_ranges(joints, mix: ServoMix, model, path: str) -> None:
    """A servo on a transmission whose range leaves out the angle the robot's home gives it would
    leave its joints no room about home (hil.board_config.within_config narrows them to a box
    about home inside the servo's range): refused, naming the servo, its range and that angle."""
    at_home = mix.servo_angles(np.asarray(model.home, dtype=np.float64))
    for k in mix.mixed():
        j = joints[k]
        if not j.min_rad - 1e-9 <= at_home[k] <= j.max_rad + 1e-9:
            raise InputError(f"{path}: {j.name} (servo {j.servo_id}) ranges over [{math.degrees(j.min_rad):.1f}, "
                             f"{math.degrees(j.max_rad):.1f}]°, but the robot's home turns it to "
                             f"{math.degrees(at_home[k]):.1f}°: widen its min_deg/max_deg to take that in")


def _options(data: dict, bus: str, owners: dict, path: str) -> dict:
    """The bus's own true/false keys in the file (a key of another bus is refused, naming whose)."""
    out = {}
    for key, kind in owners.items():
        if key not in data:
            continue
        if kind != bus:
            raise InputError(f"{path}: {key} is an option of the {kind} bus, not of {bus}; take it out")
        if not isinstance(data[key], bool):
            raise InputError(f"{path}: {key} = {data[key]!r} must be true or false")
        out[key] = data[key]
    return out


def _joint(row: dict, model, cls, where: str) -> ServoJoint:
    unknown = set(row) - JOINT_KEYS
    if unknown:
        raise InputError(f"{where}: unknown key {sorted(unknown)[0]!r}; joint keys are {', '.join(sorted(JOINT_KEYS))}")
    name = row.get("name")
    servo_range = _servo_range(model, name)
    if servo_range is None:
        raise InputError(f"{where}: name = {name!r} is not a joint of {model.name}{did_you_mean(name, model.joint_names)} "
                         f"({', '.join(model.joint_names)}" + (f"; or a transmission's, turned by a servo: "
                         f"{', '.join(f.name for f in model.followers)}" if model.followers else "") + ")")
    where = f"{where} ({name})"
    known = control_tables.model_named(row.get("model") if isinstance(row.get("model"), str) else None, cls.kind)
    if known is not None and "ticks_per_rad" not in row:
        row = {**row, "ticks_per_rad": known.ticks_per_rad}   # the model's own resolution
    for key in ("ticks_per_rad", "zero_tick"):
        if key not in row:
            raise InputError(f"{where}: {key} is missing (set it here or in [defaults], or name a model hil knows: "
                             f"{', '.join(m.name for m in control_tables.models_of(cls.kind).values()) or 'none'})")
    sid = row.get("servo_id", row.get("id"))
    if sid is None:
        raise InputError(f"{where}: servo_id is missing")
    sid = int(_num(sid, f"{where}: servo_id", 0, cls.max_id, integer=True))
    tpr = _num(row["ticks_per_rad"], f"{where}: ticks_per_rad", 1e-3, 1e7)
    zero = _num(row["zero_tick"], f"{where}: zero_tick", -(1 << 31), (1 << 31) - 1)
    zero = int(zero) if zero == int(zero) else zero   # a range's middle may fall between two ticks
    direction = row.get("direction", 1)
    if direction not in (1, -1) or isinstance(direction, bool):
        raise InputError(f"{where}: direction = {direction!r} must be 1 or -1")
    low, high, home = servo_range
    lo_deg, hi_deg = math.degrees(low), math.degrees(high)
    lo = _num(row.get("min_deg", lo_deg), f"{where}: min_deg", -360, 360)
    hi = _num(row.get("max_deg", hi_deg), f"{where}: max_deg", -360, 360)
    if lo >= hi:
        raise InputError(f"{where}: min_deg {lo:g} must be below max_deg {hi:g}")
    if hi <= lo_deg or lo >= hi_deg:
        raise InputError(f"{where}: [{lo:g}, {hi:g}]° does not overlap the robot's range [{lo_deg:g}, {hi_deg:g}]°")
    model_name = row.get("model")
    if model_name is not None and not isinstance(model_name, str):
        raise InputError(f"{where}: model = {model_name!r} must be a model name like \"XM430-W350\"")
    # the board's limits never exceed the robot's: the narrower of the two
    lower, upper = math.radians(max(lo, lo_deg)), math.radians(min(hi, hi_deg))
    _within_one_turn(cls, model_name, zero, direction * tpr, lower, upper, where)
    start = min(upper, max(lower, home))   # PWM servos not yet driven: taken to rest at home
    return ServoJoint(name, sid, tpr, zero, int(direction), lower, upper, model_name, start, **_lerobot(row, where),
                      torque_limit=_torque_limit(row, cls, where))


def _servo_range(model, name) -> tuple[float, float, float] | None:
    """(lower, upper, home) of the angle a servo on joint `name` turns through: a joint's own, or a
    transmission's (a follower: its angle over its joints' ranges); None: no such joint."""
    if not isinstance(name, str):
        return None
    if name in model.joint_names:
        i = model.joint_index(name)
        return float(model.lower[i]), float(model.upper[i]), float(model.home[i])
    for f in model.followers:
        if f.name == name:
            low = high = f.offset
            for lead, multiplier in f.leaders():
                ends = (multiplier * float(model.lower[lead]), multiplier * float(model.upper[lead]))
                low, high = low + min(ends), high + max(ends)
            return low, high, float(f.angle(np.asarray(model.home, dtype=np.float64)))
    return None


def _torque_limit(row: dict, cls, where: str) -> float | None:
    """torque_limit_pct: the servo's torque capped at this share of its own (1 … 100 %), where the
    bus's servos take one."""
    if "torque_limit_pct" not in row:
        return None
    if not cls.has_torque_limit:
        raise InputError(f"{where}: torque_limit_pct: hil sets no torque limit on {cls.title} servos; take it out "
                         "(set the limit with the vendor's tool)")
    return _num(row["torque_limit_pct"], f"{where}: torque_limit_pct", 1, 100) / 100.0


def _within_one_turn(cls, model_name, zero: float, scale: float, lower: float, upper: float, where: str) -> None:
    """A range that crosses a servo's encoder wrap cannot be driven: a reading there jumps a whole
    turn, and a goal on the far side sends the servo the long way round."""
    turn = cls.turn_ticks(model_name)
    if turn is None:
        return
    a, b = sorted((zero + scale * lower, zero + scale * upper))
    if a < -1e-6 or b > turn - 1 + 1e-6:   # not rounded: an end at tick -0.1 reads 4095, across the wrap
        span = f"[{math.degrees(lower):.1f}, {math.degrees(upper):.1f}]°"
        if b - a > turn - 1:
            raise InputError(f"{where}: its range {span} is {b - a:.0f} ticks, more than one turn of the servo "
                             f"({turn}): no zero_tick keeps it off the encoder's wrap; give this joint's min_deg and "
                             f"max_deg within {math.degrees((turn - 1) / abs(scale)):.0f}° of each other")
        raise InputError(f"{where}: its range {span} is ticks {a:.1f} … {b:.1f} "
                         f"with zero_tick {zero:g}, past the servo's 0 … {turn - 1}: it crosses the encoder's wrap. "
                         f"`hil calibrate --method reference --bus {cls.kind}` places the range inside one turn (with "
                         "a homing offset where needed)")


def _lerobot(row: dict, where: str) -> dict:
    """The servo's homing offset, and a LeRobot range with its drive mode (those three go together)."""
    out = {}
    if "homing_offset" in row:
        out["homing_offset"] = int(_num(row["homing_offset"], f"{where}: homing_offset", -(1 << 31), (1 << 31) - 1,
                                        integer=True))
    given = [k for k in LEROBOT_RANGE_KEYS if k in row]
    if not given:
        return out
    if len(given) < len(LEROBOT_RANGE_KEYS):
        missing = [k for k in LEROBOT_RANGE_KEYS if k not in row]
        raise InputError(f"{where}: has {given[0]} but not {', '.join(missing)} (a LeRobot calibration's range and "
                         "drive mode go together; `hil calibrate --import-lerobot` writes them)")
    for k in LEROBOT_RANGE_KEYS:
        out[k] = int(_num(row[k], f"{where}: {k}", 0, 1 << 20, integer=True))
    if out["drive_mode"] not in (0, 1):
        raise InputError(f"{where}: drive_mode = {out['drive_mode']} must be 0 or 1")
    if out["range_min"] >= out["range_max"]:
        raise InputError(f"{where}: range_min {out['range_min']} must be below range_max {out['range_max']}")
    return out


def servos_of(model, config: BusConfig | None):
    """The servos a run drives, as a physics model: the config's [servo] table over the robot's
    (hil.robots.servos), each joint's torque limit applied (its servo gives that share of its
    torque: plans, the stall watch and the physics emulator see the servo as limited)."""
    table = servo_table(model, config.servo if config else None, config.source if config else "")
    if config is None or all(j.torque_limit is None for j in config.joints):
        return table
    servos = tuple(s if j.torque_limit is None else dataclasses.replace(s, torque_limit_nm=s.torque_limit_nm
                                                                        * j.torque_limit)
                   for s, j in zip(table.servos, config.joints))
    return dataclasses.replace(table, servos=servos)


def within_config(model, config: BusConfig | None):
    """The robot with its joint limits narrowed to the board config's (a range recorded by hand, a
    `min_deg`/`max_deg` in the file): the loop checks against what the servos will take, so no goal
    it plans is clamped by the bus board unseen. A copy: the loaded robot stays as it is."""
    if config is None:
        return model
    lower, upper = _joint_ranges(config, model)
    if np.array_equal(lower, model.lower) and np.array_equal(upper, model.upper):
        return model
    narrowed = copy.copy(model)
    narrowed.lower, narrowed.upper = np.maximum(model.lower, lower), np.minimum(model.upper, upper)
    return narrowed


def _joint_ranges(config: BusConfig, model) -> tuple[np.ndarray, np.ndarray]:
    """Each joint's range as its servo's range says it: a servo on a transmission to one joint
    bounds it through the ratio; a differential's gear, turned by two, narrows both about home
    until every pose in their ranges keeps the gear within its servo's (a box inside the servo's
    band: the loop checks joints one by one)."""
    servo_lo = np.array([j.min_rad for j in config.joints])
    servo_hi = np.array([j.max_rad for j in config.joints])
    if config.mix is None:
        return servo_lo, servo_hi
    matrix, offset = np.array(config.mix.matrix), np.array(config.mix.offset)
    mixed = config.mix.mixed()
    lower, upper = servo_lo.copy(), servo_hi.copy()
    for k in mixed:
        lower[k], upper[k] = model.lower[k], model.upper[k]
    home = np.clip(np.asarray(model.home, dtype=np.float64), lower, upper)
    for k in mixed:
        row, at_home = matrix[k], float(matrix[k] @ home + offset[k])
        # each joint's side of home that raises the servo's angle shrinks by one share, the side
        # that lowers it by the other: a gear train's joint is bounded exactly through its ratio
        raises_hi, raises_lo = row > 0.0, row < 0.0
        up = float(np.sum(row * np.where(raises_hi, upper - home, lower - home)))
        down = float(np.sum(row * np.where(raises_hi, home - lower, home - upper)))
        grow = min(1.0, (servo_hi[k] - at_home) / up) if up > 0 else 1.0
        fall = min(1.0, (at_home - servo_lo[k]) / down) if down > 0 else 1.0
        grow, fall = max(grow, 0.0), max(fall, 0.0)
        upper = np.where(raises_hi, home + grow * (upper - home), np.where(raises_lo, home + fall * (upper - home), upper))
        lower = np.where(raises_hi, home + fall * (lower - home), np.where(raises_lo, home + grow * (lower - home), lower))
    return lower, upper


def emulated_servos(config: BusConfig, model, initial=None) -> list[dict]:
    """The emulator's servos for a config: ids, models, the robot's pose (home) in ticks, speeds, limits."""

    numbers = model_numbers()
    q = model.home if initial is None else initial
    # the servos' own (a torque limit in the config is the host's to write into them)
    stall_mA = servo_table(model, config.servo, config.source).stall_current_mA()
    angle, speed = np.asarray(q, dtype=np.float64), np.asarray(model.velocity_limit, dtype=np.float64)
    if config.mix is not None:   # a servo on a transmission: its own angle, as fast as its joints let it turn
        angle, speed = config.mix.servo_angles(angle), np.abs(np.array(config.mix.matrix)) @ speed
    out = []
    for k, j in enumerate(config.joints):
        a, b = sorted((j.ticks(j.min_rad), j.ticks(j.max_rad)))
        out.append({"id": j.servo_id, "model": numbers.get((j.model or "").lower(), 0),
                    "initial": j.ticks(float(angle[k])), "vmax": float(speed[k]) * j.ticks_per_rad,
                    "lo": a, "hi": b, "homing": j.homing_offset or 0, "stall_mA": float(stall_mA[k])})
    return out


def remapped(joint: ServoJoint, **changes) -> ServoJoint:
    """A joint whose zero, direction or limits changed: a LeRobot range recorded for the old mapping
    no longer describes it, so it is dropped (an export writes one afresh from the limits; the
    servo's homing offset is kept unless `changes` gives one)."""
    return dataclasses.replace(joint, **changes, **{k: None for k in LEROBOT_RANGE_KEYS})


def with_joint_map(config: BusConfig, offsets, signs) -> BusConfig:
    """The config with a joint map folded into its ticks: a reading b (rad, through `config`) that
    the joint map takes to q = sign · (b − offset) reads q through the result directly. (Also what
    an emulator uses to hide calibration errors: the servos' truth is this config.)"""
    shift = np.asarray(offsets, dtype=np.float64)
    if config.mix is not None:   # a joint's zero error is each servo's that turns it, through its transmission
        matrix = np.array(config.mix.matrix)
        shift = matrix @ shift
        for k in config.mix.mixed():
            if any(signs[i] < 0 for i in np.flatnonzero(matrix[k])):
                raise InputError(f"{config.joints[k].name} (servo {config.joints[k].servo_id}) sits on a transmission: "
                                 "a calibration that reverses a joint it turns cannot be kept in its ticks; set its "
                                 f"direction in {config.where} and calibrate again")
    joints = []
    for j, off, sign in zip(config.joints, shift, signs):
        zero = j.zero_tick if off == 0 else int(round(j.zero_tick + j.direction * float(off) * j.ticks_per_rad))
        direction = int(j.direction * (1 if sign > 0 else -1))
        joints.append(j if (zero, direction) == (j.zero_tick, j.direction) else
                      remapped(j, zero_tick=zero, direction=direction))
    return dataclasses.replace(config, joints=tuple(joints))


def geared_servos(config: BusConfig, model) -> list[str]:
    """A line for each servo on a transmission: the angle it is told, from the joints it turns."""
    if config.mix is None:
        return []
    matrix, offset, out = np.array(config.mix.matrix), config.mix.offset, []
    for k in config.mix.mixed():
        terms = " ".join(f"{'+' if c >= 0 else '−'} {abs(c):.4g} · {model.joint_names[i]}"
                         for i, c in enumerate(matrix[k]) if c != 0.0).lstrip("+ ")
        extra = f" {'+' if offset[k] >= 0 else '−'} {abs(math.degrees(offset[k])):.2f}°" if abs(offset[k]) > 1e-9 else ""
        j = config.joints[k]
        out.append(f"{j.name} (servo {j.servo_id}) sits on a transmission: it is told {j.name} = {terms}{extra}")
    return out


def to_toml(config: BusConfig, note: str = "") -> str:
    """A board config file for `config`, every joint written out."""
    lines = [f"# {line}" for line in note.splitlines()] + [
        f'robot = "{config.robot}"', f'bus = "{config.bus}"', f"baud = {config.baud}", f'role = "{config.role}"']
    if config.echo is not None:
        lines.append(f"echo = {'true' if config.echo else 'false'}")
    for key in ("reply_timeout_ms", "return_delay_us", "watchdog_ms", "command_timeout_ms", "stale_cycles"):
        lines.append(f"{key} = {getattr(config, key):g}")
    lines.append(f"max_step_deg = {math.degrees(config.max_step_rad):.4g}")
    lines += [f"{key} = true" for key, on in config.options.items() if on]
    if config.servo:
        lines += ["", "[servo]"] + [f"{k} = {_toml_value(v)}" for k, v in config.servo.items() if k != "joint"]
        for name, values in (config.servo.get("joint") or {}).items():
            lines += ["", f"[servo.joint.{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    for j in config.joints:
        lines += ["", "[[joint]]", f'name = "{j.name}"', f"servo_id = {j.servo_id}",
                  f"ticks_per_rad = {j.ticks_per_rad!r}", f"zero_tick = {j.zero_tick!r}", f"direction = {j.direction}",
                  f"min_deg = {math.degrees(j.min_rad)!r}", f"max_deg = {math.degrees(j.max_rad)!r}"]
        if j.model:
            lines.append(f'model = "{j.model}"')
        if j.homing_offset is not None:
            lines.append(f"homing_offset = {j.homing_offset}")
        if j.torque_limit is not None:
            lines.append(f"torque_limit_pct = {j.torque_limit * 100:g}")
        if j.range_min is not None:
            lines += [f"{k} = {getattr(j, k)}" for k in LEROBOT_RANGE_KEYS]
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return f"{v:g}" if isinstance(v, float) else str(v)
