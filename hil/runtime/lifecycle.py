"""The lifecycle of a connected robot: one state machine, pure (no I/O, no clock, no threads).

Two rules (docs/lifecycle.md has the whole transition table):

1. Only a user request moves the robot toward motion: enable, start a motion, jog, clear a fault.
   `hil run --enable --motion M` is one such request, valid once, at start.
2. Every other event moves it toward safety and **clears intent**: the running motion is stopped
   (not paused), a queued jog or a pending start is dropped, and the board's next command is
   computed from a STATE received after the event.

`Lifecycle.handle(event)` returns the `Step` it took: the new mode and activity, the board
actions the caller must carry out (send ENABLE, DISABLE, ESTOP, CLEAR_FAULT, begin the motion)
and whether intent was cleared. The caller (`hil.runtime.controller`) turns board states, the
mailbox, the clock and safety checks into events; this module only decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum


class Mode(IntEnum):
    """Where the robot is (published in shared memory as this number)."""

    DISCONNECTED = 0  # no link: nothing is sent
    DISABLED = 1      # torque off; keep-alive holds only (the board answers each with a STATE)
    ENABLING = 2      # ENABLE asked for; waiting for a STATE that says ENABLED
    RAMPING = 3       # enabled: ramping from the measured pose to the target at the ramp speed
    ACTIVE = 4        # enabled: holding, jogging or running a motion (see Activity)
    HELD = 5          # enabled: the last safe command repeated (a safety check or overruns)
    FAULT = 6         # the board latched a fault: keep-alive holds only
    ESTOP = 7         # e-stopped: keep-alive holds only


class Activity(IntEnum):
    """What an enabled robot is doing (the intent)."""

    IDLE = 0
    JOG = 1
    MOTION = 2


class Ev(Enum):
    """Events, by who causes them."""

    # a user's requests (twin, CLI, LoopClient)
    ENABLE = "enable"
    DISABLE = "disable"
    START = "start motion"
    JOG = "jog"
    STOP = "stop motion"
    CLEAR_FAULT = "clear fault"
    ESTOP = "e-stop"
    # the board, as seen in a STATE received after the last event that needs a fresh one
    SAW_ENABLED = "board reports ENABLED"
    SAW_DISABLED = "board reports DISABLED"
    SAW_FAULT = "board reports FAULT"
    SAW_ESTOP = "board reports ESTOP"
    REBOOT = "board rebooted"
    LINK_LOST = "link lost"
    RECONNECTED = "reconnected"
    ENABLE_FAILED = "enable failed"
    ENABLE_TIMEOUT = "enable not confirmed"
    CLEARED = "faults cleared"
    # the loop's own
    RAMP_DONE = "ramp done"
    MOTION_DONE = "motion done"
    SAFETY_HOLD = "safety hold"
    SAFETY_RELEASE = "safety hold released"
    OVERRUN_HOLD = "missed deadlines: hold"
    OVERRUN_RELEASE = "deadlines met again"
    OVERRUN_DISABLE = "missed deadlines: disable"
    HOLD_TIMEOUT = "held too long"
    SIGNAL = "signal"
    PARENT_DIED = "parent died"
    FELL = "the robot fell"
    STALL = "a joint stalled"


USER_EVENTS = frozenset({Ev.ENABLE, Ev.DISABLE, Ev.START, Ev.JOG, Ev.STOP, Ev.CLEAR_FAULT, Ev.ESTOP})


class Action(Enum):
    SEND_ENABLE = "send ENABLE"
    SEND_DISABLE = "send DISABLE"
    SEND_ESTOP = "send ESTOP"
    SEND_CLEAR_FAULT = "send CLEAR_FAULT"
    BEGIN_MOTION = "begin the motion from its start"  # reset the motion, its time to 0
    SET_JOG = "take the jog target"


# the members as module names too: a lookup on the enum class is an attribute search, and the
# cycle compares modes a dozen times
DISCONNECTED, DISABLED, ENABLING, RAMPING, ACTIVE, HELD, FAULT, ESTOP = Mode
IDLE, JOG, MOTION = Activity
ENABLED_MODES = frozenset({Mode.RAMPING, Mode.ACTIVE, Mode.HELD})
HOLD_SAFETY, HOLD_OVERRUN = 1, 2


@dataclass(frozen=True)
class Step:
    """What one event did."""

    event: Ev
    before: Mode
    mode: Mode
    activity: Activity
    actions: tuple[Action, ...]
    cleared: bool   # intent was forgotten
    refused: str    # a user request that does not apply here, and why ("": none)


class Lifecycle:
    def __init__(self) -> None:
        self.mode = Mode.DISCONNECTED
        self.activity = Activity.IDLE
        self.start_when_enabled = False  # `--enable --motion M`: start once, after the first ramp-in
        self.holds = 0                   # HOLD_SAFETY | HOLD_OVERRUN while HELD
        self.clearing = False            # CLEAR_FAULT sent, the board not yet DISABLED
        self.estop_pending = False       # an e-stop asked for while disconnected

    # ------------------------------------------------------------------ views
    @property
    def enabled(self) -> bool:
        return self.mode in ENABLED_MODES

    @property
    def sends_positions(self) -> bool:
        """Whether this cycle's command is a position target (else a keep-alive hold, or nothing)."""
        return self.mode in ENABLED_MODES

    @property
    def has_intent(self) -> bool:
        return self.activity != Activity.IDLE or self.start_when_enabled

    @property
    def motion_running(self) -> bool:
        """The motion's clock runs: active, running a motion, nothing holding."""
        return self.mode == Mode.ACTIVE and self.activity == Activity.MOTION

    # ---------------------------------------------------------------- the one entry
    def handle(self, ev: Ev, start_after: bool = False) -> Step:
        """Take one event; `start_after` with ENABLE: start the motion once ramped in."""
        before, intent_before = self.mode, self.has_intent
        if ev in USER_EVENTS:
            actions, refused = self._user(ev, start_after)
        else:
            actions, refused = self._other(ev), ""
        # a motion that ends or a user's stop is not forgetting: everything else that drops intent is
        cleared = intent_before and not self.has_intent and ev not in (Ev.MOTION_DONE, Ev.STOP)
        if self.mode not in ENABLED_MODES:
            self.holds = 0
        return Step(ev, before, self.mode, self.activity, tuple(actions), cleared, refused)

    def _forget(self) -> None:
        """Rule 2: stop the motion (not pause), drop jogs and a pending start."""
        self.activity = Activity.IDLE
        self.start_when_enabled = False

    def _to_safety(self, mode: Mode) -> None:
        self._forget()
        self.mode = mode
        self.clearing = False

    # ----------------------------------------------------------------- user requests
    def _user(self, ev: Ev, start_after: bool) -> tuple[list[Action], str]:
        m = self.mode
        if ev == Ev.ESTOP:
            if m == Mode.DISCONNECTED:
                self._forget()
                self.estop_pending = True  # sent as soon as the link is back
                return [], ""
            self._to_safety(Mode.ESTOP)
            return [Action.SEND_ESTOP], ""
        if m == Mode.DISCONNECTED:
            return [], "the board is not connected"
        if ev == Ev.DISABLE:
            self._to_safety(Mode.DISABLED)
            return [Action.SEND_DISABLE], ""
        if ev == Ev.CLEAR_FAULT:
            if m in (Mode.FAULT, Mode.ESTOP, Mode.DISABLED):
                self.clearing = m != Mode.DISABLED
                return [Action.SEND_CLEAR_FAULT], ""
            return [], "nothing to clear while the board is enabled"
        if ev == Ev.ENABLE:
            if m == Mode.DISABLED:
                self.mode = Mode.ENABLING
                self.start_when_enabled = start_after
                return [Action.SEND_ENABLE], ""
            if m in (Mode.FAULT, Mode.ESTOP):
                return [], f"the board is in {m.name}: clear the fault first"
            return [], "already enabled" if m in ENABLED_MODES else "already enabling"
        if m not in ENABLED_MODES:
            return [], f"the board is not enabled ({m.name}): enable it first"
        if ev == Ev.STOP:
            self.activity = Activity.IDLE
            self.start_when_enabled = False
            return [], ""
        # START or JOG: both ramp from the command to the new target
        self.activity = Activity.MOTION if ev == Ev.START else Activity.JOG
        self.start_when_enabled = False
        if m == Mode.ACTIVE:
            self.mode = Mode.RAMPING
        return [Action.BEGIN_MOTION if ev == Ev.START else Action.SET_JOG], ""

    # ---------------------------------------------------------------- everything else
    def _other(self, ev: Ev) -> list[Action]:
        if ev in (Ev.SAW_ENABLED, Ev.SAW_DISABLED, Ev.SAW_FAULT, Ev.SAW_ESTOP):
            return self._board(ev)
        if ev == Ev.LINK_LOST:
            self._to_safety(Mode.DISCONNECTED)
            return []
        if ev == Ev.RECONNECTED:
            if self.mode != Mode.DISCONNECTED:
                return []
            if self.estop_pending:
                self.estop_pending = False
                self._to_safety(Mode.ESTOP)
                return [Action.SEND_ESTOP]
            self._to_safety(Mode.DISABLED)
            return []
        if ev in (Ev.SIGNAL, Ev.PARENT_DIED):
            self._to_safety(Mode.ESTOP)
            return [Action.SEND_ESTOP]
        if self.mode == Mode.DISCONNECTED:
            return []
        if ev == Ev.REBOOT:
            if self.mode == Mode.ESTOP:  # the reset dropped the board's latch; the user's e-stop stands
                return [Action.SEND_ESTOP]
            self._to_safety(Mode.DISABLED)
            return []
        if ev in (Ev.ENABLE_FAILED, Ev.ENABLE_TIMEOUT):
            if self.mode == Mode.ENABLING:
                self._to_safety(Mode.DISABLED)
                return [Action.SEND_DISABLE] if ev == Ev.ENABLE_TIMEOUT else []
            return []
        if ev == Ev.CLEARED:
            if self.clearing:
                self._to_safety(Mode.DISABLED)
            return []
        if ev in (Ev.OVERRUN_DISABLE, Ev.FELL):
            if self.mode in ENABLED_MODES or self.mode == Mode.ENABLING:
                self._to_safety(Mode.DISABLED)
                return [Action.SEND_DISABLE]
            self._forget()
            return []
        return self._enabled_event(ev)

    def _board(self, ev: Ev) -> list[Action]:
        """A fresh STATE's board state, against ours."""
        m = self.mode
        if m == Mode.DISCONNECTED:
            return []
        if ev == Ev.SAW_ESTOP:
            if m != Mode.ESTOP:
                self._to_safety(Mode.ESTOP)
            return []
        if ev == Ev.SAW_FAULT:
            if m == Mode.ESTOP and not self.clearing:
                return [Action.SEND_ESTOP]  # ours did not arrive: an e-stop outranks a fault
            if m != Mode.FAULT and not (m == Mode.ESTOP and self.clearing):
                self._to_safety(Mode.FAULT)
            return []
        if ev == Ev.SAW_DISABLED:
            # (ENABLING: the caller observes only STATEs sent after the board answered the ENABLE,
            # so a DISABLED one means the board did not enable)
            if m in ENABLED_MODES or m in (Mode.ENABLING, Mode.FAULT) or (m == Mode.ESTOP and self.clearing):
                self._to_safety(Mode.DISABLED)
            elif m == Mode.ESTOP:
                return [Action.SEND_ESTOP]  # disabled, but not e-stopped as asked: again
            return []
        # SAW_ENABLED
        if m == Mode.ENABLING:
            self.mode = Mode.RAMPING  # ramp in from this STATE's measured pose
            return []
        if m == Mode.ESTOP:
            return [Action.SEND_ESTOP]
        if m in (Mode.DISABLED, Mode.FAULT):
            # enabled without our asking (a board that kept running through a reconnect, or
            # another program): it must not be driven from here until a user enables it
            self._to_safety(Mode.DISABLED)
            return [Action.SEND_DISABLE]
        return []

    def _enabled_event(self, ev: Ev) -> list[Action]:
        """Events of an enabled robot's cycle: ramps, motion end, holds."""
        m = self.mode
        if m not in ENABLED_MODES:
            return []
        if ev == Ev.RAMP_DONE and m == Mode.RAMPING:
            self.mode = Mode.ACTIVE
            if self.start_when_enabled:  # the command line's start, once
                self.start_when_enabled = False
                self.activity = Activity.MOTION
                self.mode = Mode.RAMPING
                return [Action.BEGIN_MOTION]
        elif ev == Ev.MOTION_DONE and self.activity == Activity.MOTION:
            self.activity = Activity.IDLE
        elif ev in (Ev.SAFETY_HOLD, Ev.OVERRUN_HOLD):
            self.holds |= HOLD_SAFETY if ev == Ev.SAFETY_HOLD else HOLD_OVERRUN
            self.mode = Mode.HELD
        elif ev in (Ev.SAFETY_RELEASE, Ev.OVERRUN_RELEASE) and m == Mode.HELD:
            self.holds &= ~(HOLD_SAFETY if ev == Ev.SAFETY_RELEASE else HOLD_OVERRUN)
            if not self.holds:
                self.mode = Mode.RAMPING  # back to the target at the ramp speed
        elif ev == Ev.HOLD_TIMEOUT and m == Mode.HELD:
            self._forget()
        elif ev == Ev.STALL:
            self._forget()    # the motion stops; the robot stays enabled, where it stands
        return []
