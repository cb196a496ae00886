"""The official Python MCP SDK against a running `switchboard serve`.

Usage: check.py URL READER_TOKEN OPS_TOKEN HIDDEN_RUN_ID

- lists tools as two tokens with different grants: they differ as the grants say;
- calls runs_list (a structured object with a "runs" list);
- calls runs_get on a run the reader may not read: a tool error whose text is not_found's;
- calls ask (a run id back), and ask with wait (the echo agent's answer).

Exits non-zero, naming the check, on the first failure.
"""

import asyncio
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import PaginatedRequestParams


def check(ok, what):
    if not ok:
        print(f"mcp-client-check: FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"  ok  {what}")


async def session_for(url, token, work):
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)


async def all_tools(session):
    names, cursor = [], None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        names += [t.name for t in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return names


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(url, reader, ops, hidden):
    reader_tools = await session_for(url, reader, all_tools)
    ops_tools = await session_for(url, ops, all_tools)
    print(f"  reader tools: {', '.join(reader_tools)}")
    print(f"  ops tools:    {', '.join(ops_tools)}")
    check("runs_list" in reader_tools and "runs_get" in reader_tools, "the reader lists runs_list and runs_get")
    check("ask" not in reader_tools and "runs_stop" not in reader_tools, "the reader is not shown ask or runs_stop")
    check("ask" in ops_tools and "runs_stop" in ops_tools, "the ops token is shown ask and runs_stop")
    broker_tools = {"read_file", "write_file", "shell", "http_fetch", "git", "restrict_self", "widen_self"}
    check(not broker_tools & set(reader_tools + ops_tools),
          "the broker's tools are never offered on the public /mcp (only on a run's own socket)")

    async def reader_work(session):
        listed = await session.call_tool("runs_list", {"status": "all"})
        check(not listed.is_error, "runs_list succeeds")
        sc = listed.structured_content
        check(isinstance(sc, dict) and isinstance(sc.get("runs"), list), "runs_list's structuredContent is an object with runs")
        check(hidden not in [r["id"] for r in sc["runs"]], "runs_list leaves out the run the reader may not read")
        denied = await session.call_tool("runs_get", {"id": hidden})
        missing = await session.call_tool("runs_get", {"id": "01JZZZZZZZZZZZZZZZZZZZZZZZ"})
        check(denied.is_error, "runs_get of a hidden run is a tool error")
        check("not found" in text_of(denied), f"its text is not_found's: {text_of(denied)!r}")
        check(text_of(denied).replace(hidden, "<ID>") == text_of(missing).replace("01JZZZZZZZZZZZZZZZZZZZZZZZ", "<ID>"),
              "a denied runs_get reads exactly like a missing one")

    await session_for(url, reader, reader_work)

    async def ops_work(session):
        started = await session.call_tool("ask", {"request": "hello from python"})
        check(not started.is_error, f"ask starts a run: {text_of(started)!r}")
        check(bool(started.structured_content.get("run_id")), "ask returns a run_id")
        waited = await session.call_tool("ask", {"request": "answer me", "wait": True})
        check(not waited.is_error and "answer me" in text_of(waited), f"ask with wait answers: {text_of(waited)!r}")
        got = await session.call_tool("runs_get", {"id": waited.structured_content["run_id"]})
        check(not got.is_error, "the ops token reads the run it started")

    await session_for(url, ops, ops_work)
    print("mcp-client-check: the official Python SDK client passed every check")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
