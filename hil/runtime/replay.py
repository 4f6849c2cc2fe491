"""`hil replay FILE`: play a recording into a shared-state block, so the twin shows it as if live."""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

from hil.errors import InputError
from hil.runtime.recorder import LOOP_MOTION, open_run
from hil.runtime.shared import C_STATUS, LoopStatus, SharedState, loop_name
from hil.runtime.supervisor import display_available
from hil.runtime.twin_launch import start_twin


class _Stopped(Exception):
    """A signal ended the replay (its number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum, frame) -> None:
    raise _Stopped(signum)


def replay(path: str, speed: float = 1.0, headless: bool = False, loop: bool = False) -> int:
    """Play a recording into a shared block (and the twin); 0 when it ran to its end, 128 + the
    signal's number when a signal (Ctrl-C, SIGTERM, SIGHUP) stopped it. The block goes either way."""
    data, meta, model = open_run(path)
    robot = meta.get("robot")
    if speed <= 0:
        raise InputError("--speed must be positive")
    name = loop_name(model.name, os.getpid())
    shared = SharedState(name, model.n, create=True)
    F = {k: shared.field(k) for k in shared.layout if not k.startswith("_")}
    twin = None
    if not headless and display_available():
        twin = start_twin(name, model.spec)
    elif not headless:
        print("no display: replaying headless (set DISPLAY or use xvfb-run to see it in the twin)")
    shared.ctrl[C_STATUS] = LoopStatus.RUNNING
    shared.set_event(f"replay of {path}: {len(data)} cycles, {data['t'][-1] - data['t'][0]:.1f} s")
    print(f"replaying {path}: {len(data)} cycles at {speed:g}× ({robot})")
    old = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    stopped: int | None = None
    t_now = float(data["t"][0])
    try:
        while True:
            t0 = time.monotonic()
            r0 = float(data["t"][0])
            for k in range(len(data)):
                due = t0 + (float(data["t"][k]) - r0) / speed
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                row = data[k]
                t_now = float(row["t"])
                shared.begin_write()
                F["t"][0] = row["t"]
                F["cycle"][0] = k
                F["q_cmd"][:] = row["q_cmd"]
                F["q_meas"][:] = row["q_meas"]
                F["q_target"][:] = row["q_target"]
                F["board_state"][0] = row["board_state"]
                F["faults"][0] = row["faults"]
                F["safety_flags"][0] = row["safety_flags"]
                F["link_ok"][0] = 1.0
                F["motion_running"][0] = 1.0 if "loop_flags" in data.dtype.names and row["loop_flags"] & LOOP_MOTION else 0.0
                shared.end_write()
                if headless and k % max(1, len(data) // 20) == 0:
                    print(f"  t {row['t']:7.2f} s  board state {int(row['board_state'])}  "
                          f"max |cmd − meas| {np.degrees(np.abs(row['q_cmd'] - row['q_meas']).max()):.2f}°")
            if not loop:
                break
    except _Stopped as e:
        stopped = e.signum
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        shared.ctrl[C_STATUS] = LoopStatus.STOPPED
        if twin is not None:
            twin.terminate()
        shared.close()
    if stopped is not None:
        print(f"replay stopped by {signal.Signals(stopped).name} at t = {t_now:.2f} s of the recording",
              file=sys.stderr)
        return 128 + stopped
    print("replay done", file=sys.stderr)
    return 0
