"""Candidate out-of-scope examples that `doctor` proposes per category, for the user to judge.

Near misses (a query that shares words with a category but is not about it: "transfer a file to my server" to a
bank) are the kind the out-of-scope fit catches least, and the file's `out_of_scope_examples` are where a user
can name them. Two sources of candidates, each scored by the served in-scope model:
- the packaged background queries (`data/background_queries.yaml`) nearest to the category;
- queries built from the file's own words: each category's most distinctive words put into generic frames
  about something else (a poem, a joke, a word's meaning), the shape of a near miss.
The riskiest, those the classifier would take in scope with the highest probability, come first. Whether one
is really out of scope is the user's call: a broad file may own a background query about its subject.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..classify.categories import CategoryConfig
from ..classify.lexical import words

WORDS_PER_CATEGORY = 3  # distinctive words built into frames per category: 3 x 6 frames = 18 built queries each
SHORTEST_WORD = 3  # "id", "vs" and the like carry no topic
# Generic requests about something other than a business's own matter: a word of the category put here reads as a
# near miss. Kept few and plain so they fit any file; doctor shows what each one scores.
FRAMES = (
    "write a short poem about {word}",
    "tell me a joke about {word}",
    "what does the word {word} mean",
    "{word} in a video game",
    "a song about {word}",
    "draw a picture of {word}",
)
PER_SOURCE_LISTED = 3  # per category and source, the candidates with the highest in-scope probability

BACKGROUND, BUILT = "background", "built from your words"


@dataclass(frozen=True)
class Candidate:
    category: str  # the category the classifier would answer (the nearest one)
    text: str
    source: str  # BACKGROUND or BUILT
    in_scope_probability: float  # as served: at or above 0.5 the classifier takes it in scope


def distinctive_words(config: CategoryConfig, per_category: int = WORDS_PER_CATEGORY) -> list[list[str]]:
    """Per category, the words its examples, name and description use most that the other categories use least
    (in how many of its texts a word appears, times log((C + 1) / how many categories use it)); no stop words,
    and a plural kept only where its singular is not there."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    bags = []
    for category in config.categories:
        texts = [category.name.replace("_", " ").replace("-", " "), category.description or "", *category.examples]
        bag = Counter(
            w for t in texts for w in set(words(t)) if len(w) >= SHORTEST_WORD and not w.isdigit() and w not in ENGLISH_STOP_WORDS
        )
        bags.append(Counter({w: n for w, n in bag.items() if not (w.endswith("s") and w[:-1] in bag)}))
    used_by = Counter(w for bag in bags for w in bag)
    spread = len(bags) + 1
    return [sorted(bag, key=lambda w: (-bag[w] * math.log(spread / used_by[w]), w))[:per_category] for bag in bags]


def built_queries(config: CategoryConfig) -> list[str]:
    """Every category's distinctive words in every frame, without repeats, in file order."""
    built = [frame.format(word=w) for ws in distinctive_words(config) for w in ws for frame in FRAMES]
    return list(dict.fromkeys(built))


def candidate_texts(config: CategoryConfig, background: Sequence[str]) -> tuple[list[str], list[str]]:
    """(texts, their sources): the built queries and the background set, less what the file already says (its
    examples and out_of_scope_examples)."""
    seen = {t.strip().lower() for c in config.categories for t in c.examples} | {t.strip().lower() for t in config.out_of_scope_examples}
    texts: list[str] = []
    sources: list[str] = []
    for text, source in [(t, BUILT) for t in built_queries(config)] + [(t, BACKGROUND) for t in background]:
        if text.strip().lower() not in seen:
            seen.add(text.strip().lower())
            texts.append(text)
            sources.append(source)
    return texts, sources


def propose(
    names: Sequence[str], texts: Sequence[str], sources: Sequence[str], probability: np.ndarray, similarities: np.ndarray
) -> list[Candidate]:
    """Per category (file order) and source, the PER_SOURCE_LISTED candidates nearest to it that the classifier
    would take in scope with the highest probability. ``probability``: (N,) in-scope probability; ``similarities``:
    (N, C) to each category, as the scope model reads them."""
    nearest = similarities.argmax(axis=1)
    out = []
    for c, name in enumerate(names):
        for source in (BUILT, BACKGROUND):
            mine = [i for i in range(len(texts)) if nearest[i] == c and sources[i] == source]
            mine.sort(key=lambda i: (-probability[i], -similarities[i, c]))
            out += [Candidate(name, texts[i], source, float(probability[i])) for i in mine[:PER_SOURCE_LISTED]]
    return out
