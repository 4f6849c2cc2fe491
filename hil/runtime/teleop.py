"""Leader–follower teleoperation (`hil teleop`): a leader arm read with its torque off (its own
process, `hil.runtime.leader`), the follower driven by hil's loop following it (`Follow`) through
every safety layer a run has — the ranges (a leader pose past them clamped and said), speed and
acceleration limits, self-collision, the ramp from the measured pose, the watchdogs. With
`record`, the run becomes one more episode of a LeRobot dataset when it ends.

    run(TeleopRequest(robot="so101", leader="/dev/ttyACM1", follower="/dev/ttyACM0"), twin) → exit code
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from hil import board_config, emulator_launch, robots
from hil.errors import HilError, InputError
from hil.lerobot import dataset, motor_calibration
from hil.lerobot.units import LeRobotUnits
from hil.runtime import leader as leader_arm
from hil.runtime import supervisor
from hil.runtime.helpers import TwinStarter
from hil.process_life import start_helper
from hil.runtime.recorder import load_recording, motion_rows
from hil.runtime.shared import runtime_dir
from hil.runtime.teleop_request import TeleopRequest, check_request

FIRST_READING_S = 15.0   # the leader's connect and first whole reading (a busy machine, a slow bus)


@dataclass(frozen=True)
class Setup:
    model: object
    bus: str
    follower: object       # BusConfig
    leader: object         # BusConfig
    units: LeRobotUnits | None


def prepare(req: TeleopRequest) -> Setup:
    """Everything checked before anything starts: the options, the robot, both maps, the ports, the dataset."""
    check_request(req)
    model = robots.load(req.robot)
    bus = req.bus or (None if req.board_config else motor_calibration.bus_for(model, None))
    follower = board_config.resolve(model, bus, req.board_config)
    bus = follower.bus
    leader = board_config.resolve(model, bus, req.leader_config) if req.leader_config else \
        board_config.shipped(model, bus, "leader")
    if leader.bus != follower.bus:
        raise InputError(f"the leader's map ({leader.source}) is for a {leader.bus} bus, the follower's for "
                         f"{follower.bus}: give both for one kit")
    units = None
    if req.record and not req.record.endswith(".npy"):
        units = LeRobotUnits(follower, req.degrees)
        dataset.check_append(req.record, _episode_like(units, req, model, follower))
    return Setup(model, bus, follower, leader, units)


def _episode_like(units, req: TeleopRequest, model, follower) -> dataset.Episode:
    zeros = np.zeros((1, len(units.names)), dtype=np.float32)
    return dataset.Episode(list(units.names), int(req.fps), zeros, zeros, req.task, f"{model.name}_{follower.role}",
                           tuple(units.modes))


def run(req: TeleopRequest, twin: TwinStarter | None = None) -> int:
    setup = prepare(req)
    model = setup.model
    emu = None
    port = req.leader
    if req.dry_run:
        hands = req.hands or tuple(emulator_launch.teleop_hands(setup.leader, model))
        emu = emulator_launch.start_bus_emulator(setup.leader, model, parent_pid=os.getpid(), hands=hands,
                                                 faults=req.leader_faults)
        port = emu.path
        print(f"leader: {setup.leader.source} emulated on {port}, moved by a hand ({len(hands)} joint(s))")
    path = leader_arm.block_path(runtime_dir(), os.getpid())
    block = leader_arm.LeaderBlock(path, model.n, create=True)
    as_dataset = bool(req.record) and not req.record.endswith(".npy")
    record = os.path.join(runtime_dir(), f"teleop-{os.getpid()}.npy") if as_dataset else req.record
    proc = None
    try:
        proc = start_helper(leader_arm.main, (port, setup.leader, path), "hil-leader")
        _wait_for_leader(block, proc, port)
        code = supervisor.run(supervisor.RunRequest(
            robot=model.spec, port=req.follower, dry_run=req.dry_run, rate_hz=req.rate_hz,
            duration_s=req.duration_s, headless=req.headless, record=record, motion=f"follow:{path}",
            enable=True, bus=setup.bus, board_config=req.board_config, watchdog_ms=req.watchdog_ms,
            faults=req.faults, command="teleop"), twin=twin)
    finally:
        if proc is not None and proc.is_alive():
            proc.terminate()
            proc.join(5)
        if emu is not None:
            emu.stop()
        block.unlink()
    if as_dataset:
        code = _save_episode(req, setup, record) or code
    return code


def _wait_for_leader(block, proc, port: str) -> None:
    """Until the leader's first whole reading: its reader's failure is the run's (nothing moved)."""
    deadline = time.monotonic() + FIRST_READING_S
    while time.monotonic() < deadline:
        got = block.read()
        if got is not None and got[1] == leader_arm.READING:
            print(f"leader: reading {port}, torque off")
            return
        if got is not None and got[1] == leader_arm.LOST:
            raise HilError(f"leader: {block.why()}; nothing was moved")
        if not proc.is_alive():
            raise HilError(f"leader: its reader ended (exit code {proc.exitcode}) before a reading; nothing was moved")
        time.sleep(0.02)
    raise HilError(f"leader: no whole reading from {port} within {FIRST_READING_S:g} s; nothing was moved")


def _save_episode(req: TeleopRequest, setup: Setup, record: str) -> int:
    """The run's recording as one more episode of the dataset (whatever ended the run: what was
    recorded is kept, and said)."""
    try:
        data, _ = load_recording(record)
        data = motion_rows(data, f"--record {req.record}")
        ep = dataset.episode_from_samples(data["t"], data["q_meas"], data["q_target"], setup.units, int(req.fps),
                                          req.task, f"{setup.model.name}_{setup.follower.role}")
        index = dataset.append_episode(req.record, ep)
    except (OSError, ValueError, InputError) as e:
        print(f"--record {req.record}: the episode was not written: {e}; the run's recording is kept in {record} "
              f"(`hil export {record} --lerobot DIR` makes it one)")
        return 1
    print(f"--record {req.record}: episode {index}, {len(ep.action)} frames at {req.fps} fps "
          f"({', '.join(setup.units.names)})")
    for p in (record, record + ".json", record + ".events.jsonl"):
        try:
            os.unlink(p)
        except OSError:
            pass
    return 0
