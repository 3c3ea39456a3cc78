"""The official A2A Python SDK (a2a-sdk 1.x) against a real `agentloop serve`.

Run by tests/a2a.rs: AGENTLOOP_URL is the server, KEY_ANN and KEY_BOB the keys of two users.
Each check prints one line; the last line is JSON the Rust test reads.
"""

import asyncio
import json
import os
import sys

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text, new_text_message
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskNotFoundError,
    TaskState,
)
from google.protobuf.struct_pb2 import Struct

URL = os.environ["AGENTLOOP_URL"]


def http(key):
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)


async def client(key, url=None, **config):
    return await create_client(url or URL, client_config=ClientConfig(httpx_client=http(key), **config))


def ask(text, context_id=None, task_id=None, output=None):
    message = new_text_message(text, context_id=context_id, task_id=task_id, role=Role.ROLE_USER)
    if output is not None:
        message.metadata.update({"output": output})
    return SendMessageRequest(message=message)


def state(task):
    return TaskState.Name(task.status.state)


async def collect(stream):
    """Every StreamResponse of a stream, and the answer text assembled from its artifact updates."""
    events, answer = [], ""
    async for event in stream:
        events.append(event)
        if event.HasField("artifact_update"):
            text = get_artifact_text(event.artifact_update.artifact, "")
            answer = answer + text if event.artifact_update.append else text
    return events, answer


def last_state(events):
    for event in reversed(events):
        if event.HasField("status_update"):
            return TaskState.Name(event.status_update.status.state)
        if event.HasField("task"):
            return state(event.task)
    return None


async def main():
    ann, bob = os.environ["KEY_ANN"], os.environ["KEY_BOB"]
    out = {}

    # The card: discovered at /.well-known/agent-card.json, no key needed.
    plain = await client(ann, streaming=False)
    card = await plain.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert card.name == "agentloop-test", card
    assert card.capabilities.streaming, card
    assert "bearer" in card.security_schemes, card
    print(f"card: {card.name}, {card.supported_interfaces[0].url}, skills {[s.id for s in card.skills]}")

    # SendMessage: the task once it ended, its answer an artifact.
    [response] = [r async for r in plain.send_message(ask("chain two echoes"))]
    task = response.task
    assert state(task) == "TASK_STATE_COMPLETED", task
    assert get_artifact_text(task.artifacts[0]) == "Chained: one, then two.", task
    context = task.context_id
    print(f"send: {state(task)}: {get_artifact_text(task.artifacts[0])}")

    # SendStreamingMessage in the same context: the task, updates, the answer in chunks.
    streaming = await client(ann)
    events, answer = await collect(streaming.send_message(ask("again: what did I ask?", context_id=context)))
    assert events[0].HasField("task"), events[0]
    assert last_state(events) == "TASK_STATE_COMPLETED", events[-1]
    assert "chain two echoes" in answer, answer
    followed = events[0].task.id
    assert events[0].task.context_id == context
    print(f"stream: {len(events)} events, {answer!r}")

    # GetTask.
    got = await plain.get_task(GetTaskRequest(id=followed))
    assert state(got) == "TASK_STATE_COMPLETED" and get_artifact_text(got.artifacts[0]) == answer, got
    print(f"get: {state(got)}")

    # Another user's task is not found; a bad key is refused.
    bobs = await client(bob, streaming=False)
    try:
        await bobs.get_task(GetTaskRequest(id=followed))
        raise AssertionError("bob read ann's task")
    except TaskNotFoundError:
        print("isolation: another user's task is not found")
    bad = await client("not-a-key", streaming=False)
    try:
        await bad.get_task(GetTaskRequest(id=followed))
        raise AssertionError("a bad key was taken")
    except A2AClientError as error:
        print(f"bad key: {type(error).__name__}")

    # A typed answer: metadata.output, the answer a DataPart.
    schema = {"type": "object", "properties": {"title": {"type": "string"}, "priority": {"type": "integer"}},
              "required": ["title", "priority"]}
    [response] = [r async for r in plain.send_message(ask("file a ticket", output={"schema": schema, "name": "ticket"}))]
    [value] = get_data_parts(response.task.artifacts[0].parts)
    assert value["title"] == "Checkout is down" and value["priority"] == 1, value
    print(f"typed: {value}")

    # An approval through input-required, answered by the next message on the task.
    events, _ = await collect(streaming.send_message(ask("approve this note")))
    assert last_state(events) == "TASK_STATE_INPUT_REQUIRED", events[-1]
    waiting = [e.status_update for e in events if e.HasField("status_update")][-1]
    [pending] = get_data_parts(waiting.status.message.parts)
    assert pending["kind"] == "approval" and pending["calls"][0]["tool"] == "test.record", pending
    approved_task = waiting.task_id
    again = await plain.get_task(GetTaskRequest(id=approved_task))
    assert state(again) == "TASK_STATE_INPUT_REQUIRED", again
    events, answer = await collect(streaming.send_message(ask("yes", context_id=waiting.context_id, task_id=approved_task)))
    assert last_state(events) == "TASK_STATE_COMPLETED", events[-1]
    assert events[0].task.id == approved_task
    assert answer.startswith("The tool said:"), answer
    print(f"approval: input-required, then {answer!r}")

    # A question (ask_user) through input-required.
    events, _ = await collect(streaming.send_message(ask("clarify my project")))
    asked = [e.status_update for e in events if e.HasField("status_update")][-1]
    assert get_message_text(asked.status.message).startswith("Which project"), asked
    events, answer = await collect(streaming.send_message(ask("Apollo", task_id=asked.task_id)))
    assert answer.startswith("You told me:") and "Apollo" in answer, answer
    print(f"clarification: {answer!r}")

    # CancelTask: a slow task begun without waiting (polling), cancelled.
    polling = await client(ann, streaming=False, polling=True)
    [response] = [r async for r in polling.send_message(ask("slow one to cancel"))]
    slow = response.task.id
    assert state(response.task) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), response.task
    cancelled = await plain.cancel_task(CancelTaskRequest(id=slow))
    assert state(cancelled) == "TASK_STATE_CANCELED", cancelled
    print(f"cancel: {state(cancelled)}")

    # SubscribeToTask mid-run: a stream left after its first tool call, then followed again.
    seen = []
    async for event in streaming.send_message(ask("slow one to follow")):
        if event.HasField("task"):
            followed = event.task.id
        if event.HasField("status_update") and event.status_update.status.HasField("message"):
            seen.append(event.status_update.status.message.message_id)
            break
    events, answer = await collect(streaming.subscribe(SubscribeToTaskRequest(id=followed)))
    assert events[0].HasField("task") and events[0].task.id == followed, events[0]
    snapshot = int(events[0].task.metadata["agentloop"]["seq"])
    assert last_state(events) == "TASK_STATE_COMPLETED", events[-1]
    assert answer == "Finished the slow run.", answer
    later = [e.status_update.status.message.message_id for e in events[1:]
             if e.HasField("status_update") and e.status_update.status.HasField("message")]
    assert len(later) == len(set(later)), later
    print(f"resubscribe: {len(events)} events after the snapshot, {answer!r}")
    out["subscribed"] = {"task": followed, "before": seen, "after": later, "snapshot": snapshot}

    print(json.dumps(out))


