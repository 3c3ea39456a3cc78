// Attachments: files picked with the Attach button or pasted into the message box, sent with
// the next question as data URLs (POST /v1/runs `attachments`); and the images of stored
// messages, shown from GET /v1/attachments/{sha256} (fetched with the key, shown as blob: URLs).

import { h } from "./dom.js";

/** What the server reads; other files are refused there too, by their content. */
export const ACCEPT = "image/png,image/jpeg,image/gif,image/webp,application/pdf,text/plain,text/markdown,text/csv";

function dataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/** The files chosen for the next question, listed as chips that can be removed. */
export class Picker {
  constructor(input, button, list, box) {
    this.input = input;
    this.list = list;
    this.files = [];
    input.accept = ACCEPT;
    button.addEventListener("click", () => input.click());
    input.addEventListener("change", () => {
      this.add([...input.files]);
      input.value = "";
    });
    box.addEventListener("paste", (event) => {
      const files = [...(event.clipboardData?.files ?? [])];
      if (!files.length) return;
      event.preventDefault();
      this.add(files);
    });
  }

  add(files) {
    for (const file of files) this.files.push(file);
    this.render();
  }

  render() {
    this.list.hidden = this.files.length === 0;
    this.list.replaceChildren(...this.files.map((file, index) => {
      const remove = h("button", { type: "button", class: "link", text: "×", "aria-label": `Remove ${file.name}` });
      remove.addEventListener("click", () => {
        this.files.splice(index, 1);
        this.render();
      });
      return h("li", { class: "chip" }, h("span", { text: file.name || file.type }), remove);
    }));
  }

  /** The chosen files as the API's attachments, and the list emptied. */
  async take() {
    const files = this.files;
    this.files = [];
    this.render();
    return Promise.all(files.map(async (file) => ({
      url: await dataUrl(file),
      name: file.name || undefined,
      media_type: file.type || undefined,
    })));
  }
}

/** The names of a question's attachments, under it. */
export function chips(attachments) {
  return h("ul", { class: "chips" }, ...attachments.map((attachment) =>
    h("li", { class: "chip", text: attachment.name ?? attachment.media_type })));
}

/** The images of a stored message, loaded with the key; other files by name. */
export function images(attachments, api) {
  const box = h("div", { class: "images" });
  for (const attachment of attachments) {
    if (!attachment.sha256 || !attachment.media_type.startsWith("image/")) {
      box.append(h("span", { class: "chip", text: attachment.name ?? attachment.media_type }));
      continue;
    }
    const image = h("img", { alt: attachment.name ?? attachment.media_type, class: "attachment" });
    box.append(image);
    api.attachment(attachment.sha256)
      .then((blob) => { image.src = URL.createObjectURL(blob); })
      .catch((error) => image.replaceWith(h("p", { class: "call-error", text: error.message })));
  }
  return box;
}
