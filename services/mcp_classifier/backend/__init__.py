"""Backends: where classification runs. The gateway only knows the ClassificationBackend interface."""