async def push():
    """A task told to push its state changes to PUSH_URL, begun without waiting for it."""
    ann = os.environ["KEY_ANN"]
    config = TaskPushNotificationConfig(id="hook", url=os.environ["PUSH_URL"], token="secret-token")
    polling = await client(ann, streaming=False, polling=True, push_notification_config=config)
    [response] = [r async for r in polling.send_message(ask("push me when done"))]
    task = response.task.id
    plain = await client(ann, streaming=False)
    # The configs of the task: the one set with the message, one more set, read, listed, deleted.
    got = await plain.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=task, id="hook"))
    assert got.url == os.environ["PUSH_URL"] and got.token == "secret-token", got
    extra = TaskPushNotificationConfig(task_id=task, id="extra", url=os.environ["PUSH_URL"] + "?extra")
    await plain.create_task_push_notification_config(extra)
    listed = await plain.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task))
    assert sorted(c.id for c in listed.configs) == ["extra", "hook"], listed
    await plain.delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest(task_id=task, id="extra"))
    listed = await plain.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task))
    assert [c.id for c in listed.configs] == ["hook"], listed
    print(f"push: task {task} with configs set, read, listed and deleted")
    print(json.dumps({"task": task}))


async def across():
    """A task begun on one instance (AGENTLOOP_URL), followed on another (OTHER_URL)."""
    ann = os.environ["KEY_ANN"]
    polling = await client(ann, streaming=False, polling=True)
    [response] = [r async for r in polling.send_message(ask("slow one to follow elsewhere"))]
    task = response.task.id
    other = await client(ann, url=os.environ["OTHER_URL"])
    events, answer = await collect(other.subscribe(SubscribeToTaskRequest(id=task)))
    assert events[0].HasField("task") and events[0].task.id == task, events[0]
    snapshot = int(events[0].task.metadata["agentloop"]["seq"])
    assert last_state(events) == "TASK_STATE_COMPLETED", events[-1]
    assert answer == "Finished the slow run.", answer
    later = [e.status_update.status.message.message_id for e in events[1:]
             if e.HasField("status_update") and e.status_update.status.HasField("message")]
    print(f"across: followed on the other instance from seq {snapshot}: {answer!r}")
    print(json.dumps({"task": task, "after": later, "snapshot": snapshot}))


PHASES = {"push": push, "across": across}
asyncio.run(PHASES.get(sys.argv[1] if len(sys.argv) > 1 else "", main)())
