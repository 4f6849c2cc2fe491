"""The ARM firmware image on QEMU's STM32F405, served on a pseudo-terminal like the other emulators:
`python -m firmware_protocol.qemu_board --elf hil-qemu-stm32f405.elf --kind humanoid17`.

It takes the Python emulator's options (`python -m firmware_protocol.emulator --help`): the board
kind, joints, hidden offsets and reversals, unique id and watchdog go to the firmware in a launch
block that QEMU's loader puts in RAM (ports/qemu_stm32f405/main.c), and the faults are made where
they would happen to a real board:

  drop:P, corrupt:P, garbage:P, delay:MS, mute:S@T, disconnect@T   on the wire (this process
                                                                    relays the bytes)
  stall:S@T     the processor stops (QEMU's `stop`, then `cont`), as a hung firmware does
  reboot@T      the processor resets (QEMU's `system_reset`): RAM from scratch, parameters kept
  (badstate@T is the Python emulator's only)

Prints the pty path (first line of stdout) and runs until SIGINT/SIGTERM; QEMU ends with it.
QEMU's USART2 is a unix socket here, not a pty of its own, because QEMU drops what the firmware
sends while no host has its pty open, and notices a host only once a second.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time

import numpy as np

from firmware_protocol import messages as M
from firmware_protocol.board_cpu import as_a_board_cpu
from firmware_protocol.emulator.__main__ import Faults, build_config, check_watchdog, parser as emulator_parser
from firmware_protocol.pty_host import close_pty, exit_with_parent, open_pty, stopped_code

LAUNCH_ADDR = 0x2001F000
LAUNCH_MAGIC = 0x514C4948   # "HILQ"
LAUNCH_FORMAT = f"<IIBB2x12sIIIIi{M.MAX_JOINTS}i{M.MAX_JOINTS}i{M.MAX_JOINTS}i{M.MAX_JOINTS}i{M.MAX_JOINTS}i" \
                f"{M.MAX_JOINTS}b2x"
QEMU = "qemu-system-arm"
QEMU_WATCHDOG_MS = 200


def _urad(values, n: int) -> list[int]:
    out = [int(round(float(v) * 1e6)) for v in values[:n]]
    return out + [0] * (M.MAX_JOINTS - n)


def launch_block(config, seed: int) -> bytes:
    """The firmware's `struct launch` for a board (firmware_protocol.emulator.board_model.BoardSetup)."""
    n = config.n_joints
    signs = [int(s) for s in (config.signs if config.signs is not None else np.ones(n))]
    offsets = config.offsets if config.offsets is not None else np.zeros(n)
    return struct.pack(LAUNCH_FORMAT, LAUNCH_MAGIC, 1, int(config.kind), n, bytes(config.uid).ljust(12, b"\0")[:12],
                       seed & 0xFFFFFFFF, int(config.cmd_timeout_ms), int(round(config.tau_s * 1e6)),
                       int(config.supply_mV), int(round(config.max_step_rad * 1e6)),
                       *_urad(config.lower, n), *_urad(config.upper, n), *_urad(config.initial, n),
                       *[int(round(float(v) * 1e3)) for v in config.vmax[:n]], *([0] * (M.MAX_JOINTS - n)),
                       *_urad(offsets, n), *(signs + [1] * (M.MAX_JOINTS - n)))


def qemu_argv(elf: str, launch_path: str, serial_sock: str, qmp_sock: str) -> list[str]:
    return [QEMU, "-M", "netduinoplus2", "-nographic", "-monitor", "none", "-kernel", elf,
            "-device", f"loader,file={launch_path},addr={LAUNCH_ADDR:#x}",
            "-chardev", f"socket,id=host,path={serial_sock},server=on,wait=on",
            "-serial", "null", "-serial", "chardev:host",          # USART1 unused; USART2 the host link
            "-qmp", f"unix:{qmp_sock},server=on,wait=off"]


def _die_with_us() -> None:
    """In QEMU's process before it starts: killed when this launcher dies, however it dies."""
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG


def _connect(path: str, proc: subprocess.Popen, timeout_s: float = 10.0) -> socket.socket:
    deadline = time.monotonic() + timeout_s
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read() if proc.stderr else ""
                raise SystemExit(f"emulator: QEMU did not start (exit code {proc.poll()}): {err.strip()[-500:]}")
            time.sleep(0.02)


