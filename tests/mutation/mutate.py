"""The mutation pass (`python -m tests.mutation.mutate [TARGET …]`, needs the `mutation` extra):
mutmut changes one operator, number or name at a time in each target file (tests/mutation/targets.py)
and runs the target's fast tests; a mutant the tests pass is a change to safety code nothing
notices. Prints killed / survived per target; `mutmut results` and `mutmut show ID` list the
survivors. Surviving mutants are either killed by a new test or listed in
tests/mutation/equivalent.md with the reason they cannot change behaviour."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.mutation.targets import TARGETS


PROGRESS = re.compile(r"(\d+)/(\d+)\s+🎉 (\d+)\s+⏰ (\d+)\s+🤔 (\d+)\s+🙁 (\d+)\s+🔇 (\d+)")


def run(target: str) -> tuple[int, int, list[str]]:
    """(killed, survived, the survivors' ids) for one target. Killed counts the mutants the tests
    failed on, slowly (mutmut's "suspicious") or by running too long (an endless loop) included."""
    path = TARGETS[target][0]
    done = subprocess.run([sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", path, "--tests-dir", "tests",
                           "--runner", f"{sys.executable} -m tests.mutation.runner {target}"],
                          capture_output=True, text=True, check=False)
    counts = PROGRESS.findall(done.stdout)
    if not counts:
        raise SystemExit(f"mutmut did not run the mutants of {path}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    _, _, killed, timeout, suspicious, survived, _ = map(int, counts[-1])
    results = subprocess.run([sys.executable, "-m", "mutmut", "results"], capture_output=True, text=True).stdout
    return killed + timeout + suspicious, survived, _ids(results, "Survived", path)


SECTION = re.compile(r"^(Timed out|Suspicious|Survived|Untested|Skipped|Killed)\b", re.M)


def _ids(text: str, heading: str, path: str | None = None) -> list[str]:
    """Mutant ids listed under a heading of `mutmut results` (single ids and ranges, on the lines
    after each file's "---- path (n) ----"), of `path` only when given."""
    starts = [(m.start(), m.group(1)) for m in SECTION.finditer(text)] + [(len(text), "")]
    ids: list[str] = []
    for (at, name), (end, _) in zip(starts, starts[1:]):
        if name != heading:
            continue
        current = None
        for line in text[at:end].splitlines()[1:]:
            if line.startswith("----"):
                current = line.strip("- ").rsplit(" (", 1)[0]
            elif line.strip() and (path is None or current == path):
                for part in re.findall(r"\d+(?:-\d+)?", line):
                    lo, _, hi = part.partition("-")
                    ids += [str(i) for i in range(int(lo), int(hi or lo) + 1)]
    return ids


def main() -> int:
    targets = sys.argv[1:] or list(TARGETS)
    for target in targets:
        killed, survived, ids = run(target)
        total = killed + survived
        score = 100.0 * killed / total if total else 100.0
        print(f"{target}: {killed} of {total} mutants killed ({score:.1f} %); survivors: {' '.join(ids) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
