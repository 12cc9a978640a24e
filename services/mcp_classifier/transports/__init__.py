"""Transports: HTTP (JSON-RPC and REST style), stdio. They call the protocol dispatcher, nothing deeper."""
