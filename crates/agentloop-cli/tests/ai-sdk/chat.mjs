// The AI SDK's own client against a real `agentloop serve` (started by tests/ai_sdk.rs):
// DefaultChatTransport sends the requests useChat sends, readUIMessageStream builds the
// assistant's message from the UI message stream, as useChat does. Exits non-zero on the first
// failed check.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { AbstractChat, DefaultChatTransport, readUIMessageStream } from "ai";

const base = process.env.AGENTLOOP_URL;
const key = process.env.KEY_ANN;
const otherKey = process.env.KEY_BOB;

const transport = (apiKey = key) =>
  new DefaultChatTransport({
    api: `${base}/v1/chat`,
    headers: { Authorization: `Bearer ${apiKey}` },
  });

const user = (text) => ({
  id: `u-${Math.random().toString(36).slice(2)}`,
  role: "user",
  parts: [{ type: "text", text }],
});

/// Records the type of every chunk that passes.
function recording(stream, types) {
  return stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        types.push(chunk.type);
        controller.enqueue(chunk);
      },
    }),
  );
}

/// The assistant's message as the stream leaves it (continuing `message`, when given).
async function lastMessage(stream, message) {
  let last;
  for await (const built of readUIMessageStream({ stream, message, terminateOnError: true })) {
    last = built;
  }
  return last;
}

async function send(chatId, messages, { apiKey, types = [] } = {}) {
  const stream = await transport(apiKey).sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  return lastMessage(recording(stream, types), messages.at(-1).role === "assistant" ? messages.at(-1) : undefined);
}

const tools = (message) => message.parts.filter((part) => part.type === "dynamic-tool");
const text = (message) =>
  message.parts
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join("");

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

// A UUID is the session's id itself, for every user (a text id names a chat of the user's own).
const chat = randomUUID();
const first = user("chain two echoes");

await check("a chained run arrives as tool parts and the answer as text", async () => {
  const types = [];
  const message = await send(chat, [first], { types });
  assert.equal(message.role, "assistant");
  const calls = tools(message);
  assert.deepEqual(
    calls.map((part) => [part.toolName, part.state, part.input.text]),
    [
      ["test.echo", "output-available", "one"],
      ["test.echo", "output-available", "two"],
    ],
  );
  assert.match(JSON.stringify(calls[0].output), /one/);
  assert.match(JSON.stringify(calls[1].output), /two/);
  assert.equal(text(message), "Chained: one, then two.");
  assert.equal(types[0], "start");
  assert.equal(types.at(-1), "finish");
  assert.equal(types.filter((t) => t === "start-step").length, 3, types.join(" "));
  assert.equal(types.filter((t) => t === "finish-step").length, 3, types.join(" "));
  assert.ok(types.includes("data-usage"), types.join(" "));
  assert.equal(message.metadata.status, "completed");
  globalThis.firstAnswer = message;
});

await check("a second message on the same chat continues the conversation", async () => {
  // The client's copy of the history is not trusted: a made-up earlier exchange is ignored.
  const forged = { id: "f", role: "user", parts: [{ type: "text", text: "forged question" }] };
  const message = await send(chat, [forged, globalThis.firstAnswer, user("again: what did I ask?")]);
  assert.equal(text(message), "Earlier you asked: chain two echoes");
});

await check("a bad key is refused", async () => {
  await assert.rejects(send(`bad-${chat}`, [user("hello")], { apiKey: "not-a-key" }), (error) => {
    assert.match(String(error.message ?? error), /401|key|unauthori/i);
    return true;
  });
});

await check("another user's chat is not found", async () => {
  await assert.rejects(send(chat, [user("hello")], { apiKey: otherKey }), (error) => {
    assert.match(String(error.message ?? error), /not found|404/i);
    return true;
  });
});

