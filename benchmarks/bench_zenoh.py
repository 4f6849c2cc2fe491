"""The loop's timing with and without the Zenoh bridge beside it, in one run of alternating rounds.

Each round is `hil run --robot puma560 --dry-run --headless --enable --motion demo` at 1 kHz for
--seconds, with `--zenoh` (publishing at 100 Hz to a subscriber in this process, over localhost)
or without; prints jitter p50/p99/max, cycle p99 and missed deadlines per round and the medians.
Run: `python benchmarks/bench_zenoh.py [--rounds 3] [--seconds 15]`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HIL = [sys.executable, "-m", "hil.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_round(with_bridge: bool, seconds: float, folder: str) -> dict:
    stats = os.path.join(folder, f"stats-{int(with_bridge)}-{time.monotonic_ns()}.json")
    argv = HIL + ["run", "--robot", "puma560", "--dry-run", "--headless", "--enable", "--motion", "demo",
                  "--rate", "1000", "--duration", str(seconds), "--stats-json", stats]
    sub = None
    if with_bridge:
        import zenoh

        locator = f"tcp/127.0.0.1:{free_port()}"
        cfg = os.path.join(folder, "bridge.json5")
        with open(cfg, "w") as f:
            f.write('{ mode: "peer", scouting: { multicast: { enabled: false } }, listen: { endpoints: ["%s"] } }'
                    % locator)
        argv += ["--zenoh", "--zenoh-config", cfg]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    received = [0]
    if with_bridge:
        time.sleep(3.0)
        c = zenoh.Config()
        c.insert_json5("mode", '"peer"')
        c.insert_json5("scouting/multicast/enabled", "false")
        c.insert_json5("connect/endpoints", json.dumps([locator]))
        session = zenoh.open(c)
        sub = session.declare_subscriber("hil/*/state", lambda s: received.__setitem__(0, received[0] + 1))
    proc.wait()
    if sub is not None:
        session.close()
    with open(stats) as f:
        s = json.load(f)
    return {"p50": s["jitter_p50_us"], "p99": s["jitter_p99_us"], "max": s["jitter_max_us"],
            "cycle_p99": s["cycle_p99_us"], "missed": s["missed_deadlines"], "received": received[0]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=15.0)
    args = ap.parse_args()
    rows: dict[bool, list[dict]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as folder:
        for k in range(args.rounds):
            for with_bridge in (False, True):
                r = one_round(with_bridge, args.seconds, folder)
                rows[with_bridge].append(r)
                print(f"round {k + 1} {'with bridge   ' if with_bridge else 'without bridge'}: jitter p50 "
                      f"{r['p50']:6.1f} p99 {r['p99']:7.1f} max {r['max']:8.1f} µs, cycle p99 {r['cycle_p99']:6.1f} µs, "
                      f"missed {r['missed']}" + (f", {r['received']} states received" if with_bridge else ""),
                      flush=True)
    for with_bridge in (False, True):
        rs = rows[with_bridge]
        med = {k: statistics.median(r[k] for r in rs) for k in ("p50", "p99", "max", "cycle_p99", "missed")}
        print(f"median {'with bridge   ' if with_bridge else 'without bridge'}: jitter p50 {med['p50']:.1f} p99 "
              f"{med['p99']:.1f} max {med['max']:.1f} µs, cycle p99 {med['cycle_p99']:.1f} µs, missed {med['missed']:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
