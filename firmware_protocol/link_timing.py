"""How long a board takes to answer, and where its clock is: the round trips of hold commands
(`round_trips_ms`, used by `hil rt-check` and the loop's start-up warning) and the NTP-style
exchange of TIME_SYNC (`time_sync`). Both drive a connected `Link` through its public calls and
its transaction helper."""

from __future__ import annotations

import time

import numpy as np

from firmware_protocol import messages as M


IDLE_GAP_S = 0.08   # a board sends STATEs of its own after 100 ms without a command (IDLE_STATE_HZ)


def round_trips_ms(link, count: int = 5, timeout_s: float = 0.25, quiet_s: float = 0.03) -> list[float]:
    """Round trips (ms) of `count` hold commands, each timed until the next STATE arrives (the
    board answers every command with one). Poll mode, before the control loop starts: a hold
    changes nothing on a board that is not enabled. STATEs still in flight are drained first
    (`_drain`), and again before any trip whose command goes out more than IDLE_GAP_S after the
    one before it — a host held up that long by other work lets the board's idle-rate STATE timer
    run, and its STATE would be taken for the answer. A command left unanswered within
    `timeout_s` counts as `timeout_s`."""

    n = link.info.n_joints if link.info is not None else 0
    hold = np.zeros(n)
    last_t, sent = _drain(link, hold, quiet_s)
    trips: list[float] = []
    doubtful: list[float] = []   # timed across such a gap: kept only where nothing better came
    for _ in range(4 * count):   # a trip its own host held up is timed again, within reason
        if len(trips) == count:
            break
        if time.monotonic() - sent > IDLE_GAP_S:
            last_t, sent = _drain(link, hold, quiet_s)
        t0 = time.monotonic()
        link.send_positions(hold, hold=True)
        previous, sent = sent, time.monotonic()
        last_t, trip = _answer(link, last_t, t0, timeout_s)
        (trips if sent - previous <= IDLE_GAP_S else doubtful).append(trip)
    return trips + doubtful[:count - len(trips)]


def _answer(link, last_t: float, t0: float, timeout_s: float) -> tuple[float, float]:
    """(host time of the STATE that came, the trip in ms), or the trip as `timeout_s` if none did."""
    while True:
        t = _newest(link)
        if t > last_t:
            return t, (t - t0) * 1e3
        if time.monotonic() - t0 > timeout_s:
            return last_t, timeout_s * 1e3
        time.sleep(0.0002)


def _newest(link) -> float:
    s = link.poll()
    return s.t_host if s is not None else -1.0


def _drain(link, hold: np.ndarray, quiet_s: float) -> float:
    """Send one more hold, wait for its answer and then `quiet_s` without any STATE: nothing is in
    flight after that, and the hold restarted the board's idle-rate timer. Returns the host time of
    the last STATE seen and when the hold went out."""
    start = time.monotonic()
    last_t = _newest(link)
    link.send_positions(hold, hold=True)
    sent = quiet_since = time.monotonic()
    answered = False
    while ((not answered or time.monotonic() - quiet_since < quiet_s)
           and time.monotonic() - start < 10 * quiet_s + 0.5):
        t = _newest(link)
        if t > last_t:
            last_t, quiet_since, answered = t, time.monotonic(), True
        time.sleep(0.0005)
    return last_t, sent


def time_sync(link, exchanges: int = 8) -> tuple[float, float]:
    """(offset_s, rtt_s): board clock ≈ host monotonic + offset, from the lowest-RTT exchange."""

    best = None
    for _ in range(exchanges):
        t1 = int(time.monotonic() * 1e6)
        resp, t4 = link.transact(M.TimeSyncReq(t1), lambda seq, t1=t1: ("time", t1))
        t4_us = t4 * 1e6
        rtt = (t4_us - resp.t1_host_us) - (resp.t3_board_tx_us - resp.t2_board_rx_us)
        offset = ((resp.t2_board_rx_us - resp.t1_host_us) + (resp.t3_board_tx_us - t4_us)) / 2
        if best is None or rtt < best[1]:
            best = (offset, rtt)
    return best[0] / 1e6, best[1] / 1e6
