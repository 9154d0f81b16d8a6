"""Run the Array API standard's conformance suite against ``namedtensor.array_api`` and check the result.

    python tools/array_api_conformance.py -- --hypothesis-seed=0   # CI's bounded run: 5 examples per test
    python tools/array_api_conformance.py --max-examples 200       # the long run, by hand (a random seed)

The suite is an unmodified copy kept next to the project (``../shared/array-api-tests``, run by
``../shared/run-array-api-tests``).  The run passes when at least 99% of its cases pass and every
case that fails is one that docs/converting.md lists, with its reason, under "Array API
conformance": a new failure, or a listed one that the docs give no reason for, fails the run.  A
listed case that passes is reported, so the list can shrink.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT.parent / "shared" / "run-array-api-tests"
DOCS = ROOT / "docs" / "converting.md"
SECTION = "### Array API conformance"
THRESHOLD = 0.99



def known_failures(text: str) -> list:
    """The patterns of the cases the docs list as failing: each bullet of the section starts with one in
    backticks (``fnmatch``-free: a prefix of the case's id), followed by the reason."""
    start = text.index(SECTION)
    end = text.find("\n#", start + len(SECTION))
    section = text[start:end if end >= 0 else None]
    return re.findall(r"^- `([^`]+)`: \S", section, flags=re.M)


def run(python: str, max_examples: int, extra: list) -> tuple:
    """``(outcomes, output)``: each case's outcome by its id (from pytest-json-report) and pytest's output."""
    env = dict(os.environ, ARRAY_API_TESTS_MODULE="namedtensor.array_api", MAX_EXAMPLES=str(max_examples))
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run([str(RUNNER), python, "--json-report", f"--json-report-file={report}", *extra],
                              env=env, capture_output=True, text=True)
        tests = json.loads(report.read_text())["tests"] if report.exists() else []
    return {t["nodeid"]: t["outcome"] for t in tests}, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-examples", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (e.g. -k linalg)")
    args = parser.parse_args()
    if not RUNNER.exists():
        print(f"array-api conformance: the suite's runner {RUNNER} is not on this machine; nothing was run.")
        return 1
    outcomes, output = run(args.python, args.max_examples, args.pytest_args)
    failed = [case for case, outcome in outcomes.items() if outcome in ("failed", "error")]
    passed = sum(outcome == "passed" for outcome in outcomes.values())
    skipped = sum(outcome == "skipped" for outcome in outcomes.values())
    total = passed + len(failed)
    if not total:
        print(output[-5000:])
        print("array-api conformance: no case ran.")
        return 1
    known = known_failures(DOCS.read_text(encoding="utf-8"))
    unexpected = [f for f in failed if not any(f.split("::", 1)[-1].startswith(k) for k in known)]
    fixed = [k for k in known if not any(f.split("::", 1)[-1].startswith(k) for f in failed)]
    rate = passed / total
    print(f"array-api conformance ({args.max_examples} examples per test): {passed} of {total} cases passed "
          f"({rate:.2%}), {len(failed)} failed, {skipped} skipped")
    for f in unexpected:
        print(f"  failed, and not listed in {DOCS.name}: {f}")
    for k in fixed:
        print(f"  listed as failing in {DOCS.name}, but passed (or did not run) this time: {k}")
    if unexpected:
        print(output[-8000:])
    return 0 if rate >= THRESHOLD and not unexpected else 1


if __name__ == "__main__":
    sys.exit(main())
