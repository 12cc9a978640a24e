#!/usr/bin/env bash
# The product speaks of the product: its history lives in git, not in its text or its file names.
# Fails on a work-session number in any tracked text, a tracked file name carrying -sNN, or a raw
# bench-run file (JSON, log) under docs/. Decision records in docs/decisions/ hold what runs decided.
set -uo pipefail
cd "$(dirname "$0")/.."
failed=0
if hits=$(git grep -IinE "\bsessions? [0-9]+\b" -- . ':!scripts/product_text_checks.sh'); then
  echo "work-session numbers in tracked text:" >&2; echo "$hits" >&2; failed=1
fi
if names=$(git ls-files | grep -E -- "-s[0-9]{2}([^0-9]|$)"); then
  echo "file names carrying a work-session number:" >&2; echo "$names" >&2; failed=1
fi
if raw=$(git ls-files docs | grep -E "\.(json|jsonl|log|csv)$"); then
  echo "raw run files under docs/ (distil them into docs/decisions/, git keeps the runs):" >&2; echo "$raw" >&2; failed=1
fi
[ "$failed" -eq 0 ] && echo "[product text] clean"
exit "$failed"
