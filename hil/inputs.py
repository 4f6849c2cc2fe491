"""Checks for what users hand in — files, paths, numbers — each failing with an `InputError` that
names what, where and what to do, before anything connects or moves."""

from __future__ import annotations

import errno
import math
import os
import stat
import tempfile
from typing import BinaryIO

from firmware_protocol.messages import CMD_TIMEOUT_MS_MAX, CMD_TIMEOUT_MS_MIN
from hil.errors import InputError


# The largest file hil reads whole: a text file (a board config, a motion, a G-code program, a
# calibration, a side file) or an array file (a trajectory, a recording's columns). Far above any
# real one (a 200 000-line G-code program is about 6 MB), far below what would exhaust memory.
MAX_TEXT_BYTES = 32 * 2**20
MAX_ARRAY_BYTES = 2 * 2**30

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_regular(path: str, what: str = "file", limit: int = MAX_TEXT_BYTES) -> BinaryIO:
    """The file at `path` opened for reading, once it is known to be a regular file (a symlink to
    one is one) of at most `limit` bytes: InputError for anything else — missing, unreadable, a
    folder, a FIFO (opened without waiting for a writer), a device such as /dev/zero, too large."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        kind = next((name for test, name in _KINDS if test(st.st_mode)), None)
        if kind is not None or not stat.S_ISREG(st.st_mode):
            raise InputError(f"{what} {path}: is {kind or 'not a regular file'}; give a regular file")
        if st.st_size > limit:
            raise InputError(f"{what} {path}: {st.st_size / 2**20:.1f} MiB, more than the {limit / 2**20:.0f} MiB hil "
                             f"reads as one {what}; split it into smaller files")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str, what: str = "file", limit: int = MAX_TEXT_BYTES) -> bytes:
    """A regular file's bytes (see `open_regular`), read with the limit (a file growing while it is
    read is cut off there and refused)."""
    with open_regular(path, what, limit) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise InputError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if len(data) > limit:
        raise InputError(f"{what} {path}: more than the {limit / 2**20:.0f} MiB hil reads as one {what}; split it "
                         "into smaller files")
    return data


def read_text(path: str, what: str = "file", limit: int = MAX_TEXT_BYTES) -> str:
    """A UTF-8 text file's contents; InputError for a missing, unreadable, binary, special or too
    large file."""
    data = read_bytes(path, what, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise InputError(f"{path}: not a text file (byte {e.start}, line {line}, is not UTF-8); a {what} is "
                         "UTF-8 text") from None
    if "\x00" in text:
        raise InputError(f"{path}: not a text file (it contains NUL bytes); a {what} is UTF-8 text")
    return text


def writable_file(path: str | None, what: str, in_place: bool = False) -> None:
    """Refuse a path that cannot be written: its folder missing or read-only, or a folder itself;
    `in_place` (a recording, updated where it lies as it grows), anything but a regular file."""
    if path is None:
        return
    if os.path.isdir(path):
        raise InputError(f"{what} {path}: is a folder; give a file name")
    if in_place and os.path.exists(path) and not os.path.isfile(path):
        raise InputError(f"{what} {path}: not a regular file (a FIFO, a device); it is a file hil updates in place "
                         "as it goes: give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{what} {path}: the folder {folder} does not exist; create it or choose another path")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(f"{what} {path}: cannot write there (permission denied)")
    # what the permission bits do not say (a read-only mount, /proc; root passes every access
    # check): tried, leaving nothing behind and the file as it was
    try:
        if os.path.exists(path) and stat.S_ISFIFO(os.stat(path).st_mode):
            _hold_fifo_reader(path)
        elif os.path.exists(path):
            with open(path, "ab"):
                pass
        else:
            can_create_in(folder)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise InputError(f"{what} {path}: a FIFO no process reads; start its reader first, or give a file "
                             "name") from None
        raise InputError(f"{what} {path}: cannot write there ({e.strerror or e}); choose another path") from None


_FIFOS_HELD: list[int] = []


def _hold_fifo_reader(path: str) -> None:
    """A FIFO is writable while a process reads it: asked without blocking (ENXIO: none does; a
    blocking open would wait for one forever), and the write end kept open until this process ends,
    so that the reader does not take this check's close for the end of its input."""
    _FIFOS_HELD.append(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))


def can_create_in(folder: str) -> None:
    """OSError unless a file can be made in `folder` (tried: one made and removed at once)."""
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".hil-write-check-")
    os.close(fd)
    os.unlink(probe)


