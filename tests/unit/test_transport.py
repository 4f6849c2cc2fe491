"""Every way of reaching a board offers the one interface the loop uses."""

from __future__ import annotations

import inspect

import pytest

from firmware_protocol.link import Link
from hil.runtime.port_process import PortLink
from hil.runtime.transport import BoardTransport, ThreadPort

MEMBERS = [name for name in dir(BoardTransport) if not name.startswith("_")] + ["info"]


@pytest.mark.parametrize("cls", [Link, ThreadPort, PortLink], ids=lambda c: c.__name__)
def test_each_transport_has_every_member_of_the_interface(cls):
    missing = [m for m in MEMBERS if m != "info" and not hasattr(cls, m)]
    assert not missing, f"{cls.__name__} lacks {missing}"
    for name in ("send_positions", "reconnect", "round_trips_ms"):
        params = inspect.signature(getattr(cls, name)).parameters
        want = {"send_positions": "hold", "reconnect": "timeout_s", "round_trips_ms": "count"}[name]
        assert want in params, f"{cls.__name__}.{name} has no {want!r} parameter"
