"""A run's options are declared once (RunRequest's fields, hil.options): the parser is built from
them, a parse becomes the request, and the request becomes the loop's configuration."""

from __future__ import annotations

import dataclasses

import pytest

from hil.cli import build_parser
from hil.errors import InputError
from hil.options import check_options, declared
from hil.runtime.loop import LoopConfig
from hil.runtime.run_request import RunRequest


def _parse(*argv: str):
    from hil.options import from_args

    args = build_parser().parse_args(["run", "--robot", "puma560", *argv])
    return from_args(RunRequest, args)


def test_a_parse_is_the_request_it_asks_for():
    assert _parse("--dry-run") == RunRequest(robot="puma560", dry_run=True, command="run")
    req = _parse("--port", "/dev/ttyACM0", "--rate", "250", "--duration", "3", "--no-realtime", "--allow-cpu-idle",
                 "--fault", "drop:0.1", "--fault", "stall:0.2@1", "--no-compensation", "--no-stabiliser",
                 "--on-record-error", "continue", "--zenoh-rate", "50", "--watchdog-ms", "300", "--bring-in")
    assert (req.port, req.rate_hz, req.duration_s, req.realtime, req.keep_cpu_awake, req.faults) == \
        ("/dev/ttyACM0", 250.0, 3.0, False, False, ("drop:0.1", "stall:0.2@1"))
    assert (req.compensate, req.stabilise, req.record_errors, req.zenoh_rate_hz, req.watchdog_ms, req.bring_in) == \
        (False, False, "continue", 50.0, 300.0, True)


def test_every_option_of_a_run_is_in_its_help_with_its_default():
    text = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    for name, (field, opt) in declared(RunRequest).items():
        assert opt.flag in text, name
    assert "(default: 100 Hz)" in text          # quoted from zenoh_rate_hz's field
    assert "(default: stop)" in text


@pytest.mark.parametrize("change,says", [
    (dict(rate_hz=5.0), "--rate 5 Hz is outside 10 … 1000 Hz"),
    (dict(zenoh_rate_hz=float("nan")), "--zenoh-rate nan: must be a finite number"),
    (dict(record_errors="retry"), "--on-record-error 'retry': one of stop, continue"),
    (dict(emulator="verilog"), "--emulator 'verilog': one of python, c, qemu"),
    (dict(duration_s=0.0), "--duration 0 s is outside"),
])
def test_a_value_outside_what_its_option_declares_names_the_flag(change, says):
    with pytest.raises(InputError) as e:
        check_options(RunRequest(robot="puma560", dry_run=True, **change))
    assert says in str(e.value)


def test_the_loop_is_configured_with_everything_the_request_asked():
    """Every field the request and the loop's configuration share reaches the loop (a field added
    to both needs no copy written out), and what the supervisor resolved wins."""
    shared = {f.name for f in dataclasses.fields(LoopConfig)} & {f.name for f in dataclasses.fields(RunRequest)}
    resolved = dict(robot="puma560.toml", port="/dev/pts/9", shm_name="hil_x", rate_hz=321.0, headless=True,
                    bus=None, watchdog_ms=None)
    asked = {}
    for f in dataclasses.fields(RunRequest):
        if f.name in shared - set(resolved):
            default = f.default
            asked[f.name] = (not default if isinstance(default, bool) else
                             1.5 if f.name == "speed" else 123.0 if f.type in ("float | None", "float") else
                             "thread" if f.name == "port_io" else "continue" if f.name == "record_errors" else
                             f"/tmp/{f.name}")
    cfg = LoopConfig.from_request(RunRequest(robot="puma560", **asked), **resolved)
    for name, value in {**asked, **resolved}.items():
        assert getattr(cfg, name) == value, name
    # a value the request leaves to the loop (None) takes the loop's default
    cfg = LoopConfig.from_request(RunRequest(robot="puma560"), **resolved)
    assert (cfg.spin_us, cfg.port_io) == (LoopConfig.spin_us, LoopConfig.port_io)
