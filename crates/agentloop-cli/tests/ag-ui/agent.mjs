// AG-UI's own client against a real `agentloop serve` (started by tests/ag_ui.rs): HttpAgent
// sends RunAgentInput, checks the event sequence itself (verifyEvents) and builds the
// conversation from the events, as CopilotKit does. Exits non-zero on the first failed check.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const base = process.env.AGENTLOOP_URL;
const key = process.env.KEY_ANN;
const otherKey = process.env.KEY_BOB;
const url = `${base}/v1/ag-ui`;

const agent = (threadId, apiKey = key) =>
  new HttpAgent({ url, threadId, headers: { Authorization: `Bearer ${apiKey}` } });

const user = (content) => ({ id: randomUUID(), role: "user", content });

/// Runs `agent` and returns the types of the events it received.
async function run(agent, parameters = {}) {
  const events = [];
  await agent.runAgent(parameters, {
    onEvent: ({ event }) => {
      events.push(event);
    },
  });
  return events;
}

const types = (events) => events.map((event) => event.type);
const lastText = (agent) => agent.messages.filter((m) => m.role === "assistant" && m.content).at(-1)?.content;
const toolCalls = (agent) => agent.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []));
const finished = (events) => events.find((event) => event.type === "RUN_FINISHED");

async function check(name, body) {
  try {
    await body();
    console.log(`ok - ${name}`);
  } catch (error) {
    console.log(`not ok - ${name}`);
    console.error(error);
    process.exit(1);
  }
}

// A UUID is the session's id itself, for every user (a text id names a thread of the user's own).
const thread = randomUUID();
const first = agent(thread);

await check("a chained run arrives as tool calls with their results and the answer as text", async () => {
  first.addMessage(user("chain two echoes"));
  const events = await run(first);
  const seen = types(events);
  assert.equal(seen[0], "RUN_STARTED");
  assert.equal(seen.at(-1), "RUN_FINISHED");
  assert.equal(seen.filter((t) => t === "STEP_STARTED").length, 3, seen.join(" "));
  assert.equal(seen.filter((t) => t === "TOOL_CALL_RESULT").length, 2, seen.join(" "));
  assert.deepEqual(
    toolCalls(first).map((call) => [call.function.name, JSON.parse(call.function.arguments).text]),
    [
      ["test.echo", "one"],
      ["test.echo", "two"],
    ],
  );
  const results = first.messages.filter((m) => m.role === "tool").map((m) => m.content);
  assert.equal(results.length, 2);
  assert.match(results[0], /one/);
  assert.match(results[1], /two/);
  // The text the model wrote beside its first call is the calls' assistant message.
  const beside = first.messages.find((m) => m.role === "assistant" && m.toolCalls?.length);
  assert.equal(beside.content, "Looking it up.");
  assert.equal(lastText(first), "Chained: one, then two.");
  assert.deepEqual(finished(events).outcome, { type: "success" });
  assert.ok(events.some((e) => e.type === "CUSTOM" && e.name === "agentloop.usage"));
});

await check("a second request on the same thread continues the conversation", async () => {
  // The client's copy of the history is not trusted: a made-up earlier message is ignored.
  first.setMessages([user("forged question"), ...first.messages, user("again: what did I ask?")]);
  await run(first);
  assert.equal(lastText(first), "Earlier you asked: chain two echoes");
});

await check("a bad key is refused", async () => {
  const stranger = agent(`bad-${thread}`, "not-a-key");
  stranger.addMessage(user("hello"));
  await assert.rejects(run(stranger), /401/);
});

await check("another user's thread is not found", async () => {
  const other = agent(thread, otherKey);
  other.addMessage(user("hello"));
  await assert.rejects(run(other), /404/);
});

for (const approved of [true, false]) {
  const word = approved ? "approve" : "deny";
  await check(`an approval round trip (${word}): an interrupt, answered with resume`, async () => {
    const asking = agent(`${word}-${thread}`);
    asking.addMessage(user(`${word} the note`));
    const events = await run(asking);
    assert.equal(finished(events).outcome.type, "interrupt");
    const [interrupt] = asking.pendingInterrupts;
    assert.equal(interrupt.reason, "agentloop:approval");
    const [call] = toolCalls(asking);
    assert.equal(call.function.name, "test.record");
    assert.equal(interrupt.toolCallId, call.id);
    assert.ok(events.some((e) => e.type === "CUSTOM" && e.name === "agentloop.input_required"));
    const resume = [
      approved
        ? { interruptId: interrupt.id, status: "resolved", payload: { approved: true } }
        : { interruptId: interrupt.id, status: "cancelled" },
    ];
    const after = await run(asking, { resume });
    assert.deepEqual(finished(after).outcome, { type: "success" });
    const result = asking.messages.find((m) => m.role === "tool" && m.toolCallId === call.id);
    if (approved) {
      assert.equal(result.content, "recorded");
      assert.equal(lastText(asking), "The tool said: recorded");
    } else {
      assert.match(result.content, /denied/);
      assert.match(lastText(asking), /^The tool said: /);
      assert.notEqual(lastText(asking), "The tool said: recorded");
    }
    assert.equal(asking.pendingInterrupts.length, 0);
  });
}

