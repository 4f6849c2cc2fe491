"""Teleoperation latency: from a leader reading to the follower's goal written on its bus, per kit.

The real pieces, each in its own process as `hil teleop` runs them: the leader's bus emulator
(moved by a hand) and its reader (`hil.runtime.leader`), the follower's bus emulator; here the
follower's bus (`BusBoard`) is driven from this process at the kit's loop rate, each cycle taking
the newest leader reading from the block, as the loop's `Follow` does, and writing it as the goal.
Latency: the goal's write done (monotonic) − the reading's time in the block (its reader's read
done). Baseline in the same run: the follower's own bus cycle (goal write + state read).

    python benchmarks/bench_teleop.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from hil import board_config, emulator_launch, robots
from hil.runtime import leader as L
from hil.process_life import start_helper

KITS = [("so101", "feetech"), ("koch", "dynamixel2")]


def one_kit(robot: str, bus: str, seconds: float) -> dict:
    model = robots.load(robot)
    lead_cfg, foll_cfg = board_config.shipped(model, bus, "leader"), board_config.shipped(model, bus)
    lead_emu = emulator_launch.start_bus_emulator(lead_cfg, model, hands=emulator_launch.teleop_hands(lead_cfg, model))
    foll_emu = emulator_launch.start_bus_emulator(foll_cfg, model)
    path = os.path.join(tempfile.mkdtemp(), "leader.npy")
    block = L.LeaderBlock(path, model.n, create=True)
    proc = start_helper(L.main, (lead_emu.path, lead_cfg, path), "hil-leader")
    from firmware_protocol.buses.bus_board import BusBoard, cycle_note

    rate = max(10.0, min(float(model.meta.get("default_rate_hz", 200)), cycle_note(foll_cfg)[1]))
    board = BusBoard.connect(foll_emu.path, foll_cfg)
    lat, cyc = [], []
    try:
        while (got := block.read()) is None or got[1] != L.READING:
            time.sleep(0.01)
        board.enable()
        period = 1.0 / rate
        t_end = time.monotonic() + seconds
        next_t = time.monotonic()
        while time.monotonic() < t_end:
            got = block.read()
            if got is not None and got[1] == L.READING:
                reading_at = time.monotonic() - got[0]
                q = np.clip(got[2], [j.min_rad for j in foll_cfg.joints], [j.max_rad for j in foll_cfg.joints])
                t0 = time.monotonic()
                board.send_positions(q)
                board.read_now()           # the goal written, then the state read (one bus cycle)
                done = time.monotonic()
                lat.append(done - reading_at)
                cyc.append(done - t0)
            next_t += period
            time.sleep(max(0.0, next_t - time.monotonic()))
    finally:
        board.close()
        proc.terminate()
        proc.join(5)
        lead_emu.stop()
        foll_emu.stop()
        block.unlink()
    lat_ms, cyc_ms = np.array(lat) * 1e3, np.array(cyc) * 1e3
    return {"kit": f"{robot} ({bus})", "rate": rate, "n": len(lat), "p50": np.median(lat_ms),
            "p99": np.percentile(lat_ms, 99), "max": lat_ms.max(), "cycle_p50": np.median(cyc_ms)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    print(f"{'kit':<22} {'rate':>6} {'cycles':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'bus cycle ms':>13} "
          f"{'p50 / cycle':>12}")
    for robot, bus in KITS:
        r = one_kit(robot, bus, args.seconds)
        print(f"{r['kit']:<22} {r['rate']:>6.0f} {r['n']:>7} {r['p50']:>8.2f} {r['p99']:>8.2f} {r['max']:>8.2f} "
              f"{r['cycle_p50']:>13.2f} {r['p50'] / r['cycle_p50']:>12.2f}")


if __name__ == "__main__":
    main()
