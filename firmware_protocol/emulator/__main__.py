"""Run a board emulator on a pseudo-terminal: `python -m firmware_protocol.emulator --kind puma6`.

Prints the pty path (first line of stdout) and runs until SIGINT/SIGTERM. The host connects to
that path with pyserial like to any USB board. Outgoing bytes are paced at `--baud` (a pty has
no baud rate of its own) plus `--latency-ms` (e.g. 16 for an FTDI adapter's default timer).

Faults (`--fault`, repeatable or comma-separated):
  drop:P        drop each byte (both directions) with probability P
  corrupt:P     flip one bit of each byte with probability P
  garbage:P     before each outgoing frame, with probability P, send 1–64 random bytes
  delay:MS      add MS milliseconds to every outgoing frame
  stall:S@T     at T seconds after start, stop answering (and processing) for S seconds
                (T = usr1: each time the emulator receives SIGUSR1)
  disconnect@T  at T seconds, close the pty and exit (code 3): a pulled cable
  reboot@T      at T seconds, reset the board (new boot id, disabled)
  mute:S@T      at T seconds, send nothing for S seconds while still receiving and applying
                commands (a board whose replies are lost, e.g. a failing TX line); T = usr1:
                each time the emulator receives SIGUSR1
  badstate@T    at T seconds, send one CRC-valid STATE with one joint too many
"""

from __future__ import annotations

import argparse
import errno
import gc
import json
import math
import os
import select
import signal
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from firmware_protocol import messages as M
from firmware_protocol.board_kinds import BY_NAME, KindFacts
from firmware_protocol.emulator.board_model import Board, BoardSetup, StreamFrame
from firmware_protocol.frame import FrameDecoder
from firmware_protocol.pty_host import close_pty, exit_with_parent, open_pty, stopped_code



def kind_defaults(facts: KindFacts) -> dict:
    """A board kind's emulator as `BoardSetup` fields (n_joints 0: from --config, the robot's limits)."""
    base = dict(kind=facts.kind, n_joints=facts.n_joints, tau_s=facts.tau_s, noise_rad=facts.noise_rad,
                resolution_rad=facts.resolution_rad, supply_mV=facts.supply_mV, max_step_rad=facts.max_step_rad)
    if facts.vmax_rad_s:
        base["vmax"] = list(facts.vmax_rad_s)
    return base


@dataclass
class Faults:
    drop: float = 0.0
    corrupt: float = 0.0
    garbage: float = 0.0
    delay_s: float = 0.0
    stalls: list = field(default_factory=list)      # (start, duration)
    disconnect_at: float | None = None
    reboots: list = field(default_factory=list)
    mutes: list = field(default_factory=list)       # (start, duration)
    mute_on_usr1: float | None = None                # duration of a mute that SIGUSR1 starts
    stall_on_usr1: float | None = None               # … of a stall
    bad_states: list = field(default_factory=list)

    @classmethod
    def parse(cls, specs: list[str]) -> "Faults":
        f = cls()
        for spec in ",".join(specs).split(","):
            spec = spec.strip()
            if not spec:
                continue
            try:
                if spec.startswith("drop:"):
                    f.drop = _prob(spec[5:])
                elif spec.startswith("corrupt:"):
                    f.corrupt = _prob(spec[8:])
                elif spec.startswith("garbage:"):
                    f.garbage = _prob(spec[8:])
                elif spec.startswith("delay:"):
                    f.delay_s = float(spec[6:]) / 1000.0
                elif spec.startswith(("stall:", "mute:")):
                    kind, rest = spec.split(":", 1)
                    dur, at = rest.split("@")
                    if at == "usr1":
                        setattr(f, f"{kind}_on_usr1", float(dur))
                    else:
                        (f.stalls if kind == "stall" else f.mutes).append((float(at), float(dur)))
                elif spec.startswith("disconnect@"):
                    f.disconnect_at = float(spec[11:])
                elif spec.startswith("reboot@"):
                    f.reboots.append(float(spec[7:]))
                elif spec.startswith("badstate@"):
                    f.bad_states.append(float(spec[9:]))
                else:
                    raise ValueError("unknown kind")
                times = [f.delay_s, *(x for pair in f.stalls + f.mutes for x in pair), *f.reboots, *f.bad_states,
                         f.disconnect_at or 0.0, f.mute_on_usr1 or 0.0, f.stall_on_usr1 or 0.0]
                if not all(math.isfinite(x) and x >= 0 for x in times):
                    raise ValueError("times and durations must be finite and not negative")
            except ValueError as e:
                raise SystemExit(f"emulator: bad --fault {spec!r} ({e}); expected drop:P, corrupt:P, garbage:P, "
                                 "delay:MS, stall:S@T, disconnect@T, reboot@T, mute:S@T or badstate@T") from None
        return f


    def mangle(self, data: bytes, rng) -> bytes:
        """The bytes as the line delivers them: bits flipped (corrupt:P), bytes lost (drop:P)."""
        if not (self.drop or self.corrupt) or not data:
            return data
        arr = np.frombuffer(data, dtype=np.uint8).copy()
        if self.corrupt:
            hit = rng.random(arr.size) < self.corrupt
            if hit.any():
                arr[hit] ^= (1 << rng.integers(0, 8, hit.sum())).astype(np.uint8)
        if self.drop:
            arr = arr[rng.random(arr.size) >= self.drop]
        return arr.tobytes()


