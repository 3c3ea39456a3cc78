// One run in the conversation, live: the question, its status, the plan as a checklist, the
// steps, the answer as it streams (Markdown rendered safely), a pause's question or approvals,
// errors with what to do, and the usage.

import { h, append } from "./dom.js";
import { render } from "./markdown.js";
import { StepList } from "./steps.js";
import { questionForm } from "./question.js";

const STATUS = {
  starting: "starting…",
  thinking: "thinking…",
  calling: "calling tools…",
  waiting: "waiting for you",
  running: "working…",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled",
  blocked: "blocked",
  awaiting_input: "waiting for you",
};

/** What to do about each error code of a failed run. */
const ADVICE = {
  llm_unreachable: "The model's server cannot be reached: the operator should check llm.base_url.",
  llm_missing_api_key: "The server has no key for the model: the operator should set it.",
  llm_unauthorized: "The model's server refused the server's key: the operator should check it.",
  llm_rejected: "The model refused the request: try rephrasing, or a new session.",
  llm_rate_limited: "The model is rate limited: try again in a minute.",
  llm_server_error: "The model's server failed: try again shortly.",
  llm_timeout: "The model took too long: try again, or ask for less.",
  llm_truncated_stream: "The model's reply was cut off: try again.",
  llm_protocol_error: "The model's reply could not be read: try again; if it persists, tell the operator.",
  store_unavailable: "The server could not save the run: try again once its database is back.",
  session_busy: "This session has a run in progress: wait for it, or start a new session.",
  session_not_found: "This session no longer exists: start a new one.",
  internal_error: "Something went wrong in the server: try again, and tell the operator if it persists.",
  blocked: "A guardrail of the agent refused this; the message names it. Rephrase the request.",
};

export function advice(code) {
  return ADVICE[code] ?? "Try again; if it persists, tell the operator.";
}

const PLAN_MARK = { done: "✓", blocked: "✕", pending: "○" };

export class RunView {
  /** `actions` = {approve(callIds, denied)}, the panel's answers to a pause. */
  constructor(question, actions) {
    this.actions = actions;
    this.runId = null;
    this.status = h("p", { class: "run-status", role: "status" });
    this.plan = h("section", { class: "plan", hidden: true, "aria-label": "Plan" });
    this.stepsList = h("ol", { class: "steps", "aria-label": "Steps" });
    this.steps = new StepList(this.stepsList);
    this.pause = h("div", { class: "pause", hidden: true });
    // Questions of running calls (elicitation), by call: the run goes on meanwhile.
    this.questions = h("div", { class: "questions" });
    this.asked = new Map();
    this.answerText = "";
    this.answer = h("div", { class: "answer", hidden: true });
    this.error = h("div", { class: "run-error", role: "alert", hidden: true });
    this.usage = h("p", { class: "usage", hidden: true });
    this.subRuns = new Map();
    this.element = h("li", { class: "run" },
      question === null ? null : h("div", { class: "question" }, h("p", { text: question })),
      h("div", { class: "work" }, this.status, this.plan, this.stepsList, this.questions, this.pause),
      this.answer, this.error, this.usage);
    this.scheduled = false;
    this.setStatus("starting");
  }

  setStatus(key) {
    this.state = key;
    this.status.textContent = STATUS[key] ?? key;
    this.status.dataset.state = key;
    this.element.dataset.state = key;
  }

  get finished() {
    return ["completed", "failed", "cancelled", "blocked"].includes(this.state);
  }