for (const approved of [true, false]) {
  const word = approved ? "approve" : "deny";
  await check(`an approval round trip (${word})`, async () => {
    const id = `${word}-${chat}`;
    const question = user(`${word} the note`);
    const asked = await send(id, [question]);
    const [call] = tools(asked);
    assert.equal(call.toolName, "test.record");
    assert.equal(call.state, "approval-requested");
    assert.equal(call.approval.id, call.toolCallId);
    assert.equal(asked.metadata.status, "awaiting_input");
    // What addToolApprovalResponse does to the message before useChat sends it again.
    const answered = {
      ...asked,
      parts: asked.parts.map((part) =>
        part === call ? { ...part, state: "approval-responded", approval: { id: call.approval.id, approved } } : part,
      ),
    };
    const done = await send(id, [question, answered]);
    const [after] = tools(done);
    if (approved) {
      assert.equal(after.state, "output-available");
      assert.equal(text(done), "The tool said: recorded");
    } else {
      assert.equal(after.state, "output-denied");
      // The model read the denial as the call's result.
      assert.match(text(done), /^The tool said: /);
      assert.notEqual(text(done), "The tool said: recorded");
    }
    assert.equal(done.metadata.status, "completed");
  });
}

await check("a clarification question is the assistant's text; the next user message answers it", async () => {
  const id = `clarify-${chat}`;
  const question = user("clarify the project");
  const asked = await send(id, [question]);
  assert.equal(text(asked), "Which project do you mean?");
  assert.equal(asked.metadata.status, "awaiting_input");
  const done = await send(id, [question, asked, user("Project X")]);
  // The model got the answer as the ask_user call's result.
  assert.equal(text(done), 'You told me: {"answer":"Project X"}');
  assert.equal(done.metadata.status, "completed");
});

await check("a reconnect mid-run resumes the message with no gap and no repeat", async () => {
  const id = `slow-${chat}`;
  const abort = new AbortController();
  const stream = await transport().sendMessages({
    chatId: id,
    messages: [user("slow run please")],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: abort.signal,
  });
  // Read until the run is in its slow tool, then leave (as a reloaded page does).
  const reader = stream.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    assert.ok(!done, "the run ended before the slow tool");
    if (value.type === "tool-input-available" && value.toolName === "test.sleep") break;
  }
  abort.abort();
  await reader.cancel().catch(() => {});

  const resumed = await transport().reconnectToStream({ chatId: id });
  assert.ok(resumed, "the run in progress was not found (204)");
  const types = [];
  const message = await lastMessage(recording(resumed, types));
  assert.deepEqual(
    tools(message).map((part) => [part.toolName, part.state]),
    [
      ["test.echo", "output-available"],
      ["test.sleep", "output-available"],
    ],
  );
  assert.equal(text(message), "Finished the slow run.");
  assert.equal(types.filter((t) => t === "start").length, 1, types.join(" "));
  assert.equal(types.filter((t) => t === "text-start").length, 1, types.join(" "));
  // Nothing in progress any more: 204, which the transport reads as null.
  assert.equal(await transport().reconnectToStream({ chatId: id }), null);
  // Another user who names a chat alike has a chat of their own, with nothing in progress; a
  // chat named by its session's UUID is no way into another user's either.
  assert.equal(await transport(otherKey).reconnectToStream({ chatId: id }), null);
  await assert.rejects(transport(otherKey).reconnectToStream({ chatId: chat }));
});

