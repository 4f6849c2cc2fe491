"""Kondo ICS 3.5/3.6 (KRS servos, as in the KHR-3HV): 8E1, one servo per exchange.

A command byte has bit 7 set and carries the id in its low 5 bits; data bytes carry 7 bits. The
reply repeats the command with bit 7 cleared. There is no checksum: parity, the framing bit and
that echo of the command are all the protection. Setting a position answers with the present
one, so one exchange per servo both writes and reads; position 0 means "free" (torque off).
"""

from __future__ import annotations

import serial

from firmware_protocol.buses.servo_bus import CycleCost, Identity, Reading, ServoBus, UsualKit

SET_POSITION, READ_PARAM, WRITE_PARAM, ID_COMMAND = 0x80, 0xA0, 0xC0, 0xE0
SC_EEPROM, SC_STRETCH, SC_SPEED, SC_CURRENT, SC_TEMPERATURE, SC_POSITION = 0, 1, 2, 3, 4, 5
FREE = 0
POSITION_MIN, POSITION_MAX, CENTRE = 3500, 11500, 7500
COUNTS_PER_DEGREE = 29.633


def set_position(servo_id: int, position: int) -> bytes:
    return bytes([SET_POSITION | (servo_id & 0x1F), (position >> 7) & 0x7F, position & 0x7F])


def read_param(servo_id: int, sc: int) -> bytes:
    return bytes([READ_PARAM | (servo_id & 0x1F), sc])


def position_reply(servo_id: int, position: int) -> bytes:
    return bytes([servo_id & 0x1F, (position >> 7) & 0x7F, position & 0x7F])


def parse_position_reply(data: bytes, servo_id: int) -> int | None:
    """The present position in a reply to SET_POSITION (or READ_PARAM 5), None if it is not one."""
    if len(data) != 3 or data[0] != (servo_id & 0x1F) or (data[1] | data[2]) & 0x80:
        return None
    return (data[1] << 7) | data[2]


class KondoIcsBus(ServoBus):
    kind = "kondo-ics"
    title = "Kondo ICS 3.5"
    bauds = (115_200, 1_250_000, 625_000)
    default_baud = 115_200
    options = {"ics_read_command": "read_command"}   # ICS 3.6: positions read without freeing the servo
    usual = UsualKit(None, 1697.8458, 7500, 0, "KRS-3304")   # KRS position units, 7500 the centre
    parity = serial.PARITY_EVEN
    bits_per_byte = 11
    default_echo = True      # Kondo's adapters read back what they send
    max_id = 31

    def __init__(self, wire, reply_timeout_s: float = 0.006, return_delay_s: float = 0.0,
                 read_command: bool = False) -> None:
        super().__init__(wire, reply_timeout_s, return_delay_s)
        self.goals: dict[int, int] = {}
        self.torque: dict[int, bool] = {}
        self.read_command = read_command   # ICS 3.6: read the position without touching torque

    def _exchange(self, frame: bytes, reply_len: int) -> bytes:
        self.wire.drain()
        self.wire.write(frame)
        return self.wire.read(reply_len, self.timeout(reply_len))

    @classmethod
    def ping_frame(cls, servo_id: int) -> bytes:
        return read_param(servo_id, SC_SPEED)

    def ping(self, servo_id: int) -> Identity | None:
        reply = self._exchange(read_param(servo_id, SC_SPEED), 3)
        if len(reply) != 3 or reply[0] != (0x20 | servo_id) or reply[1] != SC_SPEED:
            return None
        return Identity(servo_id, None, "ICS servo")

    def write_goals(self, goals: list[tuple[int, int]]) -> None:
        # ICS has no group write: the goals go out with the next read, one exchange per servo
        for i, t in goals:
            self.goals[i] = min(POSITION_MAX, max(POSITION_MIN, t))

    def read_present(self, ids: list[int]) -> dict[int, Reading]:
        out: dict[int, Reading] = {}
        for i in ids:
            if self.torque.get(i) and i in self.goals:
                reply = self._exchange(set_position(i, self.goals[i]), 3)
                pos = parse_position_reply(reply, i)
            elif self.read_command:
                reply = self._exchange(read_param(i, SC_POSITION), 4)
                pos = parse_position_reply(reply[1:], i) if len(reply) == 4 and reply[0] == (0x20 | i) else None
            else:  # ICS 3.5 can only read a position by setting one: "free" is what torque off means
                reply = self._exchange(set_position(i, FREE), 3)
                pos = parse_position_reply(reply, i)
            if pos is not None:
                out[i] = Reading(ticks=pos, torque_on=bool(self.torque.get(i)))
        return out

    def set_torque(self, ids: list[int], on: bool) -> None:
        for i in ids:
            self.torque[i] = on
            if not on:
                self._exchange(set_position(i, FREE), 3)

    def torque_off_all(self) -> None:
        for i in list(self.torque) or range(self.max_id + 1):
            self.torque[i] = False
            self.wire.write(set_position(i, FREE))   # no broadcast: each servo, without waiting for replies
        self.wire.drain()

    @classmethod
    def cycle_cost(cls, n: int, read_command: bool = False) -> CycleCost:
        return CycleCost(3 * n, 3 * n, n, n, f"{n} set-position exchanges (each also reads the position)")
