"""The parts of a request that asks for more than one thing: "find the Jira ticket and post it to #backend".

One vector for the whole request leans towards whichever part its words dominate, and the other
part's tool drops out of the top five. Measured on the project's tool sets (docs/decisions/0028-tool-query-clauses.md),
ranking each part as well and interleaving the rankings after the whole request's first two choices
raised recall@5 on two-tool requests from 0.64-0.80 to 0.68-0.89 on three sets of four and left
one-tool requests level; on the fourth the whole request alone did better (0.85 against 0.83).

Hand-written: splitting a request into its asks at conjunctions and sentence ends is the product's
own rule. A parser (spaCy and the like) needs model downloads this service cannot make, and a
clause parse would still need this rule about which clauses are separate asks.
"""

from __future__ import annotations

import re

# ", and then", " then ", " and ", "; ", ". ", "? ": where one ask ends and the next begins
_BOUNDARY = re.compile(
    r"\s*(?:,?\s+(?:and then|then|and also|and|after that|afterwards|plus)\s+|;\s*|\.\s+|\?\s+|,\s+(?:and\s+)?(?=then\b))",
    re.IGNORECASE,
)
MIN_CLAUSE_WORDS = 3  # "red and blue issues" is one ask: a two-word side is a list item, not a request
MAX_CLAUSES = 4  # each part costs a query embedding and a BM25 scoring


def request_clauses(query: str) -> list[str]:
    """The separate asks in a request, in order; [] when it has only one."""
    parts = [part.strip(" ,.") for part in _BOUNDARY.split(query) if part and part.strip(" ,.")]
    asks = [part for part in parts if len(part.split()) >= MIN_CLAUSE_WORDS]
    return asks[:MAX_CLAUSES] if len(asks) >= 2 else []


def ask_count(clauses: list[str]) -> int:
    """The separate asks a request stands for, from its clauses (request_clauses): each of them, or the request alone."""
    return max(1, len(clauses))
