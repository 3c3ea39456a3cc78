"""The official OpenAI Python SDK against a real `agentloop serve` (driven by tests/openai.rs).

`python client.py main` runs Chat Completions (with and without a stream, a follow-up that
resends the history, a client tool's round trip), the Responses API (previous_response_id,
a stream, another user's id), models.list and the errors, then starts a background response
and prints its id as the last line. `python client.py after` (RESPONSE_ID set) polls that
response, which the server was killed during, to its end and streams it again from the middle.
A failed check exits non-zero, saying what was expected.
"""

import json
import os
import sys
import time

import openai
from openai import OpenAI

URL = os.environ["AGENTLOOP_URL"] + "/v1"
ann = OpenAI(base_url=URL, api_key=os.environ["KEY_ANN"], max_retries=0)
bob = OpenAI(base_url=URL, api_key=os.environ["KEY_BOB"], max_retries=0)


def check(condition, what):
    if not condition:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what.splitlines()[0][:100]}")


def raises(error, call, what):
    try:
        call()
    except error as raised:
        check(True, f"{what} ({type(raised).__name__}: {raised.message[:60]})")
        return raised
    except Exception as other:  # noqa: BLE001 - the check says what came instead
        check(False, f"{what}: {type(other).__name__} instead of {error.__name__}: {other}")
    check(False, f"{what}: no {error.__name__}")


def reasoning_of(message):
    return (message.model_extra or {}).get("reasoning_content") or ""