await check("a question is the assistant's text and an interrupt; resume answers it", async () => {
  const asking = agent(`clarify-${thread}`);
  asking.addMessage(user("clarify the project"));
  await run(asking);
  assert.equal(lastText(asking), "Which project do you mean?");
  const [interrupt] = asking.pendingInterrupts;
  assert.equal(interrupt.reason, "agentloop:clarification");
  assert.equal(interrupt.message, "Which project do you mean?");
  await run(asking, {
    resume: [{ interruptId: interrupt.id, status: "resolved", payload: { answer: "Project X" } }],
  });
  assert.equal(lastText(asking), 'You told me: {"answer":"Project X"}');
});

await check("a frontend tool: its call ends the run pending, its result continues it", async () => {
  const tools = [
    {
      name: "pick_color",
      description: "Lets the user pick a color in the page",
      parameters: { type: "object", properties: { hint: { type: "string" } }, required: ["hint"] },
    },
  ];
  const page = agent(`frontend-${thread}`);
  page.addMessage(user("frontend: pick a color"));
  const events = await run(page, { tools });
  const [call] = toolCalls(page);
  assert.equal(call.function.name, "pick_color");
  assert.deepEqual(JSON.parse(call.function.arguments), { hint: "warm" });
  assert.deepEqual(finished(events).outcome, { type: "success", pendingToolCallIds: [call.id] });
  assert.ok(!events.some((e) => e.type === "TOOL_CALL_RESULT"), "the server did not run it");
  // What a frontend does with the call: runs it, adds the result, runs the agent again.
  page.addMessage({ id: randomUUID(), role: "tool", toolCallId: call.id, content: "orange" });
  const after = await run(page, { tools });
  assert.equal(finished(after).outcome.type, "success");
  assert.equal(lastText(page), "The page picked: orange");
  // The client's result is not sent back to it.
  assert.equal(page.messages.filter((m) => m.role === "tool" && m.toolCallId === call.id).length, 1);
});

await check("the same runId again re-attaches to the run in progress", async () => {
  const threadId = `slow-${thread}`;
  const runId = randomUUID();
  const question = user("slow run please");
  // A first connection, left while the run is in its slow tool (as a reloaded page does).
  const abort = new AbortController();
  const response = await fetch(url, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify({ threadId, runId, messages: [question], tools: [], context: [], state: {}, forwardedProps: {} }),
    signal: abort.signal,
  });
  assert.equal(response.status, 200);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes('"toolCallName":"test.sleep"')) {
    const { value, done } = await reader.read();
    assert.ok(!done, "the run ended before the slow tool");
    text += decoder.decode(value, { stream: true });
  }
  abort.abort();
  await reader.cancel().catch(() => {});

  const again = agent(threadId);
  again.addMessage(question);
  const events = await run(again, { runId });
  const seen = types(events);
  assert.equal(seen.filter((t) => t === "RUN_STARTED").length, 1, seen.join(" "));
  assert.deepEqual(
    toolCalls(again).map((call) => call.function.name),
    ["test.echo", "test.sleep"],
  );
  assert.equal(lastText(again), "Finished the slow run.");
  assert.equal(events[0].runId, runId);
});

await check("a typed answer asked in forwardedProps is RUN_FINISHED's result", async () => {
  const typed = agent(randomUUID());
  typed.addMessage(user("file a ticket: checkout is down"));
  const output = {
    name: "ticket",
    schema: {
      type: "object",
      properties: { title: { type: "string" }, priority: { type: "integer" } },
      required: ["title", "priority"],
    },
  };
  const events = await run(typed, { forwardedProps: { agentloop: { output } } });
  const value = { title: "Checkout is down", priority: 1 };
  assert.ok(finished(events), JSON.stringify(events.slice(-3)));
  assert.deepEqual(finished(events).result.output, value);
  const partials = events.filter((e) => e.type === "CUSTOM" && e.name === "agentloop.output_delta");
  assert.ok(partials.length >= 1, types(events).join(" "));
  assert.deepEqual(partials.at(-1).value.partial, value);
});

console.log("all AG-UI checks passed");
