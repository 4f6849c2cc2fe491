"""A plan that takes a while says so while it runs (hil play, hil path, hil ctl play)."""

from __future__ import annotations

import time

import hil.cli.common as common


def test_a_long_plan_says_it_is_still_at_work(capsys, monkeypatch):
    monkeypatch.setattr(common, "PLANNING_TICK_S", 0.05)
    with common.planning("wave.toml for humanoid17"):
        time.sleep(0.18)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "planning wave.toml for humanoid17 …"
    assert len([line for line in lines if "s so far …" in line]) >= 2


def test_a_quick_plan_says_only_that_it_began(capsys):
    with common.planning("bow.toml"):
        pass
    assert capsys.readouterr().out.splitlines() == ["planning bow.toml …"]
