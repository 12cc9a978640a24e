#!/usr/bin/env bash
# The project's test command: every tier (unit, integration, e2e), one pytest run each, each timed.
#   bash scripts/test.sh                 every tier (what .ci/run runs)
#   bash scripts/test.sh unit            the fast tier, for day-to-day work
#   bash scripts/test.sh unit -k edge    extra arguments go to pytest
# Prints a table of each tier's time and counts, then one closing "N passed, N failed, N skipped" line;
# exits non-zero when any test failed or a tier collected nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-.venv/bin/python}"
ALL_TIERS=(unit integration e2e)

tiers=()
while [ "$#" -gt 0 ] && [[ " ${ALL_TIERS[*]} " == *" $1 "* ]]; do tiers+=("$1"); shift; done
[ "${#tiers[@]}" -gt 0 ] || tiers=("${ALL_TIERS[@]}")

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"
reports="$(mktemp -d)"
trap 'rm -rf "$reports"' EXIT
overall=0
rows=()
for tier in "${tiers[@]}"; do
  echo "[test] tier $tier"
  started=$(date +%s)
  # The unit tier is in-process and light: one worker per core (pytest-xdist). The integration and e2e
  # tiers' tests each keep both cores busy (torch threads, server processes), so they run one at a time.
  workers=()
  if [ "$tier" = unit ]; then workers=(-n "${UNIT_WORKERS:-auto}"); fi
  "$PYTHON" -m pytest -q -ra --durations=20 "${workers[@]}" --junitxml="$reports/$tier.xml" "tests/$tier" "$@"
  status=$?
  took=$(( $(date +%s) - started ))
  if [ "$status" -eq 5 ]; then echo "[test] tier $tier collected no tests: failing on purpose" >&2; status=1; fi
  [ "$status" -eq 0 ] || overall=1
  rows+=("$tier $took $status")
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
