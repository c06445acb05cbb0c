"""Drives car-mcp (a command: stdio) or car-server (an http:// URL: streamable HTTP) with the
official MCP Python SDK and prints what it saw as JSON."""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def transport(server: str):
    if server.startswith("http://"):
        return streamable_http_client(server)
    # The SDK passes only a minimal environment by default; CAR_HOME must reach the server.
    params = StdioServerParameters(command=server, args=[], env=dict(os.environ), cwd=os.getcwd())
    return stdio_client(params)


async def main(server: str) -> None:
    async with transport(server) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            added = await session.call_tool(
                "memory_add_fact",
                {"subject": "deploys", "body": "Deploys need a green canary first"},
            )
            recalled = await session.call_tool("memory_query", {"query": "canary deploys", "k": 3})
            bad = await session.call_tool("memory_query", {"query": "x", "k": 500})
            prompt = await session.get_prompt("car_context", {"query": "deploy"})
            info = getattr(init, "server_info", None) or getattr(init, "serverInfo")
            structured = lambda r: getattr(r, "structured_content", None) or getattr(r, "structuredContent")
            is_error = lambda r: getattr(r, "is_error", None) if hasattr(r, "is_error") else getattr(r, "isError")
            print(json.dumps({
                "server": info.name,
                "tools": [t.name for t in tools.tools],
                "added": structured(added),
                "recalled": structured(recalled)["results"],
                "error_is_error": is_error(bad),
                "prompt": prompt.messages[0].content.text,
            }))


asyncio.run(main(sys.argv[1]))
