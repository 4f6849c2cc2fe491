"""Every board and wire fact is written once, in firmware_protocol's Python, and reaches the C board
through the generated header: the board kinds' rows, capability bits, command flags and the board's
default settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from firmware_protocol import board_kinds as K
from firmware_protocol import c_header
from firmware_protocol import messages as M
from firmware_protocol.emulator.__main__ import build_config, parser

PROTOCOL = Path(K.__file__).parent
C_SOURCES = [p for p in (PROTOCOL / "c").rglob("*.[ch]") if p.name != "hil_generated.h"]


def test_every_board_kind_has_one_row_and_the_header_carries_it():
    assert sorted(k.kind for k in K.KINDS) == sorted(M.BoardKind) and len(K.BY_NAME) == len(K.KINDS)
    text = c_header.render()
    for k in K.KINDS:
        row = next(line for line in text.splitlines() if line.startswith(f"  {{HIL_KIND_{k.kind.name}, "))
        assert f'"{k.name}", {k.n_joints}, {k.tau_s!r}, {k.noise_rad!r}, {k.resolution_rad!r}, {k.supply_mV}u' in row
        holds = re.search(r"#define HIL_KINDS_WATCHDOG_HOLDS \((.*)\)", text).group(1)
        homing = re.search(r"#define HIL_KINDS_NEED_HOMING \((.*)\)", text).group(1)
        assert (f"(1u << HIL_KIND_{k.kind.name})" in holds) == k.watchdog_holds
        assert (f"(1u << HIL_KIND_{k.kind.name})" in homing) == k.needs_homing
    for flag in (*M.Capability, *M.CmdFlag):
        assert re.search(rf"HIL_\w+_{flag.name} = {int(flag)}u", text), flag
    for param, value in M.BOARD_DEFAULTS.items():
        assert f"#define HIL_DEFAULT_{param.name} {value}u" in text


@pytest.mark.parametrize("facts", [k for k in K.KINDS if k.n_joints], ids=lambda k: k.name)
def test_the_python_emulator_of_a_kind_is_its_row(facts):
    setup = build_config(parser().parse_args(["--kind", facts.name]))
    assert (setup.kind, setup.n_joints, setup.tau_s, setup.supply_mV) == (facts.kind, facts.n_joints, facts.tau_s,
                                                                          facts.supply_mV)
    assert list(setup.vmax) == list(facts.vmax_rad_s)


def test_the_c_sources_type_no_wire_fact_by_hand():
    """What a kind does comes from the generated masks, a flag from its generated name: no C source
    compares a board kind with one kind, tests a command flag by its bit or defines a capability."""
    bad = []
    for path in C_SOURCES:
        for k, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"kind\s*[!=]=\s*HIL_KIND_|flags\s*&\s*\d|HIL_CAP_\w+\s*=|#define HIL_(CAP|CMD|WD)_", line):
                bad.append(f"{path.relative_to(PROTOCOL)}:{k}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_the_protocol_names_no_robot_of_hil():
    """firmware_protocol knows board kinds, not robots: a robot's name there would tie the wire to
    one of hil's data files (a board kind may share a robot's name: humanoid17)."""
    from hil import robots

    names = [r for r in robots.available() if r not in K.BY_NAME]
    word = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    bad = [f"{p.relative_to(PROTOCOL)}:{k}: {line.strip()}" for p in [*PROTOCOL.rglob("*.py"), *C_SOURCES]
           for k, line in enumerate(p.read_text().splitlines(), 1) if word.search(line)]
    assert not bad, "\n".join(bad)
