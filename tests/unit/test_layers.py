"""Imports only go down the layers (docs/architecture.md), and the wire protocol imports nothing
of hil: read from the source, every import statement including those inside functions."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for all the tests here (each walks every file)."""
    return ast.parse(path.read_text())


def documented_layers() -> list[tuple[str, ...]]:
    """The layer table of docs/architecture.md, lowest first: the one the docs show is the one
    checked here (a row `| N | `pkg`, `pkg` | what |`)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("## Layers"):]
    rows = {}
    for line in table.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if m:
            rows[int(m.group(1))] = tuple(re.findall(r"`([\w.]+)`", m.group(2)))
        elif rows and not line.startswith("|"):
            break
    assert sorted(rows) == list(range(len(rows))), rows
    return [rows[i] for i in range(len(rows))]


# lowest first; a module may import its own layer and the ones below
LAYERS = documented_layers()
PACKAGES = ("hil", "calibration", "twin", "firmware_protocol")
KERNEL_PACKAGES = ("hil.kinematics", "hil.robots", "hil.safety", "hil.dynamics")


def test_every_module_has_a_documented_layer():
    loose = [name for name, _ in modules() if name != "hil" and not name.startswith("firmware_protocol")
             and layer_of(name) is None]   # (hil/__init__.py: its version, importing nothing)
    assert not loose, f"modules in no row of docs/architecture.md's layer table: {loose}"


def layer_of(module: str) -> int | None:
    """The layer of the longest prefix that names the module (hil.remote.session sits below hil.remote)."""
    best, length = None, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > length:
                best, length = i, len(p)
    return best


def modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            name = ".".join(rel.parts).removesuffix(".__init__")
            yield name, path


def imports(path: Path):
    """Every module a file imports, and every module it starts as a program (`-m MODULE` in a
    command line it builds): a process started by name is a dependency all the same."""
    tree = _tree(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno
        elif isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            for flag, module in zip(words, words[1:]):
                if flag == "-m" and isinstance(module, str):
                    yield module, node.lineno


def test_imports_only_go_down_and_the_protocol_stands_alone():
    bad = []
    for name, path in modules():
        mine = layer_of(name)
        for target, line in imports(path):
            if not target.split(".")[0] in PACKAGES:
                continue
            if name.startswith("firmware_protocol"):
                if not target.startswith("firmware_protocol"):
                    bad.append(f"{name}:{line} imports {target} (the wire protocol imports nothing of hil)")
                continue
            theirs = layer_of(target)
            if theirs is not None and mine is not None and theirs > mine:
                bad.append(f"{name}:{line} (layer {mine}) imports {target} (layer {theirs})")
    assert not bad, "\n".join(bad)


def package_of(module: str) -> str:
    """The package a private name belongs to: the module's path up to its first private part."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return ".".join(parts[:2])


def test_no_private_name_is_used_outside_its_package():
    bad = []
    for name, path in modules():
        home = ".".join(name.split(".")[:2]) if not name.startswith(("calibration", "twin")) else name.split(".")[0]
        tree = _tree(path)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES):
                continue
            for a in node.names:
                full = f"{node.module}.{a.name}"
                owner = package_of(full)
                private = any(p.startswith("_") and not p.startswith("__") for p in full.split("."))
                # the compiled kernels call each other and RobotModel is their data: kernel
                # modules are shared between kinematics, robots and safety, and nowhere else
                shared_kernel = owner in KERNEL_PACKAGES and home in KERNEL_PACKAGES and "_kernel" in full
                if private and not (home == owner or home.startswith(owner + ".") or owner.startswith(home)
                                    or shared_kernel):
                    bad.append(f"{name}:{node.lineno} imports {a.name} from {node.module}")
    assert not bad, "\n".join(bad)


