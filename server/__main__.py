"""``python -m server ...`` is ``anvil ...`` (used by ``anvil demo`` to start the server)."""

from server.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
