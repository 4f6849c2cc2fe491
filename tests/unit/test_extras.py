"""Optional extras: a command that needs a missing one says which `pip install` to run."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from hil import robots
from hil.errors import HilError
from hil.runtime.recorder import record_dtype


def test_missing_mcap_and_matplotlib_name_their_install(monkeypatch, tmp_path):
    from hil.export import foxglove, plots

    model = robots.load("puma560")
    data = np.zeros(3, dtype=record_dtype(model.n))
    monkeypatch.setitem(sys.modules, "mcap", None)
    monkeypatch.setitem(sys.modules, "mcap.writer", None)
    with pytest.raises(HilError, match=r"pip install -e '\.\[mcap\]'"):
        foxglove.write_mcap(str(tmp_path / "x.mcap"), data, {}, [], model)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(HilError, match=r"pip install -e '\.\[plot\]'"):
        plots.plot_recording(str(tmp_path / "x.png"), data, {}, model)
    assert not (tmp_path / "x.png").exists()
