"""Errors of the wire protocol and the serial link (no dependency on `hil`).

This package has its own root, `ProtocolLibError`, and imports nothing of hil; `hil.errors.EXPECTED`
names it beside hil's own `HilError`, and hil reports both the same way.
"""

from __future__ import annotations


class ProtocolLibError(Exception):
    """Base of every error raised by firmware_protocol."""


class ProtocolError(ProtocolLibError, ValueError):
    """A message could not be encoded or decoded (wrong length, value out of range)."""


class DeviceError(ProtocolLibError, OSError):
    """The serial device failed: cannot open, busy, permission, I/O error. Names the port."""


class HandshakeError(DeviceError):
    """The board did not answer HELLO, or answered with an incompatible version or robot."""


class LinkLostError(DeviceError):
    """The link stopped working: unplugged, I/O error, or silent for longer than the timeout."""


class ReplyTimeoutError(DeviceError):
    """A transaction (ENABLE, PARAM_SET, ...) was not acknowledged after all retries."""


class CommandRejectedError(DeviceError):
    """The board acknowledged a transaction with a non-OK result."""
