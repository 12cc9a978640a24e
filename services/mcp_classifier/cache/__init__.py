"""Redis cache of identical queries: CachingBackend wraps any ClassificationBackend (DESIGN §6)."""

from .backend import CachingBackend
from .keys import Versions, cache_key, normalise_text
from .redis_link import RedisLink

__all__ = ["CachingBackend", "RedisLink", "Versions", "cache_key", "normalise_text"]
