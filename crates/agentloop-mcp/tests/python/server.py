"""An MCP server written with the official Python SDK (mcp 2.x: MCPServer, formerly FastMCP),
which crates/agentloop-mcp/tests/python_sdk.rs starts over stdio (no argument) or over
streamable HTTP (`--http PORT`): structured output, progress and logs, roots, resources and
prompts, elicitation and sampling."""

import sys
import warnings

from pydantic import BaseModel, Field

from mcp import types
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


class Booking(BaseModel):
    name: str = Field(description="Who the table is for")
    guests: int = Field(default=2, description="How many people")
    terrace: bool = False


@server.tool()
async def book(day: str, ctx: Context) -> str:
    """Books a table for a day, asking the user who for (elicitation, form mode)."""
    answer = await ctx.elicit(f"Who is the table on {day} for?", Booking)
    if answer.action != "accept":
        return f"not booked: {answer.action}"
    booking = answer.data
    place = "terrace" if booking.terrace else "inside"
    return f"booked {day} for {booking.name}, {booking.guests} guests, {place}"


@server.tool()
async def pay(amount: int, ctx: Context) -> str:
    """Pays an amount, sending the user to a payment page (elicitation, URL mode)."""
    answer = await ctx.elicit_url(
        f"Pay {amount} EUR on the payment page", f"https://pay.example/{amount}", f"pay-{amount}"
    )
    return f"payment: {answer.action}"


@server.tool()
async def haiku(topic: str, ctx: Context, max_tokens: int = 100) -> str:
    """Writes a haiku about a topic with the client's model (sampling/createMessage)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = await ctx.session.create_message(
                [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"A haiku about {topic}"))],
                max_tokens=max_tokens,
                system_prompt="You write haiku.",
                related_request_id=ctx.request_id,
            )
        except Exception as error:  # the client refused: the tool says why
            return f"no haiku: {error}"
    return f"haiku by {result.model}: {result.content.text}"


@server.tool()
async def wait(marker: str, seconds: float = 60) -> str:
    """Waits, writing "started" to the file `marker`, then "cancelled" if the client cancels
    the call (notifications/cancelled) before it ends."""
    import anyio

    with open(marker, "w") as file:
        file.write("started")
    try:
        await anyio.sleep(seconds)
    except BaseException:
        with open(marker, "w") as file:
            file.write("cancelled")
        raise
    return "waited"


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
