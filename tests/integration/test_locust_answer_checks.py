"""The load test's own answer checks, as its users run them: the protocol's confidence rule holds for an answer in
scope, and an answer out of scope (no category fits, or a language the model does not read) may have the low
confidence DESIGN §11 gives it, never one above its top probability.

In a child interpreter: importing the locustfile imports Locust, which monkey-patches the standard library.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBABILITIES = [0.83, 0.1, 0.05, 0.01, 0.01]
CASES = {
    "in scope, confident": {"in_scope": True, "confidence": 0.83},
    "in scope, confidence under 0.9 x the top": {"in_scope": True, "confidence": 0.07},
    "language not served, lowered": {"in_scope": False, "language_served": False, "confidence": 0.07},
    "out of scope, above the top": {"in_scope": False, "confidence": 0.95},
}
CHECK = """
import json, math, sys
from mcp_classifier.loadtest.locustfile import InvalidAnswer, check_classification
cases, probabilities = json.loads(sys.argv[1]), json.loads(sys.argv[2])
verdicts = {}
for name, fields in cases.items():
    entropy = -sum(p * math.log(p) for p in probabilities)
    answer = {"class": 0, "model": "m", "use_reasoning": False, "probabilities": probabilities, "entropy": entropy, **fields}
    try:
        check_classification(answer, len(probabilities), with_probabilities=True)
        verdicts[name] = "ok"
    except InvalidAnswer as exc:
        verdicts[name] = str(exc)
print(json.dumps(verdicts))
"""


def test_low_confidence_is_a_failure_in_scope_and_expected_out_of_scope() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(CASES), json.dumps(PROBABILITIES)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    assert verdicts["in scope, confident"] == "ok"
    assert "below 0.9 x the top probability" in verdicts["in scope, confidence under 0.9 x the top"]
    assert verdicts["language not served, lowered"] == "ok"
    assert "above the top probability" in verdicts["out of scope, above the top"]
