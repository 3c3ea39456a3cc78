"""The official MCP Python SDK (mcp 2.x) against agentloop's agents as MCP servers.

`client.py http` talks to `agentloop serve` at $AGENTLOOP_URL/mcp with the keys $KEY_ANN and
$KEY_BAD; `client.py stdio` starts $AGENTLOOP_BIN mcp-serve in $AGENTLOOP_DIR (an agent with an
output schema). $MCP_MODE is the client's `mode` ("auto": the newest protocol the server speaks;
"legacy": the initialize handshake). Each check prints a line; the last line is a JSON object of
what the Rust test checks further.
"""

import asyncio
import json
import os
import sys

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

MODE = os.environ.get("MCP_MODE", "auto")
found = {}


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


async def approve_every_call(context, params):
    """An elicitation form: an approval's calls all approved (a boolean per call); a question
    answered."""
    found.setdefault("forms", []).append(params.message)
    fields = params.requested_schema["properties"]
    if "answer" in fields:
        return types.ElicitResult(action="accept", content={"answer": "the blue one"})
    return types.ElicitResult(action="accept", content={name: True for name in fields})


def http_client(key):
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx2.Timeout(30, read=300),
    )


async def http():
    url = os.environ["AGENTLOOP_URL"] + "/mcp"

    # README: begin
    async with http_client(os.environ["KEY_ANN"]) as authorized:
        async with Client(
            streamable_http_client(url, http_client=authorized),
            mode=MODE,
            elicitation_callback=approve_every_call,
        ) as client:
            tools = await client.list_tools()
            steps = []

            async def progress(progress, total, message):
                steps.append(message)

            result = await client.call_tool(
                "agentloop", {"question": "chain two echoes"}, progress_callback=progress
            )
            print(result.content[0].text)
            # README: end
            names = sorted(tool.name for tool in tools.tools)
            check(names == ["agentloop", "researcher"], f"the agents are the tools: {names}")
            check(result.content[0].text == "Chained: one, then two.", "the agent answered")
            check(not result.is_error, "the result is no error")
            check(any(s and s.startswith("calling test.echo") for s in steps), f"progress: {steps}")
            check(any(s and s.startswith("test.echo done") for s in steps), "progress: tool done")
            session = result.meta["agentloop/session_id"]
            found["session"] = session
            found["protocol"] = client.session.protocol_version if client.session else None

            # The same session, continued by its id.
            again = await client.call_tool(
                "agentloop", {"question": "again: what did I ask?", "session_id": session}
            )
            check("chain two echoes" in again.content[0].text, "the session went on")
            check(again.meta["agentloop/session_id"] == session, "in the same session")

            # An approval, answered through the elicitation form.
            approved = await client.call_tool("agentloop", {"question": "approve the note"})
            check(not approved.is_error, f"the approval's run ended: {approved.content[0].text}")
            check(approved.content[0].text == "The tool said: recorded", "the approved call ran")
            check(len(found.get("forms", [])) == 1, f"one form was shown: {found.get('forms')}")
            found["approval_form"] = found["forms"][0]

            # A question of the agent, answered through a form.
            clarified = await client.call_tool("agentloop", {"question": "clarify the project"})
            check("the blue one" in clarified.content[0].text, f"the answer reached the model: {clarified}")
            check(found["forms"][-1] == "Which project do you mean?", "the question was the form's message")

            # A call cancelled while its run works cancels the run (the test checks it ended so).
            with anyio.CancelScope() as scope:

                async def cancel_at_the_sleep(progress, total, message):
                    if message and message.startswith("calling test.sleep"):
                        scope.cancel()

                await client.call_tool("agentloop", {"question": "slow run"}, progress_callback=cancel_at_the_sleep)
            check(scope.cancelled_caught, "the slow call was cancelled")

            # A public sub-agent.
            researched = await client.call_tool("researcher", {"question": "research this"})
            check(researched.content[0].text == "You asked: research this", "the sub-agent answered")

            # Bad arguments: a tool error the caller can repair.
            bad = await client.call_tool("agentloop", {"query": "no question"})
            check(bad.is_error and "question" in bad.content[0].text, "bad arguments are a tool error")

    # Without the elicitation capability: the result says how to answer; a follow-up answers.
    async with http_client(os.environ["KEY_ANN"]) as authorized:
        async with Client(streamable_http_client(url, http_client=authorized), mode=MODE) as client:
            waiting = await client.call_tool("agentloop", {"question": "approve another note"})
            text = waiting.content[0].text
            check("waits for approval" in text and "/input" in text, f"input is needed: {text}")
            session = waiting.meta["agentloop/session_id"]
            done = await client.call_tool("agentloop", {"question": "approve", "session_id": session})
            check(done.content[0].text == "The tool said: recorded", "the follow-up approved the call")

    # A bad key: 401 before MCP (the SDK raises its own error; the hook sees the status).
    statuses = []

    async def record(response):
        statuses.append(response.status_code)

    unauthorized = httpx2.AsyncClient(
        headers={"Authorization": "Bearer not-a-key"}, event_hooks={"response": [record]}
    )
    async with unauthorized:
        try:
            async with Client(streamable_http_client(url, http_client=unauthorized), mode=MODE) as client:
                await client.list_tools()
            refused = None
        except BaseException as error:  # the SDK raises from its task group
            refused = repr(error)
        check(refused is not None and statuses and set(statuses) == {401}, f"a bad key: {statuses} {refused}")

    print(json.dumps(found))


