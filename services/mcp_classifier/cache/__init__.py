"""The caches of model output in Redis: identical queries' answers (CachingBackend wraps any ClassificationBackend)
and tool-description vectors, both keyed by the versions that produced them (docs/configuration.md, "Cache (Redis)")."""

from .backend import CachingBackend
from .keys import Versions, cache_key, normalise_text

__all__ = ["CachingBackend", "Versions", "cache_key", "normalise_text"]
