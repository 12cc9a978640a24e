"""The load test's own answer checks, as its users run them. Confidence is the top probability times P(in scope)
(times P(the language is served)): an answer in scope may have P(in scope) anywhere from 0.5 up, so its confidence
from half the top probability up; an answer out of scope (no category fits, or a language the model does not read)
may have any lower one. Neither is ever above the top probability, and the class is the most probable one.

In a child interpreter: importing the locustfile imports Locust, which monkey-patches the standard library.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBABILITIES = [0.83, 0.1, 0.05, 0.01, 0.01]
CASES = {
    "in scope, confident": {"in_scope": True, "confidence": 0.83},
    "in scope, P(in scope) 0.53": {"in_scope": True, "confidence": 0.83 * 0.53},
    "in scope, P(in scope) exactly 0.5": {"in_scope": True, "confidence": 0.83 * 0.5},
    "in scope, confidence under half the top": {"in_scope": True, "confidence": 0.07},
    "in scope, above the top": {"in_scope": True, "confidence": 0.9},
    "in scope, not the top class": {"in_scope": True, "confidence": 0.1, "class": 1},
    "out of scope, lowered": {"in_scope": False, "confidence": 0.83 * 0.3},
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


def test_confidence_follows_p_in_scope_and_a_wrong_answer_fails() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(CASES), json.dumps(PROBABILITIES)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    for fine in ("in scope, confident", "in scope, P(in scope) 0.53", "in scope, P(in scope) exactly 0.5", "out of scope, lowered",
                 "language not served, lowered"):  # fmt: skip
        assert verdicts[fine] == "ok", (fine, verdicts[fine])
    assert "below 0.5 x the top probability 0.83" in verdicts["in scope, confidence under half the top"]
    assert "above the top probability" in verdicts["in scope, above the top"]
    assert "not the top one" in verdicts["in scope, not the top class"]
    assert "above the top probability" in verdicts["out of scope, above the top"]
