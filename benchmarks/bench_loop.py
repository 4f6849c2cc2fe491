"""Real-time loop timing: period jitter, cycle time and missed deadlines at 200, 500 and 1000 Hz,
with and without a busy twin (the real DearPyGui twin attached, under Xvfb, when available), and
with and without SCHED_FIFO. Every run is `hil run --dry-run` against the board emulator on a pty.

"compute" is the cycle time minus the time spent in the serial port's read and write calls (on a
pty those cost tens of µs of kernel time per call, unlike a USB device); it is the cost of one
cycle excluding the wire. Run: `python benchmarks/bench_loop.py [--quick]`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HIL = [sys.executable, "-m", "hil.cli"]


def start_xvfb():
    xvfb = shutil.which("Xvfb")
    if not xvfb:
        return None, None
    r, w = os.pipe()
    proc = subprocess.Popen([xvfb, "-displayfd", str(w), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = os.read(r, 16)
        if not chunk:
            break
        buf += chunk
    os.close(r)
    return proc, ":" + buf.decode().strip()


def one_run(robot: str, rate: int, seconds: float, realtime: bool, twin_display: str | None) -> dict:
    with tempfile.TemporaryDirectory() as d:
        stats = os.path.join(d, "s.json")
        args = HIL + ["run", "--robot", robot, "--dry-run", "--headless", "--duration", str(seconds), "--rate",
                      str(rate), "--enable", "--motion", "demo", "--stats-json", stats]
        if not realtime:
            args.append("--no-realtime")
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        twin = None
        fps = None
        if twin_display:
            name = f"hil_{robot}_{proc.pid}"
            deadline = time.monotonic() + 20
            while not os.path.exists(f"/dev/shm/{name}") and time.monotonic() < deadline:
                time.sleep(0.05)
            env = dict(os.environ, DISPLAY=twin_display, LIBGL_ALWAYS_SOFTWARE="1")
            twin = subprocess.Popen(HIL + ["twin", "--attach", name, "--robot", robot, "--duration",
                                           str(seconds - 1.0), "--max-fps", "30"],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        proc.wait(timeout=seconds + 60)
        if twin is not None:
            out, _ = twin.communicate(timeout=30)
            for line in out.splitlines():
                if line.startswith("twin:") and "fps" in line:
                    fps = float(line.split("(")[1].split()[0])
        with open(stats) as f:
            s = json.load(f)
        s["twin_fps"] = fps
        return s


def main() -> int:
    quick = "--quick" in sys.argv
    seconds = 4.0 if quick else 10.0
    xvfb, display = start_xvfb()
    if display is None:
        print("(no Xvfb: the 'twin open' rows are skipped; apt-get install -y xvfb)")
    print(f"hil loop timing, puma560 demo motion on the emulator, {seconds:.0f} s per row, {os.cpu_count()} cores")
    print(f"{'rate':>5} {'twin':>5} {'FIFO':>5} {'jitter p50':>11} {'p99':>9} {'max':>9} {'missed':>8} "
          f"{'cycle p50':>10} {'p99':>8} {'compute p50':>12} {'p99':>8} {'twin fps':>9}")
    rows = []
    try:
        for rate in (200, 500, 1000):
            for twin in (False, True):
                for realtime in (True, False):
                    if twin and display is None:
                        continue
                    if quick and not realtime and rate != 1000:
                        continue
                    s = one_run("puma560", rate, seconds, realtime, display if twin else None)
                    rows.append((rate, twin, realtime, s))
                    fps = f"{s['twin_fps']:.0f}" if s["twin_fps"] else "-"
                    print(f"{rate:>5} {'open' if twin else '-':>5} {'yes' if s['sched_fifo'] else 'no':>5} "
                          f"{s['jitter_p50_us']:>9.1f}µs {s['jitter_p99_us']:>7.1f}µs {s['jitter_max_us']:>7.0f}µs "
                          f"{100 * s['missed_fraction']:>7.2f}% {s['cycle_p50_us']:>8.1f}µs {s['cycle_p99_us']:>6.0f}µs "
                          f"{s['compute_p50_us']:>10.1f}µs {s['compute_p99_us']:>6.0f}µs {fps:>9}", flush=True)
    finally:
        if xvfb is not None:
            xvfb.terminate()
    by = {(r, t, rt): s for r, t, rt, s in rows}
    for rate in (200, 500, 1000):
        a, b = by.get((rate, False, True)), by.get((rate, True, True))
        if a and b and a["jitter_p99_us"] > 0:
            print(f"{rate} Hz, SCHED_FIFO: p99 jitter twin open / closed = "
                  f"{b['jitter_p99_us'] / a['jitter_p99_us']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
