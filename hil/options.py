"""A command's options declared once, on the dataclass the command becomes: each field that is an
option says its flag, help, unit and range (`option(...)`); from that one declaration
`add_options` builds the parser's arguments (the help quoting the field's default), `from_args`
builds the request from what was parsed (no field-by-field copy), and `check_options` checks
every value against its range or choices, naming the flag."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

from hil.errors import InputError
from hil.inputs import number

LOOP_RATE_RANGE_HZ = (10.0, 1000.0)   # the rates a loop runs at (--rate, and a robot file's own)


@dataclass(frozen=True)
class Option:
    flag: str                          # "--rate"
    help: str
    unit: str = ""                     # said with the default and in a range's message
    lo: float | None = None            # a number's range, checked by check_ranges
    hi: float | None = None
    choices: tuple | None = None
    metavar: str | None = None
    negated: bool = False              # "--no-X": the flag sets the (True by default) field False
    repeated: bool = False             # given once per value: the field is a tuple of them
    quote_default: bool = True         # the help says the field's default (off where the help says it itself)


def option(default: Any, flag: str, help: str, **declared) -> Any:
    """A dataclass field that is also a command-line option (see Option for what it may declare)."""
    return dataclasses.field(default=default, metadata={"option": Option(flag, help, **declared)})


def declared(cls) -> dict[str, tuple[dataclasses.Field, Option]]:
    """The fields of `cls` that are options, by field name."""
    return {f.name: (f, f.metadata["option"]) for f in dataclasses.fields(cls) if "option" in f.metadata}


_TYPES = {"float": float, "int": int, "str": str}


def _value_type(field: dataclasses.Field):
    """float, int or str from the field's annotation ("float | None" → float)."""
    names = [t.strip() for t in str(field.type).split("|") if t.strip() != "None"]
    return _TYPES.get(names[0].removeprefix("tuple[").split(",")[0].strip(), str) if names else str


def _help(field: dataclasses.Field, opt: Option) -> str:
    default = field.default
    if not opt.quote_default or default is None or isinstance(default, bool) or default == () or opt.negated:
        return opt.help
    unit = f" {opt.unit}" if opt.unit else ""
    return f"{opt.help} (default: {default:g}{unit})" if isinstance(default, float) else \
        f"{opt.help} (default: {default}{unit})"


def add_options(parser, cls, names: Iterable[str]) -> None:
    """Add the options `names` (field names of `cls`) to an argparse parser or group, each with
    its field's name as dest, so that `from_args(cls, args)` finds it."""
    fields = declared(cls)
    for name in names:
        field, opt = fields[name]
        kw: dict[str, Any] = dict(dest=name, help=_help(field, opt))
        # the value's name in the usage is the flag's ("--rate RATE"), not the field's
        metavar = opt.metavar or (None if opt.choices else opt.flag.lstrip("-").upper().replace("-", "_"))
        if field.type in ("bool", bool):
            kw.update(action="store_false" if opt.negated else "store_true")
        elif opt.repeated:
            kw.update(action="append", type=_value_type(field), default=None, metavar=metavar)
        else:
            kw.update(type=_value_type(field), default=field.default, metavar=metavar, choices=opt.choices)
        kw = {k: v for k, v in kw.items() if v is not None or k == "default"}
        parser.add_argument(opt.flag, **kw)


def from_args(cls, args: argparse.Namespace, **given):
    """An instance of `cls` from parsed arguments: every field that is an attribute of `args` (a
    repeated option as a tuple), then `given` over them."""
    values = {}
    for f in dataclasses.fields(cls):
        if hasattr(args, f.name):
            v = getattr(args, f.name)
            opt = f.metadata.get("option")
            values[f.name] = tuple(v or ()) if opt is not None and opt.repeated else v
    values.update(given)
    return cls(**values)


def check_options(obj) -> None:
    """Every option of `obj` against what it declares — a range, a choice — with an InputError
    naming its flag (for a request made in Python as for one parsed)."""
    for name, (_, opt) in declared(type(obj)).items():
        value = getattr(obj, name)
        if value is None:
            continue
        if opt.lo is not None or opt.hi is not None:
            number(value, opt.flag, opt.lo, opt.hi, opt.unit)
        if opt.choices is not None and value not in opt.choices:
            raise InputError(f"{opt.flag} {value!r}: one of {', '.join(map(str, opt.choices))}")
