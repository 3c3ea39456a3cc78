// The steps of a run (or of a sub-agent's run): tool calls as they are selected and as they
// end (a progress bar while one reports how far it has come), with a bounded result that
// expands, and the notes of the loop (duplicates, side effects, forced summaries, resumptions,
// the model's text between calls).

import { h, pretty, brief, duration } from "./dom.js";

/** Characters of a result shown before "Show all". */
const PREVIEW = 400;

const FINALIZE = {
  max_iterations: "the step limit was reached",
  degenerate_response: "the model gave an empty reply",
  duplicate_calls: "the model kept repeating the same call",
  consecutive_failures: "tool calls kept failing",
  review_stop: "the reviewer stopped the work",
  budget: "the run's budget is spent",
};

const RESUMED = {
  adopted: "another server instance took the run over",
  restarted: "the server started again",
};

/** A result: the first PREVIEW characters, and a button that shows the rest. */
export function result(text, label = "Result") {
  const whole = pretty(text ?? "");
  const body = h("pre", { class: "result", text: whole.length > PREVIEW ? whole.slice(0, PREVIEW) + "…" : whole });
  const box = h("div", { class: "result-box" }, h("span", { class: "label", text: label }), body);
  if (whole.length > PREVIEW) {
    const more = h("button", { type: "button", class: "link", text: `Show all (${whole.length} characters)` });
    more.addEventListener("click", () => {
      body.textContent = whole;
      more.remove();
    });
    box.append(more);
  }
  return box;
}

export class StepList {
  constructor(list) {
    this.list = list;
    this.calls = new Map();
    this.draft = null;
  }

  /** The <li> of a call (creating it when its selection was not seen). */
  call(callId, tool, args) {
    let entry = this.calls.get(callId);
    if (entry) return entry;
    const state = h("span", { class: "state running", text: "running…" });
    const summary = h("summary", {}, h("span", { class: "tool", text: tool }), " ",
      h("span", { class: "args", text: args === undefined ? "" : brief(args) }), " ", state);
    const body = h("div", { class: "call-body" });
    if (args !== undefined) body.append(h("span", { class: "label", text: "Arguments" }), h("pre", { text: pretty(args) }));
    const details = h("details", {}, summary, body);
    const item = h("li", { class: "call", "data-call": callId, "data-tool": tool }, details);
    this.list.append(item);
    entry = { item, details, state, body, tool, sub: null };
    this.calls.set(callId, entry);
    this.draft = null;
    return entry;
  }

  note(kind, text) {
    const item = h("li", { class: "note " + kind, text });
    this.list.append(item);
    this.draft = null;
    return item;
  }

  /** Applies one event; true when it was a step event. */
  apply(event) {
    switch (event.type) {
      case "assistant_delta":
        if (!this.draft) this.draft = this.note("draft", "");
        this.draft.textContent += event.text;
        return true;
      case "tool_selected":
        this.call(event.call_id, event.tool, event.arguments);
        return true;
      case "tool_executed": {
        const entry = this.call(event.call_id, event.tool);
        entry.state.className = "state " + event.status;
        entry.state.textContent = `${event.status} · ${duration(event.duration_ms)}`;
        entry.item.dataset.status = event.status;
        if (entry.progress) entry.progress.remove();
        if (event.error) entry.body.append(h("p", { class: "call-error", text: event.error }));
        if (event.result !== undefined) entry.body.append(result(event.result));
        return true;
      }
      case "tool_progress": {
        // A bar on the running call: determinate with a total, else the count and message.
        const entry = this.call(event.call_id, event.tool);
        if (entry.item.dataset.status) return true;
        if (!entry.progress) {
          entry.progress = h("progress", { class: "call-progress" });
          entry.state.after(" ", entry.progress);
        }
        if (event.total > 0) {
          entry.progress.max = event.total;
          entry.progress.value = Math.min(event.progress, event.total);
        }
        const done = event.total > 0 ? `${event.progress} of ${event.total}` : `${event.progress}`;
        entry.progress.title = event.message ? `${done}: ${event.message}` : done;
        entry.state.textContent = event.message ? `running… ${event.message}` : `running… ${done}`;
        return true;
      }
      case "duplicate_detected":
        this.note("duplicate", `Not run again: ${event.tool} was already called with ${brief(event.arguments)}`);
        return true;
      case "side_effect": {
        const entry = this.calls.get(event.call_id);
        const note = h("p", { class: "side-effect", text: `Side effect: ${event.note}` });
        if (entry) entry.body.append(note);
        else this.note("side-effect", `Side effect of ${event.tool}: ${event.note}`);
        return true;
      }
      case "forced_finalize":
        this.note("forced", `Summing up: ${FINALIZE[event.reason] ?? event.reason}.`);
        return true;
      case "run_resumed":
        this.note("resumed", `Resumed: ${RESUMED[event.reason] ?? event.reason}.`);
        return true;
      case "user_message":
        this.note("user-message", `You: ${event.text}`);
        return true;
      default:
        return false;
    }
  }

  /** The text the model wrote last turns out to be the answer: it moves there. */
  dropDraft() {
    if (this.draft) this.draft.remove();
    this.draft = null;
  }

  /** The call of `agent.*` that a sub-agent's run belongs to: the first running one without one. */
  subAgentCall() {
    for (const entry of this.calls.values()) {
      if (entry.tool.startsWith("agent.") && !entry.sub && !entry.item.dataset.status) return entry;
    }
    return null;
  }
}

/** A stored trace (a run of the history): its calls, their results on demand, the images a
 * call returned (`imagesOf`) in its output. */
export function traceList(records, loadWhole, imagesOf = () => null) {
  const list = h("ol", { class: "steps" });
  const steps = new StepList(list);
  for (const record of records) {
    const entry = steps.call(record.call_id, record.tool, record.arguments);
    entry.state.className = "state " + record.status;
    entry.state.textContent = `${record.status} · ${duration(record.duration_ms)}`;
    entry.item.dataset.status = record.status;
    if (record.error) entry.body.append(h("p", { class: "call-error", text: record.error }));
    if (record.result !== undefined) entry.body.append(result(record.result));
    const shown = imagesOf(record.call_id);
    if (shown) entry.body.append(shown);
    if (record.truncated && record.full_output) {
      const whole = h("button", { type: "button", class: "link", text: "Load the whole output" });
      whole.addEventListener("click", async () => {
        whole.disabled = true;
        try {
          const full = await loadWhole(record.call_id);
          whole.replaceWith(result(full.result ?? "", "Whole output"));
        } catch (error) {
          whole.replaceWith(h("p", { class: "call-error", text: error.message }));
        }
      });
      entry.body.append(whole);
    }
  }
  return list;
}
