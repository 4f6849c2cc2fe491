"""What a run request is checked for before anything starts (hil.runtime.supervisor.check)."""

from __future__ import annotations

import pytest

from hil import robots
from hil.errors import InputError
from hil.runtime import supervisor
from hil.runtime.supervisor import RunRequest


@pytest.mark.parametrize("ms,rate,says", [
    (5, None, "--watchdog-ms 5 ms is outside 10 … 1000 ms"),
    (1500, None, "--watchdog-ms 1500 ms is outside 10 … 1000 ms"),
    (float("nan"), None, "--watchdog-ms nan: must be a finite number"),
    (20, 100, "--watchdog-ms 20: shorter than three cycles at 100 Hz"),
])
def test_a_watchdog_the_board_cannot_keep_is_refused(ms, rate, says):
    req = RunRequest(robot="puma560", dry_run=True, watchdog_ms=ms, rate_hz=rate)
    with pytest.raises(InputError) as e:
        supervisor.check(req, robots.load("puma560"))
    assert says in str(e.value)


def test_a_watchdog_within_range_is_taken():
    req = RunRequest(robot="puma560", dry_run=True, watchdog_ms=300.4)
    supervisor.check(req, robots.load("puma560"))
    assert supervisor.watchdog_ms(req) == 300


def test_on_a_servo_bus_the_watchdog_replaces_both_of_the_configs():
    model = robots.load("humanoid17")
    shipped = supervisor.bus_config(RunRequest(robot="humanoid17", dry_run=True, bus="dynamixel2"), model)
    bus = supervisor.bus_config(RunRequest(robot="humanoid17", dry_run=True, bus="dynamixel2", watchdog_ms=400),
                                model)
    assert (shipped.command_timeout_ms, shipped.watchdog_ms) != (400, 400)
    assert (bus.command_timeout_ms, bus.watchdog_ms) == (400, 400)
    with pytest.raises(InputError, match="--watchdog-ms 2 ms is outside"):
        supervisor.bus_config(RunRequest(robot="humanoid17", dry_run=True, bus="dynamixel2", watchdog_ms=2), model)
