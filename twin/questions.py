"""The twin's confirm dialogs as decisions, without a window: which question is open, and in which
board state and mode it was asked. An e-stop, or any change of that state or mode, makes the
question moot and it closes (an "Enable?" still open after an e-stop, or after the board enabled
by another hand, would offer what no longer applies); asking to enable a board already enabled is
refused and said. `TwinApp` shows and hides the dialogs these decisions name."""

from __future__ import annotations

from typing import Callable

from firmware_protocol.messages import BoardState
from hil.runtime.shared import BOARD_STATES

ENABLED_STATE = int(BoardState.ENABLED)
ENABLE_DIALOG = "confirm"


class Questions:
    def __init__(self, show: Callable[[str, bool], None], say: Callable[[str], None]) -> None:
        self._show, self._say = show, say
        self.open: str | None = None                        # the dialog open, if any
        self._asked_in: tuple[int, int] | None = None       # (board state, mode) it was opened in
        self.now: tuple[int, int] | None = None             # the latest (board state, mode) seen

    def ask(self, dialog: str) -> None:
        """Open `dialog` (closing another open one), unless it asks to enable an enabled board."""
        if dialog == ENABLE_DIALOG and self.now is not None and self.now[0] == ENABLED_STATE:
            self._say("enable: the board is already enabled")
            return
        if self.open is not None and self.open != dialog:
            self.close(self.open)
        self.open, self._asked_in = dialog, self.now
        self._show(dialog, True)

    def close(self, dialog: str) -> None:
        self._show(dialog, False)
        if self.open == dialog:
            self.open, self._asked_in = None, None

    def estop(self) -> None:
        """An e-stop makes whatever was asked moot."""
        if self.open is not None:
            self.close(self.open)

    def seen(self, state: tuple[int, int]) -> None:
        """The loop's (board state, mode) this frame: a question asked in another one closes, said."""
        if self.open is not None and self._asked_in is not None and state != self._asked_in:
            self.close(self.open)
            self._say(f"the question was closed: the board is now {BOARD_STATES.get(state[0], '?')}")
        self.now = state
