"""The note before a first run's compile: said when the cache holds nothing for the source installed."""

from __future__ import annotations

import os
from pathlib import Path

import hil
from hil import warmup


def test_a_cache_older_than_the_safety_kernel_counts_as_cold(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert warmup.cache_is_cold()                       # nothing cached
    index = tmp_path / "safety_abc" / "_kernel.safety_step-1.py311.nbi"
    index.parent.mkdir()
    index.write_bytes(b"")
    source = Path(hil.__file__).parent / "safety" / "_kernel.py"
    changed = source.stat().st_mtime
    os.utime(index, (changed - 60, changed - 60))       # compiled before the source changed
    assert warmup.cache_is_cold()
    os.utime(index, (changed + 1, changed + 1))
    assert not warmup.cache_is_cold()
