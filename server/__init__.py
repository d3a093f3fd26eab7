"""Anvil's MCP server: the FastMCP app, worker processes per device, and the ``anvil`` CLI."""
