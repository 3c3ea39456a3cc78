// The panel: sign-in, sessions, and the conversation with its live run. Talks only to the
// public API (api.js), with the key kept in sessionStorage (never in a URL).

import { Api, ApiError } from "./api.js";
import { Picker, chips } from "./attach.js";
import { $, h } from "./dom.js";
import { Follower } from "./follow.js";
import { RunView, advice } from "./run-view.js";
import { SessionList, storedRuns } from "./sessions.js";

const KEY = "agentloop.key";
const SESSION = "agentloop.session";
const LIVE = "agentloop.live";

const ui = {
  signin: $("#signin"), signinForm: $("#signin-form"), key: $("#key"), signinError: $("#signin-error"),
  app: $("#app"), signout: $("#signout"), connection: $("#connection"),
  sidebar: $("#sidebar"), menu: $("#menu"), newSession: $("#new-session"),
  title: $("#session-title"), remove: $("#delete-session"), messages: $("#messages"),
  form: $("#ask"), message: $("#message"), send: $("#send"), stop: $("#stop"), hint: $("#ask-hint"),
};

let api = null;
let session = null;
/** The run being shown live: {view, follower, runId, paused, events}. */
let live = null;
const picker = new Picker($("#attach-input"), $("#attach"), $("#attachments"), ui.message);
const sessions = new SessionList($("#session-list"), $("#more-sessions"), { open: (id) => openSession(id) });

// ---- sign-in ----

async function signIn(key, quiet) {
  ui.signinError.textContent = "";
  const candidate = new Api(key);
  try {
    await sessions.load(candidate);
  } catch (error) {
    if (quiet) return showSignIn();
    ui.signinError.textContent = error.status === 401
      ? `This API key was refused: ${error.message}`
      : `Cannot sign in: ${error.message}`;
    return ui.key.focus();
  }
  api = candidate;
  sessionStorage.setItem(KEY, key);
  ui.signin.hidden = true;
  ui.app.hidden = false;
  const stored = sessionStorage.getItem(SESSION);
  if (stored) await openSession(stored);
  else newSession();
}

function showSignIn() {
  ui.app.hidden = true;
  ui.signin.hidden = false;
  ui.key.value = "";
  ui.key.focus();
}

function signOut() {
  stopLive();
  sessionStorage.clear();
  api = null;
  session = null;
  ui.messages.replaceChildren();
  showSignIn();
}

// ---- sessions ----

function setSession(id, title) {
  session = id;
  if (id) sessionStorage.setItem(SESSION, id);
  else sessionStorage.removeItem(SESSION);
  ui.title.textContent = title;
  ui.remove.hidden = !id;
  resetRemove();
  sessions.mark(id);
}

function newSession() {
  stopLive();
  setSession(null, "New session");
  ui.messages.replaceChildren();
  closeMenu();
  controls();
  ui.message.focus();
}

async function openSession(id) {
  stopLive();
  closeMenu();
  let details;
  try {
    details = await api.session(id);
  } catch (error) {
    if (error.status === 404) return newSession();
    return notice(error);
  }
  setSession(id, details.session.title || "Untitled");
  ui.messages.replaceChildren();
  for (const { view, live: running } of storedRuns(details, api)) {
    if (view) ui.messages.append(view.element);
    else reattach(running);
  }
  controls();
  ui.message.focus();
}

let removeTimer = null;
function resetRemove() {
  clearTimeout(removeTimer);
  ui.remove.textContent = "Delete session";
  ui.remove.dataset.confirm = "";
}

async function removeSession() {
  if (!session) return;
  if (!ui.remove.dataset.confirm) {
    ui.remove.dataset.confirm = "1";
    ui.remove.textContent = "Confirm delete";
    removeTimer = setTimeout(resetRemove, 5000);
    return;
  }
  resetRemove();
  try {
    await api.deleteSession(session);
  } catch (error) {
    return notice(error);
  }
  newSession();
  await sessions.load(api);
}

// ---- the live run ----

function actions() {
  return { decide: (decision) => resume(decision), elicit: (runId, answer) => api.elicit(runId, answer) };
}

function saveLive() {
  if (!live || !live.runId) return;
  try {
    sessionStorage.setItem(LIVE, JSON.stringify({ runId: live.runId, events: live.events }));
  } catch {
    // Too large for sessionStorage: a reload replays the run from its start instead.
    sessionStorage.removeItem(LIVE);
  }
}
let saveTimer = null;
function saveSoon() {
  if (saveTimer) return;
  saveTimer = setTimeout(() => {
    saveTimer = null;
    saveLive();
  }, 250);
}
addEventListener("pagehide", saveLive);

function stopLive() {
  if (live) live.follower?.stop();
  live = null;
}

function startLive(view, runId, events = []) {
  live = { view, runId, follower: null, paused: false, events };
  ui.messages.append(view.element);
  controls();
}

/** A run of the opened session still in progress: replayed from the events this tab saw, then followed. */
function reattach(run) {
  const view = new RunView(run.query, actions());
  let cached = null;
  try {
    cached = JSON.parse(sessionStorage.getItem(LIVE) ?? "null");
  } catch {
    cached = null;
  }
  const events = cached && cached.runId === run.id ? cached.events : [];
  for (const event of events) view.apply(event);
  view.runId = run.id;
  startLive(view, run.id, events);
  follow(live, null, events.length ? events[events.length - 1].seq : 0);
}

