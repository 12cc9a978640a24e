"""The engine's errors, apart from the encoder: the CLI catches them without importing torch."""


class ModelLoadError(RuntimeError):
    """The model could not be resolved or loaded; the message says what to do."""