def _prob(text: str) -> float:
    p = float(text)
    if not 0.0 <= p <= 1.0:  # (NaN fails this too)
        raise ValueError("probability must be in [0, 1]")
    return p


def _floats(text: str | None, n: int, what: str) -> list[float] | None:
    if text is None:
        return None
    vals = [float(v) for v in text.replace(",", " ").split()]
    if len(vals) != n:
        raise SystemExit(f"emulator: {what} needs {n} values, got {len(vals)}")
    return vals


def build_config(args: argparse.Namespace) -> BoardSetup:
    base = kind_defaults(BY_NAME[args.kind])
    extra = json.loads(args.config) if args.config else {}
    if not base["n_joints"]:
        if not 1 <= len(extra.get("lower_deg", ())) <= M.MAX_JOINTS:
            raise SystemExit(f"emulator: --kind {args.kind} takes its joints from --config lower_deg (1 … "
                             f"{M.MAX_JOINTS} joints)")
        base["n_joints"] = len(extra["lower_deg"])
    n = base["n_joints"]
    if extra:
        for key in ("lower_deg", "upper_deg", "initial_deg", "vmax_deg_s"):
            if key in extra and len(extra[key]) != n:
                raise SystemExit(f"emulator: config {key} needs {n} values")
        if "lower_deg" in extra:
            base["lower"] = np.radians(extra["lower_deg"])
        if "upper_deg" in extra:
            base["upper"] = np.radians(extra["upper_deg"])
        if "initial_deg" in extra:
            base["initial"] = np.radians(extra["initial_deg"])
        if "vmax_deg_s" in extra:
            base["vmax"] = np.radians(extra["vmax_deg_s"])
    offsets = _floats(args.offsets_deg, n, "--offsets-deg")
    if offsets is not None:
        base["offsets"] = np.radians(offsets)
    if args.reverse:
        signs = np.ones(n)
        for tok in args.reverse.replace(",", " ").split():
            j = int(tok)
            if not 0 <= j < n:
                raise SystemExit(f"emulator: --reverse joint {j} out of range 0..{n - 1}")
            signs[j] = -1.0
        base["signs"] = signs
    if args.uid:
        base["uid"] = bytes.fromhex(args.uid)
    base["seed"] = args.seed
    if args.noise_deg is not None:
        base["noise_rad"] = math.radians(args.noise_deg)
    if args.watchdog_ms is not None:
        base["cmd_timeout_ms"] = args.watchdog_ms
    return BoardSetup(**base)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m firmware_protocol.emulator",
                                description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--kind", choices=sorted(BY_NAME), default="puma6")
    p.add_argument("--config", help="JSON: lower_deg, upper_deg, initial_deg, vmax_deg_s (board frame)")
    p.add_argument("--offsets-deg", help="hidden per-joint zero offsets, degrees (board = sign·true + offset)")
    p.add_argument("--reverse", help="hidden reversed joints, indices, e.g. 2,5")
    p.add_argument("--noise-deg", type=float, help="measurement noise, 1 sigma, degrees")
    p.add_argument("--fault", action="append", default=[], help="fault injection, see below")
    p.add_argument("--baud", type=float, default=1_000_000, help="pace outgoing bytes at this baud (0: no pacing)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="extra latency per outgoing frame (USB adapter)")
    p.add_argument("--uid", help="board unique id, 24 hex digits (default: random)")
    p.add_argument("--seed", type=int, help="seed of the measurement noise")
    p.add_argument("--link", help="also make this symlink point at the pty (like a udev by-id link)")
    p.add_argument("--duration", type=float, help="exit after this many seconds")
    p.add_argument("--watchdog-ms", type=int, help=f"command watchdog (CMD_TIMEOUT_MS, {M.CMD_TIMEOUT_MS_MIN}–{M.CMD_TIMEOUT_MS_MAX} ms; "
                                                      f"default {M.CMD_TIMEOUT_MS_DEFAULT})")
    p.add_argument("--parent-pid", type=int, help="exit when this process (the one that started us) dies")
    return p


class Runner:
    def __init__(self, board: Board, faults: Faults, baud: float, latency_s: float, seed: int | None) -> None:
        self.board = board
        self.faults = faults
        self.byte_time = 10.0 / baud if baud > 0 else 0.0
        self.latency_s = latency_s + faults.delay_s
        self.rng = np.random.default_rng(seed)
        self.queue: list[tuple[float, bytes]] = []
        self.last_release = 0.0
        self.decoder = FrameDecoder()
        self.tx_dropped_frames = 0
        self.usr1 = False  # set by the SIGUSR1 handler
        # how late this process woke up (s): the commands that waited in the pty meanwhile reached a
        # real board spread over that time, and their STATEs went out on the wire then; they are
        # paced from then, not queued up behind one another from now
        self.woke_late = 0.0

    def _mangle(self, data: bytes) -> bytes:
        return self.faults.mangle(data, self.rng)

    MAX_BACKLOG_S = 0.004  # a STATE that would wait longer than this on the wire is dropped

    def send(self, frames: list[bytes], now: float) -> None:
        for fr in frames:
            if isinstance(fr, StreamFrame) and self.last_release - now > self.MAX_BACKLOG_S:
                self.tx_dropped_frames += 1  # like firmware with a full TX queue: drop STATE, count it
                continue
            if self.faults.garbage and self.rng.random() < self.faults.garbage:
                fr = self.rng.integers(0, 256, int(self.rng.integers(1, 65)), dtype=np.uint8).tobytes() + fr
            fr = self._mangle(fr)
            release = max(now - self.woke_late, self.last_release) + len(fr) * self.byte_time
            self.last_release = release
            self.queue.append((release + self.latency_s, fr))

    def flush(self, fd: int, now: float) -> None:
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.pop(0)
            try:
                os.write(fd, data)
            except BlockingIOError:
                self.tx_dropped_frames += 1  # host not reading: drop, like firmware with a full TX queue
            except OSError as e:
                if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    self.tx_dropped_frames += 1
                else:
                    raise

    TICK_S = 0.001   # the board's control tick

    def run(self, master: int, duration: float | None, stop) -> int:
        board = self.board
        t0 = time.monotonic()
        board.boot(t0)
        board.last_heartbeat = t0 - 1.0
        self.next_tick = t0
        last_wake = None
        reboots = sorted(self.faults.reboots)
        bad_states = sorted(self.faults.bad_states)
        # a full garbage collection of all that was built would stall the board tens of ms (as a
        # real board never does); frozen, collections walk only what the run makes
        gc.collect()
        gc.freeze()
        while not stop():
            now = time.monotonic()
            rel = now - t0
            if duration is not None and rel >= duration:
                return 0
            if self.faults.disconnect_at is not None and rel >= self.faults.disconnect_at:
                return 3
            stalled, muted = self._faults_at(rel, now, reboots, bad_states)
            wake = self.next_tick
            if self.queue and not stalled:
                wake = min(wake, self.queue[0][0])
            timeout = max(0.0, wake - now)
            try:
                r, _, _ = select.select([master], [], [], timeout)
            except InterruptedError:
                continue
            now = time.monotonic()
            # late: the time since the last wake-up beyond the sleep asked for and the 1 ms the work
            # between may take
            self.woke_late = max(0.0, now - last_wake - timeout - 0.001) if last_wake is not None else 0.0
            last_wake = now
            if r:
                self._receive(master, now, stalled)
            self._tick(now, stalled)
            if muted:
                self.queue.clear()  # replies lost on the way: the host hears nothing
            if not stalled:
                self.flush(master, now)
        return 0

    def _faults_at(self, rel: float, now: float, reboots: list, bad_states: list) -> tuple[bool, bool]:
        """The injected faults due at `rel` s: a reboot, a SIGUSR1's mute or stall, a bad STATE
        sent; (stalled, muted) now."""
        if reboots and rel >= reboots[0]:
            reboots.pop(0)
            self.board.boot(now)
        if self.usr1:
            self.usr1 = False
            if self.faults.mute_on_usr1:
                self.faults.mutes.append((rel, self.faults.mute_on_usr1))
            if self.faults.stall_on_usr1:
                self.faults.stalls.append((rel, self.faults.stall_on_usr1))
        if bad_states and rel >= bad_states[0]:
            bad_states.pop(0)
            self.send([self._bad_state()], now)
        stalled = any(at <= rel < at + dur for at, dur in self.faults.stalls)
        muted = any(at <= rel < at + dur for at, dur in self.faults.mutes)
        return stalled, muted

    def _receive(self, master: int, now: float, stalled: bool) -> None:
        """The host's bytes: each whole frame to the board, its replies queued (a stalled board
        reads nothing)."""
        try:
            data = os.read(master, 4096)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            data = b""
        if data and not stalled:
            frames = self.decoder.feed(self._mangle(data))
            self.board.rx_refused = self.decoder.stats.dropped
            for frame in frames:
                self.send(self.board.receive(frame, now), now)

    def _tick(self, now: float, stalled: bool) -> None:
        """The board's control tick, each millisecond (caught up after a long stall, not replayed)."""
        if now < self.next_tick:
            return
        if stalled:
            self.board.now = now  # frozen firmware: time passes, nothing is computed or sent
        else:
            self.send(self.board.tick(now), now)
        self.next_tick += self.TICK_S
        if self.next_tick < now - 0.05:
            self.next_tick = now + self.TICK_S

    def _bad_state(self) -> bytes:
        """A STATE that frames and checks correctly but carries one joint more than the board has."""
        n = self.board.config.n_joints + 1
        j = np.zeros(n, dtype=M.STATE_JOINT_DTYPE)
        msg = M.State(self.board.t_us(), self.board.echo_seq, int(self.board.state), int(self.board.faults), 0, j)
        return msg.encode(self.board._next_seq())


def check_watchdog(args) -> None:
    """--watchdog-ms within what the board accepts for CMD_TIMEOUT_MS."""
    lo, hi = M.CMD_TIMEOUT_MS_MIN, M.CMD_TIMEOUT_MS_MAX
    if args.watchdog_ms is not None and not lo <= args.watchdog_ms <= hi:
        raise SystemExit(f"emulator: --watchdog-ms {args.watchdog_ms} is outside {lo} … {hi} ms (SPEC.md)")


def main(argv: list[str] | None = None, plant_for=None) -> int:
    """`plant_for(config)`: the joints behind the board (a firmware_protocol.plant.Plant; default
    the kinematic servo model), e.g. a physics simulation (hil.physics.emulate)."""
    args = parser().parse_args(argv)
    check_watchdog(args)
    config = build_config(args)
    if plant_for is not None:
        config.plant = plant_for(config)
    faults = Faults.parse(args.fault)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid)
    board = Board(config)
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    # before the path is said: whoever reads it may stop us at once, and the link must still go
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    master, slave, path = open_pty(args.link)
    print(path, flush=True)
    print(f"board emulator: {args.kind} ({config.n_joints} joints) on {path}, uid {config.uid.hex().upper()}, "
          f"boot id {board.boot_id:08x}", file=sys.stderr, flush=True)
    runner = Runner(board, faults, args.baud, args.latency_ms / 1000.0, args.seed)

    def on_usr1(signum, frame):
        runner.usr1 = True

    signal.signal(signal.SIGUSR1, on_usr1)
    try:
        code = runner.run(master, args.duration, lambda: bool(stopping))
    finally:
        close_pty(master, slave, path, args.link)  # the slave open until here: the master sees EIO on every reopen
    return stopped_code(stopping, code)


if __name__ == "__main__":
    sys.exit(main())
