"""The parts of a query that may each be about a different category: "I was charged a no-show fee, but I
cancelled that appointment a day ahead" (billing, and appointments).

One vector for the whole query leans towards whichever topic its words dominate, and its softmax rarely
leaves the other topic more than a few hundredths. Each part on its own says its topic plainly, so a
second label is read from the parts (classify/part_labels.py).

Hand-written: cutting a query at sentence ends, commas and the words that join clauses is the product's
own rule. A parser (spaCy and the like) needs model downloads this service cannot make, and would still
need this rule about which clauses may carry a topic of their own.
"""

from __future__ import annotations

import re

# Where one clause ends and the next may begin: sentence ends, commas, semicolons, dashes, and the words that
# join a clause to another (coordinating, or subordinating a reason, a time or a condition).
_BOUNDARY = re.compile(
    r"\s*(?:[,;.!?]+|—|–|\s-\s|\b(?:and also|and|but|or|so|then|because|before|after|while|when)\b)\s*",
    re.IGNORECASE,
)
PART_MIN_WORDS = 3  # "Hi", "thanks!" or "not edit" carry no topic of their own
MAX_PARTS = 8  # each part is one more short query to embed: a long prompt is judged by its first clauses


def topic_parts(query: str) -> list[str]:
    """The clauses of ``query`` long enough to carry a topic, in order; [] when it has fewer than two."""
    parts = [part.strip() for part in _BOUNDARY.split(query)]
    kept = [part for part in parts if len(part.split()) >= PART_MIN_WORDS]
    return kept[:MAX_PARTS] if len(kept) >= 2 else []
