import type { ServerResponse } from 'node:http';

/**
 * /actions' replies, made by the server itself (actions.ts) before they are written: no GraphQL
 * library is involved. On a Node socket they are written whole; on the Fetch path they become a
 * standard `Response`.
 */

/** A response as it goes out: status, headers and the whole body, with nothing of it read back. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** An answer of the body's text, its length among the headers as a Fetch Response's is (the compressor judges by it). */
export function answerOf(status: number, headers: Record<string, string>, body: string): Answer {
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
