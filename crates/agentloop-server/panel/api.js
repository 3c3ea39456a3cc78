// The public HTTP API, with the user's key. Errors carry the API's JSON error body.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function failure(response) {
  let code = "http_" + response.status;
  let message = response.statusText || "request failed";
  try {
    const body = await response.json();
    if (body && body.error) ({ code, message } = body.error);
  } catch {
    // Not JSON: keep the status line.
  }
  return new ApiError(response.status, code, message);
}

export class Api {
  constructor(key) {
    this.key = key;
  }

  headers(extra = {}) {
    return { Authorization: "Bearer " + this.key, ...extra };
  }

  async send(method, path, body, extra = {}, signal = undefined) {
    const init = { method, headers: this.headers(extra), signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      if (error.name === "AbortError") throw error;
      throw new ApiError(0, "network", "The server cannot be reached: check your connection.");
    }
    if (!response.ok) throw await failure(response);
    return response;
  }

  async json(method, path, body) {
    const response = await this.send(method, path, body);
    return response.status === 204 ? null : response.json();
  }

  sessions(cursor) {
    const query = cursor ? "?cursor=" + encodeURIComponent(cursor) : "";
    return this.json("GET", "/v1/sessions" + query);
  }
  session(id) {
    return this.json("GET", "/v1/sessions/" + encodeURIComponent(id));
  }
  deleteSession(id) {
    return this.json("DELETE", "/v1/sessions/" + encodeURIComponent(id));
  }
  /** The bytes of a stored attachment, as a Blob of its type. */
  async attachment(sha256) {
    const response = await this.send("GET", "/v1/attachments/" + encodeURIComponent(sha256));
    return response.blob();
  }
  toolCall(runId, callId) {
    return this.json("GET", `/v1/runs/${encodeURIComponent(runId)}/tools/${encodeURIComponent(callId)}`);
  }
  cancel(runId) {
    return this.json("POST", `/v1/runs/${encodeURIComponent(runId)}/cancel`);
  }
  /** A message for a run while it works (steering): added before its next LLM call. */
  steer(runId, text) {
    return this.json("POST", `/v1/runs/${encodeURIComponent(runId)}/messages`, { text });
  }
  /** A new run, streamed: the response is its event stream. */
  startRun(query, sessionId, signal, attachments = []) {
    const body = { query, stream: true };
    if (sessionId) body.session_id = sessionId;
    if (attachments.length) body.attachments = attachments;
    return this.send("POST", "/v1/runs", body, { Accept: "text/event-stream" }, signal);
  }
  /** An answer to a paused run; the response streams its further events. */
  input(runId, answer, signal) {
    return this.send("POST", `/v1/runs/${encodeURIComponent(runId)}/input`, { ...answer, stream: true },
      { Accept: "text/event-stream" }, signal);
  }
  /** The answer to a running call's question (MCP elicitation). */
  elicit(runId, answer) {
    return this.json("POST", `/v1/runs/${encodeURIComponent(runId)}/input`, { elicitation: answer });
  }
  /** The events of a run after `lastSeq` (Last-Event-ID), replayed then live. */
  events(runId, lastSeq, signal) {
    const extra = { Accept: "text/event-stream" };
    if (lastSeq > 0) extra["Last-Event-ID"] = String(lastSeq);
    return this.send("GET", `/v1/runs/${encodeURIComponent(runId)}/events`, undefined, extra, signal);
  }
}