  /** Applies one event of the run's stream. */
  apply(event) {
    if (event.parent_run_id) return this.applySub(event);
    if (event.type === "input_required" && event.elicitation) return this.ask(event.elicitation);
    // A call that ended has no question open any more.
    if (event.type === "tool_executed" || event.type === "done") this.closeQuestions(event.call_id);
    if (event.type !== "input_required" && !this.pause.hidden && event.type !== "done") this.clearPause();
    if (this.steps.apply(event)) {
      if (event.type === "tool_selected") this.setStatus("calling");
      return;
    }
    switch (event.type) {
      case "run_started":
        this.runId = event.run_id;
        this.setStatus("starting");
        break;
      case "thinking":
        this.setStatus("thinking");
        break;
      case "plan_updated":
        this.showPlan(event.plan);
        break;
      case "input_required":
        this.showPause(event);
        break;
      case "final_response":
        this.steps.dropDraft();
        this.answerText += event.delta;
        this.answer.hidden = false;
        this.scheduleAnswer();
        break;
      case "output_delta":
        // The typed answer as the model writes it (not validated yet): shown as it grows.
        this.steps.dropDraft();
        this.showTyped(event.partial);
        break;
      case "answer_retracted":
        // A guardrail refused the text streamed for this step (guardrail_mode = "after").
        this.steps.dropDraft();
        this.answerText = "";
        this.answer.replaceChildren();
        this.answer.hidden = true;
        break;
      case "error":
        this.error.hidden = false;
        this.error.replaceChildren(h("strong", { text: `Error (${event.code}): ` }), event.message,
          h("p", { class: "advice", text: advice(event.code) }));
        // What to quote to the operator, whose log has the detail under this id.
        if (event.request_id) this.error.append(h("p", { class: "advice", text: `Request id: ${event.request_id}` }));
        break;
      case "done":
        if (event.output != null) this.showTyped(event.output);
        else if (this.answerText) this.answer.replaceChildren(render(this.answerText));
        this.setStatus(event.status);
        if (event.status !== "awaiting_input") this.clearPause();
        this.showUsage(event);
        break;
      default:
        break;
    }
  }

  /** Events of a sub-agent: nested under the call of the agent that started it. */
  applySub(event) {
    let sub = this.subRuns.get(event.run_id);
    if (!sub) {
      const entry = this.steps.subAgentCall();
      const list = h("ol", { class: "steps sub", "aria-label": "Sub-agent steps" });
      const answer = h("div", { class: "answer sub-answer", hidden: true });
      if (entry) {
        entry.sub = event.run_id;
        entry.body.append(list, answer);
        entry.details.open = true;
      } else this.stepsList.append(h("li", { class: "note" }, list, answer));
      sub = { steps: new StepList(list), answer, text: "" };
      this.subRuns.set(event.run_id, sub);
    }
    if (sub.steps.apply(event)) return;
    if (event.type === "final_response") {
      sub.steps.dropDraft();
      sub.text += event.delta;
      sub.answer.hidden = false;
      sub.answer.replaceChildren(render(sub.text));
    } else if (event.type === "error") {
      sub.steps.note("error", `Sub-agent error (${event.code}): ${event.message}`);
    }
  }

