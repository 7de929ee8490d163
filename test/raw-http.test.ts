import { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { print } from 'graphql';
import { createLogger } from '../src/core/logger.js';
import { CreateCampaignDocument, IssueCouponDocument } from './generated/graphql.js';
import { asTenantAdmin, asUser, createTenant, gql, serveTestBackend, type ServedBackend } from './support/harness.js';
import { waitFor, waitForLockWaiter } from './support/wait.js';

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

  /** The lines the server logged for one request, once its 'request completed' line is there. */
  const linesOf = async (requestId: string) => {
    await waitFor(
      () => lines.find((line) => line['requestId'] === requestId && line['msg'] === 'request completed'),
      `line of ${requestId}`,
    );
    return lines.filter((line) => line['requestId'] === requestId);
  };
  const openConnections = () =>
    new Promise<number>((resolve, reject) => backend.server.server.getConnections((e, n) => (e ? reject(e) : resolve(n))));

  it('logs a client that hangs up in the middle of a body of declared length as gone, once', async () => {
    const head =
      'POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\nx-request-id: gone-2\r\n\r\n';
    await raw(`${head}{"query":"{ view`, { hangUp: true });
    const logged = await linesOf('gone-2');
    expect(logged.filter((line) => line['level'] !== 'info')).toEqual([]);
    expect(logged.filter((line) => line['msg'] === 'request completed')).toMatchObject([{ status: 499 }]);
  });

  it('logs a mutation whose client hung up while it ran, once it has run: 499 and what it came to', async () => {
    await createTenant(backend, 'gone', 10_000);
    const campaign = { input: { id: 'left', name: 'Left', discountYen: 100, budgetYen: 10_000 } };
    await gql(backend.app.fetch, CreateCampaignDocument, campaign, asTenantAdmin('gone'));
    const body = JSON.stringify({ query: print(IssueCouponDocument), variables: { input: { campaignId: 'left' } } });
    const headers = Object.entries(asUser('gone', 'walker'))
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    const request =
      `POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\naccept: application/json\r\n${headers}` +
      `x-request-id: gone-3\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const holder = await backend.sql.connect();
    try {
      // The issue waits for the campaign's budget row while its client hangs up.
      await holder.query('begin');
      await holder.query("select 1 from campaign_budget_slots where tenant_id = 'gone' and campaign_id = 'left' for update");
      const socket = new Socket();
      socket.on('error', () => {});
      await new Promise<void>((resolve) => socket.connect(backend.port, '127.0.0.1', resolve));
      socket.write(request);
      await waitForLockWaiter(backend);
      socket.destroy();
      await waitFor(async () => ((await openConnections()) === 0 ? true : undefined), 'server side of the socket closed');
      expect(lines.filter((line) => line['requestId'] === 'gone-3' && line['msg'] === 'request completed')).toEqual([]);
      await holder.query('commit');
    } finally {
      // Closed, not pooled: a failure before the commit must not leave the lock held for the next test.
      holder.release(true);
    }
    const logged = await linesOf('gone-3');
    expect(logged.filter((line) => line['level'] !== 'info')).toEqual([]);
    expect(logged.filter((line) => line['msg'] === 'request completed')).toMatchObject([
      { status: 499, operation: 'issueCoupon', outcome: 'ISSUED' },
    ]);
    const issued = await backend.sql.query("select count(*)::int as n from coupons where tenant_id = 'gone' and member_id = 'walker'");
    expect(issued.rows[0].n).toBe(1);
  });

  it('logs a client that hangs up in the middle of its chunked body as gone, not as a server error', async () => {
    const head =
      'POST /graphql HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nx-request-id: gone-1\r\n\r\n';
    await raw(`${head}10\r\n{"query":"{ view\r\n`, { hangUp: true });
    const logged = await linesOf('gone-1');
    expect(logged.filter((line) => line['level'] !== 'info')).toEqual([]);
    expect(logged.find((line) => line['msg'] === 'request completed')).toMatchObject({ status: 499 });
  });
});
