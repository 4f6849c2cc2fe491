"""hil: hardware-in-the-loop controller and digital twin for a PUMA 560 arm and a 17-DOF humanoid.

Units are SI everywhere inside (metres, radians, seconds); degrees and millimetres appear only
at the user-facing boundary (CLI, GUI, G-code, data files), converted on the way in.
"""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("hil-twin")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.1.0"


def _default_numba_cache() -> None:
    """Give Numba a writable cache folder when the package folder is read-only.

    Numba caches next to the source; when that is not writable and no NUMBA_CACHE_DIR is set,
    importing a cached kernel fails. Must run before numba is imported.
    """
    import os
    from pathlib import Path

    if os.environ.get("NUMBA_CACHE_DIR") or os.access(Path(__file__).parent, os.W_OK):
        return
    os.environ["NUMBA_CACHE_DIR"] = str(Path.home() / ".cache" / "hil" / "numba")


_default_numba_cache()
