"""Fixtures the walking tests share: the humanoid and its default 6-step walk, planned once."""

from __future__ import annotations

import pytest

import hil.robots as robots
from hil.motion import walking


@pytest.fixture(scope="session")
def hum():
    return robots.load("humanoid17")


@pytest.fixture(scope="session")
def walk6(hum):
    return walking.generate(hum, walking.WalkParams(steps=6, stride=0.03))


@pytest.fixture(scope="session")
def walk_rolling(hum):
    """The knee-stretched 6-step walk: its feet roll (toe-off, heel strike), slowed to the limits."""
    return walking.plan(hum, walking.WalkParams(steps=6, stride=0.03, knee_stretched=True), say=lambda s: None)
