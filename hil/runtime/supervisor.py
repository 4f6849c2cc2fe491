"""`hil run`: start the emulator (dry-run), the shared block, the loop process and the twin,
show a live status line, and shut everything down in order."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import sys
import time

from hil.errors import HilError, InputError
from hil.inputs import number, writable_file
from hil.runtime.lifecycle import Activity, Mode
from hil.runtime.loop import LoopConfig, run_loop
from hil.runtime.shared import (BOARD_STATES, C_ESTOP, C_STATUS, C_STOP, ERROR_PREFIX, LoopClient, LoopStatus, SharedState,
                                progress_text)


def display_available(display: str | None = None) -> bool:
    """True if the X display (default: $DISPLAY) can be opened — probed with Xlib through ctypes,
    never with DearPyGui, which aborts the process when there is no display."""
    import ctypes
    import ctypes.util

    disp = os.environ.get("DISPLAY") if display is None else display
    lib = ctypes.util.find_library("X11")
    if not disp or not lib:
        return False
    try:
        x11 = ctypes.CDLL(lib)
        x11.XOpenDisplay.restype = ctypes.c_void_p
        x11.XOpenDisplay.argtypes = [ctypes.c_char_p]
        d = x11.XOpenDisplay(disp.encode())
        if not d:
            return False
        x11.XCloseDisplay.argtypes = [ctypes.c_void_p]
        x11.XCloseDisplay(d)
        return True
    except OSError:
        return False


def status_line(s) -> str:
    st = BOARD_STATES.get(int(s.board_state), "?")
    track = float(max(abs(a - b) for a, b in zip(s.q_cmd, s.q_meas))) if len(s.q_cmd) else 0.0
    mode = Mode(int(s.mode)).name.lower()
    activity = Activity(int(s.activity)).name.lower()
    return (f"t {s.t:7.2f} s | board {st:<8} | {mode:<8} {activity:<6} {progress_text(s.motion_progress):>8} | "
            f"{s.rate_hz:6.1f} Hz jitter p50 {s.period_p50_us:6.1f} p99 {s.period_p99_us:7.1f} µs | "
            f"cycle {s.cycle_p50_us:5.1f} µs | misses {int(s.misses)} stale {int(s.stale_total)} | "
            f"track {math.degrees(track):5.2f}°")


def run(args) -> int:
    from hil import emulation, robots

    model = robots.load(args.robot)
    rate = float(model.meta.get("default_rate_hz", 500)) if args.rate is None else args.rate
    rate = number(rate, "--rate", 10, 1000, "Hz")
    if args.duration is not None:
        number(args.duration, "--duration", 0.001, 1e7, "s")
    spin_us = getattr(args, "spin_us", None)
    if spin_us is not None and not 0.0 <= spin_us <= 1e6 / rate:  # (NaN fails this too)
        raise InputError(f"--spin-us {spin_us:g} is outside 0 … {1e6 / rate:g} µs (one cycle at {rate:g} Hz)")
    for spec in args.fault or ():
        emulation.check_fault(spec)
    if args.fault and not args.dry_run:
        raise InputError("--fault injects faults into the built-in emulator: use it with --dry-run")
    writable_file(args.record, "--record")
    writable_file(args.stats_json, "--stats-json")
    for what, path in (("--record", args.record), ("--stats-json", args.stats_json)):
        if path and args.record and args.stats_json and os.path.abspath(args.record) == os.path.abspath(args.stats_json):
            raise InputError(f"{what} {path}: --record and --stats-json name the same file")
    emu = None
    if args.dry_run:
        emu = emulation.start_emulator(model, faults=args.fault or (), baud=None, parent_pid=os.getpid())
        port = emu.path
        print(f"board emulator: {model.name} on {port}")
    else:
        port = args.port
    name = f"hil_{model.name}_{os.getpid()}"
    extra = {}
    if spin_us is not None:
        extra["spin_us"] = float(spin_us)
    if getattr(args, "port_io", None):
        extra["port_io"] = args.port_io
    try:
        shared = SharedState(name, model.n, create=True)
    except BaseException:
        if emu is not None:  # it holds our stdout: a caller waiting for EOF would wait forever
            emu.stop()
        raise
    headless = args.headless
    if not headless and not display_available():
        print("no display: running headless (set DISPLAY or use `xvfb-run`; attach later with `hil twin`)")
        headless = True
    cfg = LoopConfig(robot=model.name, port=port, shm_name=name, rate_hz=rate, duration_s=args.duration,
                     record=args.record, stats_json=args.stats_json, motion=args.motion, enable=args.enable,
                     exit_when_done=args.exit_when_done, headless=headless, realtime=not args.no_realtime,
                     keep_cpu_awake=not getattr(args, "allow_cpu_idle", False),
                     calibration=getattr(args, "calibration", None), parent_pid=os.getpid(), **extra)
    ctx = mp.get_context("spawn")
    proc = ctx.Process(target=_loop_entry, args=(cfg,), name="hil-loop")
    twin = None
    interrupted = False
    stopped_by = [signal.SIGINT]

    def on_signal(signum, frame):
        # the loop stops as for Ctrl-C (ESTOP, recording closed), whoever got the signal: a
        # launcher or a script may signal this process alone
        nonlocal interrupted
        interrupted = True
        shared.ctrl[C_ESTOP] = 1
        shared.ctrl[C_STOP] = signum
        stopped_by[0] = signum

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    started = time.time()
    proc.start()
    code = 0
    error_text = ""
    ever_ran = False
    try:
        client = LoopClient(name)
        if not headless:
            from hil.runtime.twin_launch import start_twin
            twin = start_twin(name, model.name, getattr(args, "path_file", None))
            print("twin: starting …")
        last_event = 0
        last_print = 0.0
        tty = sys.stdout.isatty()
        while proc.is_alive():
            time.sleep(0.05)
            if twin is not None and twin.poll() is not None:
                if twin.returncode != 0:  # it could not open, or died: the run has no e-stop button
                    print(f"hil run: the twin failed (exit code {twin.returncode}); see its messages above. "
                          "Stopping the run (use --headless to run without it)", file=sys.stderr)
                    code = 1
                    shared.ctrl[C_STOP] = signal.SIGTERM
                else:
                    print("twin closed; the loop runs on (Ctrl-C, or `hil ctl shutdown`, to stop it)")
                twin = None
            try:
                snap = client.snapshot()
            except HilError:
                continue
            last_event, texts = client.state.events_since(last_event)
            for text in texts:
                if text.startswith(ERROR_PREFIX):
                    error_text = text[len(ERROR_PREFIX):]  # said once, at the end
                    continue
                print(("\r" if tty else "") + text + " " * 20, flush=True)
            now = time.monotonic()
            ever_ran = ever_ran or client.status() == LoopStatus.RUNNING
            if headless and client.status() == LoopStatus.RUNNING and now - last_print > (0.2 if tty else 2.0):
                last_print = now
                line = status_line(snap)
                print(("\r" + line) if tty else line, end="" if tty else "\n", flush=True)
        proc.join()
        if tty:
            print()
        status = LoopStatus(int(shared.ctrl[C_STATUS]))
        last_event, texts = client.state.events_since(last_event)
        for text in texts:
            if text.startswith(ERROR_PREFIX):
                error_text = text[len(ERROR_PREFIX):]
            else:
                print(text)
        if code == 0 and (proc.exitcode != 0 or status == LoopStatus.FAILED):
            if error_text:
                print(f"hil run: error: {error_text}", file=sys.stderr)
                code = 2 if not ever_ran else 1  # refused before anything ran, like bad arguments
            else:
                print(f"hil run: the loop stopped with an error (exit code {proc.exitcode}); see the messages above",
                      file=sys.stderr)
            code = code or 1
        client.close()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=3)
        if twin is not None:
            twin.terminate()
        if emu is not None:
            emu.stop()
        shared.close()
        if _written_since(args.record, started):
            print(f"recording: {args.record} (load with numpy.load; {args.record}.json beside it says what it holds)")
        if _written_since(args.stats_json, started):
            print(f"timing statistics: {args.stats_json}")
    if interrupted and code == 0:
        code = 128 + stopped_by[0]  # as a shell reports a run ended by that signal
    return code


def _written_since(path: str | None, t: float) -> bool:
    """Whether `path` exists and was written at or after `t` (time.time())."""
    try:
        return path is not None and os.path.getmtime(path) >= t - 1.0
    except OSError:
        return False


def _loop_entry(cfg: LoopConfig) -> None:
    sys.exit(run_loop(cfg))
