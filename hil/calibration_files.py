"""Calibration files: per-board joint offsets and direction signs, in TOML.

    format_version = 1
    board_uid = "3276384A3335..."       # the board it belongs to (HELLO_REPLY unique id)
    robot = "humanoid17"
    date = "2026-11-30T12:00:00Z"
    method = "reference"
    [joints.l_knee]
    offset_deg = 1.7                    # board reading − true angle, at sign +1
    sign = 1                            # -1 when the joint is mounted reversed
    residual_deg = 0.02

Applied only at the link boundary (`firmware_protocol.link.JointMap`: q = sign · (b − offset)).
Files are looked up by board id in `$HIL_CALIBRATION_DIR` (default `~/.config/hil/calibration`).
A corrupt file, or one for another board or robot, is an error: the loop refuses to start, so the
robot stays disabled.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

from firmware_protocol.joint_map import JointMap
from hil.errors import ConfigError, InputError
from hil.inputs import parse_toml, read_text

FORMAT_VERSION = 1


def calibration_dir() -> Path:
    return Path(os.environ.get("HIL_CALIBRATION_DIR", Path.home() / ".config" / "hil" / "calibration"))


def default_path(board_uid: str) -> Path:
    return calibration_dir() / f"{board_uid}.toml"


def save(path: str | Path, model, board_uid: str, method: str, offsets_rad: np.ndarray, signs: np.ndarray,
         residuals_rad: np.ndarray | None = None, extra: dict | None = None) -> Path:
    """Write a calibration file (degrees inside, as the format says)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"format_version = {FORMAT_VERSION}", f'board_uid = "{board_uid}"', f'robot = "{model.name}"',
             f'date = "{time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}"', f'method = "{method}"']
    for k, v in (extra or {}).items():
        lines.append(f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"')
    for i, name in enumerate(model.joint_names):
        lines.append(f"\n[joints.{name}]")
        lines.append(f"offset_deg = {math.degrees(offsets_rad[i]):.6f}")
        lines.append(f"sign = {int(signs[i])}")
        if residuals_rad is not None:
            lines.append(f"residual_deg = {math.degrees(residuals_rad[i]):.6f}")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


def load(path: str | Path, model, board_uid: str | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """(offsets rad, signs, raw data) from a calibration file; ConfigError names what is wrong."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"calibration file {path} does not exist")
    try:
        data = parse_toml(read_text(str(path), "calibration file"), f"calibration file {path}")
    except InputError as e:
        raise ConfigError(f"{e}: the file is corrupt. Run `hil calibrate` again") from None
    if data.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"calibration file {path}: format_version {data.get('format_version')!r}, "
                          f"expected {FORMAT_VERSION}")
    if data.get("robot") != model.name:
        raise ConfigError(f"calibration file {path} is for robot {data.get('robot')!r}, not {model.name!r}")
    if board_uid is not None and data.get("board_uid") != board_uid:
        raise ConfigError(f"calibration file {path} belongs to board {data.get('board_uid')!r}, but the "
                          f"connected board is {board_uid}; refusing it. Calibrate this board with `hil calibrate`")
    joints = data.get("joints")
    if not isinstance(joints, dict):
        raise ConfigError(f"calibration file {path}: missing [joints.*] tables")
    offsets = np.zeros(model.n)
    signs = np.ones(model.n)
    for name, entry in joints.items():
        if name not in model.joint_names:
            raise ConfigError(f"calibration file {path}: unknown joint {name!r}")
        i = model.joint_names.index(name)
        if not isinstance(entry, dict):
            raise ConfigError(f"calibration file {path}: joint {name}: expected a table with offset_deg and sign")
        try:
            off = float(entry["offset_deg"])
            sign = int(entry.get("sign", 1))
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"calibration file {path}: joint {name}: needs offset_deg (number) and sign (±1)") from e
        if not math.isfinite(off) or abs(off) > 180 or sign not in (1, -1):
            raise ConfigError(f"calibration file {path}: joint {name}: offset_deg {off} / sign {sign} out of range")
        offsets[i] = math.radians(off)
        signs[i] = sign
    missing = [n for n in model.joint_names if n not in joints]
    if missing:
        raise ConfigError(f"calibration file {path}: no entry for joints {', '.join(missing)}")
    return offsets, signs, data


def joint_map_for(model, board_info, path: str | None, event=print):
    """The JointMap for a connected board: from `path`, else the board's default file; None (and a
    warning) when there is none. Raises ConfigError for a corrupt or foreign file."""

    p = Path(path) if path else default_path(board_info.uid)
    if not p.exists():
        if path:
            raise ConfigError(f"calibration file {path} does not exist")
        event(f"no calibration file for board {board_info.uid}: joint offsets are nominal. "
              f"Run `hil calibrate --robot {model.spec} --port {board_info.port}` to make one")
        return None
    offsets, signs, _ = load(p, model, board_info.uid)
    event(f"calibration {p} applied")
    return JointMap(offsets.copy(), signs.copy())
