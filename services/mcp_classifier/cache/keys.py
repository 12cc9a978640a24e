"""Cache keys: which classifier (or model) produced a value, and for which text: length-prefixed, hashed, never in clear."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Sequence
from typing import NamedTuple

KEY_PREFIX = "mcp-classifier:cls:v1:"  # bump v1 when the key or value layout changes


class Versions(NamedTuple):
    """Everything besides the text that decides an answer; a change in any of them changes every key."""

    model_id: str
    category_set_version: str
    policy_version: str
    # The scorer the index runs (e.g. "neighbours+tokens"): a settings change that swaps it (scoring method,
    # word or token matching) changes answers for the same file, so it must not read the old ones.
    scoring: str = ""
    # Which languages are served and how sure the detector must be (ClassifierInfo.language_policy): a change
    # turns answers in_scope false or back for the same text.
    languages: str = ""
    # Which classifier of the process answered: two classifiers never share an entry, even on files alike.
    classifier: str = "default"


def normalise_text(text: str) -> str:
    """The form under which identical queries share one cache entry.

    * Unicode NFKC: full-width letters, ligatures, non-breaking spaces and other compatibility
      forms are folded into their plain equivalents, so a query pasted from a PDF or typed on a
      CJK keyboard hits the entry of its plain twin.
    * strip + collapse runs of whitespace (tabs, newlines, repeated spaces) into one space:
      routers and chat UIs reformat whitespace freely, and it carries no meaning for a topic.
    * casefold (a stronger, Unicode-aware lower()): "What is TCP?" and "what is tcp?" are the same
      question. The routing policy already matches its reasoning markers case-insensitively and
      counts words with \\w+, which none of these steps changes, and the default MiniLM is uncased.

    The trade-off, accepted on purpose: a cased model (Qwen3-Embedding) may give two spellings
    slightly different confidences, and the first one classified answers for both. The text the
    model sees is always the caller's own on a miss; normalisation only decides the key.
    """
    # str.split() splits on exactly the characters re's \s matches (str.isspace), at a fifth of the cost.
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()


class KeyBuilder:
    """Keys for one set of versions: the versions are hashed once, each text then costs one copy + update.

    Classification keys normalise the text (identical queries share an answer); tool-description
    vectors (cache.embeddings) pass normalise=False, since the model sees each text as written.
    """

    def __init__(self, versions: Sequence[str], prefix: str = KEY_PREFIX, *, normalise: bool = True) -> None:
        self.versions = versions
        self.prefix = prefix
        self.normalise = normalise
        base = hashlib.blake2b(digest_size=20)
        for part in versions:
            _update(base, part)
        self._base = base

    def key(self, text: str) -> str:
        """prefix + hash(model id, category-set version, policy version, scoring, normalised text).

        Fields are length-prefixed before hashing, so no choice of model id or text can make two
        different tuples hash the same input. The text never appears in Redis in clear.
        """
        h = self._base.copy()
        _update(h, normalise_text(text) if self.normalise else text)
        return self.prefix + h.hexdigest()


def _update(h: hashlib.blake2b, part: str) -> None:
    data = part.encode("utf-8", "surrogatepass")
    h.update(len(data).to_bytes(8, "big"))
    h.update(data)


def cache_key(versions: Versions, text: str, prefix: str = KEY_PREFIX) -> str:
    return KeyBuilder(versions, prefix).key(text)
