"""Evaluation of a classifier (in-process or any running MCP classifier) on labelled queries."""