async function follow(current, response, lastSeq) {
  if (!current || live !== current) return;
  const follower = new Follower(api, {
    onEvent(event) {
      current.view.apply(event);
      current.events.push(event);
      if (event.type === "run_started" && !event.parent_run_id) {
        current.runId = event.run_id;
        controls();
        if (!session) {
          setSession(event.session_id, current.view.element.querySelector(".question p")?.textContent ?? "");
          sessions.load(api).catch(() => {});
        }
      }
      saveSoon();
    },
    onConnection(state) {
      ui.connection.textContent = state === "reconnecting" ? "Connection lost: reconnecting…" : "";
    },
  }, lastSeq);
  current.follower = follower;
  let status;
  try {
    status = await follower.follow(current.runId, response);
  } catch (error) {
    status = "error";
    showError(current.view, error);
  }
  if (live !== current) return;
  ui.connection.textContent = "";
  current.paused = status === "awaiting_input";
  if (status !== "awaiting_input" && status !== "stopped") {
    sessionStorage.removeItem(LIVE);
    live = null;
    sessions.load(api).catch(() => {});
  } else saveLive();
  controls();
}

function showError(view, error) {
  view.error.hidden = false;
  view.error.replaceChildren(h("strong", { text: `Error (${error.code}): ` }), error.message,
    h("p", { class: "advice", text: advice(error.code) }));
  if (!view.finished) view.setStatus("failed");
}

async function ask(text) {
  const view = new RunView(text, actions());
  startLive(view, null);
  const current = live;
  let response;
  try {
    const attachments = await picker.take();
    if (attachments.length) view.element.querySelector(".question")?.append(chips(attachments));
    response = await api.startRun(text, session, undefined, attachments);
  } catch (error) {
    showError(view, error);
    if (live === current) live = null;
    return controls();
  }
  await follow(current, response, 0);
}

/** Answers the paused run: decisions on its calls, or the answer to its question. */
async function resume(answer) {
  if (!live || !live.paused) return;
  const current = live;
  current.paused = false;
  controls();
  let response;
  try {
    response = await api.input(current.runId, answer);
  } catch (error) {
    current.paused = true;
    current.view.pauseFailed(error.message);
    return controls();
  }
  if (answer.answer !== undefined) {
    current.view.pause.before(h("div", { class: "question reply" }, h("p", { text: answer.answer })));
  }
  await follow(current, response, current.follower?.lastSeq ?? 0);
}

async function stop() {
  if (!live || !live.runId) return;
  const current = live;
  ui.stop.disabled = true;
  try {
    await api.cancel(current.runId);
  } catch (error) {
    ui.stop.disabled = false;
    return notice(error);
  }
  // A paused run is not being followed: its end comes on a new stream.
  if (current.paused) {
    current.paused = false;
    await follow(current, null, current.follower?.lastSeq ?? 0);
  }
}

function notice(error) {
  ui.connection.textContent = error instanceof ApiError ? error.message : String(error);
}

// ---- the Message box ----

function clarifying() {
  return live && live.paused && live.view.pause.dataset.kind === "clarification";
}

function controls() {
  const working = Boolean(live) && !live.paused;
  ui.stop.hidden = !live;
  ui.stop.disabled = !live || !live.runId;
  // While the run works, what is sent steers it; while it waits for a decision, nothing.
  ui.send.disabled = Boolean(live) && (live.paused ? !clarifying() : !live.runId);
  ui.send.textContent = clarifying() ? "Answer" : "Send";
  ui.hint.textContent = clarifying()
    ? "Answer the question above; Enter sends."
    : live && live.paused ? "The run waits for your decision above (or Stop it)."
      : working ? "The run is working: what you send now is added before its next step (or Stop it)."
        : "Enter sends, Shift+Enter starts a new line.";
}

function submit() {
  const text = ui.message.value.trim();
  if (!text || !api) return;
  if (clarifying()) {
    ui.message.value = "";
    return resume({ answer: text });
  }
  if (live && !live.paused && live.runId) {
    ui.message.value = "";
    return api.steer(live.runId, text).catch(notice);
  }
  if (live) return;
  ui.message.value = "";
  ask(text);
}

function closeMenu() {
  ui.sidebar.classList.remove("open");
  ui.menu.setAttribute("aria-expanded", "false");
}

ui.signinForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const key = ui.key.value.trim();
  if (key) signIn(key, false);
});
ui.form.addEventListener("submit", (event) => {
  event.preventDefault();
  submit();
});
ui.message.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});
ui.stop.addEventListener("click", stop);
ui.newSession.addEventListener("click", newSession);
ui.remove.addEventListener("click", removeSession);
ui.signout.addEventListener("click", signOut);
ui.menu.addEventListener("click", () => {
  const open = ui.sidebar.classList.toggle("open");
  ui.menu.setAttribute("aria-expanded", String(open));
  if (open) ui.sidebar.querySelector("button")?.focus();
});
addEventListener("keydown", (event) => {
  if (event.key === "Escape" && ui.sidebar.classList.contains("open")) {
    closeMenu();
    ui.menu.focus();
  }
});

const saved = sessionStorage.getItem(KEY);
if (saved) signIn(saved, true);
else showSignIn();
