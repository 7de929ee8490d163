import { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { serveTestBackend, type ServedBackend } from './support/harness.js';

/** Requests only a raw socket can make (TRACE, a body cut off midway), answered and logged as the client's doing. */
describe('what a socket can do that fetch cannot', () => {
  let backend: ServedBackend;
  const lines: Record<string, unknown>[] = [];
  beforeAll(async () => {
    const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    backend = await serveTestBackend({ log });
  });
  afterAll(() => backend.close());

  /** Writes raw HTTP and gives what came back when the server closed or `settleMs` passed. */
  async function raw(text: string, options: { hangUp?: boolean; settleMs?: number } = {}): Promise<string> {
    const socket = new Socket();
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.on('error', () => {});
    await new Promise<void>((resolve) => socket.connect(backend.port, '127.0.0.1', resolve));
    socket.write(text);
    await sleep(options.settleMs ?? 200);
    if (options.hangUp) socket.destroy();
    else socket.end();
    await sleep(200);
    return answer;
  }

  it('answers TRACE 405 with a code, and logs it as a request, not as a server error', async () => {
    const answer = await raw('TRACE /graphql HTTP/1.1\r\nHost: x\r\nx-request-id: trace-1\r\nConnection: close\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 405 /);
    expect(answer).toContain('"code":"BAD_USER_INPUT"');
    const logged = lines.filter((line) => line['requestId'] === 'trace-1');
    expect(logged.map((line) => [line['level'], line['msg'], line['status']])).toEqual([['info', 'request completed', 405]]);
  });

  it('logs a client that hangs up in the middle of its chunked body as gone, not as a server error', async () => {
    const head =
      'POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nx-request-id: gone-1\r\n\r\n';
    await raw(`${head}10\r\n{"query":"{ view\r\n`, { hangUp: true });
    await sleep(300);
    const logged = lines.filter((line) => line['requestId'] === 'gone-1');
    expect(logged.filter((line) => line['level'] !== 'info')).toEqual([]);
    expect(logged.find((line) => line['msg'] === 'request completed')).toMatchObject({ status: 499 });
  });
});