def main():
    ids = [model.id for model in ann.models.list()]
    check(ids == ["agentloop", "researcher"], f"models.list: the main agent and the public sub-agent, got {ids}")

    # Chat Completions, not streamed: the answer, the steps as reasoning, the run's usage.
    first = [{"role": "user", "content": "chain two echoes"}]
    done = ann.chat.completions.create(model="agentloop", messages=first)
    message = done.choices[0].message
    check(message.content == "Chained: one, then two.", f"the answer, got {done}")
    check(done.choices[0].finish_reason == "stop", "finish_reason stop")
    check("echo" in reasoning_of(message), f"the tool calls as reasoning_content: {reasoning_of(message)!r}")
    usage = done.usage
    check(usage.prompt_tokens > 0 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, f"usage: {usage}")

    # The whole history again, with the next question: the same session, nothing twice.
    history = first + [{"role": "assistant", "content": message.content},
                       {"role": "user", "content": "again: what did I ask?"}]
    follow = ann.chat.completions.create(model="agentloop", messages=history)
    answer = follow.choices[0].message.content
    check(answer == "Earlier you asked: chain two echoes", f"the session's history, once: {answer!r}")

    # Streamed, with usage; then with reasoning off.
    content, reasoning, finish, usage, objects = "", "", None, None, set()
    stream = ann.chat.completions.create(
        model="agentloop", messages=[{"role": "user", "content": "chain in a stream"}],
        stream=True, stream_options={"include_usage": True})
    for chunk in stream:
        objects.add(chunk.object)
        usage = chunk.usage or usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
            finish = choice.finish_reason or finish
    check(objects == {"chat.completion.chunk"}, f"chunks: {objects}")
    check(content == "Chained: one, then two.", f"the streamed answer: {content!r}")
    check("echo" in reasoning, f"the streamed steps: {reasoning!r}")
    check(finish == "stop" and usage is not None and usage.total_tokens > 0, f"finish {finish}, usage {usage}")
    quiet = ann.chat.completions.create(
        model="agentloop", messages=[{"role": "user", "content": "chain quietly"}],
        stream=True, extra_headers={"X-Reasoning": "false"})
    chunks = list(quiet)
    check(not any((c.delta.model_extra or {}).get("reasoning_content") for k in chunks for c in k.choices),
          "no reasoning_content with X-Reasoning: false")

    # A client tool: the completion ends with its call; the tool message continues the run.
    tools = [{"type": "function", "function": {
        "name": "pick_color", "description": "Lets the user pick a color",
        "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}}}}]
    messages = [{"role": "user", "content": "frontend: pick a color"}]
    paused = ann.chat.completions.create(model="agentloop", messages=messages, tools=tools)
    check(paused.choices[0].finish_reason == "tool_calls", f"finish_reason tool_calls: {paused}")
    call = paused.choices[0].message.tool_calls[0]
    check(call.function.name == "pick_color" and json.loads(call.function.arguments) == {"hint": "warm"},
          f"the call: {call}")
    messages.append(paused.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "teal"})
    picked = ann.chat.completions.create(model="agentloop", messages=messages, tools=tools)
    check(picked.choices[0].message.content == "The page picked: teal", f"the result reached the model: {picked}")

    # A conversation named by the X-Session-Id header: only the new question is sent.
    named = {"X-Session-Id": "support-1"}
    ann.chat.completions.create(model="agentloop", messages=[{"role": "user", "content": "named first"}],
                                extra_headers=named)
    second = ann.chat.completions.create(model="agentloop", messages=[{"role": "user", "content": "again: named?"}],
                                         extra_headers=named)
    check(second.choices[0].message.content == "Earlier you asked: named first", f"X-Session-Id: {second}")

    # A public sub-agent as the model.
    helped = ann.chat.completions.create(model="researcher", messages=[{"role": "user", "content": "research this"}])
    check(helped.model == "researcher" and helped.choices[0].message.content == "You asked: research this", f"{helped}")

    # Errors in OpenAI's shape.
    raises(openai.AuthenticationError, lambda: OpenAI(base_url=URL, api_key="not-a-key", max_retries=0).models.list(),
           "a bad key")
    raises(openai.NotFoundError, lambda: ann.chat.completions.create(model="gpt-nothing", messages=first),
           "an unknown model")
    # A typed answer: the content is JSON valid against the schema.
    ticket = {"type": "object", "properties": {"title": {"type": "string"}, "priority": {"type": "integer"}},
              "required": ["title", "priority"]}
    typed = ann.chat.completions.create(
        model="agentloop", messages=[{"role": "user", "content": "file a ticket: checkout is down"}],
        response_format={"type": "json_schema", "json_schema": {"name": "ticket", "schema": ticket}})
    check(json.loads(typed.choices[0].message.content) == {"title": "Checkout is down", "priority": 1},
          f"typed answer: {typed.choices[0].message.content!r}")
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}
    refused = raises(openai.BadRequestError,
                     lambda: ann.chat.completions.create(model="agentloop", messages=first, response_format=bad),
                     "a response_format schema that does not compile")
    check(refused.param == "response_format", f"{refused.body}")

    # Responses: a response, the next one after it, retrieved, streamed, another user's.
    response = ann.responses.create(model="agentloop", input="chain via responses")
    check(response.status == "completed" and response.output_text == "Chained: one, then two.", f"{response}")
    check(response.id.startswith("resp_") and response.usage.total_tokens > 0, f"{response.id} {response.usage}")
    after = ann.responses.create(model="agentloop", input="again: what did I ask?", previous_response_id=response.id,
                                 instructions="Answer in one line.")
    check(after.output_text == "Earlier you asked: chain via responses", f"previous_response_id: {after.output_text!r}")
    got = ann.responses.retrieve(response.id)
    check(got.status == "completed" and got.output_text == "Chained: one, then two.", f"retrieve: {got}")
    raises(openai.NotFoundError, lambda: bob.responses.retrieve(response.id), "another user's response id")
    events = list(ann.responses.create(model="agentloop", input="chain streamed", stream=True))
    kinds = [event.type for event in events]
    check(kinds[0] == "response.created" and kinds[-1] == "response.completed", f"{kinds}")
    check([event.sequence_number for event in events] == list(range(len(events))), "sequence numbers from 0")
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    check(text == "Chained: one, then two.", f"the streamed text: {text!r}")

    # A client tool of the Responses API: a function_call item, answered by function_call_output.
    functions = [{"type": "function", "name": "pick_color", "description": "Lets the user pick a color",
                  "parameters": {"type": "object", "properties": {"hint": {"type": "string"}}}}]
    asked = ann.responses.create(model="agentloop", input="frontend: pick a color", tools=functions)
    calls = [item for item in asked.output if item.type == "function_call"]
    check(len(calls) == 1 and calls[0].name == "pick_color", f"a function_call item: {asked.output}")
    answered = ann.responses.create(model="agentloop", previous_response_id=asked.id, tools=functions,
                                    input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                                            "output": "amber"}])
    check(answered.output_text == "The page picked: amber", f"function_call_output: {answered}")

    # A background response: answered at once; the test kills the server while it runs.
    background = ann.responses.create(model="agentloop", input="background job", background=True)
    check(background.status in ("queued", "in_progress"), f"background: {background.status}")
    print(json.dumps({"background": background.id}))


def after_restart():
    response_id = os.environ["RESPONSE_ID"]
    deadline = time.monotonic() + 60
    while True:
        response = ann.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            break
        check(time.monotonic() < deadline, f"the background response to end: {response.status}")
        time.sleep(0.2)
    check(response.status == "completed", f"completed after the restart: {response}")
    check(response.output_text == "Background answer after the restart.", f"{response.output_text!r}")
    events = list(ann.responses.retrieve(response_id, stream=True, starting_after=1))
    check(events[0].sequence_number == 2 and events[-1].type == "response.completed",
          f"streamed again after 1: {[(e.sequence_number, e.type) for e in events]}")


if __name__ == "__main__":
    {"main": main, "after": after_restart}[sys.argv[1]]()
