"""How the loop reaches a board: one declared interface, `BoardTransport`, and where its serial
I/O runs — in a process of its own (`port_process.PortLink`, the default: the loop shares no GIL
with it), on a thread of the loop's process (`ThreadPort`), or on the loop's own thread (the
wire-protocol `Link` in poll mode). New board kinds (servo buses) implement the same interface.

Every call the loop makes each cycle (`poll`, `send_positions`, `estop`, `lost`) returns at
once; the transactions (`enable`, `disable`, `clear_faults`, `reconnect`, `round_trips_ms`) wait
for the board and are made from `board_actions.BoardActions`' thread, never from the cycle.
"""

from __future__ import annotations

import os
import threading
from typing import Protocol, runtime_checkable

import numpy as np

from firmware_protocol.board_data import BoardInfo, StateSample
from firmware_protocol.buses import bus_class
from firmware_protocol.buses.bus_board import BusBoard, BusConfig, cycle_cost, cycle_note
from firmware_protocol.buses.servo_bus import wire_time_s
from firmware_protocol.link import Link
from firmware_protocol.messages import Param
from hil.runtime.realtime import leave_the_loop_cpu

PORT_IO_NOTES = {"process": "in its own process", "thread": "on a thread of the loop's process",
                 "inline": "on the loop's thread"}


@runtime_checkable
class BoardTransport(Protocol):
    """A connected board, as the loop uses it (radians in the joint frame)."""

    info: BoardInfo

    @property
    def lost(self) -> str | None:
        """Why the link is lost, or None while it works."""

    @property
    def rejected_frames(self) -> int:
        """Frames dropped so far: bad framing or CRC, or a payload that failed validation."""

    def poll(self) -> StateSample | None:
        """The newest STATE (the same object until a newer one); raises LinkLostError once lost."""

    def send_positions(self, q: np.ndarray, hold: bool = False) -> None:
        """Joint targets for every joint; `hold`: a keep-alive the board answers but never applies."""

    def estop(self) -> None:
        """ESTOP now, without waiting."""

    def enable(self) -> None: ...

    def disable(self) -> None: ...

    def clear_faults(self) -> None: ...

    def reconnect(self, timeout_s: float) -> BoardInfo:
        """The same board (by unique id) again; it stays disabled. Raises LinkLostError."""

    def round_trips_ms(self, count: int = 5) -> list[float]: ...

    def describe_faults(self) -> str:
        """What is at fault on the board, joint by joint, and what to do ("" if it cannot say)."""

    def close(self) -> None: ...


