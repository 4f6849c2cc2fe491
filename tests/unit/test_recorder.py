"""A recording that cannot be written is a failure said, never a silent loss: the file is cut back
to the rows its header counts and reads whole; the recorder says why and how many rows it keeps."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

from hil.runtime.recorder import load_recording

# a recorder in a process whose files may not grow past 200 KiB (the kernel refuses the write that
# would, EFBIG: a full disk as far as the writer can tell)
WRITER = textwrap.dedent("""
    import resource, signal, sys, time
    import numpy as np
    from hil.runtime.recorder import Recorder
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200 * 1024, 200 * 1024))
    rec = Recorder(sys.argv[1], 3, {"robot": "test", "joints": ["a", "b", "c"], "rate_hz": 100.0})
    q = np.zeros(3)
    for k in range(2000):
        rec.append(k * 0.01, q, q, q, 2, 0, 0, False, 10000.0, 50.0)
        if k % 100 == 99:
            time.sleep(0.02)   # the writer thread's turn
    rec.close()
    print(rec.rows)
    print(rec.failure)
""")


def test_a_write_that_fails_stops_the_recording_where_the_file_is_whole(tmp_path):
    path = tmp_path / "run.npy"
    r = subprocess.run([sys.executable, "-c", WRITER, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    rows, failure = r.stdout.strip().splitlines()
    assert "File too large" in failure and f"the file keeps {rows} rows, readable" in failure, failure
    data, meta = load_recording(str(path))
    assert 0 < len(data) == int(rows) < 2000
    assert np.allclose(data["t"], np.arange(len(data)) * 0.01)   # the rows kept are the first ones, whole
    assert "Traceback" not in r.stderr, r.stderr