def number(value, name: str, lo: float | None = None, hi: float | None = None, unit: str = "") -> float:
    """A finite number within [lo, hi]; InputError naming the option and the range otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: {value!r} is not a number") from None
    unit = f" {unit}" if unit else ""
    if not math.isfinite(v):
        raise InputError(f"{name} {value}: must be a finite number")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"{lo:g} … {hi:g}" if lo is not None and hi is not None else (f"≥ {lo:g}" if lo is not None
                                                                           else f"≤ {hi:g}")
        raise InputError(f"{name} {v:g}{unit} is outside {rng}{unit}")
    return v


def parse_toml(text: str, where: str) -> dict:
    """A TOML document's tables; InputError naming the file and the place for bad TOML, and for
    one nested too deeply to read (tomllib recurses once per level)."""
    import tomllib   # lazy: the command line's start-up does without it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{where}: not valid TOML ({e})") from None
    except RecursionError:
        data = None
    return _readable(data, where)


MAX_NESTING = 64   # levels of arrays and tables inside each other in a TOML or JSON file


def parse_json(text: str, where: str):
    """A JSON document; InputError naming the file for bad or too deeply nested JSON."""
    import json   # lazy: as above

    try:
        data = json.loads(text)
    except ValueError as e:
        raise InputError(f"{where}: not valid JSON ({e})") from None
    except RecursionError:
        data = None
    return _readable(data, where)


MAX_INTEGER = 2 ** 63   # TOML's own bound; past it an integer is no count, id or angle, and no float holds it


def _readable(data, where: str):
    """The parsed document, or InputError for one nested too deeply to read (the parser recursed
    past its limit: `None`) or holding an integer past MAX_INTEGER (JSON has no bound; the number
    would fail wherever it is turned into a float)."""
    depth, huge = _depth(data) if data is not None else (MAX_NESTING + 1, None)
    if depth > MAX_NESTING:
        raise InputError(f"{where}: nested too deeply to read (more than {MAX_NESTING} levels of arrays or tables "
                         "inside each other); no hil file needs more than a few")
    if huge is not None:
        raise InputError(f"{where}: the integer {str(huge)[:12]}… ({len(str(abs(huge)))} digits) is too large for any "
                         "value in a hil file; write the number it should be")
    return data


def _depth(value) -> tuple[int, int | None]:
    """How deeply arrays and tables nest in a parsed document (without recursion: any depth), and
    an integer in it past MAX_INTEGER (None: none)."""
    deepest, todo, huge = 0, [(value, 1)], None
    while todo:
        v, d = todo.pop()
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_INTEGER:
            huge = v
        if isinstance(v, dict):
            v = list(v.values())
        if isinstance(v, list):
            deepest = max(deepest, d)
            if d > MAX_NESTING:
                return d, huge
            todo.extend((x, d + 1) for x in v)
    return deepest, huge


def load_npy(path: str, what: str = "array file", limit: int = MAX_ARRAY_BYTES):
    """A `.npy` array, its header checked against the file before anything is allocated: a header
    that claims more rows than the file holds (a truncated or forged file) is refused, not read into
    memory; pickled objects are never loaded."""

    with open_regular(path, what, limit) as f:
        return _read_npy(f, os.fstat(f.fileno()).st_size, f"{what} {path}")


def _read_npy(f, size: int, where: str):
    """One .npy array from the stream `f` of `size` bytes in all (header included)."""
    import numpy as np   # lazy: the command line's start-up reads no arrays

    try:
        version = np.lib.format.read_magic(f)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read_header is None:
            raise ValueError(f"format version {version}")
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject:
            raise InputError(f"{where}: holds Python objects, which hil never loads; save plain numbers")
        count = math.prod(shape)
        body = size - f.tell()
        if count * dtype.itemsize > body:
            raise InputError(f"{where}: its header claims {count} items of {dtype.itemsize} bytes, the file holds "
                             f"{body // max(dtype.itemsize, 1)}: truncated or not written by hil")
        data = np.frombuffer(f.read(count * dtype.itemsize), dtype=dtype, count=count).copy()
    except InputError:
        raise
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as e:
        raise InputError(f"{where}: not a .npy array ({e})") from None
    return data.reshape(shape, order="F" if fortran else "C")


def load_npz(path: str, what: str = "array file", limit: int = MAX_ARRAY_BYTES) -> dict:
    """The arrays of a `.npz` archive, each member's size checked before it is inflated (a small
    archive that inflates to gigabytes is refused); pickled objects are never loaded."""
    import zipfile   # lazy: as numpy below

    with open_regular(path, what, limit) as f:
        try:
            with zipfile.ZipFile(f) as z:
                infos = [i for i in z.infolist() if i.filename.endswith(".npy")]
                total = sum(i.file_size for i in infos)
                if total > limit:
                    raise InputError(f"{what} {path}: its arrays inflate to {total / 2**20:.0f} MiB, more than the "
                                     f"{limit / 2**20:.0f} MiB hil reads; split it into smaller files")
                out = {}
                for info in infos:
                    with z.open(info) as member:
                        out[info.filename[:-4]] = _read_npy(member, info.file_size, f"{what} {path}")
                return out
        except InputError:
            raise
        except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, SyntaxError, TypeError) as e:
            raise InputError(f"{what} {path}: not an .npz archive of arrays ({e})") from None


WATCHDOG_ENV = "HIL_WATCHDOG_MS"


def watchdog_ms_or_env(given: float | None) -> float | None:
    """The board's command watchdog a command asks for: --watchdog-ms as given, else the environment's
    HIL_WATCHDOG_MS (a standing margin on a machine busy with other work, such as a CI runner), else
    None (the board's own). Either is checked against the board's range (10 … 1000 ms)."""
    if given is not None:
        return number(given, "--watchdog-ms", CMD_TIMEOUT_MS_MIN, CMD_TIMEOUT_MS_MAX, "ms")
    raw = os.environ.get(WATCHDOG_ENV, "").strip()
    if not raw:
        return None
    try:
        return number(raw, WATCHDOG_ENV, CMD_TIMEOUT_MS_MIN, CMD_TIMEOUT_MS_MAX, "ms")
    except InputError as e:
        raise InputError(f"{e} (from the environment: set it within the range, or unset it)") from None
