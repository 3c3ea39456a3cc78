"""The floor of the performance issue's comparison: an agent loop written by hand in Python, with
no framework, answering the load bench's runs as `agentloop serve` does.

`POST /v1/runs` with `{"query": ..., "stream": false}`: the loop calls the LLM (OpenAI Chat
Completions, not streaming, with an httpx.AsyncClient of its own while it runs), runs each tool
call it asks for in the process (`test__echo`, instant), sends the results back, and answers with
the LLM's last reply as JSON once it asks for no tool. No store, no checks, no events: what any
agent costs at least in Python. `GET /metrics` says how many runs are in progress, as the bench
reads it off agentloop.

    python floor.py --llm http://127.0.0.1:PORT/v1 --model scripted

It prints `floor listening on http://HOST:PORT` on stderr and a placeholder API key on stdout
(the bench reads both, as from `agentloop serve`), and exits 0 on SIGTERM. The HTTP server is
asyncio's streams with HTTP/1.1 keep-alive, `Content-Length` and chunked request bodies: just
what the bench sends.

A client per run in flight, kept for the next run, not one shared by all: httpx's connection
pool works through its connections for every request it places, which made 200 runs at once take
16.5 s of wall time (14 s of CPU) for 3 s of LLM time; with a client per run, 3.8 s (1 s of CPU).
Kept, not made per run: a new client and its connection cost a run one after another 2 ms of CPU
more (5.75 against 3.6 ms).
"""

import argparse
import asyncio
import json
import signal
import ssl
import sys

import httpx

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "test__echo",
            "description": "Echoes its text.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
]
MAX_TURNS = 10
# One TLS context for every client: httpx loads the system's certificates for each client that
# is not given one (some 25 ms of CPU).
TLS = ssl.create_default_context()
# Clients no run uses now, each with its keep-alive connection to the LLM.
idle_clients: list = []

active = 0


def echo(arguments: str) -> str:
    return json.loads(arguments)["text"]


async def agent_loop(url: str, model: str, query: str) -> dict:
    llm = idle_clients.pop() if idle_clients else httpx.AsyncClient(verify=TLS, timeout=120)
    try:
        return await chat(llm, url, model, query)
    finally:
        idle_clients.append(llm)


async def chat(llm: httpx.AsyncClient, url: str, model: str, query: str) -> dict:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": query},
    ]
    tools_used = 0
    for _ in range(MAX_TURNS):
        response = await llm.post(
            url, json={"model": model, "messages": messages, "tools": TOOLS, "stream": False}
        )
        response.raise_for_status()
        message = response.json()["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        if not calls:
            return {
                "status": "completed",
                "answer": message.get("content") or "",
                "agent_metadata": {"tools_used": tools_used},
            }
        messages.append(
            {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
        )
        for call in calls:
            function = call["function"]
            try:
                result = echo(function["arguments"]) if function["name"] == "test__echo" else None
                content = result if result is not None else f"unknown tool {function['name']}"
            except (ValueError, KeyError) as error:
                content = f"bad arguments: {error}"
            tools_used += 1
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return {"status": "failed", "error": "too many turns", "agent_metadata": {"tools_used": tools_used}}


async def read_body(reader: asyncio.StreamReader, headers: dict) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readline()).split(b";")[0].strip(), 16)
            if size == 0:
                await reader.readline()
                return body
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    return await reader.readexactly(int(headers.get("content-length", "0")))


def answer(status: str, content_type: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def handle(request_line: bytes, headers: dict, body: bytes, url, model) -> bytes:
    global active
    method, path, _ = request_line.decode().split(" ", 2)
    if method == "GET" and path == "/metrics":
        return answer("200 OK", "text/plain", f"agentloop_runs_active {active}\n".encode())
    if method != "POST" or path != "/v1/runs":
        return answer("404 Not Found", "application/json", b'{"error":"not found"}')
    try:
        query = json.loads(body)["query"]
    except (ValueError, KeyError, TypeError):
        return answer("400 Bad Request", "application/json", b'{"error":"no query"}')
    active += 1
    try:
        outcome = await agent_loop(url, model, query)
    except httpx.HTTPError as error:
        outcome = {"status": "failed", "error": str(error), "agent_metadata": {"tools_used": 0}}
    finally:
        active -= 1
    return answer("200 OK", "application/json", json.dumps(outcome).encode())


async def serve_connection(reader, writer, url, model):
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                break
            headers = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await read_body(reader, headers)
            writer.write(await handle(request_line.strip(), headers, body, url, model))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", required=True, help="the LLM's base URL, ending in /v1")
    parser.add_argument("--model", default="scripted")
    parser.add_argument("--listen", default="127.0.0.1:0")
    args = parser.parse_args()
    url = args.llm.rstrip("/") + "/chat/completions"
    host, port = args.listen.rsplit(":", 1)
    server = await asyncio.start_server(
        lambda r, w: serve_connection(r, w, url, args.model), host, int(port), backlog=4096
    )
    bound = server.sockets[0].getsockname()
    print(f"floor listening on http://{bound[0]}:{bound[1]}", file=sys.stderr, flush=True)
    print("floor-has-no-keys", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
