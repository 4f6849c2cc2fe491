"""pytest plugin of `bench_suite.py`: each test's CPU (its worker's own and that of the child
processes it waited for) and wall time, one file per worker in $HIL_SUITE_CPU_DIR."""

import json
import os
import resource
import time

import pytest

_rows = []


def _cpu() -> tuple[float, float]:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    (s0, c0), t0 = _cpu(), time.monotonic()
    yield
    s1, c1 = _cpu()
    _rows.append((item.nodeid, s1 - s0, c1 - c0, time.monotonic() - t0))


def pytest_unconfigure(config):
    folder = os.environ.get("HIL_SUITE_CPU_DIR")
    if folder:
        with open(os.path.join(folder, f"tests-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.json"), "w") as f:
            json.dump(_rows, f)
