"""G-code reader for contour programs: G0 G1 G2 G3 (I J K or R, full circles, helices), G17 G18
G19, G20 G21, G90 G91, F, N, comments ( ... ) and ; ..., M2 M30.

The program's own units (mm, or inch after G20) are converted to millimetres here; the program
frame is the workpiece frame (z = face normal). Anything else is an error naming line and column.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from hil.errors import InputError
from hil.motion.bounds import MAX_MOVES

INCH = 25.4
ARC_TOL_MM = 0.01  # |start − centre| and |end − centre| may differ by this much (plus 1e-4 relative)
PLANES = {17: (0, 1, 2), 18: (2, 0, 1), 19: (1, 2, 0)}  # (first, second, normal) axis indices


class GCodeError(InputError):
    """A G-code program error; `line` and `column` are 1-based."""

    def __init__(self, message: str, line: int, column: int = 1, source: str = "") -> None:
        where = f"{source + ': ' if source else ''}line {line}, column {column}"
        super().__init__(f"{where}: {message}")
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Segment:
    """One move in workpiece coordinates (mm). `kind` is "rapid", "line" or "arc"; arcs carry the
    centre, the plane (17/18/19), the direction (cw) and the swept angle (rad, positive)."""

    kind: str
    start: np.ndarray
    end: np.ndarray
    feed_mm_min: float
    line: int
    centre: np.ndarray | None = None
    plane: int = 17
    cw: bool = False
    sweep: float = 0.0

    def length(self) -> float:
        if self.kind != "arc":
            return float(np.linalg.norm(self.end - self.start))
        a, b, n = PLANES[self.plane]
        r = math.hypot(self.start[a] - self.centre[a], self.start[b] - self.centre[b])
        return math.hypot(r * self.sweep, self.end[n] - self.start[n])

    def point(self, u: float) -> np.ndarray:
        """Point at fraction u ∈ [0, 1] of the segment."""
        if self.kind != "arc":
            return self.start + u * (self.end - self.start)
        a, b, n = PLANES[self.plane]
        r = math.hypot(self.start[a] - self.centre[a], self.start[b] - self.centre[b])
        a0 = math.atan2(self.start[b] - self.centre[b], self.start[a] - self.centre[a])
        ang = a0 + (-1 if self.cw else 1) * self.sweep * u
        p = np.empty(3)
        p[a] = self.centre[a] + r * math.cos(ang)
        p[b] = self.centre[b] + r * math.sin(ang)
        p[n] = self.start[n] + u * (self.end[n] - self.start[n])
        return p


@dataclass
class Program:
    segments: list[Segment] = field(default_factory=list)
    source: str = ""

    def scaled(self, factor: float) -> "Program":
        """The same program `factor` times the size about its origin (feeds as written)."""
        def grown(s: Segment) -> Segment:
            return replace(s, start=s.start * factor, end=s.end * factor,
                           centre=None if s.centre is None else s.centre * factor)
        return Program([grown(s) for s in self.segments], self.source)

    def extents(self) -> tuple[np.ndarray, np.ndarray]:
        pts = np.array([s.point(u) for s in self.segments if s.kind != "rapid" for u in np.linspace(0, 1, 33)])
        if len(pts) == 0:
            pts = np.array([s.end for s in self.segments])
        return pts.min(axis=0), pts.max(axis=0)


_WORD = re.compile(r"([A-Za-z])\s*([-+]?(?:\d+\.?\d*|\.\d+))")


# Words beyond these are mistakes (a robot's workspace is metres, its feed metres per second), and
# would make the planner allocate without bound.
MAX_COORD = 100_000.0
MAX_FEED = 1_000_000.0


def _strip_comments(text: str, lineno: int, source: str) -> str:
    out = []
    depth = 0
    for col, ch in enumerate(text, 1):
        if depth == 0 and ch == ";":
            break
        if ch == "(":
            depth += 1
            out.append(" ")
            continue
        if ch == ")":
            if depth == 0:
                raise GCodeError("')' without '('", lineno, col, source)
            depth -= 1
            out.append(" ")
            continue
        out.append(" " if depth else ch)
    if depth:
        raise GCodeError("comment '(' is not closed on this line", lineno, text.index("(") + 1, source)
    return "".join(out)


def parse(text: str, source: str = "") -> Program:
    """Parse a program into segments (mm, workpiece frame). Raises GCodeError with line and column."""
    prog = Program(source=source)
    modal = _Modal()
    for lineno, raw in enumerate(text.splitlines(), 1):
        body = _strip_comments(raw, lineno, source)
        stripped = body.strip()
        if modal.ended:
            if stripped and stripped != "%":
                raise GCodeError("text after the program end (M2/M30)", lineno, 1, source)
            continue
        if not stripped or stripped == "%":
            continue
        line = _Line(lineno, source)
        for letter, value, col, rawnum in _words(body, lineno, source):
            line.take(letter, value, col, rawnum, modal)
        if line.new_motion is not None:
            modal.motion = line.new_motion
        if not line.axes and not line.centre_words and line.radius is None:
            if line.new_motion in (1, 2, 3) and not modal.ended:
                raise GCodeError(f"G{line.new_motion} without an end point (X, Y or Z)", lineno,
                                 line.seen.get("G", 1), source)
            continue
        _move(prog, modal, line)
        if len(prog.segments) > MAX_MOVES:
            raise GCodeError(f"more than {MAX_MOVES} moves, the most hil plans in one program; split it into "
                             "several programs run one after another", lineno, 1, source)
    if not prog.segments:
        raise GCodeError("the program has no moves", max(1, len(text.splitlines())), 1, source)
    return prog


@dataclass
class _Modal:
    """What stays in force from line to line: the motion mode, plane, units, absolute or
    incremental coordinates, feed (mm/min), where the tool is (mm), and whether the program ended."""

    motion: int | None = None
    plane: int = 17
    scale: float = 1.0
    absolute: bool = True
    feed: float | None = None
    ended: bool = False
    pos: np.ndarray = field(default_factory=lambda: np.zeros(3))


def _words(body: str, lineno: int, source: str) -> list[tuple[str, float, int, str]]:
    """A line's words: (letter, value, 1-based column, the number as written)."""
    words = []
    i = 0
    while i < len(body):
        if body[i].isspace():
            i += 1
            continue
        m = _WORD.match(body, i)
        if not m:
            bad = body[i]
            what = f"'{bad}' is not followed by a number" if bad.isalpha() else f"unexpected character {bad!r}"
            raise GCodeError(what, lineno, i + 1, source)
        words.append((m.group(1).upper(), float(m.group(2)), i + 1, m.group(2)))
        i = m.end()
    return words


