"""HELLO → HELLO_REPLY (SPEC.md §5): what the board on an open port says it is."""

from __future__ import annotations

import errno
import random
import time
from typing import Callable

from firmware_protocol import messages as M
from firmware_protocol.board_data import BoardInfo
from firmware_protocol.protocol_errors import DeviceError, HandshakeError
from firmware_protocol.frame import PROTOCOL_MAJOR, PROTOCOL_MINOR, FrameDecoder
from firmware_protocol.serial_port import PORT_ERRORS, PortIO, usb_serial_number


def hello(io: PortIO, next_seq: Callable[[], int], timeout_s: float, low_latency: bool | None,
          warnings: list | None = None) -> BoardInfo:
    """Send HELLO every 100 ms until the board answers with our nonce, or raise HandshakeError
    after `timeout_s`. A different message schema is appended to `warnings`; a different major
    version is refused."""
    nonce = random.getrandbits(32)
    decoder = FrameDecoder()
    t0 = time.monotonic()
    next_hello = t0
    while True:
        now = time.monotonic()
        if now - t0 > timeout_s:
            raise HandshakeError(errno.ETIMEDOUT, f"{io.port}: no answer to HELLO within {timeout_s:.1f} s "
                                                  "(not a hil board, wrong baud rate, or the board is not running). "
                                                  "`hil ports --probe " + io.port + "` says what answers there; "
                                                  "servos on a bus adapter need --bus")
        try:
            if now >= next_hello:
                io.write(M.Hello(PROTOCOL_MAJOR, PROTOCOL_MINOR, M.SCHEMA_HASH, nonce).encode(next_seq()))
                next_hello = now + 0.1
            data = io.read_some()
        except PORT_ERRORS as e:
            raise DeviceError(errno.EIO, f"{io.port}: I/O error during handshake: {e}") from e
        for frame in decoder.feed(data):
            msg = M.decode_message(frame)
            if isinstance(msg, M.HelloReply) and msg.nonce_echo == nonce:
                return _board_info(io.port, msg, (time.monotonic() - t0) * 1e3, low_latency, warnings)


def _board_info(port: str, msg: M.HelloReply, took_ms: float, low_latency: bool | None,
                warnings: list | None) -> BoardInfo:
    if msg.major != PROTOCOL_MAJOR:
        raise HandshakeError(errno.EPROTO, f"{port}: board speaks protocol {msg.major}.{msg.minor}, "
                                           f"this host {PROTOCOL_MAJOR}.{PROTOCOL_MINOR}; update the "
                                           "board firmware or hil so that the major versions match")
    if msg.schema_hash != M.SCHEMA_HASH and warnings is not None:
        warnings.append(f"warning: message schema hash {msg.schema_hash:08x} differs from "
                        f"the host's {M.SCHEMA_HASH:08x}")
    return BoardInfo(port, msg.board_kind, msg.n_joints, msg.firmware, msg.uid_hex, msg.boot_id,
                     msg.schema_hash, msg.capabilities, f"{msg.major}.{min(msg.minor, PROTOCOL_MINOR)}",
                     took_ms, usb_serial_number(port), low_latency)
