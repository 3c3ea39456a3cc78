// Markdown to DOM, safely: every piece of text becomes a text node, so HTML written by a model
// or a tool shows as the characters it is and never runs. Links are kept only for http(s) and
// mailto. Enough Markdown for answers: headings, paragraphs, lists, quotes, code, emphasis.

import { h } from "./dom.js";

const SAFE_URL = /^(https?:|mailto:)/i;

/** Inline spans: `code`, **strong**, *em* / _em_, [text](url). */
export function inline(text) {
  const out = [];
  const pattern = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|(?<!\w)__([^_]+)__(?!\w)|\*([^*\s][^*]*)\*|(?<!\w)_([^_\s][^_]*)_(?!\w)|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) out.push(text.slice(last, match.index));
    if (match[2] !== undefined) out.push(h("code", { text: match[2] }));
    else if (match[3] !== undefined || match[4] !== undefined) out.push(h("strong", {}, inline(match[3] ?? match[4])));
    else if (match[5] !== undefined || match[6] !== undefined) out.push(h("em", {}, inline(match[5] ?? match[6])));
    else if (SAFE_URL.test(match[8])) {
      out.push(h("a", { href: match[8], rel: "noopener noreferrer nofollow", target: "_blank" }, inline(match[7])));
    } else out.push(match[0]);
    last = match.index + match[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;

/** A document fragment for `source`. */
export function render(source) {
  const root = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) root.append(h("p", {}, withBreaks(paragraph)));
    paragraph = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
    if (fence) {
      flush();
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1;
      root.append(h("pre", {}, h("code", { class: fence[2] ? "language-" + fence[2] : null, text: body.join("\n") })));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      flush();
      // Answers sit under the page's own headings: # becomes h3.
      const level = Math.min(6, heading[1].length + 2);
      root.append(h("h" + level, {}, inline(heading[2])));
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      root.append(h("hr"));
      i += 1;
      continue;
    }
    if (line.startsWith(">")) {
      flush();
      const quoted = [];
      while (i < lines.length && lines[i].startsWith(">")) quoted.push(lines[i++].replace(/^>\s?/, ""));
      root.append(h("blockquote", {}, render(quoted.join("\n"))));
      continue;
    }
    const item = line.match(LIST_ITEM);
    if (item) {
      flush();
      const ordered = /\d/.test(item[2]);
      const list = h(ordered ? "ol" : "ul");
      while (i < lines.length) {
        const next = lines[i].match(LIST_ITEM);
        if (!next) {
          if (lines[i].trim() && /^\s{2,}/.test(lines[i]) && list.lastChild) {
            list.lastChild.append(" ", ...inline(lines[i].trim()));
            i += 1;
            continue;
          }
          break;
        }
        list.append(h("li", {}, inline(next[3])));
        i += 1;
      }
      root.append(list);
      continue;
    }
    if (!line.trim()) flush();
    else paragraph.push(line);
    i += 1;
  }
  flush();
  return root;
}

function withBreaks(lines) {
  const out = [];
  lines.forEach((line, index) => {
    if (index) out.push(h("br"));
    out.push(...inline(line));
  });
  return out;
}
