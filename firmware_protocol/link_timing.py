"""How long a board takes to answer, and where its clock is: the round trips of hold commands
(`round_trips_ms`, used by `hil rt-check` and the loop's start-up warning) and the NTP-style
exchange of TIME_SYNC (`time_sync`). Both drive a connected `Link` through its public calls and
its transaction helper."""

from __future__ import annotations

import time

import numpy as np

from firmware_protocol import messages as M


def round_trips_ms(link, count: int = 5, timeout_s: float = 0.25, quiet_s: float = 0.03) -> list[float]:
    """Round trips (ms) of `count` hold commands, each timed until the next STATE arrives (the
    board answers every command with one). Poll mode, before the control loop starts: a hold
    changes nothing on a board that is not enabled. STATEs still in flight are drained first,
    so that a slow adapter's backlog is not taken for answers: one more hold command, then
    wait for its answer and for `quiet_s` without any. That command also restarts the board's
    idle-rate STATE timer (10 Hz after 100 ms without commands), so no STATE is under way when
    the timing starts (behind a 16 ms adapter one would be taken for the first answer, and
    every trip after it timed against the previous command's). A command left unanswered
    within `timeout_s` counts as `timeout_s`."""

    n = link.info.n_joints if link.info is not None else 0
    hold = np.zeros(n)

    def newest_t() -> float:
        s = link.poll()
        return s.t_host if s is not None else -1.0

    start = time.monotonic()
    last_t = newest_t()
    link.send_positions(hold, hold=True)
    quiet_since = time.monotonic()
    answered = False
    while ((not answered or time.monotonic() - quiet_since < quiet_s)
           and time.monotonic() - start < 10 * quiet_s + 0.5):
        t = newest_t()
        if t > last_t:
            last_t, quiet_since, answered = t, time.monotonic(), True
        time.sleep(0.0005)
    trips = []
    for _ in range(count):
        t0 = time.monotonic()
        link.send_positions(hold, hold=True)
        while True:
            t = newest_t()
            if t > last_t:
                last_t = t
                trips.append((t - t0) * 1e3)
                break
            if time.monotonic() - t0 > timeout_s:
                trips.append(timeout_s * 1e3)
                break
            time.sleep(0.0002)
    return trips


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