class ThreadPort:
    """The wire-protocol `Link` with its reads and writes on a thread of the loop's process: the
    cycle hands over the newest command and takes the newest state, and never waits in a system
    call (the GIL is released inside them)."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.info = link.info
        self._cond = threading.Condition()
        self._cmd: tuple[np.ndarray, bool] | None = None
        self._latest: StateSample | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._start()

    def _start(self) -> None:
        self._running = True
        self._error = None
        self._latest = None
        self._thread = threading.Thread(target=self._serve, name="hil-port", daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify()
        t = self._thread
        if t is not None and t.is_alive() and t is not threading.current_thread():
            t.join(timeout=1.0)

    def _serve(self) -> None:
        # threads inherit the loop's SCHED_FIFO and pinning: one priority below it, on the other CPUs
        try:
            mine = os.sched_getaffinity(0)
            fifo = os.sched_getscheduler(0) == os.SCHED_FIFO
            leave_the_loop_cpu(next(iter(mine)) if len(mine) == 1 else None, fifo)
        except (AttributeError, OSError):
            pass
        link = self.link
        while self._running:
            with self._cond:
                if self._cmd is None and self._running:
                    self._cond.wait(0.002)
                cmd, self._cmd = self._cmd, None
            try:
                if cmd is not None:
                    link.send_positions(cmd[0], hold=cmd[1])
                s = link.poll()
                if s is not None:
                    self._latest = s
            except BaseException as e:  # LinkLostError and friends: the cycle decides
                self._error = e
                return

    # ------------------------------------------------------------------ every cycle
    @property
    def lost(self) -> str | None:
        return self.link.lost

    @property
    def rejected_frames(self) -> int:
        return self.link.rejected_frames

    def poll(self) -> StateSample | None:
        if self._error is not None:
            raise self._error
        return self._latest

    def send_positions(self, q: np.ndarray, hold: bool = False) -> None:
        with self._cond:
            self._cmd = (q.copy(), hold)  # an older one not yet written is stale: replaced
            self._cond.notify()

    def estop(self) -> None:
        self.link.estop()

    # ------------------------------------------------------------------ transactions
    def enable(self) -> None:
        self.link.enable()

    def disable(self) -> None:
        self.link.disable()

    def clear_faults(self) -> None:
        self.link.clear_faults()

    def describe_faults(self) -> str:
        return self.link.describe_faults()

    def round_trips_ms(self, count: int = 5) -> list[float]:
        self._stop()
        try:
            return self.link.round_trips_ms(count)
        finally:
            self._start()

    def reconnect(self, timeout_s: float) -> BoardInfo:
        self._stop()
        info = self.link.reconnect(timeout_s=timeout_s)
        self.info = info
        self._start()
        return info

    @property
    def joint_map(self):
        return self.link.joint_map

    @joint_map.setter
    def joint_map(self, jm) -> None:
        self.link.joint_map = jm

    def close(self) -> None:
        self._stop()
        self.link.close()


def connect_board(port: str, baud: int, link_timeout_s: float, n: int, bus: BusConfig | None = None,
                  watchdog_ms: int | None = None):
    """The board on `port`: our own protocol's `Link` (poll mode), or, with a servo bus config, a
    `BusBoard` over those servos. Both offer what `BoardTransport` asks. `watchdog_ms`: the board's
    command watchdog (CMD_TIMEOUT_MS), set at connect and after every reconnect (a bus config
    carries its own: `command_timeout_ms`, `watchdog_ms`)."""
    if bus is not None:
        return BusBoard.connect(port, bus, link_timeout_s, expect_joints=n)
    link = Link.connect(port, baud, link_timeout_s, expect_joints=n, threaded=False)
    if watchdog_ms is not None:
        try:
            link.keep_param(Param.CMD_TIMEOUT_MS, int(watchdog_ms))
        except BaseException:
            link.close()
            raise
    return link


def bus_notes(bus: BusConfig, rate_hz: float) -> list[str]:
    """What a user must know about driving this servo bus: its cycle on the wire and the rate that
    allows, and what it cannot do (no servo-side watchdog, no measured positions)."""
    cls = bus_class(bus.bus)
    text, bus_rate = cycle_note(bus)
    notes = [text]
    if rate_hz > bus_rate:
        notes.append(f"warning: the loop runs at {rate_hz:g} Hz, the bus at ≤ {bus_rate:.0f} Hz: the servos get "
                     "the newest command of each bus cycle (use --rate to match)")
    if not cls.has_watchdog:
        notes.append(f"{cls.title} servos have no watchdog of their own: if the host stops, they hold the last "
                     "goal (hil's port process switches torque off when the loop dies)")
    if not cls.measures_position:
        notes.append(f"{cls.title} reports the pulses it outputs, not where the servos are: measured positions "
                     "are estimates (flagged in the twin and the recording)")
    return notes


def bus_round_trip_warning(bus: BusConfig, port: str, trips_ms: list[float]) -> str | None:
    """A warning when whole bus cycles take much longer than their bytes need on the wire (an
    adapter's latency timer, or servos whose return delay is not what the config says)."""
    cls = bus_class(bus.bus)
    cost = cycle_cost(bus)
    wire_ms = wire_time_s(cost, bus.baud, cls.bits_per_byte, bus.return_delay_us * 1e-6) * 1e3
    median = sorted(trips_ms)[len(trips_ms) // 2]
    extra = median - wire_ms
    if extra <= max(3.0, 0.5 * wire_ms) + cost.round_trips * 1.0:
        return None
    return (f"warning: a bus cycle takes {median:.1f} ms, {extra:.1f} ms more than its {wire_ms:.1f} ms on the wire "
            f"({cost.round_trips} round trip{'s' if cost.round_trips > 1 else ''}): an FTDI adapter at its default "
            f"16 ms latency timer (echo 1 | sudo tee /sys/bus/usb-serial/devices/"
            f"{os.path.basename(os.path.realpath(port))}/latency_timer), or servos with a return delay above "
            f"return_delay_us = {bus.return_delay_us:g} (set their Return Delay Time to 0)")


def round_trip_warning(port: str, trips_ms: list[float], rate_hz: float, low_latency: bool | None) -> str | None:
    """The warning for command → STATE round trips (ms) longer than a cycle at `rate_hz` (and than
    5 ms), naming the likely cause and its fix; None when they are short enough."""
    trips = sorted(trips_ms)
    median = trips[len(trips) // 2]
    period_ms = 1e3 / rate_hz
    if median <= max(5.0, period_ms):
        return None
    dev = os.path.basename(os.path.realpath(port))
    if dev.startswith("ttyUSB"):
        fix = (f"if it is an FTDI adapter its latency timer is probably at the default 16 ms: "
               f"echo 1 | sudo tee /sys/bus/usb-serial/devices/{dev}/latency_timer "
               f"(or setserial {port} low_latency)")
    elif dev.startswith("pts") or "/pts/" in os.path.realpath(port):
        fix = ("this is a pseudo-terminal: the emulator behind it answers late, its process held up by the "
               "machine's other work (the loop, the twin, other jobs); a lower --rate, or fewer other jobs")
    else:
        fix = "the adapter or the board buffers its replies; a USB CDC-ACM board or an adapter with a 1 ms latency timer avoids it"
    if low_latency is False:
        fix += "; hil could not switch this port to low-latency mode itself"
    return (f"warning: round trip to the board is {median:.1f} ms (median of {len(trips)}, "
            f"{trips[0]:.1f}–{trips[-1]:.1f} ms), longer than one {rate_hz:.0f} Hz cycle "
            f"({period_ms:.1f} ms): measured states will lag the commands. {fix}")