class Qmp:
    """QEMU's machine protocol: stop, continue and reset the processor."""

    def __init__(self, path: str, proc: subprocess.Popen) -> None:
        self.sock = _connect(path, proc)
        self.buf = b""
        self._reply()                       # the greeting
        self.command("qmp_capabilities")

    def _reply(self) -> dict:
        while True:
            line, sep, rest = self.buf.partition(b"\n")
            if sep:
                self.buf = rest
                msg = json.loads(line)
                if "event" not in msg:
                    return msg
                continue
            chunk = self.sock.recv(4096)
            if not chunk:
                raise SystemExit("emulator: QEMU closed its machine protocol")
            self.buf += chunk

    def command(self, name: str) -> dict:
        self.sock.sendall(json.dumps({"execute": name}).encode() + b"\n")
        return self._reply()


class Relay:
    """Bytes between the pty and QEMU's USART2, with the wire's faults; the processor's through QMP."""

    MAX_BACKLOG_S = 0.004   # a board's TX queue: what would wait longer on the wire is dropped
    # bytes for the firmware that QEMU has not taken yet: more is lost, as a UART's receiver overruns
    # (never a blocking send: QEMU, blocked writing to us meanwhile, would never take them). As much
    # as the firmware's own receive ring holds: a command waits behind at most that much
    MAX_TO_BOARD = 512

    def __init__(self, faults: Faults, baud: float, latency_s: float, seed: int | None, qmp: Qmp) -> None:
        self.faults, self.qmp = faults, qmp
        self.byte_time = 10.0 / baud if baud > 0 else 0.0
        self.latency_s = latency_s + faults.delay_s
        self.rng = np.random.default_rng(seed)
        self.queue: list[tuple[float, bytes]] = []
        self.last_release = 0.0
        self.stopped = False
        self.usr1 = False
        self.to_board = bytearray()
        self.overrun_bytes = 0

    def to_firmware(self, data: bytes) -> None:
        room = self.MAX_TO_BOARD - len(self.to_board)
        self.to_board += data[:max(0, room)]
        self.overrun_bytes += max(0, len(data) - max(0, room))

    IN_FLIGHT = 256   # bytes handed to QEMU's socket and not yet read by it, at most

    def _send(self, serial: socket.socket) -> None:
        """As much as keeps the socket's own queue short: the socket would otherwise hold hundreds of
        kilobytes, seconds of QEMU's USART, and a reply would wait behind all of it."""
        queued = struct.unpack("i", fcntl.ioctl(serial.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        room = self.IN_FLIGHT - queued
        if room <= 0:
            return
        try:
            sent = serial.send(self.to_board[:room])
        except (BlockingIOError, InterruptedError):
            return
        del self.to_board[:sent]

    def _mangle(self, data: bytes) -> bytes:
        return self.faults.mangle(data, self.rng)

    def from_board(self, data: bytes, now: float, since: float) -> None:
        """Bytes the firmware sent between `since` (this relay's last look) and `now`: the wire was
        free for them from `since` on, so a relay that was not scheduled for a while does not take
        its own lateness for a full TX queue (a burst it finds is what the wire carried meanwhile)."""
        if self.faults.garbage and self.rng.random() < self.faults.garbage:
            data = self.rng.integers(0, 256, int(self.rng.integers(1, 65)), dtype=np.uint8).tobytes() + data
        data = self._mangle(data)
        start = max(since, self.last_release)
        if start - now > self.MAX_BACKLOG_S:
            return
        self.last_release = start + len(data) * self.byte_time
        self.queue.append((self.last_release + self.latency_s, data))

    def flush(self, fd: int, now: float, muted: bool) -> None:
        while self.queue and self.queue[0][0] <= now:
            _, data = self.queue.pop(0)
            if muted:
                continue
            try:
                written = os.write(fd, data)
            except OSError as e:   # no host reading: dropped, as a board's full TX queue drops
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    raise
                continue
            if written < len(data):   # the pty's buffer full part way: the rest goes next time
                self.queue.insert(0, (now, data[written:]))
                return

    def processor(self, stalled: bool) -> None:
        if stalled != self.stopped:
            self.qmp.command("stop" if stalled else "cont")
            self.stopped = stalled

    def run(self, master: int, serial: socket.socket, duration: float | None, stop) -> int:
        f, t0 = self.faults, time.monotonic()
        reboots = sorted(f.reboots)
        looked = t0
        while not stop():
            now = time.monotonic()
            rel = now - t0
            if duration is not None and rel >= duration:
                return 0
            if f.disconnect_at is not None and rel >= f.disconnect_at:
                return 3
            if reboots and rel >= reboots[0]:
                reboots.pop(0)
                self.qmp.command("system_reset")
            if self.usr1:
                self.usr1 = False
                if f.mute_on_usr1:
                    f.mutes.append((rel, f.mute_on_usr1))
                if f.stall_on_usr1:
                    f.stalls.append((rel, f.stall_on_usr1))
            self.processor(any(at <= rel < at + d for at, d in f.stalls))
            muted = any(at <= rel < at + d for at, d in f.mutes)
            wait = 0.005 if not self.queue else max(0.0, min(0.005, self.queue[0][0] - now))
            if self.to_board:
                wait = min(wait, 0.0005)   # QEMU takes a byte every few tens of µs: hand it more soon
            try:
                ready, _, _ = select.select([master, serial], [], [], wait)
            except InterruptedError:
                continue
            now = time.monotonic()
            if master in ready:
                try:
                    data = os.read(master, 4096)
                except OSError as e:
                    data = b"" if e.errno in (errno.EIO, errno.EAGAIN) else None
                    if data is None:
                        raise
                if data:
                    self.to_firmware(self._mangle(data))
            if self.to_board:
                self._send(serial)
            if serial in ready:
                try:
                    data = serial.recv(4096)
                except (BlockingIOError, InterruptedError):
                    data = None
                if data == b"":
                    return 1     # QEMU ended
                if data:
                    self.from_board(data, now, looked)
            looked = now
            self.flush(master, now, muted)
        return 0


def main(argv: list[str] | None = None) -> int:
    p = emulator_parser()
    p.prog = "python -m firmware_protocol.qemu_board"
    p.add_argument("--elf", required=True, help="the firmware image (make -C firmware_protocol/c qemu)")
    args = p.parse_args(argv)
    check_watchdog(args)
    faults = Faults.parse(args.fault)
    if faults.bad_states:
        raise SystemExit("emulator: --fault badstate@T is the Python emulator's only (leave out --impl qemu)")
    if shutil.which(QEMU) is None:
        raise SystemExit(f"emulator: {QEMU} is not installed (Debian: apt-get install -y qemu-system-arm)")
    if args.watchdog_ms is None:
        # QEMU's USART is slower than a real one, and a host busy with other work slows QEMU's
        # processor further: the board's command watchdog waits longer than a real board's 50 ms
        args.watchdog_ms = QEMU_WATCHDOG_MS
    config = build_config(args)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    as_a_board_cpu(0)   # the relay, and QEMU (it inherits both)
    # a stop before the relay's own handlers are set still removes the folder below
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _stop_now)
    tmp = tempfile.mkdtemp(prefix="hil-qemu-")
    try:
        launch, serial_sock, qmp_sock = (os.path.join(tmp, name) for name in ("launch.bin", "usart2", "qmp"))
        with open(launch, "wb") as fh:
            fh.write(launch_block(config, seed))
        proc = subprocess.Popen(qemu_argv(args.elf, launch, serial_sock, qmp_sock), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_die_with_us)
        try:
            return _serve(args, config, faults, proc, serial_sock, qmp_sock, lambda: shutil.rmtree(tmp, True))
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _stop_now(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _serve(args, config, faults: Faults, proc, serial_sock: str, qmp_sock: str, forget_files) -> int:
    serial = _connect(serial_sock, proc)     # QEMU starts the processor once this is connected
    serial.setblocking(False)
    relay = Relay(faults, args.baud, args.latency_ms / 1000.0, args.seed, Qmp(qmp_sock, proc))
    # QEMU has loaded the launch block and both sockets are connected: nothing needs the files any
    # more, and removed now they are not left behind however this process ends (SIGKILL included)
    forget_files()
    stopping: list[int] = []
    # before the path is said: whoever reads it may stop us at once, and the link must still go
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    signal.signal(signal.SIGINT, lambda s, f: stopping.append(s))
    master, slave, path = open_pty(args.link)
    print(path, flush=True)
    print(f"board emulator: {args.kind} ({config.n_joints} joints) on {path}, uid {config.uid.hex().upper()}, "
          f"the ARM image {args.elf} on QEMU's STM32F405", file=sys.stderr, flush=True)
    signal.signal(signal.SIGUSR1, lambda s, f: setattr(relay, "usr1", True))
    try:
        code = relay.run(master, serial, args.duration, lambda: bool(stopping))
    finally:
        serial.close()
        close_pty(master, slave, path, args.link)
    return stopped_code(stopping, code)


if __name__ == "__main__":
    sys.exit(main())
