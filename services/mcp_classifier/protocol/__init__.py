"""MCP over JSON-RPC: envelope rules, methods and the tool registry. Pure: no I/O, no transport."""
