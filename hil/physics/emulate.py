"""A board emulator with the robot in physics behind it: `python -m hil.physics.emulate --robot R
[--bus KIND [--board-config FILE]] -- EMULATOR OPTIONS`.

The emulator is the same one a plain dry-run starts — our board model
(`firmware_protocol.emulator`) or a servo bus's (`firmware_protocol.buses.emulator`), with the
options after `--` — and its joints are MuJoCo's (`hil.physics.physics_plant.PhysicsPlant`): the host
cannot tell the difference except that the robot now sags, stumbles and can fall. What it
prints first is the pty's path, as the other emulators do.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from firmware_protocol import messages as M
from firmware_protocol.buses import emulator as bus_emulator
from firmware_protocol.emulator import __main__ as board_emulator
from firmware_protocol.plant import ServoBridge
from hil import board_config, robots
from hil.errors import HilError, message
from hil.physics.build import build
from hil.physics.physics_plant import PhysicsPlant
from hil.physics.world import WorldBlock
from hil.process_life import end_command_process, real_time_gc, start_command_process


def _made(plant: PhysicsPlant, made: list, world: WorldBlock | None) -> PhysicsPlant:
    if world is not None:
        plant.attach_world(world)
    made.append(plant)
    return plant


def _board_plant(model, servo, made: list, world: WorldBlock | None):
    def plant_for(config):
        pm = build(model, servo)
        return _made(PhysicsPlant(pm, np.asarray(config.initial, dtype=float), brakes=config.kind == M.BoardKind.PUMA6),
                     made, world)
    return plant_for


def _bus_bridge(model, servo, config, made: list, world: WorldBlock | None):
    def bridge_for(servos):
        pm = build(model, servo)
        plant = _made(PhysicsPlant(pm, model.home.copy()), made, world)
        joints = config.joints
        kt = [s.torque_per_amp_nm for s in servo.servos]
        return ServoBridge(plant, [j.servo_id for j in joints], [j.ticks_per_rad for j in joints],
                           [j.zero_tick for j in joints], [j.direction for j in joints], kt, config.mix)
    return bridge_for


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hil.physics.emulate", description=__doc__.split("\n")[0],
                                allow_abbrev=False)
    p.add_argument("--robot", required=True, help="the robot (a shipped name, a URDF or a robot .toml)")
    p.add_argument("--bus", help="a servo bus kind: its emulator instead of our board's")
    p.add_argument("--board-config", help="the robot ↔ servo mapping (default: the one shipped for --bus)")
    p.add_argument("--truth", metavar="FILE", help="at exit, write what the robot's body did (JSON: fell, when, "
                                                   "largest tilt, travel): the run's report reads it")
    p.add_argument("--world", metavar="FILE", help="while it runs, publish where the body is, its floor contacts and "
                                                   "their centre of pressure to FILE (the twin draws them)")
    return p


def main(argv: list[str] | None = None) -> int:
    start_command_process()   # loading the robot and building its MuJoCo model: rarer collections
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, theirs = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    args = parser().parse_args(ours)
    try:
        model = robots.load(args.robot)
        bus = board_config.resolve(model, args.bus, args.board_config)
        servo = board_config.servos_of(model, bus)
        build(model, servo)   # a robot MuJoCo cannot build is said now, before the pty exists
    except HilError as e:
        print(f"physics emulator: {message(e)}", file=sys.stderr)
        return 2
    try:   # made once, before the pty: the twin maps this very file for the whole run
        world = WorldBlock(args.world, create=True) if args.world else None
    except OSError as e:
        print(f"physics emulator: --world {args.world}: cannot write it ({e.strerror}); name a file in a folder "
              "that exists and is writable", file=sys.stderr)
        return 2
    made: list[PhysicsPlant] = []
    real_time_gc()   # loaded: from here on it answers the loop in real time
    try:
        if bus is not None:
            return bus_emulator.main(theirs, bridge_for=_bus_bridge(model, servo, bus, made, world))
        return board_emulator.main(theirs, plant_for=_board_plant(model, servo, made, world))
    finally:
        if args.truth and made:
            with open(args.truth, "w") as f:
                json.dump(made[0].truth(), f)
        if world is not None:
            world.unlink()


if __name__ == "__main__":
    end_command_process(main())
