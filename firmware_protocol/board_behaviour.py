"""What a board does with each request in each state (SPEC.md §4.2, §7), declared once.

Three boards answer the host: the Python board model (`emulator/board_model.py`), the servo-bus board
that runs on the host (`buses/bus_board.py`) and the C firmware (`c/hil_board.c`, through the table
generated into `c/hil_generated.h` by `firmware_protocol.c_header`). All three look their answer
up here, so they cannot drift apart; `tests/integration/test_board_behaviour.py` drives the same
request sequences through all three and compares the answers and the states.

`react(request, state, faults)` is the whole rule: the ACK result, the next state, the fault bits
after it and the effects the board carries out on its actuators. Requests that carry no ACK (an
e-stop, the command watchdog, a fault the hardware reports) have a result too, which the boards
do not send.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, IntFlag

from firmware_protocol.messages import AckResult, BoardState, Fault, JointFlag


class BoardRequest(IntEnum):
    """What can happen to a board: the host's requests and the board's own events."""

    ENABLE = 0       # torque on, targets from where the actuators are
    DISABLE = 1
    ESTOP = 2        # not a transaction: no ACK, the next STATE says ESTOP
    CLEAR_FAULT = 3  # clears the fault bits it names
    REBOOT = 4
    HOME = 5         # incremental encoders (PUMA6 only)
    PARAM_SAVE = 6
    SET_LIMITS = 7   # PARAM_SET of POS_MIN, POS_MAX, MAX_STEP or VEL_MAX
    COMMAND = 8      # CMD_POS / CMD_PVF: its targets applied or not
    WATCHDOG = 9     # no command for CMD_TIMEOUT_MS
    HW_FAULT = 10    # the hardware reports a fault (servo bus, amplifier, limit switch)


class Effect(IntFlag):
    """What the board does to its actuators beside changing state."""

    NONE = 0
    SEED_TARGETS = 1 << 0   # targets := where the actuators are (no jump when torque comes on)
    TORQUE_OFF = 1 << 1     # torque off / brakes on
    HOLD_HERE = 1 << 2      # targets := where the actuators are, and hold them (torque stays on)
    APPLY = 1 << 3          # apply the command's targets (clamped to the limits and the step)
    FEED_WATCHDOG = 1 << 4  # the command watchdog starts counting again
    RESET = 1 << 5          # after the ACK: a reset (new boot id, DISABLED)


# fault bits that keep a board in FAULT or ESTOP until cleared (SPEC.md §4.3: "L")
LATCHED = Fault.ESTOP | Fault.WATCHDOG
# a next state that depends on the faults left: DISABLED when no latched bit remains
UNCHANGED = -1
DISABLED_WHEN_CLEAR = -2


@dataclass(frozen=True)
class Rule:
    """One cell of the table: the answer, the next state (or UNCHANGED / DISABLED_WHEN_CLEAR),
    the effects, and the fault bits that refuse the request (BAD_STATE) although the state allows it."""

    result: AckResult
    next_state: int
    effects: Effect = Effect.NONE
    refused_by: int = 0
    latch: int = 0          # fault bits set


S, A, E = BoardState, AckResult, Effect
_ANY = tuple(S)
OK_NOTHING = Rule(A.OK, UNCHANGED)
BAD_STATE = Rule(A.BAD_STATE, UNCHANGED)


def _rows() -> dict[BoardRequest, dict[BoardState, Rule]]:
    """The table, a row per request (every state named or covered by a default)."""
    enable = {s: BAD_STATE for s in _ANY}
    enable[S.DISABLED] = Rule(A.OK, S.ENABLED, E.SEED_TARGETS | E.FEED_WATCHDOG, refused_by=Fault.NOT_HOMED)
    enable[S.ENABLED] = OK_NOTHING   # asked again (a retry, a second tool): nothing changes
    disable = {s: OK_NOTHING for s in _ANY}
    disable[S.ENABLED] = Rule(A.OK, S.DISABLED, E.TORQUE_OFF)
    estop = {s: Rule(A.OK, S.ESTOP, E.TORQUE_OFF | E.HOLD_HERE, latch=Fault.ESTOP) for s in _ANY}
    clear = {s: OK_NOTHING for s in _ANY}
    clear[S.FAULT] = clear[S.ESTOP] = Rule(A.OK, DISABLED_WHEN_CLEAR, E.TORQUE_OFF)
    reboot = {s: Rule(A.OK, S.DISABLED, E.RESET) for s in _ANY}
    reboot[S.ENABLED] = BAD_STATE
    only_disabled = {s: BAD_STATE for s in _ANY}
    only_disabled[S.DISABLED] = OK_NOTHING
    limits = {s: OK_NOTHING for s in _ANY}
    limits[S.ENABLED] = BAD_STATE
    command = {s: Rule(A.OK, UNCHANGED, E.FEED_WATCHDOG) for s in _ANY}
    command[S.ENABLED] = Rule(A.OK, UNCHANGED, E.APPLY | E.FEED_WATCHDOG)
    watchdog = {s: OK_NOTHING for s in _ANY}
    watchdog[S.ENABLED] = Rule(A.OK, S.FAULT, E.HOLD_HERE, latch=Fault.WATCHDOG)
    # the bits latch (react adds them); a board at fault stays there until a user clears it
    hw_fault = {s: Rule(A.OK, S.FAULT) for s in _ANY}
    hw_fault[S.ENABLED] = Rule(A.OK, S.FAULT, E.HOLD_HERE)
    hw_fault[S.ESTOP] = OK_NOTHING
    return {BoardRequest.ENABLE: enable, BoardRequest.DISABLE: disable, BoardRequest.ESTOP: estop, BoardRequest.CLEAR_FAULT: clear,
            BoardRequest.REBOOT: reboot, BoardRequest.HOME: dict(only_disabled), BoardRequest.PARAM_SAVE: dict(only_disabled),
            BoardRequest.SET_LIMITS: limits, BoardRequest.COMMAND: command, BoardRequest.WATCHDOG: watchdog,
            BoardRequest.HW_FAULT: hw_fault}


TABLE: dict[BoardRequest, dict[BoardState, Rule]] = _rows()


@dataclass(frozen=True)
class Reaction:
    """What the board does: the ACK result, the state and faults after it, the effects."""

    result: AckResult
    state: BoardState
    faults: int
    effects: Effect

    @property
    def ok(self) -> bool:
        return self.result == AckResult.OK


def react(request: BoardRequest, state: int, faults: int, fault_bits: int = 0) -> Reaction:
    """The board's reaction to `request` in `state` with `faults` latched. `fault_bits`: for
    CLEAR_FAULT the bits to clear, for HW_FAULT the bits the hardware reports."""
    rule = TABLE[request][BoardState(state)]
    if rule.refused_by & faults:
        return Reaction(AckResult.BAD_STATE, BoardState(state), faults, Effect.NONE)
    after = faults | rule.latch
    if request == BoardRequest.CLEAR_FAULT:
        after &= ~fault_bits
    elif request == BoardRequest.HW_FAULT:
        after |= fault_bits
    if request == BoardRequest.REBOOT and rule.result == AckResult.OK:
        after = 0
    nxt = rule.next_state
    if nxt == UNCHANGED:
        nxt = state
    elif nxt == DISABLED_WHEN_CLEAR:
        nxt = state if after & LATCHED else BoardState.DISABLED
    effects = rule.effects
    if request == BoardRequest.CLEAR_FAULT and nxt == state:
        effects = Effect.NONE   # still latched: nothing moves
    return Reaction(rule.result, BoardState(nxt), int(after), effects)


def torque_on(state: int, faults: int, holds_on_watchdog: bool) -> bool:
    """Whether the actuators are driven: ENABLED, or a watchdog FAULT on a board whose watchdog
    action is to hold (SPEC.md §7: HUMANOID17 holds its last target)."""
    if state == BoardState.ENABLED:
        return True
    return holds_on_watchdog and state == BoardState.FAULT and bool(faults & Fault.WATCHDOG) \
        and not faults & Fault.ESTOP


LIMIT_FLAG, STEP_FLAG = int(JointFlag.LIMIT), int(JointFlag.STEP)


def clamp_target(target: float, previous: float, lower: float, upper: float, max_step: float) -> tuple[float, int]:
    """A commanded target as a board applies it (SPEC.md §4.3): into [lower, upper] (jflag LIMIT),
    then no farther than `max_step` from the previous target (jflag STEP). Returns (target, jflags).

    A previous target outside the range (a joint enabled where it stands, outside: the host brings
    it in) widens the range to it: the joint moves inward as commanded, never further out, and is
    not sent to the end of its range at once."""
    flags = 0
    lower, upper = min(lower, previous), max(upper, previous)
    if target < lower or target > upper:
        target = min(max(target, lower), upper)
        flags |= LIMIT_FLAG
    step = target - previous
    if step > max_step:
        target, flags = previous + max_step, flags | STEP_FLAG
    elif step < -max_step:
        target, flags = previous - max_step, flags | STEP_FLAG
    return target, flags
