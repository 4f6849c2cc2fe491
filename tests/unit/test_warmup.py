"""The note before a first run's compile: said when the cache holds nothing for the source installed."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numba

import hil
from hil import warmup

SOURCE = Path(hil.__file__).parent / "safety" / "_kernel.py"


def _index(folder: Path, version: str, stamp) -> None:
    """A cache index as Numba writes it: its version, then the pickled (source stamp, overloads)."""
    index = folder / "safety_abc" / "_kernel.safety_step-1.py311.nbi"
    index.parent.mkdir(exist_ok=True)
    with open(index, "wb") as f:
        pickle.dump(version, f)
        f.write(pickle.dumps((stamp, {})))


def test_the_cache_is_cold_unless_numba_would_use_it(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert warmup.cache_is_cold()                                     # nothing cached
    digest = hashlib.sha256(SOURCE.read_bytes()).digest()
    _index(tmp_path, numba.__version__, hashlib.sha256(b"an older source").digest())
    assert warmup.cache_is_cold()                                     # compiled for another source
    _index(tmp_path, "0.1", digest)
    assert warmup.cache_is_cold()                                     # by another Numba
    _index(tmp_path, numba.__version__, digest)
    assert not warmup.cache_is_cold()                                 # however old the file's mtime
    st = SOURCE.stat()
    _index(tmp_path, numba.__version__, (st.st_mtime, st.st_size))    # older Numbas' stamp
    assert not warmup.cache_is_cold()
