"""Classifier core: model loading, pooling, category index, scoring, routing policy. No web imports."""
