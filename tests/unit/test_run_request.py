"""What a run request is checked for before anything starts (hil.runtime.supervisor.check)."""

from __future__ import annotations

import pytest

from hil import robots
from hil.errors import InputError
from hil.runtime import supervisor
from hil.runtime.supervisor import RunRequest
from tests.launch import HIL


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


def test_the_environment_gives_the_watchdog_a_command_names_none(monkeypatch):
    from hil.inputs import watchdog_ms_or_env

    monkeypatch.delenv("HIL_WATCHDOG_MS", raising=False)
    assert watchdog_ms_or_env(None) is None                    # the board's own
    monkeypatch.setenv("HIL_WATCHDOG_MS", " 400 ")
    assert watchdog_ms_or_env(None) == 400
    assert watchdog_ms_or_env(120) == 120                      # the option wins
    for bad, says in (("abc", "HIL_WATCHDOG_MS: 'abc' is not a number"),
                      ("5000", "HIL_WATCHDOG_MS 5000 ms is outside 10 … 1000 ms"), ("nan", "must be a finite")):
        monkeypatch.setenv("HIL_WATCHDOG_MS", bad)
        with pytest.raises(InputError) as e:
            watchdog_ms_or_env(None)
        assert says in str(e.value) and "from the environment" in str(e.value)


def test_a_bad_watchdog_in_the_environment_is_one_line_before_anything_starts(tmp_path):
    import os
    import subprocess

    env = dict(os.environ, HIL_WATCHDOG_MS="fast")
    for argv in (["run", "--robot", "puma560", "--dry-run", "--headless", "--duration", "1"],
                 ["walk", "--robot", "humanoid17", "--dry-run", "--headless", "--steps", "2"],
                 ["calibrate", "--robot", "puma560", "--dry-run", "--method", "directions", "--out", str(tmp_path / "c.toml")]):
        r = subprocess.run([*HIL, *argv], capture_output=True, text=True, env=env,
                           timeout=120)
        err = r.stderr.strip().splitlines()
        assert r.returncode == 2 and "HIL_WATCHDOG_MS: 'fast' is not a number" in err[-1], r.stdout + r.stderr
        assert "Traceback" not in r.stderr and "connected" not in r.stdout + r.stderr


def test_a_dry_run_does_not_spin_unless_asked_and_a_board_s_loop_sizes_its_spin():
    assert supervisor.spin_us(RunRequest(robot="puma560", dry_run=True)) == 0.0
    assert supervisor.spin_us(RunRequest(robot="puma560", dry_run=True, spin_us=300.0)) == 300.0
    assert supervisor.spin_us(RunRequest(robot="puma560", port="/dev/ttyUSB0")) is None
    assert supervisor.spin_us(RunRequest(robot="puma560", port="/dev/ttyUSB0", spin_us=80.0)) == 80.0
