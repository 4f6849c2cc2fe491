"""What a calibration shows and asks: the twin's before and after, the prompts, a latched fault."""

from __future__ import annotations

import os
import time

import numpy as np

from firmware_protocol import messages as M
from hil.display import display_available
from hil.errors import HilError
from hil.runtime.shared import LoopStatus, LoopWord, SharedState, loop_name
from hil.runtime.helpers import TwinStarter


def ask(args, text: str) -> None:
    if args.yes:
        print(text + " (--yes)")
        return
    try:
        input(text + " Press Enter when ready (Ctrl-C to stop). ")
    except EOFError:
        raise SystemExit("no terminal to ask on: run with --yes") from None


class CalibrationView:
    """Before and after, in the twin: the measured pose solid, the nominal reference as the ghost.

    Publishes into a shared-state block like a running loop does, so `hil twin` (opened here when
    a display is available) shows it; `hil twin --attach NAME` works too."""

    def __init__(self, model, start_twin: TwinStarter | None) -> None:
        self.model = model
        self.name = loop_name(model.name, os.getpid())
        self.shared = SharedState(self.name, model.n, create=True)
        self.shared.ctrl[LoopWord.STATUS] = LoopStatus.RUNNING
        self.fields = {k: self.shared.field(k) for k in ("q_meas", "q_cmd", "q_target", "link_ok", "board_state")}
        self.twin = None
        if start_twin is not None:
            if display_available():
                self.twin = start_twin(self.name, model.spec)
                print("twin: showing the measured pose (solid) against the reference (ghost)")

    def show(self, q_meas: np.ndarray, q_nominal: np.ndarray, text: str) -> None:
        self.shared.begin_write()
        self.fields["q_meas"][:] = q_meas
        self.fields["q_cmd"][:] = q_nominal
        self.fields["q_target"][:] = q_nominal
        self.fields["link_ok"][0] = 1.0
        self.fields["board_state"][0] = 1
        self.shared.end_write()
        if text:
            self.shared.set_event(text)

    def close(self, linger_s: float) -> None:
        if self.twin is not None:
            time.sleep(linger_s)
            self.twin.terminate()
            self.twin.join(timeout=3)
        self.shared.close()


def clear_latched_fault(args, link) -> None:
    """A board left in FAULT or ESTOP (a watchdog trip from an earlier run, say) cannot be jogged:
    offer to clear it — asked, since clearing an e-stop is the user's decision."""
    state = None
    for _ in range(100):
        s = link.latest()
        if s is not None:
            state = s
            break
        link.send_positions(np.zeros(link.info.n_joints), hold=True)
        time.sleep(0.01)
    if state is None or state.state not in (M.BoardState.FAULT, M.BoardState.ESTOP):
        return
    what = f"{M.BoardState(state.state).name} ({M.fault_names(state.faults)})"
    if not args.yes:
        try:
            answer = input(f"The board is in {what}. Clear it (the board stays disabled)? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            raise HilError(f"the board is in {what}: not cleared. Clear it with `hil calibrate ... --yes`, "
                           "`hil ctl clear-fault` on a running loop, or power-cycle the board")
    link.clear_faults()
    print(f"cleared the board's {what}; it is disabled")
