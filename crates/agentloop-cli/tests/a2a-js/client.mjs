// The official A2A JavaScript SDK (@a2a-js/sdk 1.x) against a real `agentloop serve`, run by
// tests/a2a.rs: AGENTLOOP_URL is the server, KEY_ANN a user's key.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { Role, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

const url = process.env.AGENTLOOP_URL;
const key = process.env.KEY_ANN;
const withKey = (input, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set("Authorization", `Bearer ${key}`);
  return fetch(input, { ...init, headers });
};

const factory = new ClientFactory(
  ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: withKey })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: withKey }),
  }),
);
const client = await factory.createFromUrl(url);

const ask = (text, extra = {}) => ({
  message: {
    messageId: randomUUID(),
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text } }],
    ...extra,
  },
});
const text = (artifact) =>
  artifact.parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");

// SendMessage: the task once it ended.
const sent = await client.sendMessage(ask("chain two echoes"));
assert.equal(sent.status.state, TaskState.TASK_STATE_COMPLETED, JSON.stringify(sent));
assert.equal(text(sent.artifacts[0]), "Chained: one, then two.");
console.log(`send: ${text(sent.artifacts[0])}`);

// SendStreamingMessage in the same context.
let answer = "";
let last;
let first;
for await (const event of client.sendMessageStream(ask("again: what did I ask?", { contextId: sent.contextId }))) {
  first ??= event.payload?.$case;
  if (event.payload?.$case === "artifactUpdate") {
    const update = event.payload.value;
    answer = update.append ? answer + text(update.artifact) : text(update.artifact);
  }
  if (event.payload?.$case === "statusUpdate") last = event.payload.value.status.state;
}
assert.equal(first, "task");
assert.equal(last, TaskState.TASK_STATE_COMPLETED);
assert.ok(answer.includes("chain two echoes"), answer);
console.log(`stream: ${answer}`);

// GetTask.
const got = await client.getTask({ id: sent.id });
assert.equal(got.status.state, TaskState.TASK_STATE_COMPLETED);
console.log("get: completed");
