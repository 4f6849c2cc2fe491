"""Opening a Zenoh session from the user's config, and what the bridge's keys are."""

from __future__ import annotations

import json
import os

from hil.errors import HilError, InputError

PREFIX = "hil"
STATE, TOOL, STATS, EVENTS, INFO, MODEL, REQUEST = ("state", "tool_pose", "stats", "events", "info", "model",
                                                   "request")
STATE_KEYS = ("t", "cycle", "board_state", "faults", "safety_flags", "enabled", "ramping", "motion_running",
              "motion_progress", "mode", "activity", "link_ok", "stale", "q_cmd", "q_meas", "q_target", "qd_meas",
              "com", "estimated", "load")
STATS_KEYS = ("rate_hz", "jitter_p50_us", "jitter_p99_us", "jitter_max_us", "cycle_p50_us", "cycle_p99_us", "misses",
              "stale_total", "link_errors", "decoder_drops", "safety_total", "sched_fifo", "cpu", "jitter_hist")


def key(board: str, what: str) -> str:
    return f"{PREFIX}/{board}/{what}"


def zenoh_module():
    try:
        import zenoh  # lazy: zenoh is the optional `zenoh` extra
    except ImportError:
        raise HilError("Zenoh needs its Python package: pip install -e '.[zenoh]' (or pip install eclipse-zenoh)") \
            from None
    return zenoh


def load_config(path: str | None, connect: str | None = None):
    """A zenoh.Config: the user's file (JSON5, Zenoh's own format) or Zenoh's defaults (peer mode,
    multicast scouting), plus `connect` (a locator such as tcp/192.168.1.20:7447) when given."""
    zenoh = zenoh_module()
    if path is not None:
        if not os.path.isfile(path):
            raise InputError(f"--zenoh-config {path}: no such file")
        try:
            config = zenoh.Config.from_file(path)
        except Exception as e:   # noqa: BLE001 - Zenoh's parser: any error is the file's
            raise InputError(f"--zenoh-config {path}: not a Zenoh config ({e})") from None
    else:
        config = zenoh.Config()
    if connect:
        if "/" not in connect:
            raise InputError(f"{connect!r} is not a Zenoh locator (e.g. tcp/192.168.1.20:7447)")
        try:
            config.insert_json5("connect/endpoints", json.dumps([connect]))
        except Exception as e:   # noqa: BLE001
            raise InputError(f"{connect!r}: not a Zenoh locator ({e})") from None
    return config


def secured(config) -> bool:
    """True when the config restricts who may talk to the session: access control enabled, or every
    endpoint over TLS/QUIC (with its certificates)."""
    def get(path: str):
        try:
            return json.loads(config.get_json(path))
        except Exception:   # noqa: BLE001 - an absent key
            return None

    if get("access_control/enabled") is True:
        return True
    endpoints = (get("listen/endpoints") or []) + (get("connect/endpoints") or [])
    if isinstance(endpoints, dict):
        endpoints = [e for v in endpoints.values() for e in (v if isinstance(v, list) else [])]
    return bool(endpoints) and all(isinstance(e, str) and e.startswith(("tls/", "quic/")) for e in endpoints)


def open_session(config):
    zenoh = zenoh_module()
    try:
        return zenoh.open(config)
    except Exception as e:   # noqa: BLE001
        raise HilError(f"Zenoh: the session does not open ({e}); check the endpoints in --zenoh-config") from None
