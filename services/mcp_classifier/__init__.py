"""mcp-classifier: an MCP classification service that LLM routers call before every request."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mcp-classifier")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

SERVER_NAME = "mcp-classifier"
