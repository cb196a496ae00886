"""A command agent that works only through the broker's tools over MCP, with the official
Python MCP SDK: run by Switchboard in its sandbox (no network but the run's proxy), it reaches
the run's own endpoint at $SWITCHBOARD_BROKER_MCP_URL, lists the tools, and calls `shell` and
`read_file`, each decided by the broker as in the openai loop. It prints one line per call;
scripts/mcp-client-check.sh reads them (and the run's events)."""

import asyncio
import os

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def text(result):
    said = " ".join(c.text for c in result.content if getattr(c, "text", None))
    return ("error " if result.is_error else "") + said.replace("\n", " ").strip()


async def main():
    url = os.environ["SWITCHBOARD_BROKER_MCP_URL"]
    async with streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            print("tools:", ",".join(sorted(t.name for t in tools.tools)))
            shell = await session.call_tool(
                "shell", {"command": "echo from-the-shell > out.txt && cat out.txt", "cwd": "/workspace"})
            print("shell:", text(shell))
            read_back = await session.call_tool("read_file", {"path": "/workspace/out.txt"})
            print("read_file:", text(read_back))
            outside = await session.call_tool("read_file", {"path": "/etc/passwd"})
            print("outside:", text(outside))
            pushed = await session.call_tool("git", {"subcommand": "push", "args": [], "cwd": "/workspace"})
            print("push:", text(pushed))


asyncio.run(main())
