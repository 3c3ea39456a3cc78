// The panel's browser tests, started by crates/agentloop-cli/tests/panel.rs with a running
// `agentloop serve` (PANEL_URL), two users' keys (KEY_ANN, KEY_BOB), the Chromium to drive
// (CHROMIUM) and where screenshots go (SCREENSHOTS). Exits non-zero on the first failure.

import { chromium } from "playwright-core";
import { join } from "node:path";

const { PANEL_URL, KEY_ANN, KEY_BOB, CHROMIUM, SCREENSHOTS } = process.env;
const TIMEOUT = 20_000;

function check(condition, message) {
  if (!condition) throw new Error("check failed: " + message);
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
context.setDefaultTimeout(TIMEOUT);
const page = await context.newPage();
const problems = [];
let allowed = [];
page.on("console", (message) => {
  if (message.type() !== "error" && message.type() !== "warning") return;
  const text = message.text();
  if (allowed.some((pattern) => pattern.test(text))) return;
  problems.push(`console ${message.type()}: ${text}`);
});
page.on("pageerror", (error) => problems.push("page error: " + error.message));
const lastEventIds = [];
page.on("request", (request) => {
  if (request.url().includes("/events")) lastEventIds.push(request.headers()["last-event-id"] ?? null);
});

const shot = (name) => page.screenshot({ path: join(SCREENSHOTS, name + ".png"), fullPage: false });
const message = () => page.getByRole("textbox", { name: "Message" });
const lastRun = () => page.locator("#messages > li.run").last();
const finished = (state = "completed") => page.locator(`#messages > li.run[data-state="${state}"]`).last().waitFor();

async function ask(text) {
  await message().fill(text);
  await message().press("Enter");
}

async function newSession() {
  await page.getByRole("button", { name: "New session", exact: true }).click();
  await page.locator("#messages > li").first().waitFor({ state: "detached" }).catch(() => {});
}

const steps = [];
async function step(name, body) {
  const started = Date.now();
  await body();
  steps.push(name);
  console.log(`ok - ${name} (${Date.now() - started} ms)`);
}

try {
  await step("a bad key is refused and says how to make one", async () => {
    allowed = [/status of 401/];
    await page.goto(PANEL_URL);
    const key = page.getByLabel("API key");
    await key.waitFor();
    await shot("sign-in");
    await key.fill("not-a-key");
    await key.press("Enter");
    const alert = page.locator("#signin-error");
    await alert.filter({ hasText: "refused" }).waitFor();
    check((await alert.textContent()).includes("agentloop keys create"), "the error says how to make a key");
    allowed = [];
  });

  await step("sign in with the keyboard", async () => {
    const key = page.getByLabel("API key");
    await key.fill(KEY_ANN);
    await key.press("Enter");
    await message().waitFor();
    check(!page.url().includes(KEY_ANN), "the key is not in the URL");
    check(await page.evaluate(() => sessionStorage.getItem("agentloop.key")) === KEY_ANN, "the key is in sessionStorage");
  });

  await step("tool steps appear live, before the answer", async () => {
    await ask("slow tools, please");
    const sleeping = lastRun().locator('.call[data-tool="test.sleep"] .state.running');
    await sleeping.waitFor();
    check(await lastRun().locator(".answer").isHidden(), "no answer while a tool runs");
    check(await lastRun().locator('.call[data-tool="test.echo"][data-status="success"]').count() === 1, "the first call ended before");
    check((await lastRun().locator(".run-status").textContent()).includes("calling tools"), "status says calling tools");
    await shot("run-live");
    await finished();
    const answer = lastRun().locator(".answer");
    check((await answer.locator("strong").textContent()) === "done", "Markdown is rendered");
    check(await answer.locator("li").count() === 2, "lists are rendered");
    check(/\d+ tokens in/.test(await lastRun().locator(".usage").textContent()), "usage is shown");
    check(await lastRun().locator(".note.draft").count() === 1, "the model's text between calls is shown");
    await lastRun().locator('.call[data-tool="test.echo"] summary').click();
    await lastRun().locator('.call[data-tool="test.echo"] .result').filter({ hasText: "first step" }).waitFor();
    await page.locator("#session-list button.session", { hasText: "slow tools" }).waitFor();
    await shot("run-completed");
  });

  await step("a reload mid-run reattaches with Last-Event-ID, no gap, no duplicate", async () => {
    await newSession();
    await ask("reload in the middle");
    await lastRun().locator('.call[data-tool="test.sleep"] .state.running').waitFor();
    await page.waitForTimeout(400);
    lastEventIds.length = 0;
    await page.reload();
    await finished();
    const run = lastRun();
    check(await page.locator("#messages > li.run").count() === 1, "one run shown");
    check(await run.locator('.call[data-tool="test.echo"]').count() === 1, "the call before the reload shown once");
    check(await run.locator('.call[data-tool="test.sleep"]').count() === 1, "the call across the reload shown once");
    check((await run.locator(".answer").textContent()).trim() === "Finished after the reload.", "the answer, once");
    check(lastEventIds.some((id) => Number(id) > 0), `reattached with Last-Event-ID (${JSON.stringify(lastEventIds)})`);
  });

  await step("approve a call", async () => {
    await newSession();
    await ask("approve the note");
    const approve = page.getByRole("button", { name: "Approve", exact: true });
    await approve.waitFor();
    check((await lastRun().locator(".pause").textContent()).includes("approved-note"), "the call's arguments are shown");
    await shot("approval");
    await approve.focus();
    await page.keyboard.press("Enter");
    await finished();
    check((await lastRun().locator(".answer").textContent()).includes("The tool said: recorded"), "the approved call ran");
  });

  await step("deny a call", async () => {
    await newSession();
    await ask("deny the note");
    await page.getByRole("button", { name: "Deny", exact: true }).click();
    await finished();
    const status = await lastRun().locator('.call[data-tool="test.record"]').getAttribute("data-status");
    check(status && status !== "success", `the denied call did not run (${status})`);
  });

  await step("a clarification is answered in the Message box", async () => {
    await newSession();
    await ask("clarify the request");
    const pause = lastRun().locator('.pause[data-kind="clarification"]');
    await pause.filter({ hasText: "Which project do you mean?" }).waitFor();
    await shot("clarification");
    await ask("Project 7");
    await finished();
    check((await lastRun().locator(".answer").textContent()).includes("Project 7"), "the answer reached the model");
  });

  await step("a tool's question is answered in a form built from its schema", async () => {
    await newSession();
    await ask("book a table");
    const form = lastRun().locator("form.elicitation");
    await form.waitFor();
    check((await form.textContent()).includes("Who is the table on Friday for?"), "the question is shown");
    check(await form.getByLabel("How many people").inputValue() === "2", "a default is filled in");
    await shot("elicitation");
    await form.getByLabel("Who the table is for").fill("Ada");
    await form.getByRole("button", { name: "Send", exact: true }).click();
    await finished();
    check(await lastRun().locator("form.elicitation").count() === 0, "the form is gone once answered");
    const answer = await lastRun().locator(".answer").textContent();
    check(answer.includes("booked Friday for Ada, 2 guests"), `the answer reached the tool (${answer})`);
  });

  await step("Stop cancels the run", async () => {
    await newSession();
    await ask("stop me");
    await lastRun().locator('.call[data-tool="test.sleep"] .state.running').waitFor();
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await finished("cancelled");
    check(await page.getByRole("button", { name: "Stop", exact: true }).isHidden(), "Stop goes away");
    await shot("stopped");
  });

  await step("a message sent while the run works steers it", async () => {
    await newSession();
    await ask("steer me");
    await lastRun().locator('.call[data-tool="test.sleep"] .state.running').waitFor();
    check(!(await page.getByRole("button", { name: "Send", exact: true }).isDisabled()), "Send works while the run works");
    await ask("in euros, please");
    await lastRun().locator(".note.user-message", { hasText: "You: in euros, please" }).waitFor();
    await finished();
    const answer = await lastRun().locator(".answer").textContent();
    check(answer.includes("Steered by: in euros, please"), `the model's next request held the message: ${answer}`);
    await shot("steered");
  });

  await step("model output with <script> and <img onerror> stays inert", async () => {
    await newSession();
    await ask("markup please");
    await finished();
    const answer = lastRun().locator(".answer");
    check((await answer.textContent()).includes("<script>window.__pwned"), "the markup shows as text");
    check(await answer.locator("script, img, a[href^=javascript]").count() === 0, "no element made from model text");
    await page.waitForTimeout(200);
    check(await page.evaluate(() => window.__pwned) === undefined, "nothing ran");
  });

  await step("an attached image goes with the question", async () => {
    await newSession();
    // A 1×1 PNG picked with the Attach button (its file input).
    const png = Buffer.from(
      "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==",
      "base64");
    await page.locator("#attach-input").setInputFiles({ name: "dot.png", mimeType: "image/png", buffer: png });
    await page.locator("#attachments .chip", { hasText: "dot.png" }).waitFor();
    await ask("look at this");
    await finished();
    check((await lastRun().locator(".answer").textContent()).includes("I see 1 image(s): image/png"),
      "the model was given the image");
    check(await lastRun().locator(".question .chip", { hasText: "dot.png" }).count() === 1,
      "the question shows its attachment");
    check(await page.locator("#attachments").isHidden(), "the chosen files are sent once");
    // Opened again, the stored question shows the image, fetched by its hash with the key.
    await page.locator("#session-list button.session", { hasText: "look at this" }).click();
    const image = lastRun().locator(".question img.attachment");
    await image.waitFor();
    await page.waitForFunction(() => document.querySelector("#messages .question img.attachment")?.naturalWidth === 1);
    check((await image.getAttribute("src")).startsWith("blob:"), "the image is shown from a blob: URL");
  });

  await step("keyboard only, visible focus", async () => {
    await message().focus();
    await page.keyboard.press("Tab");
    check(await page.evaluate(() => document.activeElement.id) === "send", "Tab leads from Message to Send");
    const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
    check(outline !== "none", "focus is visible");
  });

  await step("a typed answer is shown pretty-printed", async () => {
    const value = { title: "Checkout is down", priority: 1 };
    const response = await fetch(`${PANEL_URL.replace(/\/$/, "")}/v1/runs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${KEY_ANN}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        query: "file a ticket for the checkout",
        stream: false,
        output: { name: "ticket", schema: { type: "object", required: ["title", "priority"] } },
      }),
    });
    check(response.status === 200, `the typed run: ${response.status}`);
    const { output } = await response.json();
    check(output?.title === value.title && output?.priority === value.priority, `its value: ${JSON.stringify(output)}`);
    await page.reload();
    await page.locator("#session-list button.session", { hasText: "file a ticket" }).click();
    const shown = lastRun().locator(".answer pre.typed");
    await shown.waitFor();
    check((await shown.textContent()) === JSON.stringify(output, null, 2), "the value, indented");
    await shot("typed-answer");
  });

  await step("a session can be opened again, and deleted", async () => {
    await page.locator("#session-list button.session", { hasText: "slow tools" }).click();
    await lastRun().locator('.call[data-tool="test.sleep"][data-status="success"]').waitFor();
    check((await lastRun().locator(".answer").textContent()).includes("All done"), "the stored answer");
    await page.getByRole("button", { name: "Delete session", exact: true }).click();
    await page.getByRole("button", { name: "Confirm delete", exact: true }).click();
    await page.locator("#session-list button.session", { hasText: "slow tools" }).waitFor({ state: "detached" });
  });

  await step("phone width, dark scheme", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.emulateMedia({ colorScheme: "dark" });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth > innerWidth);
    check(!wide, "no horizontal scrolling at 390 px");
    const menu = page.getByRole("button", { name: "Sessions", exact: true });
    await menu.focus();
    await page.keyboard.press("Enter");
    await page.locator("#session-list button.session").first().waitFor();
    await page.keyboard.press("Escape");
    check(await page.locator("#sidebar").isHidden(), "Escape closes the sessions");
    await menu.press("Enter");
    await page.locator("#session-list button.session", { hasText: "approve the note" }).press("Enter");
    await lastRun().locator(".answer").waitFor();
    check(!(await page.evaluate(() => document.documentElement.scrollWidth > innerWidth)), "no horizontal scrolling with a run");
    await shot("phone-dark");
    await page.setViewportSize({ width: 1200, height: 800 });
    await page.emulateMedia({ colorScheme: "light" });
  });

  await step("a second user's key sees none of the first user's sessions", async () => {
    const annSession = await page.locator("#session-list button.session").first().getAttribute("data-session");
    check(annSession, "the first user has a session");
    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    await page.getByLabel("API key").fill(KEY_BOB);
    await page.getByLabel("API key").press("Enter");
    await page.locator("#session-list .empty").waitFor();
    check(await page.locator("#session-list button.session").count() === 0, "no sessions listed");
    allowed = [/status of 404/];
    const status = await page.evaluate(async ([id, key]) => (await fetch("/v1/sessions/" + id,
      { headers: { Authorization: "Bearer " + key } })).status, [annSession, KEY_BOB]);
    allowed = [];
    check(status === 404, `another user's session answers 404 (${status})`);
  });

  check(problems.length === 0, "no console errors:\n" + problems.join("\n"));
  console.log(`all ${steps.length} browser checks passed`);
} catch (error) {
  await shot("failure").catch(() => {});
  console.error(error.stack ?? String(error));
  if (problems.length) console.error("console:\n" + problems.join("\n"));
  process.exitCode = 1;
} finally {
  await browser.close();
}