async def stdio():
    server = StdioServerParameters(
        command=os.environ["AGENTLOOP_BIN"],
        args=["mcp-serve", "--user", "desk"],
        cwd=os.environ["AGENTLOOP_DIR"],
    )
    async with Client(server, mode=MODE, elicitation_callback=approve_every_call) as client:
        tools = await client.list_tools()
        agent = next(tool for tool in tools.tools if tool.name == "agentloop")
        check(agent.output_schema["properties"]["n"]["type"] == "integer", "the typed agent's outputSchema")
        steps = []

        async def progress(progress, total, message):
            steps.append(message)

        result = await client.call_tool("agentloop", {"question": "chain two echoes"}, progress_callback=progress)
        check(result.structured_content == {"n": 5}, f"structuredContent: {result.structured_content}")
        check(json.loads(result.content[0].text) == {"n": 5}, "the value as text too")
        check(any(s and s.startswith("calling test.echo") for s in steps), f"progress: {steps}")

        approved = await client.call_tool("agentloop", {"question": "approve the note"})
        check(approved.structured_content == {"n": 5}, f"the approved run's value: {approved}")
        check(len(found.get("forms", [])) == 1, "one form was shown")
        found["session"] = approved.meta["agentloop/session_id"]
        found["protocol"] = client.session.protocol_version if client.session else None
    print(json.dumps(found))


async def relay():
    """A tool of the agent asks a question (its MCP server's elicitation): the form reaches this
    client in the call, and the answer goes back to the tool."""
    url = os.environ["AGENTLOOP_URL"] + "/mcp"

    async def fill_the_booking(context, params):
        found.setdefault("forms", []).append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with http_client(os.environ["KEY_ANN"]) as authorized:
        async with Client(
            streamable_http_client(url, http_client=authorized),
            mode="legacy",
            elicitation_callback=fill_the_booking,
        ) as client:
            result = await client.call_tool("agentloop", {"question": "book a table"})
            text = result.content[0].text
            check("booked Friday for Ada, 2 guests" in text, f"the tool's answer: {text}")
            check(found["forms"] == ["Who is the table on Friday for?"], f"the form: {found}")
    print(json.dumps(found))


if __name__ == "__main__":
    asyncio.run({"http": http, "stdio": stdio, "relay": relay}[sys.argv[1]]())
