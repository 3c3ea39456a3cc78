"""An MCP server written with the official Python SDK (mcp 2.x: MCPServer, formerly FastMCP),
which crates/agentloop-mcp/tests/python_sdk.rs starts over stdio (no argument) or over
streamable HTTP (`--http PORT`): structured output, progress and logs, roots, resources and
prompts."""

import sys

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("agentloop-python-test")


class Weather(BaseModel):
    temperature: float
    conditions: str


@server.tool()
def weather(city: str) -> Weather:
    """The weather of a city, as a structured result."""
    return Weather(temperature=18.5, conditions=f"Windy in {city}")


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Takes the given steps, reporting each with notifications/progress and logging."""
    await ctx.info(f"starting {count} steps")
    for step in range(1, count + 1):
        await ctx.report_progress(step, count, f"step {step}")
    await ctx.warning(f"took {count} steps")
    return f"took {count} steps"


@server.tool()
async def roots(ctx: Context) -> str:
    """The client's roots (roots/list), one URI per line."""
    listed = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in listed.roots)


@server.resource("memo://today", mime_type="text/plain")
def today() -> str:
    """Today's memo."""
    return "buy milk"


@server.resource("memo://day/{day}")
def memo(day: str) -> str:
    """The memo of a day."""
    return f"memo for {day}"


@server.prompt()
def review(code: str) -> str:
    """Asks for a review of some code."""
    return f"Review this code:\n{code}"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        import anyio

        anyio.run(lambda: server.run_streamable_http_async(port=int(sys.argv[2])))
    else:
        server.run()
