"""`hil replay FILE`: play a recording into a shared-state block, so the twin shows it as if live."""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

from hil.errors import InputError
from hil.robots.servos import servo_table
from hil.runtime.recorder import LOOP_MOTION, open_run
from hil.runtime.shared import BOARD_STATES, LoopStatus, LoopWord, SharedState, loop_name
from hil.display import display_available
from hil.runtime.helpers import TwinStarter


class _Stopped(Exception):
    """A signal ended the replay (its number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum, frame) -> None:
    raise _Stopped(signum)


def replay(path: str, speed: float = 1.0, headless: bool = False, loop: bool = False,
           start_twin: TwinStarter | None = None, robot: str | None = None) -> int:
    """Play a recording into a shared block (and the twin); 0 when it ran to its end, 128 + the
    signal's number when a signal (Ctrl-C, SIGTERM, SIGHUP) stopped it. The block goes either way.
    The twin (started with `start_twin`; none without) has a replay bar that pauses it, scrubs it and
    sets its speed (the block's LoopWord.REPLAY_* words)."""
    data, meta, model = open_run(path, robot)
    robot = model.spec
    if speed <= 0:
        raise InputError("--speed must be positive")
    name = loop_name(model.name, os.getpid())
    shared = SharedState(name, model.n, create=True)
    shared.ctrl[LoopWord.REPLAY_ROWS] = len(data)
    shared.set_info(robot=model.spec, replay=os.path.abspath(path), pid=os.getpid())
    twin = None
    headless = headless or start_twin is None
    if not headless and display_available():
        twin = start_twin(name, model.spec)
    elif not headless:
        print("no display: replaying headless (set DISPLAY or use xvfb-run to see it in the twin)")
    shared.ctrl[LoopWord.STATUS] = LoopStatus.RUNNING
    shared.set_event(f"replay of {path}: {len(data)} cycles, {data['t'][-1] - data['t'][0]:.1f} s")
    print(f"replaying {path}: {len(data)} cycles at {speed:g}× ({robot})")
    old = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    player = _Player(data, shared, speed, headless, loop, stall_currents(model, data, meta))
    stopped: int | None = None
    try:
        player.run()
    except _Stopped as e:
        stopped = e.signum
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        shared.ctrl[LoopWord.STATUS] = LoopStatus.STOPPED
        if twin is not None:
            twin.terminate()
            twin.join(timeout=3)
        shared.close()
    if stopped is not None:
        print(f"replay stopped by {signal.Signals(stopped).name} at t = {player.t_now:.2f} s of the recording",
              file=sys.stderr)
        return 128 + stopped
    print("replay done", file=sys.stderr)
    return 0


def stall_currents(model, data, meta: dict):
    """The stall current of each joint's servo as the run knew it (its meta), else the robot's own
    servo table's; None for a recording without currents."""
    if "current_mA" not in data.dtype.names:
        return None
    kept = meta.get("stall_current_mA")
    if isinstance(kept, list) and len(kept) == model.n and all(isinstance(v, (int, float)) and v > 0 for v in kept):
        return np.array(kept, dtype=float)
    return servo_table(model).stall_current_mA()


class _Player:
    """A cursor over the recording's rows that follows its own clock: the recording's time runs at
    `speed` (or the twin's), stands while paused, and jumps where the twin seeks."""

    def __init__(self, data, shared, speed: float, headless: bool, loop: bool, stall_mA=None) -> None:
        self.data, self.shared, self.speed, self.headless, self.loop = data, shared, speed, headless, loop
        self.stall_mA = stall_mA
        self.t = data["t"].astype(float)
        self.F = {k: shared.field(k) for k in shared.layout if not k.startswith("_")}
        self.k = 0
        self.t_now = float(self.t[0])
        self.motion = "loop_flags" in data.dtype.names

    def run(self) -> None:
        ctrl, last, shown = self.shared.ctrl, time.monotonic(), -1
        while True:
            if ctrl[LoopWord.REPLAY_SEEK]:
                self.k = int(ctrl[LoopWord.REPLAY_SEEK]) - 1
                self.t_now = float(self.t[self.k])
                ctrl[LoopWord.REPLAY_SEEK] = 0
            now = time.monotonic()
            if not ctrl[LoopWord.REPLAY_PAUSE]:
                speed = ctrl[LoopWord.REPLAY_SPEED] / 1000.0 if ctrl[LoopWord.REPLAY_SPEED] > 0 else self.speed
                self.t_now += (now - last) * speed
                while self.k + 1 < len(self.t) and self.t[self.k + 1] <= self.t_now:
                    self.k += 1
            last = now
            if self.k != shown:
                ctrl[LoopWord.REPLAY_ROW] = self.k     # first: whoever sees the row's state sees its number too
                self._publish(self.k)
                shown = self.k
            if self.k == len(self.t) - 1 and not ctrl[LoopWord.REPLAY_PAUSE] and self.t_now >= self.t[-1]:
                if not self.loop:
                    return
                self.k, self.t_now, shown = 0, float(self.t[0]), -1
            time.sleep(0.001)

    def _publish(self, k: int) -> None:
        row, F, shared = self.data[k], self.F, self.shared
        shared.begin_write()
        F["t"][0] = row["t"]
        F["cycle"][0] = k
        F["q_cmd"][:] = row["q_cmd"]
        F["q_meas"][:] = row["q_meas"]
        F["q_target"][:] = row["q_target"]
        if self.stall_mA is not None:
            F["load"][:] = row["current_mA"] / self.stall_mA
        F["board_state"][0] = row["board_state"]
        F["faults"][0] = row["faults"]
        F["safety_flags"][0] = row["safety_flags"]
        F["link_ok"][0] = 1.0
        F["motion_running"][0] = 1.0 if self.motion and row["loop_flags"] & LOOP_MOTION else 0.0
        shared.end_write()
        if self.headless and k % max(1, len(self.data) // 20) == 0:
            print(f"  t {row['t']:7.2f} s  board {BOARD_STATES.get(int(row['board_state']), '?')}  "
                  f"max |cmd − meas| {np.degrees(np.abs(row['q_cmd'] - row['q_meas']).max()):.2f}°")
