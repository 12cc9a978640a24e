#!/usr/bin/env bash
# The project's test command: every tier (unit, integration, e2e), each timed; e2e in two steps (see below).
#   bash scripts/test.sh                 every tier (what .ci/run runs)
#   bash scripts/test.sh unit            the fast tier, for day-to-day work
#   bash scripts/test.sh unit -k edge    extra arguments go to pytest
# Prints a table of each tier's time and counts, then one closing "N passed, N failed, N skipped" line;
# exits non-zero when any test failed or a tier collected nothing. Under CI=true (.ci/run) a skip is a failure that
# names its reason, except for the tests marked cuda (tests/conftest.py), so a skip counted here is an expected one.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
ALL_TIERS=(unit integration e2e)

tiers=()
while [ "$#" -gt 0 ] && [[ " ${ALL_TIERS[*]} " == *" $1 "* ]]; do tiers+=("$1"); shift; done
[ "${#tiers[@]}" -gt 0 ] || tiers=("${ALL_TIERS[@]}")
extra_args=$#  # pytest arguments after the tiers (-k ...): a run they leave empty is then no failure

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
# The tiers start hundreds of Python processes (gateways, stdio servers, Ray workers, benchmark children). uv installs
# no .pyc files, so with PYTHONDONTWRITEBYTECODE set (some CI and agent shells set it) each of those processes compiled
# transformers, scikit-learn, scipy and Ray from source again: about 8 s of CPU more for every process that loads the
# model. Writing the bytecode cache (into .venv and the git-ignored __pycache__ folders) compiles each module once.
unset PYTHONDONTWRITEBYTECODE
reports="$(mktemp -d)"
trap 'rm -rf "$reports"' EXIT
overall=0
rows=()

# One step: pytest over tests/TIER with its own and the caller's arguments; its report and row (step, seconds, exit)
# in $reports under the step's name.
run_step() {
  local name=$1 tier=$2 started status
  shift 2
  names+=("$name")
  started=$(date +%s)
  "$PYTHON" -m pytest -q -ra --durations=20 --junitxml="$reports/$name.xml" "tests/$tier" "$@"
  status=$?
  if [ "$status" -eq 5 ] && [ "$extra_args" -gt 0 ]; then status=0; fi
  if [ "$status" -eq 5 ]; then echo "[test] $name collected no tests: failing on purpose" >&2; status=1; fi
  echo "$name $(( $(date +%s) - started )) $status" >"$reports/$name.row"
}

# The tiers run one after another; side by side (integration beside the e2e tests without an embedded Ray) was
# measured on a fresh clone: each took about twice its time alone (integration 1,242 s against 575-659), more
# than running them in turn, and two bounded-time e2e tests failed.
# - unit: in process and light, one worker per core (pytest-xdist).
# - integration: one process. On two workers it took longer (558 s against 528) and 60% more CPU: its in-process
#   model work already runs on every core.
# - e2e: its modules mostly start processes and wait on them (a third of the host idle), so the modules that start
#   no embedded Ray run on two workers, a module's tests on one worker (its servers start once); then the
#   embedded-Ray modules run alone, in one process, since an embedded Ray node starts its own processes on every
#   core and the tests bound a replica's restart by the start they measured. A run given its own -m runs the
#   e2e tier in one process, as asked.
names=()
for tier in "${tiers[@]}"; do
  echo "[test] tier $tier"
  case "$tier" in
    unit) run_step unit unit -n "${UNIT_WORKERS:-auto}" "$@" ;;
    e2e)
      if [[ " $* " == *" -m "* ]]; then
        run_step e2e e2e "$@"
      else
        run_step e2e e2e -m "not embedded_ray" -n "${E2E_WORKERS:-2}" --dist loadfile "$@"
        echo "[test] tier e2e: the embedded-Ray modules, alone"
        run_step e2e-ray e2e -m embedded_ray "$@"
      fi
      ;;
    *) run_step "$tier" "$tier" "$@" ;;
  esac
done
for name in "${names[@]}"; do
  if [ -f "$reports/$name.row" ]; then
    rows+=("$(cat "$reports/$name.row")")
  else
    rows+=("$name 0 1")  # the run never finished (interrupted)
  fi
done
for row in "${rows[@]}"; do
  set -- $row
  [ "$3" -eq 0 ] || overall=1
done

"$PYTHON" - "$reports" "${rows[@]}" <<'EOF'
"""Sums the tiers' JUnit reports: one table, then the plain closing line CI reads."""
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

reports, rows = Path(sys.argv[1]), sys.argv[2:]
totals = {"passed": 0, "failed": 0, "skipped": 0}
print("\n| tier | seconds | passed | failed | skipped | exit |\n|---|---|---|---|---|---|")
for row in rows:
    tier, took, status = row.split()
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    path = reports / f"{tier}.xml"
    if path.exists():
        for suite in ET.parse(path).getroot().iter("testsuite"):
            tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
            failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            counts["failed"] += failed
            counts["skipped"] += skipped
            counts["passed"] += tests - skipped - failed
    for key in totals:
        totals[key] += counts[key]
    print(f"| {tier} | {took} | {counts['passed']} | {counts['failed']} | {counts['skipped']} | {status} |")
closing = f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped"
print(f"\n{closing}")
if os.environ.get("TEST_SUMMARY_FILE"):
    Path(os.environ["TEST_SUMMARY_FILE"]).write_text(closing + "\n")
EOF
exit "$overall"
