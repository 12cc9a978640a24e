#!/usr/bin/env bash
# The project's test command: every tier (unit, integration, e2e), one pytest run each, each timed.
#   bash scripts/test.sh                 every tier (what .ci/run runs)
#   bash scripts/test.sh unit            the fast tier, for day-to-day work
#   bash scripts/test.sh unit -k edge    extra arguments go to pytest
# The unit tier runs first; then integration beside the e2e tests without an embedded Ray, then the e2e
# tests with one, alone (TEST_TIERS_IN_SEQUENCE=1: each tier in turn, whole).
# Prints a table of each tier's time and counts, then one closing "N passed, N failed, N skipped" line;
# exits non-zero when any test failed or a tier collected nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
ALL_TIERS=(unit integration e2e)

tiers=()
while [ "$#" -gt 0 ] && [[ " ${ALL_TIERS[*]} " == *" $1 "* ]]; do tiers+=("$1"); shift; done
[ "${#tiers[@]}" -gt 0 ] || tiers=("${ALL_TIERS[@]}")
extra_args=$#  # pytest arguments after the tiers (-k ...): a run they leave empty is then no failure

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
reports="$(mktemp -d)"
trap 'rm -rf "$reports"' EXIT
overall=0
rows=()

# One run: pytest over tests/DIR with extra arguments, its report, log and row (name, seconds, exit) in $reports.
run_tier() {
  local name=$1 dir=$2 started status workers=()
  shift 2
  started=$(date +%s)
  # The unit tier is in-process and light: one worker per core (pytest-xdist).
  if [ "$dir" = unit ]; then workers=(-n "${UNIT_WORKERS:-auto}"); fi
  "$PYTHON" -m pytest -q -ra --durations=20 "${workers[@]}" --junitxml="$reports/$name.xml" "tests/$dir" "$@"
  status=$?
  if [ "$status" -eq 5 ] && [ "$extra_args" -gt 0 ]; then status=0; fi
  if [ "$status" -eq 5 ]; then echo "[test] $name collected no tests: failing on purpose" >&2; status=1; fi
  echo "$name $(( $(date +%s) - started )) $status" >"$reports/$name.row"
}

# With both integration and e2e asked for (and TEST_TIERS_IN_SEQUENCE unset), the integration tier and the
# e2e tests without an embedded Ray run side by side, each in its own pytest process: an e2e test mostly
# waits on the servers it started (about one core busy of two), and the integration tier fills the other.
# The e2e tests that start an embedded Ray (marker embedded_ray) run after them, alone: Ray's own start
# gives its proxy 60 s, which a host doing both at once can outrun. Each run's output is printed when it ends.
names=()
if [[ " ${tiers[*]} " == *" integration "* ]] && [[ " ${tiers[*]} " == *" e2e "* ]] && [ "${TEST_TIERS_IN_SEQUENCE:-0}" != 1 ]; then
  if [[ " ${tiers[*]} " == *" unit "* ]]; then
    echo "[test] tier unit"
    run_tier unit unit "$@"
    names+=(unit)
  fi
  echo "[test] tier integration and tier e2e (without embedded Ray) side by side; each one's output follows when it ends"
  run_tier integration integration "$@" >"$reports/integration.log" 2>&1 &
  integration_pid=$!
  run_tier e2e e2e -m "not embedded_ray" "$@" >"$reports/e2e.log" 2>&1 &
  e2e_pid=$!
  # An interrupt (CI's wall-clock guard) reaches the pytest processes too; their summaries are still printed.
  trap 'echo "[test] interrupted: the runs print what they ran" >&2' INT
  wait "$integration_pid" || wait "$integration_pid"
  echo "[test] tier integration output:"
  cat "$reports/integration.log"
  wait "$e2e_pid" || wait "$e2e_pid"
  echo "[test] tier e2e (without embedded Ray) output:"
  cat "$reports/e2e.log"
  echo "[test] tier e2e, the tests with an embedded Ray, alone"
  run_tier e2e-ray e2e -m embedded_ray "$@"
  names+=(integration e2e e2e-ray)
else
  for tier in "${tiers[@]}"; do
    echo "[test] tier $tier"
    run_tier "$tier" "$tier" "$@"
    names+=("$tier")
  done
fi
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
