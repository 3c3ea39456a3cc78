// The sessions of the signed-in user: the list (title, last activity), and a stored session
// as runs with their traces and answers.

import { images as attachmentImages } from "./attach.js";
import { h, when } from "./dom.js";
import { RunView } from "./run-view.js";
import { traceList } from "./steps.js";

export class SessionList {
  /** `hooks` = {open(id)}. */
  constructor(list, more, hooks) {
    this.list = list;
    this.more = more;
    this.hooks = hooks;
    this.cursor = null;
    this.current = null;
    more.addEventListener("click", () => this.load(this.api, true));
  }

  async load(api, next = false) {
    this.api = api;
    const page = await api.sessions(next ? this.cursor : null);
    if (!next) this.list.replaceChildren();
    if (!next && !page.sessions.length) this.list.append(h("li", { class: "empty", text: "No sessions yet." }));
    for (const session of page.sessions) this.list.append(this.item(session));
    this.cursor = page.next_cursor ?? null;
    this.more.hidden = !this.cursor;
    this.mark(this.current);
  }

  item(session) {
    const button = h("button", { type: "button", class: "session", "data-session": session.id },
      h("span", { class: "title", text: session.title || "Untitled" }),
      h("time", { datetime: session.updated_at, text: when(session.updated_at) }));
    button.addEventListener("click", () => this.hooks.open(session.id));
    return h("li", {}, button);
  }

  /** Marks the open session as current. */
  mark(id) {
    this.current = id;
    for (const button of this.list.querySelectorAll("button.session")) {
      if (button.dataset.session === id) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }
}

/**
 * Views of the runs of a stored session, oldest first. Runs still in progress (or paused)
 * are returned as `live` for the caller to follow; the others are rendered as stored.
 */
export function storedRuns(details, api) {
  const answers = new Map();
  // The images tool calls returned, by call id: shown in the call's output; the attachments of
  // each run's question, by run id.
  const images = new Map();
  const attached = new Map();
  for (const shown of details.messages) {
    const message = shown.message ?? shown;
    if (message.kind === "dialogue" && message.role === "assistant" && message.run_id) {
      answers.set(message.run_id, message.content ?? "");
    }
    if (message.role === "tool" && message.attachments?.length) {
      images.set(message.tool_call_id, message.attachments);
    }
    if (message.kind === "dialogue" && message.role === "user" && message.attachments?.length
      && message.run_id && !attached.has(message.run_id)) {
      attached.set(message.run_id, message.attachments);
    }
  }
  return details.runs.map((shown) => {
    const run = shown.run ?? shown;
    if (!["completed", "failed", "cancelled", "blocked"].includes(run.status)) return { live: run };
    const trace = traceList(shown.execution_trace ?? [], (callId) => api.toolCall(run.id, callId),
      (callId) => images.has(callId) ? attachmentImages(images.get(callId), api) : null);
    const view = RunView.stored(run, answers.get(run.id), trace);
    if (attached.has(run.id)) {
      view.element.querySelector(".question")?.append(attachmentImages(attached.get(run.id), api));
    }
    return { view };
  });
}
