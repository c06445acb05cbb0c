"""A stdio MCP server (official Python SDK) for the connector tests: `hang` sleeps until it is
cancelled and then writes the word "cancelled" to the file named by HANG_MARKER; `ping` answers
at once; `files.read` has a dot in its name; `whoami` returns the value of the environment variable SECRET_ENV_NAME names."""
import anyio
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("hang-server")


@server.tool()
async def hang(seconds: float = 600) -> str:
    """Sleeps for `seconds` (default 600) unless cancelled."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        with open(os.environ["HANG_MARKER"], "w") as f:
            f.write("cancelled")
        raise
    return "woke up"


@server.tool()
async def ping() -> str:
    """Answers pong."""
    return "pong"


@server.tool()
async def whoami() -> str:
    """Returns the value of the API_TOKEN environment variable (tests check it arrived)."""
    return os.environ.get("API_TOKEN", "<unset>")


@server.tool(name="files.read")
async def files_read(path: str) -> str:
    """A tool whose name has a dot, which hosts do not accept in tool names."""
    return f"read {path}"


if __name__ == "__main__":
    server.run()
