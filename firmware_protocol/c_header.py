"""Writes the C firmware's constants and its board table from the Python definitions:
`python -m firmware_protocol.c_header` (re)writes `c/hil_generated.h`; `--check` exits 1 when
the file on disk is not what the Python side says (`make` runs it before compiling, and a test
does too). Nothing in the header is typed by hand: message ids, payload sizes, capability bits,
command flags and the board's default settings (`messages.py`), frame constants (`frame.py`), the
board table (`board_behaviour.py`), what each board kind does and models (`board_kinds.py`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from firmware_protocol import board_behaviour as B
from firmware_protocol import board_kinds as K
from firmware_protocol import frame as F
from firmware_protocol import messages as M

HEADER = Path(__file__).parent / "c" / "hil_generated.h"
# C names of the messages (the SPEC's names)
MSG_NAMES = {M.Hello: "HELLO", M.HelloReply: "HELLO_REPLY", M.Heartbeat: "HEARTBEAT", M.Ack: "ACK",
             M.TimeSyncReq: "TSYNC_REQ", M.TimeSyncResp: "TSYNC_RESP", M.Log: "LOG", M.Enable: "ENABLE",
             M.Disable: "DISABLE", M.Estop: "ESTOP", M.ClearFault: "CLEAR_FAULT", M.Home: "HOME",
             M.Reboot: "REBOOT", M.CmdPos: "CMD_POS", M.CmdPvf: "CMD_PVF", M.State: "STATE",
             M.StateRaw: "STATE_RAW", M.ParamGet: "PARAM_GET", M.ParamSet: "PARAM_SET",
             M.ParamValue: "PARAM_VALUE", M.ParamSave: "PARAM_SAVE"}


def _enum(prefix: str, members, suffix: str = "") -> str:
    items = [f"{prefix}{m.name} = {int(m)}{suffix}" for m in members]
    return "enum {\n  " + ",\n  ".join(items) + "\n};"


def _constants() -> list[str]:
    out = [f"#define HIL_PROTOCOL_MAJOR {F.PROTOCOL_MAJOR}", f"#define HIL_PROTOCOL_MINOR {F.PROTOCOL_MINOR}",
           f"#define HIL_MAX_BODY {F.MAX_BODY}", f"#define HIL_MIN_BODY {F.MIN_BODY}",
           f"#define HIL_FLAG_ACK_REQ 0x{F.FLAG_ACK_REQ:02X}u", f"#define HIL_FLAG_RETX 0x{F.FLAG_RETX:02X}u",
           f"#define HIL_FLAG_RESERVED 0x{F.FLAG_RESERVED:02X}u", f"#define HIL_MAX_JOINTS {M.MAX_JOINTS}",
           f"#define HIL_JOINT_BOARD 0x{M.JOINT_BOARD:02X}u", f"#define HIL_JOINT_ALL 0x{M.JOINT_ALL:02X}u",
           f"#define HIL_REBOOT_MAGIC 0x{M.REBOOT_MAGIC:08X}u", f"#define HIL_SAVE_MAGIC 0x{M.SAVE_MAGIC:08X}u",
           f"#define HIL_SCHEMA_HASH 0x{M.SCHEMA_HASH:08X}u",
           f"#define HIL_MAX_PAYLOAD {M.MAX_PAYLOAD}",
           f"#define HIL_CMD_TIMEOUT_MS_MIN {M.CMD_TIMEOUT_MS_MIN}u", f"#define HIL_CMD_TIMEOUT_MS_MAX {M.CMD_TIMEOUT_MS_MAX}u",
           f"#define HIL_CMD_TIMEOUT_MS_DEFAULT {M.CMD_TIMEOUT_MS_DEFAULT}u",
           f"#define HIL_IMU_BYTES {M.IMU_DTYPE.itemsize}   /* appended to STATE: u8 flags, i16 quat[4], gyro[3], acc[3] */",
           f"#define HIL_IMU_QUAT_SCALE {int(M.IMU_QUAT_SCALE)}"]
    out += [f"#define HIL_DEFAULT_{p.name} {v}u" for p, v in M.BOARD_DEFAULTS.items()]
    return out


def _kind_mask(has) -> str:
    bits = [f"(1u << HIL_KIND_{k.kind.name})" for k in K.KINDS if has(k)]
    return " | ".join(bits) or "0u"


def _kinds() -> list[str]:
    """What each board kind does (bit masks by kind) and what its emulators model (the host build's
    table; `board_kinds.KINDS`)."""
    out = [f"#define HIL_KINDS_WATCHDOG_HOLDS ({_kind_mask(lambda k: k.watchdog_holds)})",
           f"#define HIL_KINDS_NEED_HOMING ({_kind_mask(lambda k: k.needs_homing)})",
           f"#define HIL_N_KINDS {len(K.KINDS)}",
           "struct hil_kind_model { uint8_t kind; const char *name; uint8_t n_joints; double tau_s, noise_rad,",
           "  resolution_rad; uint32_t supply_mv; double max_step_rad; uint8_t n_vmax; double vmax_rad_s[HIL_MAX_JOINTS]; };",
           "#ifdef HIL_WANT_KIND_MODELS",
           "static const struct hil_kind_model HIL_KIND_MODELS[HIL_N_KINDS] = {"]
    for k in K.KINDS:
        vmax = ", ".join(repr(float(v)) for v in k.vmax_rad_s) or "0"
        out.append(f"  {{HIL_KIND_{k.kind.name}, \"{k.name}\", {k.n_joints}, {k.tau_s!r}, {k.noise_rad!r}, "
                   f"{k.resolution_rad!r}, {k.supply_mV}u, {k.max_step_rad!r}, {len(k.vmax_rad_s)}, {{{vmax}}}}},")
    out += ["};", "#endif"]
    return out


def _messages() -> list[str]:
    items = [f"HIL_M_{MSG_NAMES[cls]} = 0x{mid:02X}" for mid, cls in sorted(M.MESSAGES.items())]
    out = ["enum {\n  " + ",\n  ".join(items) + "\n};",
           "/* payload sizes: the fixed part; streaming messages add per_joint bytes per joint, the joint",
           " * count being the byte at n_at (-1: none) */",
           "struct hil_payload_size { uint8_t msg_id; uint8_t fixed; uint8_t per_joint; int8_t n_at; };",
           "#define HIL_N_MESSAGES " + str(len(M.MESSAGES)),
           "#ifdef HIL_WANT_PAYLOAD_SIZES",
           "static const struct hil_payload_size HIL_PAYLOAD_SIZES[HIL_N_MESSAGES] = {"]
    for mid, cls in sorted(M.MESSAGES.items()):
        per, n_at = getattr(cls, "PER_JOINT", 0), getattr(cls, "N_AT", -1)
        out.append(f"  {{0x{mid:02X}, {cls.FMT.size}, {per}, {n_at}}},  /* {MSG_NAMES[cls]} */")
    out += ["};", "#endif"]
    return out


def _rules() -> list[str]:
    states = list(M.BoardState)
    out = [_enum("HIL_REQ_", B.BoardRequest), f"#define HIL_N_REQUESTS {len(B.BoardRequest)}",
           f"#define HIL_N_STATES {len(states)}",
           _enum("HIL_FX_", [e for e in B.Effect if e], "u"),
           "#define HIL_NEXT_UNCHANGED 0xFFu", "#define HIL_NEXT_DISABLED_WHEN_CLEAR 0xFEu",
           f"#define HIL_LATCHED_FAULTS 0x{int(B.LATCHED):X}u",
           "/* what the board does with each request in each state (board_behaviour.TABLE) */",
           "struct hil_rule { uint8_t result, next, effects; uint32_t refused_by, latch; };",
           "#ifdef HIL_WANT_RULES",
           "static const struct hil_rule HIL_RULES[HIL_N_REQUESTS][HIL_N_STATES] = {"]
    nxt = {B.UNCHANGED: "HIL_NEXT_UNCHANGED", B.DISABLED_WHEN_CLEAR: "HIL_NEXT_DISABLED_WHEN_CLEAR"}
    for req in B.BoardRequest:
        cells = []
        for st in states:
            r = B.TABLE[req][st]
            cells.append(f"{{{int(r.result)}, {nxt.get(r.next_state, r.next_state)}, {int(r.effects)}, "
                         f"0x{int(r.refused_by):X}u, 0x{int(r.latch):X}u}}")
        out.append(f"  {{ /* {req.name} in " + ", ".join(s.name for s in states) + " */")
        out.append("    " + ",\n    ".join(cells) + "},")
    out += ["};", "#endif"]
    return out


def render() -> str:
    """The header's text."""
    enums = [_enum("HIL_", M.BoardState), _enum("HIL_F_", M.Fault, "u"), _enum("HIL_J_", M.JointFlag, "u"),
             _enum("HIL_KIND_", M.BoardKind), _enum("HIL_ACK_", M.AckResult), _enum("HIL_P_", M.Param),
             _enum("HIL_CAP_", M.Capability, "u"), _enum("HIL_CMD_", M.CmdFlag, "u"),
             _enum("HIL_WD_", M.WatchdogAction),
             "enum { HIL_T_I32 = %d, HIL_T_U32 = %d, HIL_T_F32 = %d };" % (M.PARAM_TYPE_I32, M.PARAM_TYPE_U32,
                                                                          M.PARAM_TYPE_F32)]
    parts = ["/* Generated by `python -m firmware_protocol.c_header` from firmware_protocol/messages.py, frame.py",
             " * board_behaviour.py and board_kinds.py: do not edit; `make` checks that it is current. */",
             "#ifndef HIL_GENERATED_H", "#define HIL_GENERATED_H", "", "#include <stdint.h>", "",
             *_constants(), "", *enums, "", *_messages(), "", *_rules(), "", *_kinds(), "", "#endif", ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, prog="python -m firmware_protocol.c_header",
                                description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="only say whether the header on disk is current")
    p.add_argument("--out", default=str(HEADER), help="where the header goes (default: %(default)s)")
    args = p.parse_args(argv)
    text = render()
    path = Path(args.out)
    if args.check:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run `python -m firmware_protocol.c_header` (messages.py, frame.py, "
                  "board_behaviour.py or board_kinds.py changed)", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

