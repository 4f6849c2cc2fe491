"""Checks for what users hand in — files, paths, numbers — each failing with an `InputError` that
names what, where and what to do, before anything connects or moves."""

from __future__ import annotations

import math
import os

from hil.errors import InputError


def read_text(path: str, what: str = "file") -> str:
    """A UTF-8 text file's contents; InputError for a missing, unreadable or binary file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"cannot read {what} {path}: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise InputError(f"{path}: not a text file (byte {e.start}, line {line}, is not UTF-8); a {what} is "
                         "UTF-8 text") from None
    if "\x00" in text:
        raise InputError(f"{path}: not a text file (it contains NUL bytes); a {what} is UTF-8 text")
    return text


def writable_file(path: str | None, what: str) -> None:
    """Refuse a path that cannot be written: its folder missing or read-only, or a folder itself."""
    if path is None:
        return
    if os.path.isdir(path):
        raise InputError(f"{what} {path}: is a folder; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"{what} {path}: the folder {folder} does not exist; create it or choose another path")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise InputError(f"{what} {path}: cannot write there (permission denied)")


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
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{where}: not valid TOML ({e})") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply to read (arrays or tables inside each other hundreds of "
                         "levels down); no hil file needs more than a few") from None


def parse_json(text: str, where: str):
    """A JSON document; InputError naming the file for bad or too deeply nested JSON."""
    import json   # lazy: as above

    try:
        return json.loads(text)
    except ValueError as e:
        raise InputError(f"{where}: not valid JSON ({e})") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply to read; no hil file needs more than a few levels") from None
