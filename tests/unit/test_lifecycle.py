"""The lifecycle as a table: every (state, event) pair, the next state, whether intent survives,
and whether a command may follow. The expected table is written out here, apart from the code."""

from __future__ import annotations

import pytest

from hil.runtime.lifecycle import ENABLED_MODES, Action, Activity, Ev, Lifecycle, Mode, USER_EVENTS

D, OFF, ING, RAMP, ACT, HELD, FAULT, ESTOP = (Mode.DISCONNECTED, Mode.DISABLED, Mode.ENABLING, Mode.RAMPING,
                                              Mode.ACTIVE, Mode.HELD, Mode.FAULT, Mode.ESTOP)
ALL = tuple(Mode)
CONNECTED = tuple(m for m in ALL if m != D)


def in_mode(mode: Mode) -> Lifecycle:
    """A lifecycle brought to `mode` by the events that lead there, carrying intent where it can:
    a pending start while enabling and ramping in, a running motion when active or held."""
    life = Lifecycle()
    steps = {D: [], OFF: [Ev.RECONNECTED], FAULT: [Ev.RECONNECTED, Ev.SAW_FAULT],
             ESTOP: [Ev.RECONNECTED, Ev.ESTOP], ING: [Ev.RECONNECTED, (Ev.ENABLE, True)],
             RAMP: [Ev.RECONNECTED, (Ev.ENABLE, True), Ev.SAW_ENABLED],
             ACT: [Ev.RECONNECTED, (Ev.ENABLE, True), Ev.SAW_ENABLED, Ev.RAMP_DONE, Ev.RAMP_DONE],
             HELD: [Ev.RECONNECTED, (Ev.ENABLE, True), Ev.SAW_ENABLED, Ev.RAMP_DONE, Ev.RAMP_DONE, Ev.SAFETY_HOLD]}
    for ev in steps[mode]:
        if isinstance(ev, tuple):
            life.handle(*ev)
        else:
            life.handle(ev)
    assert life.mode == mode
    return life


def everywhere(to: Mode, but=()) -> dict:
    return {m: (m if m in but else to) for m in ALL}


def only(changes: dict) -> dict:
    return {m: changes.get(m, m) for m in ALL}


# event → {state before: state after}
TABLE = {
    Ev.ENABLE: only({OFF: ING}),
    Ev.DISABLE: everywhere(OFF, but=(D,)),
    Ev.START: only({ACT: RAMP}),
    Ev.JOG: only({ACT: RAMP}),
    Ev.STOP: only({}),
    Ev.CLEAR_FAULT: only({}),  # the board's answer (CLEARED, or a DISABLED state) moves it
    Ev.ESTOP: everywhere(ESTOP, but=(D,)),
    Ev.SAW_ENABLED: only({ING: RAMP, FAULT: OFF}),
    Ev.SAW_DISABLED: only({ING: OFF, RAMP: OFF, ACT: OFF, HELD: OFF, FAULT: OFF}),
    Ev.SAW_FAULT: only({OFF: FAULT, ING: FAULT, RAMP: FAULT, ACT: FAULT, HELD: FAULT}),
    Ev.SAW_ESTOP: everywhere(ESTOP, but=(D,)),
    Ev.REBOOT: everywhere(OFF, but=(D, ESTOP)),
    Ev.LINK_LOST: everywhere(D),
    Ev.RECONNECTED: only({D: OFF}),
    Ev.ENABLE_FAILED: only({ING: OFF}),
    Ev.ENABLE_TIMEOUT: only({ING: OFF}),
    Ev.CLEARED: only({}),  # only after a CLEAR_FAULT (tested below)
    Ev.RAMP_DONE: only({}),  # RAMPING with a pending start: the motion begins, ramping to its start
    Ev.MOTION_DONE: only({}),
    Ev.SAFETY_HOLD: only({RAMP: HELD, ACT: HELD}),
    Ev.SAFETY_RELEASE: only({HELD: RAMP}),
    Ev.OVERRUN_HOLD: only({RAMP: HELD, ACT: HELD}),
    Ev.OVERRUN_RELEASE: only({}),  # HELD here is a safety hold: it stays
    Ev.OVERRUN_DISABLE: only({ING: OFF, RAMP: OFF, ACT: OFF, HELD: OFF}),
    Ev.HOLD_TIMEOUT: only({}),
    Ev.SIGNAL: everywhere(ESTOP),
    Ev.PARENT_DIED: everywhere(ESTOP),
    Ev.FELL: only({ING: OFF, RAMP: OFF, ACT: OFF, HELD: OFF}),
    Ev.STALL: only({}),   # the robot holds where it stands, enabled; the motion is forgotten (below)
}
# events after which no intent may be left, wherever they take effect
FORGETTING = {Ev.DISABLE, Ev.ESTOP, Ev.SAW_DISABLED, Ev.SAW_FAULT, Ev.SAW_ESTOP, Ev.REBOOT, Ev.LINK_LOST,
              Ev.RECONNECTED, Ev.ENABLE_FAILED, Ev.ENABLE_TIMEOUT, Ev.OVERRUN_DISABLE, Ev.SIGNAL, Ev.PARENT_DIED,
              Ev.FELL}


