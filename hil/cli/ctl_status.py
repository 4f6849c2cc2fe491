"""`hil ctl status`: the loop's state in words (degrees) or as JSON (SI), once or watched."""

from __future__ import annotations

import json
import math
import sys
import time

from hil.errors import HilError


def status_record(client, snap, joint_names: list[str] | None) -> dict:
    """One status as plain data (SI units): what `--json` prints, one object per line."""
    from firmware_protocol.messages import Fault
    from hil.runtime.lifecycle import Activity, Mode
    from hil.runtime.shared import BOARD_STATES, LoopStatus

    faults = int(snap.faults)
    names = joint_names or [f"j{i + 1}" for i in range(len(snap.q_cmd))]

    def joints(key: str) -> dict:
        return {n: float(v) for n, v in zip(names, snap.values[key])}
    progress = float(snap.motion_progress)
    return {"loop": client.name, "robot": client.info().get("robot"), "running": client.status() == LoopStatus.RUNNING,
            "t_s": float(snap.t), "cycle": int(snap.cycle), "mode": Mode(int(snap.mode)).name,
            "activity": Activity(int(snap.activity)).name.lower(),
            "board_state": BOARD_STATES.get(int(snap.board_state), "?"), "enabled": bool(snap.enabled),
            "faults": [f.name.lower() for f in Fault if faults & f],
            "motion_progress": None if progress < 0 else progress, "misses": int(snap.misses),
            "stale_cycles": int(snap.stale_total), "link_ok": bool(snap.link_ok),
            "rate_hz": float(snap.rate_hz), "q_cmd_rad": joints("q_cmd"), "q_meas_rad": joints("q_meas"),
            "q_target_rad": joints("q_target"), "position_estimated": bool(client.info().get("position_estimated")),
            "last_event": snap.event}


def status_lines(rec: dict) -> list[str]:
    """The same status in words, angles in degrees."""
    progress = "endless" if rec["motion_progress"] is None else f"{100 * rec['motion_progress']:.1f}%"
    lines = [f"{rec['loop']}: {rec['mode']} ({rec['activity']}, motion {progress}), board {rec['board_state']}, "
             f"faults {', '.join(rec['faults']) or 'none'}, t {rec['t_s']:.2f} s, cycle {rec['cycle']}, "
             f"misses {rec['misses']}"]
    meas, cmd = rec["q_meas_rad"], rec["q_cmd_rad"]
    lines.append("joints (measured / commanded, °): " + ", ".join(
        f"{n} {math.degrees(meas[n]):.1f}/{math.degrees(cmd[n]):.1f}" for n in meas))
    lines.append(f"last event: {rec['last_event']}")
    if rec["position_estimated"]:
        lines.append("measured positions are estimates: the board's servos report no position (open loop)")
    return lines


def model_of(client):
    """What the loop's run card says of its robot (hil.runtime.run_card.RobotFacts: names, ranges,
    poses, kind — no compiled kernels to load), or None when it cannot be read."""
    from hil.runtime import run_card

    try:
        facts = run_card.facts(client.name)
    except HilError:
        return None
    return facts if facts is not None and facts.n == client.n else None


def joint_names_of(client) -> list[str] | None:
    facts = model_of(client)
    return None if facts is None else list(facts.joint_names)


def show(client, as_json: bool, watch: float | None) -> int:
    from hil.runtime.shared import LoopStatus

    if watch is not None and not (math.isfinite(watch) and watch > 0):
        raise HilError(f"--watch {watch:g}: give a positive number of seconds")
    names = joint_names_of(client)
    while True:
        rec = status_record(client, client.snapshot(), names)
        print(json.dumps(rec) if as_json else "\n".join(status_lines(rec)), flush=True)
        if watch is None:
            return 0
        if client.status() in (LoopStatus.STOPPED, LoopStatus.FAILED):
            print(f"{client.name}: the loop ended", file=sys.stderr)
            return 0
        time.sleep(watch)
