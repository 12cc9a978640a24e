"""Every classifier a process serves, by name: where its categories come from, the live one, its version, its reload.

The one road of a categories file, for every backend and command: the setting names a source
(``category_sources``), the registry reads and validates it (``categories.load_categories``), a
builder fits a Classifier on the process's one model (``build.build_registry``), and a reload
re-reads the same source and swaps the new index in, or keeps the live one and says why. The
classifier ``default`` is the categories file setting (or the packaged file); the ``classifiers``
setting names more, each its own file, all fitted on the one model.

Pure: no model is loaded here (the builder is handed in), and nothing web, network or cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..settings import DEFAULT_CLASSIFIER, CategorySettings
from ..util.file_watch import watch_file_in_thread
from .categories import CategoryConfig, CategoryFileError, load_categories

if TYPE_CHECKING:  # the classifier imports the engine (torch): the gateway reads sources without it
    from .classifier import Classifier
    from .results import ClassificationResult

DEFAULT = DEFAULT_CLASSIFIER  # the categories file setting, or the packaged default; reserved for it
PACKAGED = "the packaged default categories"

ClassifierBuilder = Callable[[CategoryConfig], "Classifier"]


class UnknownClassifier(KeyError):
    """A request named a classifier this process does not serve; the message lists the ones it does."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = tuple(known)
        shown = name if len(name) <= 40 else name[:40] + "..."  # never echo a long input back
        super().__init__(f"no classifier named {shown!r} (known: {', '.join(self.known) or 'none'})")

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class CategorySource:
    """Where one classifier's categories come from: a file, or the packaged default (``path`` None)."""

    path: Path | None = None

    @property
    def reloadable(self) -> bool:
        """A file can change under a running process; the packaged default cannot."""
        return self.path is not None

    def describe(self) -> str:
        return str(self.path) if self.path is not None else PACKAGED

    def load(self) -> CategoryConfig:
        """Read and validate; a bad file raises CategoryFileError with the reason."""
        return load_categories(self.path)

    def watch(self, on_change: Callable[[], None], stop: threading.Event) -> bool:
        """Call ``on_change`` whenever the file changes, until ``stop`` is set; False when there is no file to watch.

        The one watch every road uses: the gateway's hot reload and each Ray replica's own copy.
        """
        if self.path is None:
            return False
        watch_file_in_thread(self.path, on_change, stop)
        return True


def category_sources(categories: CategorySettings) -> dict[str, CategorySource]:
    """Each classifier's source by name, from the settings: ``default`` first, then the named ones."""
    sources = {DEFAULT: CategorySource(categories.categories_file)}
    sources.update((name, CategorySource(path)) for name, path in categories.classifiers.items())
    return sources


def reloadable_sources(categories: CategorySettings) -> dict[str, CategorySource]:
    """The sources a running process watches and re-reads on SIGHUP: the files, not the packaged default."""
    return {name: source for name, source in category_sources(categories).items() if source.reloadable}


@dataclass(frozen=True)
class Reload:
    """How a reload ended: a new version live (``changed``), no change, or refused (``error``, the live one kept)."""

    changed: bool
    error: str | None = None


@dataclass
class _Entry:
    source: CategorySource
    config: CategoryConfig  # what was read before the classifier was built; the live one is the classifier's after
    classifier: Classifier | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)  # one reload of a classifier at a time


class ClassifierRegistry:
    """Reads every source at once (cheap: a bad file fails before any model loads), then builds each classifier
    on a builder the caller hands in (``build``: slow, it embeds and fits), then serves, reloads and watches them."""

    def __init__(self, sources: Mapping[str, CategorySource]) -> None:
        self._entries = {name: _Entry(source, source.load()) for name, source in sources.items()}
        self._stop = threading.Event()  # ends every watch this registry started

    @classmethod
    def read(cls, categories: CategorySettings) -> ClassifierRegistry:
        """The registry of the settings' sources, read and validated, nothing built yet."""
        return cls(category_sources(categories))

    @classmethod
    def holding(cls, classifier: Classifier, source: CategorySource | None = None, name: str = DEFAULT) -> ClassifierRegistry:
        """A registry around a classifier built already (tests, tools): ``source`` is what a reload re-reads."""
        registry = cls({})
        registry._entries[name] = _Entry(source or CategorySource(), classifier.config, classifier)
        return registry

    def build(self, builder: ClassifierBuilder) -> ClassifierRegistry:
        """Build each classifier from the categories read; returns the registry, ready to serve."""
        for entry in self._entries.values():
            if entry.classifier is None:
                entry.classifier = builder(entry.config)
        return self

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def source(self, name: str = DEFAULT) -> CategorySource:
        return self._entry(name).source

    def config(self, name: str = DEFAULT) -> CategoryConfig:
        """The live categories: the classifier's once built, before that the ones read."""
        entry = self._entry(name)
        return entry.classifier.config if entry.classifier is not None else entry.config

    def versions(self, name: str = DEFAULT) -> tuple[str, str]:
        """(category_set_version, policy_version): content hashes of the live categories (cache keys, /health)."""
        config = self.config(name)
        return config.category_set_version, config.policy_version

    def classify(self, asked: Sequence[tuple[str, str]]) -> list[ClassificationResult]:
        """(classifier name, text) pairs -> one result each, in order, in one pass over the model: a text asked of
        several classifiers that put the same instruction before queries is embedded once."""
        names = {name for name, _ in asked}
        if len(names) == 1:
            (name,) = names
            return self.get(name).classify([text for _, text in asked])
        from .classifier import classify_together

        return classify_together([(self.get(name), text) for name, text in asked])

    def get(self, name: str = DEFAULT) -> Classifier:
        """The live classifier. The same object across reloads: a reload swaps its index in place."""
        classifier = self._entry(name).classifier
        if classifier is None:
            raise RuntimeError(f"classifier {name!r} is read but not built yet (ClassifierRegistry.build)")
        return classifier

    def reload(self, name: str = DEFAULT) -> Reload:
        """Re-read ``name``'s source: a valid, different file goes live in one swap; a bad one is refused and the
        live version stays, with the reason in the classifier's ``reload_error`` (on /health) until a good file."""
        entry = self._entry(name)
        classifier = self.get(name)
        if not entry.source.reloadable:
            return Reload(changed=False)
        with entry.lock:
            try:
                config = entry.source.load()
            except CategoryFileError as exc:
                classifier.reload_error = str(exc)
                return Reload(changed=False, error=str(exc))
            changed = classifier.apply(config)
            classifier.reload_error = None  # cleared only once the file read is live
            return Reload(changed)

    def reload_all(self) -> bool:
        """Re-read every classifier's source (the hot reload asks for all of them); True when any new version went live."""
        return any([self.reload(name).changed for name in self._entries])

    def watch(self, name: str, on_change: Callable[[], None]) -> bool:
        """Call ``on_change`` when ``name``'s file changes, until ``close``; False when there is no file to watch.
        The caller reloads from it, on the thread its batches run on, and says how it went."""
        return self.source(name).watch(on_change, self._stop)

    def close(self) -> None:
        """Stop every watch started here."""
        self._stop.set()

    def _entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownClassifier(name, tuple(self._entries)) from None
