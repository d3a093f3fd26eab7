"""Anvil's agent tools as plain Python: request/response models and the compile, launch, benchmark and
device_info functions, usable without MCP (``tools.runtime.Runtime`` + ``anyio.run``)."""
