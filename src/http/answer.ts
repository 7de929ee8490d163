import type { ServerResponse } from 'node:http';

/**
 * What goes out on a Node socket. /actions' replies are made by the server itself (actions.ts)
 * before they are written: no GraphQL library is involved; they are written whole, and on the
 * Fetch path they become a standard `Response`. Yoga's answers arrive as a Fetch Response and are
 * written by writeFetchResponse.
 */

/** A response as it goes out: status, headers and the whole body, with nothing of it read back. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** An answer of the body's text, its length among the headers as a Fetch Response's is (the compressor judges by it). */
function answerOf(status: number, headers: Record<string, string>, body: string): Answer {
  return { status, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, body };
}

/** A JSON answer, typed as Response.json types it. */
export const jsonAnswer = (status: number, value: unknown): Answer =>
  answerOf(status, { 'content-type': 'application/json' }, JSON.stringify(value));

/** On a Node socket: the status, the headers and the body in one write. */
export function writeAnswer(res: ServerResponse, answer: Answer): void {
  res.writeHead(answer.status, answer.headers);
  res.end(answer.body);
}

/** On the Fetch path. */
export const responseOf = (answer: Answer): Response => new Response(answer.body, { status: answer.status, headers: answer.headers });

/** Media types whose body arrives in parts over time (subscriptions, incremental delivery): sent as they come. */
const STREAMED_MEDIA_TYPES = /^\s*(text\/event-stream|multipart\/mixed)\b/i;

/**
 * Writes a Fetch Response on the socket: the status, the headers and the whole body in one write
 * (writeHead, then end with the body), except for a streamed media type, whose parts go out as
 * they are produced.
 */
export async function writeFetchResponse(response: Response, res: ServerResponse): Promise<void> {
  // One pass over the headers and no lookup after it (a Fetch Headers lookup showed in the profile).
  const headers: Record<string, string | string[]> = {};
  let contentType = '';
  response.headers.forEach((value, name) => {
    if (name === 'content-type') contentType = value;
    headers[name] = name === 'set-cookie' ? response.headers.getSetCookie() : value;
  });
  if (!STREAMED_MEDIA_TYPES.test(contentType)) {
    const bytes: ArrayBuffer | Uint8Array = await response.arrayBuffer();
    res.writeHead(response.status, headers);
    res.end(ArrayBuffer.isView(bytes) ? bytes : Buffer.from(bytes));
    return;
  }
  res.writeHead(response.status, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    res.write(value);
  }
  res.end();
}
