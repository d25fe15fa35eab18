"""``python -m mcp_server``: the same entry point as ``oprof-mcp``."""

from mcp_server.server import main

if __name__ == "__main__":
    main()