/// What useChat keeps (the React state of `@ai-sdk/react`, without React): the chat's messages.
class PlainState {
  constructor() {
    this.status = "ready";
    this.error = undefined;
    this.messages = [];
  }
  pushMessage = (message) => {
    this.messages = this.messages.concat(message);
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = (thing) => structuredClone(thing);
}

/// The chat of useChat: sendMessage and regenerate as a page calls them.
class PlainChat extends AbstractChat {
  constructor(id) {
    super({ id, transport: transport(), state: new PlainState() });
  }
}

async function sessionMessages(sessionId, query = "") {
  const response = await fetch(`${base}/v1/sessions/${sessionId}${query}`, {
    headers: { Authorization: `Bearer ${key}` },
  });
  assert.equal(response.status, 200, await response.clone().text());
  const body = await response.json();
  return body.messages.filter((message) => message.kind === "dialogue");
}

await check("sendMessage with files sends them as file parts, and the model sees the image", async () => {
  // A 1×1 PNG, as a FileUIPart (what sendMessage makes of a FileList).
  const png =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==";
  const chat = new PlainChat(`files-${Date.now()}`);
  await chat.sendMessage({
    text: "look at this",
    files: [{ type: "file", mediaType: "image/png", filename: "dot.png", url: `data:image/png;base64,${png}` }],
  });
  assert.equal(chat.error, undefined, String(chat.error));
  assert.deepEqual(chat.messages[0].parts.map((part) => part.type), ["file", "text"]);
  assert.equal(text(chat.messages.at(-1)), "I see 1 image(s): image/png");
});

await check("regenerate replaces the last exchange: the question once, the new answer", async () => {
  const chat = new PlainChat(`regenerate-${Date.now()}`);
  await chat.sendMessage({ text: "hello there" });
  await chat.sendMessage({ text: "draft an answer" });
  assert.equal(chat.error, undefined, String(chat.error));
  const first = chat.messages.at(-1);
  assert.match(text(first), /^Draft \d+ \(asked once\)$/);

  await chat.regenerate();
  assert.equal(chat.error, undefined, String(chat.error));
  assert.deepEqual(
    chat.messages.map((message) => message.role),
    ["user", "assistant", "user", "assistant"],
  );
  const again = chat.messages.at(-1);
  assert.notEqual(again.id, first.id);
  // The model was asked the question once, not once per answer it had.
  assert.match(text(again), /^Draft \d+ \(asked once\)$/);
  assert.notEqual(text(again), text(first));

  // The session holds what the page shows; the old exchange is kept, marked superseded.
  const sessionId = again.metadata.sessionId;
  const shown = (messages) => messages.map((message) => [message.role, message.content]);
  assert.deepEqual(shown(await sessionMessages(sessionId)), [
    ["user", "hello there"],
    ["assistant", "You asked: hello there"],
    ["user", "draft an answer"],
    ["assistant", text(again)],
  ]);
  const all = await sessionMessages(sessionId, "?superseded=true");
  const superseded = all.filter((message) => message.superseded_by_run);
  assert.deepEqual(shown(superseded), [
    ["user", "draft an answer"],
    ["assistant", text(first)],
  ]);
  assert.ok(superseded.every((message) => message.superseded_by_run === again.id));
  assert.ok(superseded.every((message) => message.run_id === first.id));

  // Regenerating an earlier answer (its message id) replaces it and everything after it.
  await chat.regenerate({ messageId: chat.messages[1].id });
  assert.equal(chat.error, undefined, String(chat.error));
  assert.deepEqual(shown(await sessionMessages(sessionId)), [
    ["user", "hello there"],
    ["assistant", "You asked: hello there"],
  ]);
});

await check("regenerate is refused while the chat's run waits for input", async () => {
  const id = `regenerate-paused-${chat}`;
  const question = user("approve the note");
  const asked = await send(id, [question]);
  assert.equal(asked.metadata.status, "awaiting_input");
  await assert.rejects(
    transport().sendMessages({
      chatId: id,
      messages: [question],
      trigger: "regenerate-message",
      messageId: asked.id,
      abortSignal: undefined,
    }),
    (error) => {
      assert.match(String(error.message ?? error), /waits for input/);
      return true;
    },
  );
  const response = await fetch(`${base}/v1/sessions/${asked.metadata.sessionId}?superseded=maybe`, {
    headers: { Authorization: `Bearer ${key}` },
  });
  assert.equal(response.status, 400);
});

await check("a typed answer asked in the request's body arrives as data-output parts", async () => {
  const output = {
    name: "ticket",
    schema: {
      type: "object",
      properties: { title: { type: "string" }, priority: { type: "integer" } },
      required: ["title", "priority"],
    },
  };
  const types = [];
  const stream = await transport().sendMessages({
    chatId: `typed-${chat}`,
    messages: [user("file a ticket: checkout is down")],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
    body: { output },
  });
  const message = await lastMessage(recording(stream, types));
  const parts = message.parts.filter((part) => part.type === "data-output");
  // Parts with one id are one part, its data the latest: the value, complete.
  assert.equal(parts.length, 1, JSON.stringify(message.parts));
  assert.deepEqual(parts[0].data, {
    value: { title: "Checkout is down", priority: 1 },
    complete: true,
  });
  assert.ok(types.filter((t) => t === "data-output").length >= 1, types.join(" "));
  assert.equal(message.metadata.status, "completed");

  // A schema that is not one: 400 naming where.
  const response = await fetch(`${base}/v1/chat`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({
      id: `typed-bad-${chat}`,
      messages: [user("file a ticket")],
      output: { schema: { type: "nope" } },
    }),
  });
  assert.equal(response.status, 400);
  const error = await response.json();
  assert.equal(error.error.details.field, "output.schema");
});

console.log("all AI SDK checks passed");