  scheduleAnswer() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      // A typed answer shows its value, not the value's JSON text.
      if (this.typed) return;
      this.answer.replaceChildren(render(this.answerText));
    });
  }

  showPlan(plan) {
    this.plan.hidden = false;
    const items = (plan.sub_tasks ?? []).map((task) =>
      h("li", { class: "task " + task.status, "data-status": task.status },
        h("span", { class: "mark", "aria-hidden": "true", text: PLAN_MARK[task.status] ?? "○" }),
        h("span", { class: "visually-hidden", text: task.status + ": " }),
        task.description));
    this.plan.replaceChildren(h("h3", { text: "Plan" }), plan.goal ? h("p", { text: plan.goal }) : null,
      h("ul", { class: "checklist" }, items));
  }

  showPause(event) {
    this.setStatus("waiting");
    this.pause.hidden = false;
    this.pause.replaceChildren();
    if (event.kind === "clarification") {
      this.pause.dataset.kind = "clarification";
      append(this.pause, [h("p", { class: "ask" }, h("strong", { text: "Question: " }), event.question ?? ""),
        h("p", { class: "hint", text: "Answer it in the Message box." })]);
      return;
    }
    this.pause.dataset.kind = "approval";
    const decisions = new Map();
    const calls = event.calls ?? [];
    this.pause.append(h("p", { class: "ask", text: calls.length > 1 ? "These calls wait for your approval:" : "This call waits for your approval:" }));
    for (const call of calls) {
      const entry = this.steps.calls.get(call.call_id);
      if (entry) entry.state.textContent = "waiting for approval";
      const buttons = h("div", { class: "decide" });
      const decide = (approved) => {
        decisions.set(call.call_id, approved);
        buttons.replaceChildren(h("span", { class: "decided", text: approved ? "Approved" : "Denied" }));
        if (decisions.size === calls.length) {
          const approve = [...decisions].filter(([, yes]) => yes).map(([id]) => id);
          const deny = [...decisions].filter(([, yes]) => !yes).map(([id]) => id);
          this.actions.decide({ approve, deny });
        }
      };
      buttons.append(h("button", { type: "button", class: "approve", onclick: () => decide(true), text: "Approve" }),
        h("button", { type: "button", class: "deny", onclick: () => decide(false), text: "Deny" }));
      this.pause.append(h("div", { class: "pending", "data-call": call.call_id },
        h("span", { class: "tool", text: call.tool }), h("pre", { text: JSON.stringify(call.arguments, null, 2) }), buttons));
    }
  }

  /** A running call's question: a form, until it is answered or its call ends. */
  ask(question) {
    const send = (answer) => this.actions.elicit(this.runId, answer);
    const form = questionForm(question, send);
    this.asked.get(question.call_id)?.forEach((old) => old.remove());
    this.asked.set(question.call_id, [form]);
    this.questions.append(form);
  }

  /** Closes the questions of `callId` (all of them when it is undefined). */
  closeQuestions(callId) {
    for (const [call, forms] of this.asked) {
      if (callId !== undefined && call !== callId) continue;
      forms.forEach((form) => form.remove());
      this.asked.delete(call);
    }
  }

  clearPause() {
    this.pause.hidden = true;
    this.pause.replaceChildren();
  }

  /** A pause's answer was refused: its buttons come back. */
  pauseFailed(message) {
    this.pause.append(h("p", { class: "call-error", role: "alert", text: message }));
  }

  showUsage(event) {
    const usage = event.usage ?? {};
    const parts = [`${event.iterations ?? 0} steps`, `${event.tools_used ?? 0} tool calls`,
      `${usage.prompt_tokens ?? 0} tokens in`, `${usage.completion_tokens ?? 0} out`];
    if (usage.cache_read_tokens) parts.push(`${usage.cache_read_tokens} cached`);
    if (usage.cost_complete && typeof usage.cost_usd === "number") {
      parts.push(`$${usage.cost_usd.toFixed(4)}`);
    } else if (usage.cost_complete === false) {
      parts.push("cost unknown");
    }
    this.usage.textContent = parts.join(" · ");
    this.usage.hidden = false;
  }

  /** A typed answer (or its partial object), pretty-printed; it replaces the JSON text. */
  showTyped(value) {
    this.typed = true;
    this.answer.hidden = false;
    this.answer.replaceChildren(h("pre", { class: "typed", text: JSON.stringify(value, null, 2) }));
  }

  /** A run of the history, as stored. */
  static stored(run, answer, trace) {
    const view = new RunView(run.query, { decide() {}, elicit() {} });
    view.runId = run.id;
    view.stepsList.replaceWith(trace);
    view.stepsList = trace;
    if (run.output != null) {
      view.showTyped(run.output);
    } else if (answer) {
      view.answerText = answer;
      view.answer.hidden = false;
      view.answer.replaceChildren(render(answer));
    }
    if (run.error_code) {
      view.error.hidden = false;
      view.error.replaceChildren(h("strong", { text: `Error (${run.error_code}): ` }), run.error_message ?? "",
        h("p", { class: "advice", text: advice(run.error_code) }));
    }
    view.setStatus(run.status);
    view.showUsage({ iterations: run.iterations, tools_used: run.tools_used, usage: run.usage });
    return view;
  }
}