def top_level_imports(path: Path):
    """The project modules a module imports when it is imported (its top-level statements)."""
    for node in _tree(path).body:
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def test_no_import_cycles():
    """No module imports, directly or through others, a module that imports it (cycles that
    only work because one side imports inside a function count too)."""
    names = dict(modules())
    graph = {}
    for name, path in names.items():
        deps = set()
        for target, _ in imports(path):
            deps.add(target)
        graph[name] = {d for d in deps if d in names and d != name and not name.startswith(d + ".")}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for d in sorted(graph[node]):
            if state.get(d) == 1:
                cycles.append(" → ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[node] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [])
    assert not cycles, "\n".join(cycles)


COMMAND_MODULES = ("hil.cli", "twin.twin_command", "calibration.calibrate_command", "hil.__init__", "hil.warmup")


def test_imports_inside_functions_say_why():
    """Imports sit at the top of a module, except in the command modules (which `hil --help`
    loads all of: each says so in its docstring) and where a line's comment gives the reason."""
    bad = []
    for name, path in modules():
        if name.startswith(COMMAND_MODULES) or name == "hil":
            continue
        src = path.read_text()
        lines = src.split("\n")
        for fn in ast.walk(_tree(path)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    here = lines[node.lineno - 1] + lines[node.lineno - 2]
                    if "lazy:" not in here:
                        bad.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert not bad, "\n".join(bad)


def test_no_code_outside_the_bus_package_names_a_bus():
    """A bus is registered once (firmware_protocol.buses.BUSES): help texts, probing, LeRobot files
    and emulated models ask the registry, so adding a bus is adding files to that package."""
    import re

    from firmware_protocol.buses import BUSES

    names = sorted({*BUSES, *(b.module for b in BUSES.values())}, key=len, reverse=True)
    word = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    bad = []
    for name, path in modules():
        if name.startswith("firmware_protocol.buses"):
            continue
        for k, line in enumerate(path.read_text().split("\n"), 1):
            if word.search(line):
                bad.append(f"{name}:{k}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_every_registered_bus_has_emulated_servos_whose_tables_are_the_drivers():
    """A bus in the registry has a responder in the bus emulator; the emulator's servos and the
    drivers read one control table per family (control_tables): the drivers' named addresses are
    that table's, and every model the drivers know is one of its entries."""
    from firmware_protocol.buses import BUSES, control_tables, dynamixel1, dynamixel2, feetech
    from firmware_protocol.buses import emulator as E

    assert set(E.RESPONDERS) == set(BUSES)
    for bus, driver in (("dynamixel2", dynamixel2), ("dynamixel1", dynamixel1), ("feetech", feetech)):
        table = control_tables.family(bus)
        assert driver.T is table and driver.GOAL_POSITION == table["Goal_Position"].address
        assert driver.PRESENT_POSITION == table["Present_Position"].address and driver.ID == table["ID"].address
        assert driver.MODELS == control_tables.models_of(bus)

def _what_the_tests_reach() -> tuple[set[str], set[str]]:
    """(modules some test imports, or starts with -m; commands some test runs as `hil COMMAND`)."""
    imported, commands = set(), set()
    for path in (ROOT / "tests").rglob("*.py"):
        tree = _tree(path)
        for name, _ in imports(path):
            imported.add(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                commands.add(node.value)
    return imported, commands


def test_a_modules_tests_are_found_by_its_imports_its_command_or_the_map():
    """A newcomer finds a module's tests by grep for its name, by its `hil COMMAND` (hil/cli/X_cmd.py
    is `hil X`), or in tests/MAP.toml, which says which tests reach the rest through the processes
    that use them. Every module is one of those; the map names files that exist and no module a
    test already imports."""
    import tomllib

    mapped = tomllib.loads((ROOT / "tests" / "MAP.toml").read_text())["tested_through"]
    imported, strings = _what_the_tests_reach()
    lost, stale = [], []
    for name, path in modules():
        command = path.stem.removesuffix("_cmd").replace("_", "-") if path.stem.endswith("_cmd") else None
        found = name in imported or (command is not None and command in strings)
        if name in mapped:
            stale += [name] if found else []
            stale += [f"{name}: {f} does not exist" for f in mapped[name] if not (ROOT / f).is_file()]
        elif not found:
            lost.append(name)
    assert not lost, f"modules no test imports, runs as a command, or tests/MAP.toml names: {lost}"
    assert not stale, f"tests/MAP.toml rows to mend: {stale}"
    assert set(mapped) <= {name for name, _ in modules()}, set(mapped) - {name for name, _ in modules()}


def test_one_name_one_meaning_across_the_packages():
    # a module's or a class's name says what it holds, once: two `board.py`s or two `Packet`s
    # leave a newcomer guessing which one an import or a traceback means
    modules: dict[str, list[str]] = {}
    classes: dict[str, list[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if path.name not in ("__init__.py", "__main__.py"):
                modules.setdefault(path.stem, []).append(rel)
            for node in _tree(path).body:
                if isinstance(node, ast.ClassDef):
                    classes.setdefault(node.name, []).append(rel)
    assert not {k: v for k, v in modules.items() if len(v) > 1}, "module names used twice"
    assert not {k: v for k, v in classes.items() if len(v) > 1}, "class names used twice"
