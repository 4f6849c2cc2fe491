"""Opening a Zenoh session from the user's config, and what the bridge's keys are."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

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


def _one_line(message: str) -> str:
    """Zenoh's parser error (a caret drawn under the line, the Rust source it came from) as one
    line: where in the file, and what it expected."""
    where = re.search(r"-->\s*(\d+):(\d+)", message)
    what = re.search(r"^\s*=\s*(.+?)(?:\s+at\s+\S+\.rs:\d+)?\.?\s*$", message, re.M)
    if where and what:   # its JSON5 syntax
        return f"line {where.group(1)}, column {where.group(2)}: {what.group(1)}"
    value = re.search(r'msg: "(.*?)", location: Some\(Location \{ line: (\d+), column: (\d+)', message)
    if value:            # a value its schema does not take
        return f"line {value.group(2)}, column {value.group(3)}: {value.group(1)}"
    return re.sub(r"\s+at\s+\S+\.rs:\d+\.?", "", " ".join(message.split()))


def load_config(path: str | None, connect: str | None = None):
    """A zenoh.Config: the user's file (JSON5, Zenoh's own format) or Zenoh's defaults (peer mode,
    multicast scouting), without Zenoh's shared-memory transport unless the file names it, plus
    `connect` (a locator such as tcp/192.168.1.20:7447) when given."""
    zenoh = zenoh_module()
    if path is not None:
        if not os.path.isfile(path):
            raise InputError(f"--zenoh-config {path}: no such file")
        try:
            config = zenoh.Config.from_file(path)
        except Exception as e:   # noqa: BLE001 - Zenoh's parser: any error is the file's
            raise InputError(f"--zenoh-config {path}: not a Zenoh config ({_one_line(str(e))})") from None
    else:
        config = zenoh.Config()
    if path is None or "shared_memory" not in Path(path).read_text(encoding="utf-8", errors="replace"):
        # Zenoh's shared-memory transport keeps segment files in /dev/shm that a process killed
        # outright leaves behind; hil's messages are small and its links fast enough without it
        # (a config file that names shared_memory decides)
        config.insert_json5("transport/shared_memory/enabled", "false")
    if connect:
        if "/" not in connect:
            raise InputError(f"{connect!r} is not a Zenoh locator (e.g. tcp/192.168.1.20:7447)")
        try:
            config.insert_json5("connect/endpoints", json.dumps([connect]))
        except Exception as e:   # noqa: BLE001
            raise InputError(f"{connect!r}: not a Zenoh locator ({e})") from None
    return config


def control_refusal(config) -> str:
    """Why `config` does not keep remote control (enable, jog, start …) to authorised peers, or ""
    when it does. Deny by default: access control enabled with `default_permission: "deny"`, and
    every policy that lets a peer query `hil/<board>/request` naming only subjects Zenoh
    authenticates — certificate common names with mutual TLS, or user names with user/password
    authentication; or, without access control, every endpoint over TLS/QUIC with mutual TLS."""
    def get(path: str):
        try:
            return json.loads(config.get_json(path))
        except Exception:   # noqa: BLE001 - an absent key
            return None

    mtls = get("transport/link/tls/enable_mtls") is True
    usrpwd = bool(get("transport/auth/usrpwd/dictionary_file"))
    acl = get("access_control") or {}
    if acl.get("enabled") is True:
        if acl.get("default_permission") != "deny":
            return ('its access control allows by default (default_permission: "allow"): anyone who can reach the '
                    'bridge could move the robot; set default_permission: "deny" and allow only named peers')
        return _open_policy(acl, mtls, usrpwd)
    endpoints = (get("listen/endpoints") or []) + (get("connect/endpoints") or [])
    if isinstance(endpoints, dict):
        endpoints = [e for v in endpoints.values() for e in (v if isinstance(v, list) else [])]
    if not endpoints or not all(isinstance(e, str) and e.startswith(("tls/", "quic/")) for e in endpoints):
        return ("it has no access control (access_control.enabled) and not every endpoint is TLS or QUIC, so anyone "
                "who can reach the bridge could move the robot")
    if not mtls:
        return ("its TLS endpoints do not authenticate peers (transport/link/tls/enable_mtls is not true): anyone "
                "could connect and move the robot")
    return ""


REQUEST_KEY = f"{PREFIX}/*/{REQUEST}"   # what a remote request is sent to (a query)


def _open_policy(acl: dict, mtls: bool, usrpwd: bool) -> str:
    """The first policy letting an unauthenticated subject query the request key, in words ("" none)."""
    zenoh = zenoh_module()
    request = zenoh.KeyExpr(REQUEST_KEY)
    rules = {r.get("id"): r for r in acl.get("rules") or [] if isinstance(r, dict)}
    subjects = {s.get("id"): s for s in acl.get("subjects") or [] if isinstance(s, dict)}

    def grants_requests(rule: dict) -> bool:
        messages, flows = rule.get("messages"), rule.get("flows") or ["ingress", "egress"]
        if rule.get("permission") != "allow" or "ingress" not in flows or not messages or "query" not in messages:
            return False
        try:
            return any(zenoh.KeyExpr(k).intersects(request) for k in rule.get("key_exprs") or [])
        except Exception:   # noqa: BLE001 - Zenoh refuses a bad key expression itself, at open
            return False

    for policy in acl.get("policies") or []:
        granting = [r for r in policy.get("rules") or [] if r in rules and grants_requests(rules[r])]
        if not granting:
            continue
        for sid in policy.get("subjects") or []:
            subject = subjects.get(sid, {})
            names = subject.get("cert_common_names") if mtls else None
            users = subject.get("usernames") if usrpwd else None
            if not names and not users:
                why = ("its certificate names are not checked without mutual TLS (transport/link/tls/enable_mtls)"
                       if subject.get("cert_common_names") else
                       "its user names are not checked without user/password authentication "
                       "(transport/auth/usrpwd/dictionary_file)" if subject.get("usernames") else
                       "it names no certificate or user, so any peer (on its interfaces) matches it")
            elif (subject.get("cert_common_names") and not mtls) or (subject.get("usernames") and not usrpwd):
                why = "some of its names are not authenticated (mutual TLS or user/password is not configured)"
            else:
                continue
            return (f"its access-control policy lets subject {sid!r} send requests (rule {granting[0]!r} allows "
                    f"query on {REQUEST_KEY}), and {why}; name only peers Zenoh authenticates")
    return ""


def open_session(config):
    zenoh = zenoh_module()
    try:
        return zenoh.open(config)
    except Exception as e:   # noqa: BLE001
        raise HilError(f"Zenoh: the session does not open ({e}); check the endpoints in --zenoh-config") from None
