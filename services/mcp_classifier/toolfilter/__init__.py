"""Semantic tool filter: ranks a caller's MCP tools against a request and keeps the relevant ones."""