G_SUPPORTED = "G0 G1 G2 G3 G17 G18 G19 G20 G21 G90 G91"


class _Line:
    """One line's words: its coordinates, arc centre or radius and motion code kept; the modal
    words (planes, units, coordinates' mode, feed, program end) set in force as they come."""

    def __init__(self, lineno: int, source: str) -> None:
        self.lineno, self.source = lineno, source
        self.axes: dict[str, float] = {}
        self.centre_words: dict[str, float] = {}
        self.radius: float | None = None
        self.new_motion: int | None = None
        self.seen: dict[str, int] = {}

    def error(self, message: str, col: int) -> GCodeError:
        return GCodeError(message, self.lineno, col, self.source)

    def take(self, letter: str, value: float, col: int, rawnum: str, modal: _Modal) -> None:
        if letter in "XYZIJKRFN" and letter in self.seen:
            raise self.error(f"{letter} appears twice on one line", col)
        self.seen[letter] = col
        if letter == "N":
            return
        if letter in "XYZIJKR" and not abs(value) <= MAX_COORD:
            raise self.error(f"{letter}{rawnum} is out of range: coordinates and radii are at most {MAX_COORD:g} (mm "
                             "or inch)", col)
        if letter == "F" and not value <= MAX_FEED:
            raise self.error(f"feed rate F{rawnum} is out of range: at most {MAX_FEED:g} (mm/min or inch/min)", col)
        if letter == "G":
            self._g(value, col, rawnum, modal)
        elif letter == "M":
            if value not in (2, 30):
                raise self.error(f"M{rawnum} is not supported (supported: M2, M30)", col)
            modal.ended = True
        elif letter in "XYZ":
            self.axes[letter] = value
        elif letter in "IJK":
            self.centre_words[letter] = value
        elif letter == "R":
            self.radius = value
        elif letter == "F":
            if value <= 0:
                raise self.error(f"feed rate F{rawnum} must be positive", col)
            modal.feed = value * modal.scale
        else:
            raise self.error(f"word '{letter}' is not supported", col)

    def _g(self, code: float, col: int, rawnum: str, modal: _Modal) -> None:
        if code in (0, 1, 2, 3):
            self.new_motion = int(code)
        elif code in (17, 18, 19):
            modal.plane = int(code)
        elif code in (20, 21):
            modal.scale = INCH if code == 20 else 1.0
        elif code in (90, 91):
            modal.absolute = code == 90
        else:
            raise self.error(f"G{rawnum} is not supported (supported: {G_SUPPORTED})", col)


