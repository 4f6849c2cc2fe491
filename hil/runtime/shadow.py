"""The shadow twin (`hil run --port P --shadow`): the robot in MuJoCo, driven with the same commands
as the real one, in real time beside the run, so that what the robot does can be held against what
it should do.

Its own process (physics must not share the loop's CPU): it reads the loop's block (the command
sent, whether the board is enabled, the measured pose), steps the physics plant to now, and
publishes the predicted pose and the residual measured − predicted per joint, with a diagnosis
where the residual has a shape:

  offset     a steady residual while the joint moves: its zero is off (`hil calibrate`)
  reversed   measured and predicted move in opposite directions: the joint is reversed
  backlash   the residual flips sign with the direction of motion: play in the gears
  stall      predicted moving, the joint still, the residual growing: something blocks it

A joint "moves" where its model moves and it was commanded to: a model that moves on under a
command held still (settling, a body swaying on its feet in physics after the motion stopped) is
the model's own motion, which the robot, told to stand, rightly does not follow.

While the robot is not enabled the shadow is put where the robot is measured to be, so each enable
starts both from the same pose. The block (`<loop>.shadow` in the runtime folder) is read by the
twin; with `--record FILE` the shadow writes FILE.shadow.npy at the end (t, q_pred, residual, flags)
which `hil plot` draws.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time

import numpy as np

from firmware_protocol.messages import BoardState
from hil import robots
from hil.board_config import load as load_board_config, servos_of
from hil.seqlock import SeqlockFile
from hil.runtime.shared import LoopClient, runtime_dir

OFFSET, REVERSED, BACKLASH, STALL = 1, 2, 4, 8
DIAGNOSES = {OFFSET: "offset", REVERSED: "reversed", BACKLASH: "backlash", STALL: "stall"}
WINDOW_S = 2.0                     # the residual's history a diagnosis looks at
MOVING_RAD_S = 0.05                # a joint faster than this (predicted, commanded) is moving
COMMANDED_RECENTLY_S = 0.2         # and it moves on in its model this long after its command stops
# steady residuals above this are an offset (or, flipping with the direction, backlash): above what a
# model's servo stiffness being somewhat off gives (a soft servo's sag under load, its compensation)
OFFSET_RAD = math.radians(2.5)
STALL_RAD = math.radians(3.0)
RATE_HZ = 200.0
# not run for longer than this (a machine busy with other work), the shadow has missed the commands
# of that time: holding the last one through the gap would predict a robot that never was
GAP_S = 0.05
# started over mid-motion, the shadow's joints start from rest while the robot's are moving: their
# servos take this long to take the motion up again, and what they show meanwhile is no diagnosis
SETTLE_S = 0.5
SHADOW_NICE = -5   # its scheduling niceness, where the user may raise it (root); the loop's is real-time


def block_path(loop_name: str) -> str:
    return os.path.join(runtime_dir(), f"{loop_name}.shadow")


class ShadowBlock:
    """t, then n predicted positions, n residuals, n diagnosis flags, in a seqlocked file
    (`hil.seqlock`) mapped by both sides."""

    def __init__(self, path: str, n: int, create: bool = False) -> None:
        self.n = n
        try:
            self.block = SeqlockFile(path, 1 + 3 * n, create)
        except ValueError:
            raise ValueError(f"{path}: not a shadow block for {n} joints") from None

    def write(self, t: float, q_pred: np.ndarray, residual: np.ndarray, flags: np.ndarray) -> None:
        self.block.write(np.concatenate([[t], q_pred, residual, flags]))

    def read(self) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
        v = self.block.read()
        if v is None:
            return None
        n = self.n
        return float(v[0]), v[1:1 + n], v[1 + n:1 + 2 * n], v[1 + 2 * n:]


def diagnose(t: np.ndarray, meas: np.ndarray, pred: np.ndarray, cmd: np.ndarray) -> np.ndarray:
    """Per joint, the flags the last WINDOW_S of measured, predicted and commanded positions (rows)
    show."""
    n = meas.shape[1]
    flags = np.zeros(n)
    keep = np.concatenate([[True], np.diff(t) > 0]) if len(t) else np.zeros(0, dtype=bool)
    t, meas, pred, cmd = t[keep], meas[keep], pred[keep], cmd[keep]   # (a state read twice is one sample)
    if len(t) < 10:
        return flags
    dt = np.diff(t)[:, None]
    vp, vm = np.diff(pred, axis=0) / dt, np.diff(meas, axis=0) / dt
    commanded = _commanded_recently(t[1:], np.abs(np.diff(cmd, axis=0) / dt) > MOVING_RAD_S)
    r = (meas - pred)[1:]
    for j in range(n):
        moving = (np.abs(vp[:, j]) > MOVING_RAD_S) & commanded[:, j]
        if moving.sum() < 5:
            continue
        a, b = vp[moving, j], vm[moving, j]
        if np.dot(a, b) < -0.5 * np.dot(a, a):
            flags[j] += REVERSED
            continue
        still = np.abs(b) < 0.2 * np.abs(a)
        growing = abs(r[-1, j]) > STALL_RAD and abs(r[-1, j]) > abs(r[moving, j][0])
        if moving[-5:].all() and still[-5:].all() and growing:
            flags[j] += STALL
            continue
        up, down = r[moving & (vp[:, j] > 0), j], r[moving & (vp[:, j] < 0), j]
        if len(up) > 3 and len(down) > 3 and np.median(up) * np.median(down) < 0 \
                and abs(np.median(up) - np.median(down)) > OFFSET_RAD:
            flags[j] += BACKLASH
        elif abs(np.median(r[moving, j])) > OFFSET_RAD and np.std(r[moving, j]) < 0.5 * abs(np.median(r[moving, j])):
            flags[j] += OFFSET
    return flags


def _commanded_recently(t: np.ndarray, cmd_moving: np.ndarray) -> np.ndarray:
    """Per sample and joint: its command moved within the last COMMANDED_RECENTLY_S."""
    last = np.where(cmd_moving, t[:, None], -np.inf)
    return t[:, None] - np.maximum.accumulate(last, axis=0) <= COMMANDED_RECENTLY_S


def describe(names, residual: np.ndarray, flags: np.ndarray) -> list[str]:
    """One line per flagged joint: its name, what the residual points to, and its size."""
    out = []
    for j, f in enumerate(flags.astype(int)):
        for bit, word in DIAGNOSES.items():
            if f & bit:
                out.append(f"{names[j]}: {word} (measured − predicted {math.degrees(residual[j]):+.1f}°)")
    return out


class Shadow:
    def __init__(self, loop_name: str, robot: str, board_config: str | None) -> None:
        from hil.physics.build import build   # lazy: MuJoCo is an optional extra (--shadow checks it first)
        from hil.physics.physics_plant import PhysicsPlant   # lazy: as above

        self.client = LoopClient(loop_name)
        self.model = robots.load(robot)
        bus = load_board_config(board_config, self.model) if board_config else None
        servo = servos_of(self.model, bus)
        pm = build(self.model, servo)
        s = self.client.snapshot()
        self.plant = PhysicsPlant(pm, initial=s.q_meas, brakes="dh" in self.model.meta)
        self.block = ShadowBlock(block_path(loop_name), self.model.n, create=True)
        self.rows: list[tuple] = []      # (t, measured, predicted, commanded) while enabled, last WINDOW_S
        self.gaps: list[float] = []      # each time this process was not run for longer than GAP_S (s)
        self.last_step = time.monotonic()
        self.settled_from = self.last_step   # no rows before this (after starting over mid-motion)

    def _resync(self, q: np.ndarray) -> None:
        """Not enabled: the shadow stands where the robot is measured to be."""
        p = self.plant
        p.pm.set_joints(p.d.qpos, q)
        p.d.qvel[:] = 0.0
        p.stop_here()
        p.mj.mj_forward(p.m, p.d)
        p.q = q.copy()

    def step(self) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        """One step to now: (the loop's time, predicted pose, residual, diagnosis flags)."""
        s = self.client.snapshot()
        now = time.monotonic()
        enabled = int(s.board_state) == BoardState.ENABLED
        gap, self.last_step = now - self.last_step, now
        if enabled and gap <= GAP_S:
            self.plant.drive(s.q_cmd, np.ones(self.model.n, dtype=bool))
            self.plant.advance(now)
        else:
            if enabled:   # after a gap: start over from the robot, with a diagnosis window of its own
                self.rows = []
                self.gaps.append(gap)
                self.settled_from = now + SETTLE_S
            self._resync(s.q_meas)
            self.plant.t = now
        pred = self.plant.q.copy()
        self.rows = [r for r in self.rows if r[0] > s.t - WINDOW_S]
        if enabled and now >= self.settled_from:
            self.rows.append((float(s.t), s.q_meas.copy(), pred, s.q_cmd.copy()))
        flags = diagnose(*(np.array(column) for column in zip(*self.rows))) if len(self.rows) > 10 \
            else np.zeros(self.model.n)
        residual = s.q_meas - pred
        self.block.write(float(s.t), pred, residual, flags)
        return float(s.t), pred, residual, flags


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hil.runtime.shadow", allow_abbrev=False)
    p.add_argument("--loop", required=True)
    p.add_argument("--robot", required=True)
    p.add_argument("--board-config")
    p.add_argument("--record", help="write RECORD.shadow.npy at the end")
    args = p.parse_args(argv)
    try:
        # ahead of ordinary work for the CPU the loop leaves (a busy machine's other jobs): a shadow not
        # run for GAP_S starts over and loses what it was diagnosing; a user without the right keeps 0
        os.nice(SHADOW_NICE)
    except OSError:
        pass
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the run's Ctrl-C is the loop's; the run ends us
    shadow = Shadow(args.loop, args.robot, args.board_config)
    print(f"shadow: {shadow.model.name} in MuJoCo beside the run, {RATE_HZ:.0f} Hz", flush=True)
    rows, said = [], {}
    try:
        while not stopping:
            t, pred, residual, flags = shadow.step()
            rows.append((t, pred, residual, flags))
            for line in describe(shadow.model.joint_names, residual, flags):
                joint = line.split(":")[0]
                if said.get(joint) != line.split("(")[0]:
                    said[joint] = line.split("(")[0]
                    print(f"shadow: {line}", flush=True)
            time.sleep(1.0 / RATE_HZ)
    finally:
        if shadow.gaps:
            print(f"shadow: not run for more than {GAP_S * 1e3:.0f} ms {len(shadow.gaps)} time(s) (the longest "
                  f"{max(shadow.gaps) * 1e3:.0f} ms: the machine is busy); it started over from the measured pose "
                  "each time", flush=True)
        if args.record and rows:
            n = shadow.model.n
            out = np.zeros(len(rows), dtype=[("t", "f8"), ("q_pred", "f8", (n,)), ("residual", "f8", (n,)),
                                             ("flags", "i4", (n,))])
            for k, (t, pred, residual, flags) in enumerate(rows):
                out[k] = (t, pred, residual, flags.astype(int))
            np.save(args.record + ".shadow.npy", out)
        try:
            os.unlink(block_path(args.loop))
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
