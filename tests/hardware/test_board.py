"""A real board on `--port` (or `hil emulate`'s pty): what the link needs of any board that speaks
SPEC.md. Nothing is enabled, so nothing moves; the e-stop is cleared again at the end.
Run: `pytest -m hardware --port /dev/ttyACM0`."""

from __future__ import annotations

import time

import numpy as np
import pytest

from firmware_protocol import messages as M
from firmware_protocol.link import Link
from tests.conftest import wait_for

pytestmark = pytest.mark.hardware


@pytest.fixture
def link(board_port):
    with Link.connect(board_port) as link:
        yield link


def test_the_handshake_names_a_board_this_host_can_drive(link):
    info = link.info
    assert info.protocol.split(".")[0] == "1" and 1 <= info.n_joints <= M.MAX_JOINTS
    assert len(info.uid) == 24 and info.kind_name in {k.name for k in M.BoardKind}


def test_every_command_is_answered_with_a_state_and_the_board_stays_disabled(link):
    first = wait_for(link.latest, timeout_s=2)
    assert first is not None and first.state in (M.BoardState.DISABLED, M.BoardState.FAULT, M.BoardState.ESTOP)
    before = link.stats.rx_states
    hold = np.zeros(link.info.n_joints)
    for _ in range(100):
        link.send_positions(hold, hold=True)  # a keep-alive: answered, never applied
        time.sleep(0.005)
    time.sleep(0.1)
    assert link.stats.rx_states - before >= 90  # one STATE per command (a few may be lost on the wire)
    assert link.latest().state == first.state  # a hold never enables anything
    assert link.rejected_frames == 0


def test_an_estop_latches_and_clears_into_disabled(link):
    link.estop()
    assert wait_for(lambda: (s := link.latest()) is not None and s.state == M.BoardState.ESTOP, timeout_s=2)
    link.clear_faults()
    s = wait_for(lambda: (s := link.latest()) is not None and s.state == M.BoardState.DISABLED and s, timeout_s=2)
    assert s and s.faults & M.Fault.ESTOP == 0  # disabled, never enabled by the clear
