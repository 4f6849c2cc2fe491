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


def run(target: str) -> tuple[int, int, list[str]]:
    path = TARGETS[target][0]
    subprocess.run([sys.executable, "-m", "mutmut", "run", "--paths-to-mutate", path, "--tests-dir", "tests",
                    "--runner", f"{sys.executable} -m tests.mutation.runner {target}", "--no-progress"],
                   check=False)
    results = subprocess.run([sys.executable, "-m", "mutmut", "results"], capture_output=True, text=True).stdout
    survived = _ids(results, "Survived")
    killed = int(re.search(r"Killed (\d+)", results).group(1)) if re.search(r"Killed (\d+)", results) else 0
    return killed, len(survived), survived


def _ids(text: str, heading: str) -> list[str]:
    """Mutant ids listed under a heading of `mutmut results` (single ids and ranges)."""
    m = re.search(rf"{heading}[^\n]*\n(.*?)(\n\n|\Z)", text, re.S)
    if not m:
        return []
    ids = []
    for part in re.findall(r"\d+(?:-\d+)?", m.group(1)):
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
