// A question a running tool call asks (MCP elicitation): the server's message, a form built
// from its requested schema (text, number, checkbox, choice; defaults filled in), or the URL to
// open; Accept, Decline and Cancel send the answer to the call. The run goes on meanwhile.

import { h } from "./dom.js";

/** The form of `question` (`input_required.elicitation`); `send(answer)` posts the answer. */
export function questionForm(question, send) {
  const fields = [];
  const form = h("form", { class: "elicitation", "data-question": question.id, "aria-label": "Question from " + question.server });
  form.append(h("p", { class: "ask" },
    h("strong", { text: question.purpose === "sampling" ? "Approve: " : `${question.server} asks: ` }), question.message));
  if (question.mode === "url" && question.url) {
    form.append(h("p", {}, h("a", { href: question.url, target: "_blank", rel: "noopener noreferrer", text: question.url })));
  }
  const schema = question.requested_schema ?? {};
  const required = new Set(schema.required ?? []);
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const id = `q-${question.id}-${name}`.replace(/[^A-Za-z0-9_-]/g, "_");
    let input;
    if (Array.isArray(property.enum)) {
      input = h("select", { id, name });
      for (const choice of property.enum) input.append(h("option", { value: choice, text: String(choice) }));
      if (property.default !== undefined) input.value = property.default;
    } else if (property.type === "boolean") {
      input = h("input", { id, name, type: "checkbox" });
      input.checked = property.default === true;
    } else {
      const type = property.type === "integer" || property.type === "number" ? "number" : "text";
      input = h("input", { id, name, type, required: required.has(name) });
      if (property.type === "number") input.step = "any";
      if (property.default !== undefined) input.value = String(property.default);
    }
    fields.push([name, property, input]);
    form.append(h("p", { class: "field" },
      h("label", { for: id, text: property.description ?? property.title ?? name }), " ", input));
  }
  const error = h("p", { class: "call-error", role: "alert", hidden: true });
  const reply = async (action) => {
    const answer = { id: question.id, action };
    if (action === "accept" && question.mode === "form") {
      const content = {};
      for (const [name, property, input] of fields) {
        if (property.type === "boolean") content[name] = input.checked;
        else if (input.value === "") continue;
        else if (property.type === "integer") content[name] = parseInt(input.value, 10);
        else if (property.type === "number") content[name] = Number(input.value);
        else content[name] = input.value;
      }
      answer.content = content;
    }
    try {
      await send(answer);
      form.replaceChildren(h("p", { class: "decided", text: `Answered: ${action}` }));
    } catch (failure) {
      error.hidden = false;
      error.textContent = failure.message;
    }
  };
  const accept = question.mode === "url" ? "Done" : question.purpose === "sampling" ? "Allow" : "Send";
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    reply("accept");
  });
  form.append(h("div", { class: "decide" },
    h("button", { type: "submit", class: "approve", text: accept }),
    h("button", { type: "button", class: "deny", onclick: () => reply("decline"), text: "Decline" }),
    h("button", { type: "button", class: "cancel", onclick: () => reply("cancel"), text: "Cancel" })), error);
  return form;
}