def test_the_table_covers_every_event():
    assert set(TABLE) == set(Ev)


@pytest.mark.parametrize("ev", list(Ev), ids=lambda e: e.name)
@pytest.mark.parametrize("mode", ALL, ids=lambda m: m.name)
def test_every_state_and_event(mode, ev):
    life = in_mode(mode)
    start = ev == Ev.ENABLE
    step = life.handle(ev, start_after=start) if ev != Ev.JOG else life.handle(ev)
    want = TABLE[ev][mode]
    assert life.mode == want, f"{mode.name} + {ev.name} → {life.mode.name}, expected {want.name}"
    assert step.before == mode and step.mode == want
    # a command may be sent only in an enabled state ...
    assert life.sends_positions == (want in ENABLED_MODES)
    # ... and only a user's request (or the board confirming one) leads into one
    if want in ENABLED_MODES and mode not in ENABLED_MODES:
        assert mode == ING and ev == Ev.SAW_ENABLED
    # (a late completion — RECONNECTED while connected, ENABLE_FAILED once enabled — changes nothing)
    if (ev in FORGETTING and want != mode) or (ev == Ev.HOLD_TIMEOUT and mode == HELD):
        assert not life.has_intent, f"{mode.name} + {ev.name} kept intent"
        assert life.activity == Activity.IDLE and not life.start_when_enabled
    if ev not in USER_EVENTS and ev not in (Ev.RAMP_DONE, Ev.SAW_ENABLED):
        # nothing but a user moves toward motion: no event of another kind adds intent
        assert not (life.has_intent and not in_mode(mode).has_intent)
    if want in (ESTOP,) and mode != ESTOP and ev not in (Ev.SAW_ESTOP,):
        assert Action.SEND_ESTOP in step.actions
    if ev in (Ev.SAW_ENABLED,) and mode in (OFF, FAULT):
        assert Action.SEND_DISABLE in step.actions  # enabled without a user asking: disabled again
    if mode == D:
        assert not step.actions or ev in (Ev.SIGNAL, Ev.PARENT_DIED)


@pytest.mark.parametrize("mode", [RAMP, ACT, HELD], ids=lambda m: m.name)
def test_a_stall_forgets_the_motion_and_keeps_the_robot_enabled(mode):
    life = in_mode(mode)
    assert life.has_intent
    step = life.handle(Ev.STALL)
    assert life.mode == mode and not life.has_intent and step.cleared and not step.actions


def test_user_requests_that_do_not_apply_are_refused_with_a_reason():
    life = in_mode(OFF)
    for ev in (Ev.START, Ev.JOG, Ev.STOP):
        step = life.handle(ev)
        assert step.refused and "enable it first" in step.refused and not step.actions
    life = in_mode(FAULT)
    assert "clear the fault first" in life.handle(Ev.ENABLE).refused
    life = in_mode(D)
    assert life.handle(Ev.ENABLE).refused == "the board is not connected"


def test_re_enabling_never_restarts_a_motion():
    life = in_mode(ACT)
    assert life.activity == Activity.MOTION
    life.handle(Ev.ESTOP)
    life.handle(Ev.CLEAR_FAULT)
    assert life.clearing
    life.handle(Ev.CLEARED)
    assert life.mode == OFF
    life.handle(Ev.ENABLE)
    life.handle(Ev.SAW_ENABLED)
    step = life.handle(Ev.RAMP_DONE)
    assert life.mode == ACT and life.activity == Activity.IDLE and Action.BEGIN_MOTION not in step.actions


def test_the_command_lines_start_happens_once():
    life = in_mode(RAMP)
    step = life.handle(Ev.RAMP_DONE)
    assert Action.BEGIN_MOTION in step.actions and life.activity == Activity.MOTION and life.mode == RAMP
    life.handle(Ev.RAMP_DONE)
    assert life.motion_running
    life.handle(Ev.MOTION_DONE)
    assert life.activity == Activity.IDLE
    life.handle(Ev.RAMP_DONE)
    assert life.activity == Activity.IDLE


def test_holds_of_both_kinds_release_only_together():
    life = in_mode(ACT)
    life.handle(Ev.SAFETY_HOLD)
    life.handle(Ev.OVERRUN_HOLD)
    life.handle(Ev.SAFETY_RELEASE)
    assert life.mode == HELD
    life.handle(Ev.OVERRUN_RELEASE)
    assert life.mode == RAMP and life.activity == Activity.MOTION  # intent kept through a hold


def test_an_estop_while_disconnected_is_sent_when_the_link_is_back():
    life = in_mode(ACT)
    life.handle(Ev.LINK_LOST)
    life.handle(Ev.ESTOP)
    step = life.handle(Ev.RECONNECTED)
    assert life.mode == ESTOP and Action.SEND_ESTOP in step.actions


