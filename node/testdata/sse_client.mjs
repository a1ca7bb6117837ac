// A Server-Sent Events client on Node's own fetch stream reader, parsing
// the stream as the WHATWG "event stream interpretation" does (lines end in
// LF, CR or CRLF; "field: value" with one optional space; comments skipped;
// an event dispatched at a blank line; the last event ID kept across
// events). Usage: node sse_client.mjs URL COUNT [LAST_EVENT_ID]
// Prints each dispatched event as one JSON line {id, event, data}, then
// exits once COUNT events have come.
const [url, countArg, lastId] = process.argv.slice(2);
const want = Number(countArg);
const headers = { Accept: 'text/event-stream' };
if (lastId !== undefined) headers['Last-Event-ID'] = lastId;
const res = await fetch(url, { headers });
if (res.status !== 200 || res.headers.get('content-type') !== 'text/event-stream') {
  console.error(`status ${res.status}, content-type ${res.headers.get('content-type')}`);
  process.exit(2);
}
const decoder = new TextDecoder('utf-8');
let buf = '', data = '', event = '', id = lastId ?? '', got = 0;
const reader = res.body.getReader();
for (;;) {
  const { value, done } = await reader.read();
  if (done) { console.error(`stream ended after ${got} events`); process.exit(3); }
  buf += decoder.decode(value, { stream: true });
  for (;;) {
    const m = buf.match(/\r\n|\r|\n/);
    if (!m) break;
    const line = buf.slice(0, m.index);
    buf = buf.slice(m.index + m[0].length);
    if (line === '') {
      if (data !== '') {
        console.log(JSON.stringify({ id, event: event || 'message', data: data.endsWith('\n') ? data.slice(0, -1) : data }));
        if (++got === want) process.exit(0);
      }
      data = ''; event = '';
      continue;
    }
    if (line.startsWith(':')) continue;
    const i = line.indexOf(':');
    let field = line, val = '';
    if (i >= 0) { field = line.slice(0, i); val = line.slice(i + 1); if (val.startsWith(' ')) val = val.slice(1); }
    if (field === 'data') data += val + '\n';
    else if (field === 'event') event = val;
    else if (field === 'id' && !val.includes('\0')) id = val;
  }
}
