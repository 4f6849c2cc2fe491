"""PWM servo controllers without position feedback: Lynxmotion SSC-32/32U (ASCII) and Pololu
Maestro (compact binary protocol). Ticks are microseconds of pulse width.

Both can only report the pulse they are generating (after their own speed ramp), never where the
horn is: `measures_position` is False and the board flags its positions as estimates.
"""

from __future__ import annotations

import math

from firmware_protocol.buses.servo_bus import CycleCost, Identity, Reading, ServoBus, UsualKit

PULSE_MIN_US, PULSE_MAX_US = 500, 2500


# ----------------------------------------------------------------------------------- SSC-32
def ssc32_group_move(goals: list[tuple[int, int]], time_ms: int | None = None) -> bytes:
    """One group move: every channel starts together (and, with `time_ms`, arrives together)."""
    text = "".join(f"#{ch}P{pw}" for ch, pw in goals)
    if time_ms is not None:
        text += f"T{time_ms}"
    return (text + "\r").encode()


def ssc32_query_pulses(channels: list[int]) -> bytes:
    return (" ".join(f"QP{ch}" for ch in channels) + "\r").encode()


class Ssc32Bus(ServoBus):
    kind = "ssc32"
    title = "Lynxmotion SSC-32"
    bauds = (115_200, 38_400, 9_600)
    default_baud = 115_200
    usual = UsualKit(None, 1000 / math.radians(90), 1500, 0, "PWM-standard")   # 1000 µs per 90°
    measures_position = False
    goal_range = (PULSE_MIN_US, PULSE_MAX_US)
    max_id = 31

    @classmethod
    def ping_frame(cls, servo_id: int) -> bytes:
        return ssc32_query_pulses([servo_id])

    def ping(self, servo_id: int) -> Identity | None:
        self.wire.drain()
        self.wire.write(ssc32_query_pulses([servo_id]))
        return Identity(servo_id, None, "PWM channel") if len(self.wire.read(1, self.timeout(1))) == 1 else None

    def version(self) -> str | None:
        self.wire.drain()
        self.wire.write(b"VER\r")
        text = self.wire.read(32, self.timeout(32) + 0.02)
        return text.decode("ascii", "replace").strip() or None

    def __init__(self, wire, reply_timeout_s: float = 0.006, return_delay_s: float = 0.0) -> None:
        super().__init__(wire, reply_timeout_s, return_delay_s)
        self.sent: dict[int, int] = {}

    def write_goals(self, goals: list[tuple[int, int]]) -> None:
        if goals:
            goals = [(ch, max(PULSE_MIN_US, min(PULSE_MAX_US, t))) for ch, t in goals]
            self.sent.update(goals)
            self.wire.write(ssc32_group_move(goals))

    def read_present(self, ids: list[int]) -> dict[int, Reading]:
        """QP answers in 10 µs steps: where that agrees with the pulse we sent, the pulse we sent."""
        self.wire.drain()
        self.wire.write(ssc32_query_pulses(ids))
        data = self.wire.read(len(ids), self.timeout(len(ids)))
        out = {}
        for i, b in zip(ids, data):
            sent = self.sent.get(i)
            ticks = sent if sent is not None and b and abs(10 * b - sent) < 10 else 10 * b
            out[i] = Reading(ticks=ticks, torque_on=b != 0)
        return out

    def set_torque(self, ids: list[int], on: bool) -> None:
        if not on:  # pulses off; on: the next goal starts them
            self.wire.write(ssc32_group_move([(i, 0) for i in ids]))
            for i in ids:
                self.sent.pop(i, None)

    def torque_off_all(self) -> None:
        self.wire.write(ssc32_group_move([(i, 0) for i in range(32)]))
        self.sent.clear()

    @classmethod
    def cycle_cost(cls, n: int) -> CycleCost:
        move = len(ssc32_group_move([(10 + i, 1500) for i in range(n)]))
        query = len(ssc32_query_pulses([10 + i for i in range(n)]))
        return CycleCost(move + query, n, 1, 1, "one ASCII group move + a QP query (the commanded pulses)")


# ----------------------------------------------------------------------------------- Maestro
SET_TARGET, SET_MULTIPLE, SET_SPEED, SET_ACCEL, GET_POSITION, GET_ERRORS, GO_HOME = (
    0x84, 0x9F, 0x87, 0x89, 0x90, 0xA1, 0xA2)


def maestro_target(channel: int, quarter_us: int) -> bytes:
    return bytes([SET_TARGET, channel, quarter_us & 0x7F, (quarter_us >> 7) & 0x7F])


def maestro_multiple(first: int, quarter_us: list[int]) -> bytes:
    out = bytearray([SET_MULTIPLE, len(quarter_us), first])
    for t in quarter_us:
        out += bytes([t & 0x7F, (t >> 7) & 0x7F])
    return bytes(out)


def maestro_get_position(channel: int) -> bytes:
    return bytes([GET_POSITION, channel])


class MaestroBus(ServoBus):
    kind = "maestro"
    title = "Pololu Maestro"
    bauds = (115_200, 9_600, 57_600)
    default_baud = 115_200
    usual = UsualKit(None, 1000 / math.radians(90), 1500, 0, "PWM-standard")
    measures_position = False
    goal_range = (PULSE_MIN_US, PULSE_MAX_US)
    max_id = 23

    @classmethod
    def ping_frame(cls, servo_id: int) -> bytes:
        return maestro_get_position(servo_id)

    def ping(self, servo_id: int) -> Identity | None:
        self.wire.drain()
        self.wire.write(maestro_get_position(servo_id))
        return Identity(servo_id, None, "PWM channel") if len(self.wire.read(2, self.timeout(2))) == 2 else None

    def errors(self) -> int | None:
        self.wire.drain()
        self.wire.write(bytes([GET_ERRORS]))
        data = self.wire.read(2, self.timeout(2))
        return data[0] | (data[1] << 8) if len(data) == 2 else None

    def write_goals(self, goals: list[tuple[int, int]]) -> None:
        """Set Multiple Targets for each run of consecutive channels (Mini Maestro), in ¼ µs."""
        goals = sorted(goals)
        run: list[tuple[int, int]] = []
        for ch, t in goals + [(-2, 0)]:
            if run and ch != run[-1][0] + 1:
                self.wire.write(maestro_multiple(run[0][0], [4 * max(PULSE_MIN_US, min(PULSE_MAX_US, v))
                                                            for _, v in run]))
                run = []
            run.append((ch, t))

    def read_present(self, ids: list[int]) -> dict[int, Reading]:
        self.wire.drain()
        self.wire.write(b"".join(maestro_get_position(i) for i in ids))
        data = self.wire.read(2 * len(ids), self.timeout(2 * len(ids)))
        out = {}
        for k, i in enumerate(ids):
            if 2 * k + 2 <= len(data):
                q = data[2 * k] | (data[2 * k + 1] << 8)
                out[i] = Reading(ticks=round(q / 4), torque_on=q != 0)
        return out

    def set_torque(self, ids: list[int], on: bool) -> None:
        if not on:
            for i in ids:
                self.wire.write(maestro_target(i, 0))   # target 0: no pulses

    def torque_off_all(self) -> None:
        self.wire.write(b"".join(maestro_target(i, 0) for i in range(self.max_id + 1)))

    @classmethod
    def cycle_cost(cls, n: int) -> CycleCost:
        return CycleCost(3 + 2 * n + 2 * n, 2 * n, 1, 1, "Set Multiple Targets + Get Position per channel")
