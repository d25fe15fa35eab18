"""``oprof-mcp``: the MCP server, a thin adapter over profiler_core's public API.

``create_server(ServerConfig(...))`` builds it (tests drive it in process with
``mcp.Client``); ``main()`` is the console script.
"""
