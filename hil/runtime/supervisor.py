"""`hil run`: start the emulator (dry-run), the shared block, the loop process and the twin,
show a live status line, and shut everything down in order."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
import dataclasses
from typing import Callable

from firmware_protocol.buses.bus_board import cycle_note
from firmware_protocol.messages import CMD_TIMEOUT_MS_MAX, CMD_TIMEOUT_MS_MIN, BoardState, fault_names
from hil import board_config, emulator_launch, robots
from hil.display import display_available
from hil.errors import HilError, InputError
from hil.inputs import number, writable_file
from hil.physics.world import world_path
from hil.remote.session import control_refusal, load_config
from hil.runtime.lifecycle import Activity, Mode
from hil.runtime import loop_process
from hil.runtime.loop import LoopConfig
from hil.runtime.realtime import DRY_RUN_SPIN_S, check_a_loop_cpu_is_free
from hil.options import LOOP_RATE_RANGE_HZ, check_options
from hil.runtime.run_request import RunRequest
from hil.runtime.shared import (BOARD_STATES, ERROR_PREFIX, LoopClient, LoopStatus, LoopWord, SharedState,
                                loop_name, progress_text, runtime_dir)
from hil.runtime.helpers import TwinStarter, start_bridge, start_shadow
from hil.runtime.shadow import block_path as shadow_block_path
from hil.safety import flag_names


SHADOW_READY_S = 30.0   # the longest a run waits for its shadow twin to be ready before it starts


def status_line(s) -> str:
    st = BOARD_STATES.get(int(s.board_state), "?")
    track = float(max(abs(a - b) for a, b in zip(s.q_cmd, s.q_meas))) if len(s.q_cmd) else 0.0
    mode = Mode(int(s.mode)).name.lower()
    activity = Activity(int(s.activity)).name.lower()
    if int(s.mode) == Mode.HELD:  # and why
        why = [n for n in flag_names(int(s.safety_flags)) if n != "velocity limit"]
        mode = f"held ({', '.join(why) if why else 'missed deadlines'})"
    elif int(s.board_state) in (BoardState.FAULT, BoardState.ESTOP) and int(s.faults):
        mode = f"{mode} ({fault_names(int(s.faults))})"
    return (f"t {s.t:7.2f} s | board {st:<8} | {mode:<8} {activity:<6} {progress_text(s.motion_progress):>8} | "
            f"{s.rate_hz:6.1f} Hz jitter p50 {s.jitter_p50_us:6.1f} p99 {s.jitter_p99_us:7.1f} µs | "
            f"cycle {s.cycle_p50_us:5.1f} µs | misses {int(s.misses)} stale {int(s.stale_total)} | "
            f"track {math.degrees(track):5.2f}°")


def bus_config(req: RunRequest, model):
    """The servo bus mapping a request names (None: our own protocol), with --watchdog-ms in place of
    its own watchdogs (the host-side one and the servos' bus watchdog)."""
    bus = board_config.resolve(model, req.bus, req.board_config)
    if bus is not None and req.watchdog_ms is not None:
        ms = watchdog_ms(req)
        bus = dataclasses.replace(bus, command_timeout_ms=ms, watchdog_ms=ms)
    return bus


def watchdog_ms(req: RunRequest) -> int | None:
    """--watchdog-ms, checked: the board's range for its command watchdog (CMD_TIMEOUT_MS)."""
    if req.watchdog_ms is None:
        return None
    return round(number(req.watchdog_ms, "--watchdog-ms", CMD_TIMEOUT_MS_MIN, CMD_TIMEOUT_MS_MAX, "ms"))


def spin_us(req: RunRequest) -> float | None:
    """The loop's busy-wait before each deadline: --spin-us as given; without it none in a dry run
    (DRY_RUN_SPIN_S), else None: sized as the loop runs."""
    if req.spin_us is not None or not req.dry_run:
        return req.spin_us
    return DRY_RUN_SPIN_S * 1e6


def check(req: RunRequest, model, bus=None) -> float:
    """Refuse a request that cannot run, before anything starts; returns the loop rate (Hz)."""
    check_options(req)   # each value against what its option declares: a range, a choice
    if not req.dry_run and not req.port:
        raise InputError("hil run needs --port PORT (see `hil ports`) or --dry-run")
    default = model.default_rate_hz
    if bus is not None and req.rate_hz is None:  # no faster than the bus can go
        default = max(10.0, min(default, math.floor(cycle_note(bus)[1])))
    if req.emulator == "qemu" and req.rate_hz is None:   # no faster than QEMU's USART carries frames
        default = min(default, emulator_launch.QEMU_RATE_HZ)
    if bus is not None and req.port_io == "inline":
        raise InputError("--port-io inline cannot drive a servo bus (each poll waits for the servos' replies); "
                         "use process (the default) or thread")
    rate = number(default if req.rate_hz is None else req.rate_hz, "--rate", *LOOP_RATE_RANGE_HZ, "Hz")
    watchdog = watchdog_ms(req)
    if watchdog is not None and watchdog < 3e3 / rate:
        raise InputError(f"--watchdog-ms {watchdog}: shorter than three cycles at {rate:g} Hz "
                         f"({3e3 / rate:g} ms): the watchdog would trip between commands; raise it or --rate")
    if req.spin_us is not None and not 0.0 <= req.spin_us <= 1e6 / rate:  # (NaN fails this too)
        raise InputError(f"--spin-us {req.spin_us:g} is outside 0 … {1e6 / rate:g} µs (one cycle at {rate:g} Hz)")
    for spec in req.faults:
        (emulator_launch.check_fault if bus is None else emulator_launch.check_bus_fault)(spec)
    if req.emulator != "python" and (bus is not None or not req.dry_run):
        raise InputError(f"--emulator {req.emulator} runs the C firmware (its host build, or its ARM image on QEMU) for "
                         "--dry-run; not with --port or --bus")
    if req.faults and not req.dry_run:
        raise InputError("--fault injects faults into the built-in emulator: use it with --dry-run")
    if req.shadow:
        emulator_launch.check_physics("--shadow")
        if req.physics:
            raise InputError("--shadow runs physics beside the robot; with --physics the robot itself is in physics: "
                             "choose one")
    if req.physics:
        if not req.dry_run:
            raise InputError("--physics puts the robot in physics behind the built-in emulator: use it with --dry-run")
        if req.emulator != "python":
            raise InputError(f"--physics runs the Python board model with MuJoCo behind it; leave out --emulator "
                             f"{req.emulator}")
        emulator_launch.check_physics()
    if req.dry_run and bus is None:   # a board the emulator cannot be is the request's, said before the CPUs
        emulator_launch.board_kind(model)
    _check_zenoh(req)
    writable_file(req.record, "--record", in_place=True)
    if req.record:
        _check_room_to_record(req, model.n, rate)
    writable_file(req.stats_json, "--stats-json")
    if req.record and req.stats_json and os.path.abspath(req.record) == os.path.abspath(req.stats_json):
        raise InputError(f"--record {req.record}: --record and --stats-json name the same file")
    return rate


RECORD_AT_LEAST_S = 60.0   # a run of no stated length needs room to record this long at its start


def _check_room_to_record(req: RunRequest, n: int, rate_hz: float) -> None:
    """Refuse a recording the disk has no room for: the whole run when its length is known, else
    its first minute."""
    from hil.runtime.recorder import record_dtype   # lazy: the recorder's numpy only when recording

    folder = os.path.dirname(os.path.abspath(req.record))
    try:
        st = os.statvfs(folder)
    except OSError:
        return   # (a folder that cannot be asked is refused by the write itself, then said)
    free = st.f_bavail * st.f_frsize
    per_s = record_dtype(n).itemsize * rate_hz
    seconds = req.duration_s if req.duration_s is not None else RECORD_AT_LEAST_S
    need = per_s * seconds * 1.1 + 256 * 1024
    if free < need:
        what = f"a {seconds:g} s run" if req.duration_s is not None else "the first minute of the run"
        raise InputError(f"--record {req.record}: {free / 2**20:.1f} MiB free in {folder}; {what} at {rate_hz:g} Hz "
                         f"records {need / 2**20:.1f} MiB ({per_s / 1024:.0f} KiB/s): free some space, or record "
                         "elsewhere")


def _check_zenoh(req: RunRequest) -> None:
    if not req.zenoh:
        if req.zenoh_config or req.zenoh_control:
            raise InputError("--zenoh-config and --zenoh-control belong to --zenoh")
        return
    config = load_config(req.zenoh_config)   # a missing package or a bad file: said now
    refusal = control_refusal(config) if req.zenoh_control else ""
    if refusal:
        raise InputError(f"--zenoh-control lets other machines move the robot, and the --zenoh-config "
                         f"{req.zenoh_config or '(none: Zenoh defaults)'} does not keep that to authorised peers: "
                         f"{refusal} (docs/remote.md shows one that does)")


def run(req: RunRequest, twin: TwinStarter | None = None, bridge: Callable[[list[str]], int] | None = None,
        model=None) -> int:
    """Start the emulator (dry-run), the shared block, the loop process, the twin (with `twin`, unless
    headless) and the Zenoh bridge (`bridge`: its main, with req.zenoh), show events and a status
    line, and stop everything in order. Returns the exit code."""
    if req.zenoh and bridge is None:
        raise InputError("--zenoh: this caller gave no Zenoh bridge to start")
    model = model if model is not None else robots.load(req.robot)   # (a command has loaded it already)
    bus = bus_config(req, model)
    rate = check(req, model, bus)
    if req.realtime:
        check_a_loop_cpu_is_free()   # before anything starts: the loops already running stay undisturbed
    emu = None
    physics = " with the robot in physics (MuJoCo)" if req.physics else ""
    name = loop_name(model.name, os.getpid())
    truth = os.path.join(runtime_dir(), f"physics-{os.getpid()}.json") if req.physics else None
    world = world_path(runtime_dir(), name) if req.physics else None
    if req.dry_run and bus is not None:
        emu = emulator_launch.start_bus_emulator(bus, model, faults=req.faults, parent_pid=os.getpid(),
                                                 physics=req.physics, truth=truth, world=world)
        print(f"servo bus config: {bus.source}{physics}")
    elif req.dry_run:
        emu = emulator_launch.start_emulator(model, impl=req.emulator, faults=req.faults, baud=None,
                                             parent_pid=os.getpid(), physics=req.physics, truth=truth, world=world)
        print(f"board emulator: {model.name} on {emu.path}" + (" (the C firmware)" if req.emulator == "c" else "")
              + physics)
    try:
        shared = SharedState(name, model.n, create=True)
    except BaseException:
        if emu is not None:  # it holds our stdout: a caller waiting for EOF would wait forever
            emu.stop()
        raise
    headless = req.headless or twin is None
    if not headless and not display_available():
        print("no display: running headless (set DISPLAY or use `xvfb-run`; attach later with `hil twin`)")
        headless = True
    cfg = LoopConfig.from_request(req, robot=model.spec, port=emu.path if emu else req.port, shm_name=name,
                                  rate_hz=rate, headless=headless, parent_pid=os.getpid(), bus=bus,
                                  watchdog_ms=None if bus is not None else watchdog_ms(req), spin_us=spin_us(req))
    session = _Run(shared, req, model, headless, twin, bridge)
    try:
        session.supervise(cfg)
    finally:
        session.close(emu)
        if truth is not None:
            session.physics_report(truth)
        if world is not None:   # an emulator killed outright leaves it
            _remove(world)
        if session.last_line:   # what went wrong, last, so that it is what a user sees
            print(session.last_line, file=sys.stderr)
    return session.code


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class _Run:
    """One run's processes and what it has said, from start to the exit code."""

    def __init__(self, shared, req: RunRequest, model, headless: bool, start_twin: TwinStarter | None,
                 bridge_main: Callable[[list[str]], int] | None) -> None:
        self.shared, self.req, self.model, self.headless = shared, req, model, headless
        self.start_twin, self.bridge_main = start_twin, bridge_main
        self.proc = None
        self.twin = None
        self.shadow = None
        self.bridge = None
        self.code = 0
        self.signal: int | None = None
        self.error_text = ""
        self.last_line = ""
        self.ever_ran = False
        self.last_event = 0
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.tty = sys.stdout.isatty()

    def _on_signal(self, signum, frame) -> None:
        # the loop stops as for Ctrl-C (ESTOP, recording closed), whoever got the signal: a
        # launcher or a script may signal this process alone
        self.signal = signum
        self.shared.ctrl[LoopWord.STOP] = signum   # the loop e-stops on it at once, naming the signal

    def supervise(self, cfg: LoopConfig) -> None:
        self._old = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        if self.req.shadow:   # beside the run from its first cycle: ready before the loop is told to start
            self.shadow = start_shadow(self.shared.name, self.model.spec, self.req.board_config, self.req.record)
            self._wait_for_shadow()
        loop = loop_process.take()
        self.proc = loop.proc
        loop.start(cfg)
        client = LoopClient(self.shared.name)
        try:
            if not self.headless:
                self.twin = self.start_twin(self.shared.name, self.model.spec, self.req.path_file, self.req.view)
                print("twin: starting …")
            if self.req.zenoh:
                r = self.req
                self.bridge = start_bridge(self.bridge_main, self.shared.name, r.zenoh_rate_hz, r.zenoh_config,
                                           r.zenoh_control)
            last_print = 0.0
            while self.proc.is_alive():
                time.sleep(0.05)
                self._watch_twin()
                self._watch_bridge()
                try:
                    snap = client.snapshot()
                except HilError:
                    continue
                self._print_events(client)
                running = client.status() == LoopStatus.RUNNING
                self.ever_ran = self.ever_ran or running
                now = time.monotonic()
                if self.headless and running and now - last_print > (0.2 if self.tty else 2.0):
                    last_print = now
                    line = status_line(snap)
                    print(("\r" + line) if self.tty else line, end="" if self.tty else "\n", flush=True)
            self.proc.join()
            if self.tty:
                print()
            self._print_events(client)
            self._outcome()
        finally:
            client.close()

    def _wait_for_shadow(self) -> None:
        """Until the shadow twin has built its model and made its block (or has ended, or a busy
        machine took SHADOW_READY_S: the run goes on and the shadow joins it when it can)."""
        deadline = time.monotonic() + SHADOW_READY_S
        while (self.shadow.is_alive() and not os.path.exists(shadow_block_path(self.shared.name))
               and time.monotonic() < deadline and self.signal is None):
            time.sleep(0.02)

    def _watch_twin(self) -> None:
        twin = self.twin
        if twin is None or twin.is_alive():
            return
        if twin.exitcode != 0:  # it could not open, or died: the run has no e-stop button
            print(f"hil {self.req.command}: the twin failed (exit code {twin.exitcode}); see its messages above. "
                  "Stopping the run (use --headless to run without it)", file=sys.stderr)
            self.code = 1
            self.shared.ctrl[LoopWord.STOP] = signal.SIGTERM
        else:
            print("twin closed; the loop runs on (Ctrl-C, or `hil ctl shutdown`, to stop it)")
        self.twin = None

    def _watch_bridge(self) -> None:
        if self.bridge is not None and not self.bridge.is_alive():
            if self.bridge.exitcode != 0:   # not a safety matter: the loop runs on, said once
                print(f"hil {self.req.command}: the Zenoh bridge stopped (exit code {self.bridge.exitcode}); the loop runs on "
                      "without it", file=sys.stderr)
            self.bridge = None

    def _print_events(self, client) -> None:
        self.last_event, texts = client.state.events_since(self.last_event)
        for text in texts:
            if text.startswith(ERROR_PREFIX):
                self.error_text = text[len(ERROR_PREFIX):]  # said once, at the end
            else:
                print(("\r" if self.tty else "") + text + " " * 20, flush=True)

    def _outcome(self) -> None:
        status = LoopStatus(int(self.shared.ctrl[LoopWord.STATUS]))
        if self.code == 0 and (self.proc.exitcode != 0 or status == LoopStatus.FAILED):
            if self.error_text and self.ever_ran:
                self.last_line = f"hil {self.req.command}: {self.error_text}"
                self.code = 1
            elif self.error_text:   # refused before anything ran, like bad arguments
                self.last_line = f"hil {self.req.command}: error: {self.error_text}"
                self.code = 2
            elif self.proc.exitcode is not None and self.proc.exitcode < 0:
                sig = -self.proc.exitcode
                name = signal.Signals(sig).name if sig in signal.valid_signals() else f"signal {sig}"
                self.last_line = (f"hil {self.req.command}: the loop's process was killed ({name}); its port process e-stops the board "
                                  "when the loop is gone (said above when it did), else the board's watchdog stops it")
                self.code = 1
            else:
                self.last_line = (f"hil {self.req.command}: the loop stopped with an error (exit code {self.proc.exitcode}); see the "
                                  "messages above")
                self.code = 1
        if self.signal is not None and self.code == 0:
            self.code = 128 + self.signal  # as a shell reports a run ended by that signal

    def physics_report(self, path: str) -> None:
        """A physics dry-run: what the emulator saw the robot's body do, said in one line, added to
        the stats file, and a fall made the run's failure (exit code 1)."""
        truth = _read_truth(path)
        if truth is None or not truth.get("released"):
            return
        if truth["fell"]:
            when = truth["fell_at"] - self.started_mono
            line = (f"hil {self.req.command}: the robot fell in physics at t = {when:.2f} s (the emulator's verdict; largest tilt "
                    f"{truth['max_tilt_deg']:.0f}°)")
            if self.code == 0:
                self.code, self.last_line = 1, line
            else:
                print(line, file=sys.stderr)
        else:
            dx, dy = truth["base_travel_m"]
            print(f"physics: the robot stayed up (largest tilt {truth['max_tilt_deg']:.1f}°, its base travelled "
                  f"{1e3 * dx:.0f} mm forward and {1e3 * dy:.0f} mm left; MuJoCo's model "
                  f"{truth.get('model', 'built from hil')})")
        stats = self.req.stats_json
        if stats and _written_since(stats, self.started):
            try:
                with open(stats) as f:
                    data = json.load(f)
                report = data.setdefault("physics", {"imu": False})
                report["emulator"] = {k: v for k, v in truth.items() if k not in ("fell_at", "released_at")}
                report["emulator"]["fell_at_s"] = None if truth["fell_at"] is None else \
                    round(truth["fell_at"] - self.started_mono, 3)
                if not report.get("imu"):   # the host had no IMU (a servo bus): the emulator's word is the report
                    report.update(fell=truth["fell"], max_tilt_deg=truth["max_tilt_deg"],
                                  base_travel_m=truth["base_travel_m"], fell_at_s=report["emulator"]["fell_at_s"])
                with open(stats, "w") as f:
                    json.dump(data, f, indent=1)
            except (OSError, ValueError):
                pass

    def close(self, emu) -> None:
        for sig, handler in getattr(self, "_old", {}).items():
            signal.signal(sig, handler)
        if self.proc is not None and self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=3)
        if self.twin is not None:
            self.twin.terminate()
            self.twin.join(timeout=3)
        if self.shadow is not None:
            self.shadow.terminate()
            self.shadow.join(timeout=5)   # it writes its recording as it ends
            if self.shadow.is_alive():
                self.shadow.kill()
                self.shadow.join()
        if self.bridge is not None:
            self.bridge.terminate()
            self.bridge.join(timeout=3)
            if self.bridge.is_alive():
                self.bridge.kill()
                self.bridge.join()
        if emu is not None:
            emu.stop()
        self.shared.close()
        req = self.req
        if _written_since(req.record, self.started):
            print(f"recording: {req.record} (load with numpy.load; {req.record}.json beside it says what it holds)")
        if _written_since(req.stats_json, self.started):
            print(f"timing statistics: {req.stats_json}")


def _read_truth(path: str) -> dict | None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return data if isinstance(data, dict) else None


def _written_since(path: str | None, t: float) -> bool:
    """Whether `path` exists and was written at or after `t` (time.time())."""
    try:
        return path is not None and os.path.getmtime(path) >= t - 1.0
    except OSError:
        return False
