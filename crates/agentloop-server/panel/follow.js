// Follows a run's event stream to its `done`: any stream (a new run's, an answer's, or
// GET /v1/runs/{id}/events), and when the stream breaks off (network lost, server restarted,
// a client too slow), again with Last-Event-ID: no gap, no duplicate (events at or below the
// last seq seen are dropped).

import { readEvents } from "./sse.js";

const sleep = (ms, signal) => new Promise((resolve) => {
  const timer = setTimeout(resolve, ms);
  signal.addEventListener("abort", () => {
    clearTimeout(timer);
    resolve();
  }, { once: true });
});

export class Follower {
  /** `hooks` = {onEvent(event), onConnection(state: "live" | "reconnecting", detail)}. */
  constructor(api, hooks, lastSeq = 0) {
    this.api = api;
    this.hooks = hooks;
    this.lastSeq = lastSeq;
    this.runId = null;
    this.controller = new AbortController();
  }

  get signal() {
    return this.controller.signal;
  }

  stop() {
    this.controller.abort();
  }

  /**
   * Reads `response` (or, without one, the events of `runId` after the last seq) until the
   * run's `done`. Resolves to its status ("completed", "awaiting_input", ...), or "stopped".
   * Errors the API answers (a run that is not yours, a key revoked) are thrown.
   */
  async follow(runId, response = null) {
    this.runId = runId;
    let delay = 500;
    while (!this.signal.aborted) {
      try {
        if (!response) response = await this.api.events(this.runId, this.lastSeq, this.signal);
        this.hooks.onConnection("live");
        for await (const frame of readEvents(response)) {
          const event = JSON.parse(frame.data);
          if (event.seq <= this.lastSeq) continue;
          this.lastSeq = event.seq;
          if (!this.runId && !event.parent_run_id) this.runId = event.run_id;
          delay = 500;
          this.hooks.onEvent(event);
          if (event.type === "done" && !event.parent_run_id) return event.status;
        }
      } catch (error) {
        if (this.signal.aborted) break;
        const lasting = error.status && error.status !== 429 && error.status < 500;
        if (lasting || !this.runId) throw error;
      }
      response = null;
      if (this.signal.aborted || !this.runId) break;
      this.hooks.onConnection("reconnecting", delay);
      await sleep(delay, this.signal);
      delay = Math.min(delay * 2, 5000);
    }
    return "stopped";
  }
}