def _move(prog: Program, modal: _Modal, line: _Line) -> None:
    """The line's move, in the mode in force, appended to the program; the tool is then at its end."""
    lineno, source, seen = line.lineno, line.source, line.seen
    col0 = min(seen.values())
    if modal.motion is None:
        raise GCodeError("coordinates without a motion mode (G0, G1, G2 or G3) in force", lineno, col0, source)
    pos = modal.pos
    end = pos.copy()
    for k, letter in enumerate("XYZ"):
        if letter in line.axes:
            v = line.axes[letter] * modal.scale
            end[k] = v if modal.absolute else pos[k] + v
    arc_words = line.centre_words or line.radius is not None
    if modal.motion in (0, 1):
        if arc_words:
            raise GCodeError(f"I/J/K/R on a G{modal.motion} move", lineno, col0, source)
        if modal.motion == 1 and modal.feed is None:
            raise GCodeError("G1 without a feed rate: give F (mm/min) first", lineno, col0, source)
        if np.linalg.norm(end - pos) > 0:
            kind, feed = ("rapid", 0.0) if modal.motion == 0 else ("line", modal.feed)
            prog.segments.append(Segment(kind, pos.copy(), end, feed, lineno))
    else:
        if modal.feed is None:
            raise GCodeError(f"G{modal.motion} without a feed rate: give F (mm/min) first", lineno, col0, source)
        prog.segments.append(_arc(pos, end, line.centre_words, line.radius, modal.plane, modal.motion == 2,
                                  modal.feed, modal.scale, lineno, seen, source))
    modal.pos = end


def _arc(pos, end, centre_words, radius, plane, cw, feed, scale, lineno, seen, source) -> Segment:
    a, b, n = PLANES[plane]
    names = "IJK"
    allowed = {names[a], names[b]}
    col = seen.get("G", min(seen.values()))
    if centre_words and radius is not None:
        raise GCodeError("give either I/J/K or R for an arc, not both", lineno, seen.get("R", col), source)
    if not centre_words and radius is None:
        raise GCodeError(f"G{2 if cw else 3} needs I/J/K or R", lineno, col, source)
    for w in centre_words:
        if w not in allowed:
            raise GCodeError(f"{w} is not in the G{plane} plane (use {' and '.join(sorted(allowed))})", lineno,
                             seen[w], source)
    centre = pos.copy()
    full = False
    if centre_words:
        for w, v in centre_words.items():
            centre["IJK".index(w)] = pos["IJK".index(w)] + v * scale
        r0 = math.hypot(pos[a] - centre[a], pos[b] - centre[b])
        r1 = math.hypot(end[a] - centre[a], end[b] - centre[b])
        if r0 < 1e-9:
            raise GCodeError("arc centre coincides with the start point", lineno, col, source)
        if abs(r0 - r1) > ARC_TOL_MM + 1e-4 * r0:
            raise GCodeError(f"arc radius mismatch: {r0:.4f} mm at the start, {r1:.4f} mm at the end "
                             f"(tolerance {ARC_TOL_MM} mm)", lineno, col, source)
        full = math.hypot(end[a] - pos[a], end[b] - pos[b]) < 1e-9
    else:
        r = radius * scale
        dx, dy = end[a] - pos[a], end[b] - pos[b]
        d = math.hypot(dx, dy)
        if d < 1e-9:
            raise GCodeError("a full circle cannot be given with R; use I/J/K", lineno, seen.get("R", col), source)
        if abs(r) < d / 2 - ARC_TOL_MM:
            raise GCodeError(f"R{radius:g} is too small for a chord of {d:.4f} mm (needs at least {d / 2:.4f})",
                             lineno, seen.get("R", col), source)
        h = math.sqrt(max(r * r - d * d / 4, 0.0))
        # centre on the left of the chord for a CCW arc with R > 0 (the shorter arc), mirrored otherwise
        side = 1.0 if (not cw) == (r > 0) else -1.0
        mx, my = pos[a] + dx / 2, pos[b] + dy / 2
        centre[a] = mx - side * h * dy / d
        centre[b] = my + side * h * dx / d
        centre[n] = pos[n]
    a0 = math.atan2(pos[b] - centre[b], pos[a] - centre[a])
    a1 = math.atan2(end[b] - centre[b], end[a] - centre[a])
    if cw:
        sweep = (a0 - a1) % (2 * math.pi)
    else:
        sweep = (a1 - a0) % (2 * math.pi)
    if full or sweep < 1e-12:
        sweep = 2 * math.pi
    return Segment("arc", pos.copy(), end.copy(), feed, lineno, centre, plane, cw, sweep)