def test_a_board_that_stays_enabled_or_disabled_after_an_estop_gets_it_again():
    life = in_mode(ESTOP)
    assert Action.SEND_ESTOP in life.handle(Ev.SAW_ENABLED).actions
    assert Action.SEND_ESTOP in life.handle(Ev.SAW_DISABLED).actions
    assert life.mode == ESTOP
    life.handle(Ev.CLEAR_FAULT)
    assert not life.handle(Ev.SAW_DISABLED).actions and life.mode == OFF  # cleared on request


def test_a_fresh_lifecycle_is_disconnected_with_no_intent_and_nothing_held():
    life = Lifecycle()
    assert life.mode == D and life.activity == Activity.IDLE and not life.has_intent
    assert life.holds == 0 and not life.start_when_enabled and not life.clearing and not life.estop_pending
    step = life.handle(Ev.RECONNECTED)
    assert step.mode == OFF and not step.cleared and not step.actions and not life.has_intent


# ------------------------------------------------------------------ what the mutation pass found unguarded
def test_accepted_requests_are_not_refused_and_refusals_say_why():
    """A request that is taken comes back with no refusal (else the user is told it was refused
    while it was carried out); each refusal names the state and what to do, the two "already"
    cases apart."""
    life = in_mode(ACT)
    for ev in (Ev.JOG, Ev.STOP, Ev.START, Ev.DISABLE):
        assert life.handle(ev).refused == "", ev
    life = in_mode(D)
    step = life.handle(Ev.ESTOP)
    assert step.refused == "" and life.estop_pending       # taken: sent when the link is back
    life = in_mode(ACT)
    assert life.handle(Ev.ESTOP).refused == ""
    assert in_mode(ACT).handle(Ev.CLEAR_FAULT).refused == "nothing to clear while the board is enabled"
    assert in_mode(FAULT).handle(Ev.ENABLE).refused == "the board is in FAULT: clear the fault first"
    assert in_mode(ESTOP).handle(Ev.ENABLE).refused == "the board is in ESTOP: clear the fault first"
    assert in_mode(ACT).handle(Ev.ENABLE).refused == "already enabled"
    assert in_mode(ING).handle(Ev.ENABLE).refused == "already enabling"
    assert in_mode(OFF).handle(Ev.JOG).refused == "the board is not enabled (DISABLED): enable it first"


def test_a_stop_before_the_ramp_in_ends_cancels_the_pending_start():
    """`--enable --motion M` then STOP while ramping in: the motion must not start when the ramp
    is done (only a user's request moves toward motion; the STOP was the last one)."""
    life = in_mode(RAMP)
    assert life.start_when_enabled
    life.handle(Ev.STOP)
    assert life.activity == Activity.IDLE and not life.start_when_enabled and not life.has_intent
    for _ in range(2):
        step = life.handle(Ev.RAMP_DONE)
        assert Action.BEGIN_MOTION not in step.actions
    assert life.mode == ACT and life.activity == Activity.IDLE


@pytest.mark.parametrize("ev", [Ev.JOG, Ev.START], ids=lambda e: e.name)
def test_a_jog_or_start_replaces_a_pending_start(ev):
    """A JOG during the ramp-in is the user's newer wish: the pending start is dropped, and the ramp's
    end begins nothing else (a START begins its motion once)."""
    life = in_mode(RAMP)
    life.handle(ev)
    assert not life.start_when_enabled
    begun = [Action.BEGIN_MOTION in life.handle(Ev.RAMP_DONE).actions for _ in range(3)]
    assert life.activity == (Activity.JOG if ev == Ev.JOG else Activity.MOTION)
    assert not any(begun)    # the START's own BEGIN_MOTION came with the request, not at the ramp's end


def test_an_estop_sent_on_reconnection_is_sent_once():
    life = in_mode(ACT)
    life.handle(Ev.LINK_LOST)
    life.handle(Ev.ESTOP)
    assert Action.SEND_ESTOP in life.handle(Ev.RECONNECTED).actions and not life.estop_pending
    life.handle(Ev.CLEAR_FAULT)
    life.handle(Ev.CLEARED)
    life.handle(Ev.LINK_LOST)
    step = life.handle(Ev.RECONNECTED)
    assert life.mode == OFF and Action.SEND_ESTOP not in step.actions


def test_nothing_stays_held_once_the_robot_is_not_enabled():
    life = in_mode(HELD)
    assert life.holds
    life.handle(Ev.DISABLE)
    assert life.holds == 0
    life.handle(Ev.ENABLE)
    life.handle(Ev.SAW_ENABLED)
    life.handle(Ev.RAMP_DONE)
    assert life.mode == ACT    # not HELD by a hold from before


@pytest.mark.parametrize("mode", ALL, ids=lambda m: m.name)
def test_enabled_is_the_enabled_modes(mode):
    # read by the cycle's overrun handling: a hold or a disable only where there is something to stop
    assert in_mode(mode).enabled is (mode in ENABLED_MODES)
