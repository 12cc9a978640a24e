"""Plug-ins for other programs that call the running service over HTTP (no in-process imports of it)."""
