// A small Server-Sent Events reader over fetch: EventSource cannot send the Authorization
// header. Yields {id, event, data} for each event of a text/event-stream body; comments
// (": keep-alive") are skipped.

export async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let frame = { id: null, event: "message", data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, end);
      const newline = buffer.startsWith("\r\n", end) ? 2 : 1;
      buffer = buffer.slice(end + newline);
      if (line === "") {
        if (frame.data.length) yield { id: frame.id, event: frame.event, data: frame.data.join("\n") };
        frame = { id: null, event: "message", data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? "" : line.slice(colon + 1);
      if (text.startsWith(" ")) text = text.slice(1);
      if (field === "data") frame.data.push(text);
      else if (field === "event") frame.event = text;
      else if (field === "id") frame.id = text;
    }
  }
}
