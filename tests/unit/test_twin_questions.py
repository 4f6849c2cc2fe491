"""The twin's confirm dialogs decided without a window (twin.questions): what an e-stop, a change of
the board's state and a second question do to the one open."""

from __future__ import annotations

from firmware_protocol.messages import BoardState
from twin.questions import Questions

DISABLED, ENABLED, ESTOP = int(BoardState.DISABLED), int(BoardState.ENABLED), int(BoardState.ESTOP)


def _questions():
    shown: dict[str, bool] = {}
    said: list[str] = []
    return Questions(lambda d, v: shown.__setitem__(d, v), said.append), shown, said


def test_an_estop_closes_the_question_it_made_moot():
    q, shown, _ = _questions()
    q.seen((DISABLED, 0))
    q.ask("confirm")
    assert shown == {"confirm": True} and q.open == "confirm"
    q.estop()
    assert shown == {"confirm": False} and q.open is None


def test_a_change_of_state_closes_the_question_and_says_why():
    q, shown, said = _questions()
    q.seen((DISABLED, 0))
    q.ask("confirm")
    q.seen((DISABLED, 0))                    # the same state: still open
    assert q.open == "confirm"
    q.seen((ESTOP, 0))
    assert q.open is None and not shown["confirm"] and "the board is now ESTOP" in said[-1]


def test_enabling_an_enabled_board_is_not_asked():
    q, shown, said = _questions()
    q.seen((ENABLED, 4))
    q.ask("confirm")
    assert q.open is None and not shown and said == ["enable: the board is already enabled"]
    q.ask("confirm_disable")                 # disabling it is a fair question
    assert q.open == "confirm_disable" and shown == {"confirm_disable": True}


def test_a_second_question_replaces_the_first():
    q, shown, _ = _questions()
    q.seen((DISABLED, 0))
    q.ask("confirm")
    q.ask("confirm_disable")
    assert shown == {"confirm": False, "confirm_disable": True} and q.open == "confirm_disable"
