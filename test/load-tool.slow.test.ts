import { mkdtemp, readFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLoadArgs, UsageError } from './load/args.js';
import { LoadClient } from './load/client.js';
import { startDelayProxy } from './load/delay-proxy.js';
import { renderReport } from './load/report.js';
import { runLoad, type LoadResult } from './load/run.js';
import { replyOutcome, violationsOf, type LoadScenario } from './load/scenario.js';
import { couponsScenario, headerSessions } from './load/scenarios/coupons.js';
import { documentsScenario } from './load/scenarios/documents.js';
import { huddlesScenario } from './load/scenarios/huddles.js';
import { percentile } from './load/stats.js';
import { formatResult } from './load/cli.js';
import { serveTestBackend, type ServedBackend } from './support/harness.js';
import { listenOnLoopback, type LoopbackServer } from './support/ports.js';
import { runScript } from './support/scripts.js';

describe('npm run load: arguments', () => {
  it('defaults to the reference coupon scenario at 32 clients', () => {
    expect(parseLoadArgs(['--scenario', 'coupons'])).toMatchObject({
      scenario: 'coupons',
      concurrency: 32,
      requests: 1_800,
      durationSeconds: null,
      url: null,
    });
  });

  it('--rate: the open model, with room for 256 connections unless told otherwise', () => {
    expect(parseLoadArgs(['--scenario', 'coupons', '--rate', '400'])).toMatchObject({ rate: 400, concurrency: 256 });
    expect(parseLoadArgs(['--scenario', 'coupons', '--rate', '400', '--concurrency', '64'])).toMatchObject({ rate: 400, concurrency: 64 });
    expect(() => parseLoadArgs(['--scenario', 'coupons', '--rate', '0'])).toThrow(/whole number above 0/);
  });

  it('reads every option', () => {
    const args = parseLoadArgs([
      '--scenario',
      'huddles',
      '--url',
      'http://10.0.0.1:4000/graphql',
      '--database-url',
      'postgres://x@y/z',
      '--concurrency',
      '8',
      '--duration',
      '30',
      '--json',
      'out.json',
      '--report',
      'out.html',
      '--secret',
      's3cret',
      '--resend',
    ]);
    expect(args).toEqual({
      scenario: 'huddles',
      url: 'http://10.0.0.1:4000/graphql',
      databaseUrl: 'postgres://x@y/z',
      concurrency: 8,
      rate: null,
      requests: null,
      durationSeconds: 30,
      json: 'out.json',
      report: 'out.html',
      secret: 's3cret',
      resend: true,
      help: false,
    });
  });

  it.each([
    [[], /--scenario is required/],
    [['--scenario', 'payments'], /unknown scenario "payments"/],
    [['--scenario', 'coupons', '--requests', '10', '--duration', '5'], /not both/],
    [['--scenario', 'coupons', '--concurrency', '0'], /whole number above 0/],
    [['--scenario', 'coupons', '--concurrency', 'many'], /whole number above 0/],
    [['--scenario', 'coupons', '--json'], /--json needs a value/],
    [['--scenario', 'coupons', '--fast'], /unknown option --fast/],
  ])('refuses %j', (argv, message) => {
    expect(() => parseLoadArgs(argv)).toThrow(UsageError);
    expect(() => parseLoadArgs(argv)).toThrow(message);
  });

  it('computes nearest-rank percentiles', () => {
    const sorted = Array.from({ length: 100 }, (_, i) => i + 1);
    expect([percentile(sorted, 50), percentile(sorted, 99), percentile(sorted, 100), percentile([], 99)]).toEqual([50, 99, 100, 0]);
  });
});

describe('npm run load --rate: the open model keeps its schedule', () => {
  const STALL_FROM_MS = 250;
  const STALL_UNTIL_MS = 2_250;
  let stub: LoopbackServer;

  beforeAll(async () => {
    // A server that answers at once, except that from 250 ms to 2,250 ms after the first request
    // it answers nothing and holds every request until the stall ends.
    let firstRequestAt: number | null = null;
    const server = http.createServer((req, res) => {
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"data":{"ping":{"status":"PONG"}}}');
      if (req.url === '/health') return answer();
      firstRequestAt ??= performance.now();
      const at = performance.now() - firstRequestAt;
      if (at >= STALL_FROM_MS && at < STALL_UNTIL_MS) setTimeout(answer, STALL_UNTIL_MS - at);
      else answer();
    });
    stub = await listenOnLoopback(server);
  });
  afterAll(() => stub.close());

  it('sends every request at its time while the server stalls, and counts the stall in their latency', async () => {
    const EDGE_MS = 100;
    const ping: LoadScenario = {
      name: 'ping',
      setup: async () => {},
      request: (_index, client) => () => client.graphql('{ ping { status } }', {}, {}),
      outcomeOf: replyOutcome,
      check: async () => [],
    };
    const client = new LoadClient(`${stub.origin}/graphql`, 300);
    try {
      // 100 requests per second for 2.8 s: about 200 fall due while the server answers nothing.
      const result = await runLoad({
        client,
        sessions: headerSessions(),
        scenario: ping,
        concurrency: 300,
        rate: 100,
        amount: { requests: 280 },
        sql: null,
      });
      expect(result.outcomes).toEqual({ PONG: 280 });
      // A closed model stops sending once its lanes all wait (32 by default): it could send no more
      // than 32 in the stall. This one kept going. How many more depends on how often a busy
      // machine's scheduler lets this process run, so the bound is the closed model's, twice over.
      const inStall = (ms: number) => ms >= STALL_FROM_MS && ms < STALL_UNTIL_MS;
      const dueInStall = result.samples.filter((s) => inStall(s.dueMs));
      const sentInStall = result.samples.filter((s) => inStall(s.sentMs));
      expect(dueInStall.length).toBeGreaterThanOrEqual(190);
      expect(sentInStall.length).toBeGreaterThan(2 * 32);
      // Latency runs from the scheduled time: nothing due in the stall could be answered before it
      // ended. The server counts from the first request it saw, the tool from its own start, so the
      // two windows may sit a few milliseconds apart: only requests well inside the stall are judged.
      const wellInside = dueInStall.filter((s) => s.dueMs >= STALL_FROM_MS + EDGE_MS && s.dueMs < STALL_UNTIL_MS - EDGE_MS);
      expect(wellInside.length).toBeGreaterThan(100);
      for (const sample of wellInside) expect(sample.latencyMs).toBeGreaterThanOrEqual(STALL_UNTIL_MS - sample.dueMs - EDGE_MS);
      expect(result.latency.p50).toBeGreaterThan(100);
    } finally {
      client.close();
    }
  });
});

describe('npm run load --resend: mutations sent with the typed client', () => {
  it('resends a TRY_AGAIN with the same Idempotency-Key after the Retry-After it asked for, and counts both sends', async () => {
    const keys: (string | undefined)[] = [];
    const server = http.createServer((req, res) => {
      keys.push(req.headers['idempotency-key'] as string | undefined);
      req.resume();
      const body =
        keys.length === 1
          ? { errors: [{ message: 'busy', extensions: { code: 'TRY_AGAIN', retryAfterMs: 50 } }] }
          : { data: { issueCoupon: { status: 'ISSUED' } } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    const stub = await listenOnLoopback(server);
    const client = new LoadClient(`${stub.origin}/graphql`, 2, { resend: true });
    try {
      const reply = await client.graphql(
        'mutation { issueCoupon(input: { campaignId: "c" }) { status } }',
        {},
        { 'idempotency-key': 'k-1' },
      );
      expect(reply.body).toEqual({ data: { issueCoupon: { status: 'ISSUED' } } });
      expect(reply.attempts).toBe(2);
      expect(keys).toEqual(['k-1', 'k-1']);
      expect(reply.latencyMs).toBeGreaterThanOrEqual(50);
      // Queries are never resent: they go out once as they are.
      const query = await client.graphql('{ viewer { role } }', {}, {});
      expect(query.attempts).toBeUndefined();
      expect(keys).toHaveLength(3);
    } finally {
      client.close();
      await stub.close();
    }
  });
});

describe('the delay proxy the bench puts between a server and PostgreSQL', () => {
  it('holds every chunk at least 0.5 ms each way, and delivers every byte in order', async () => {
    const echo = net.createServer((socket) => socket.pipe(socket));
    const echoing = await listenOnLoopback(echo);
    const proxy = await startDelayProxy({ target: { host: '127.0.0.1', port: echoing.port }, delayMs: 0.5 });
    const socket = net.connect(proxy.port, '127.0.0.1');
    try {
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.setNoDelay(true);
      const roundTrips: number[] = [];
      let received = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
      for (let i = 0; i < 50; i++) {
        const message = Buffer.from(`ping ${i};`);
        const expected = received.length + message.length;
        const sent = performance.now();
        socket.write(message);
        while (received.length < expected) await new Promise((resolve) => setImmediate(resolve));
        roundTrips.push(performance.now() - sent);
      }
      expect(received.toString()).toBe(Array.from({ length: 50 }, (_, i) => `ping ${i};`).join(''));
      // Twice 0.5 ms at the least, and not held for long (a loose bound: the machine is shared).
      expect(Math.min(...roundTrips)).toBeGreaterThanOrEqual(1);
      expect(
        percentile(
          [...roundTrips].sort((a, b) => a - b),
          50,
        ),
      ).toBeLessThan(10);
    } finally {
      socket.destroy();
      await proxy.close();
      await echoing.close();
    }
  });
});

describe('npm run load: scenarios and their invariant checks', () => {
  let backend: ServedBackend;
  beforeAll(async () => {
    backend = await serveTestBackend();
  });
  afterAll(() => backend.close());

  const load = async (scenario: LoadScenario, requests: number): Promise<LoadResult> => {
    const client = new LoadClient(backend.url, 8);
    try {
      return await runLoad({ client, sessions: headerSessions(), scenario, concurrency: 8, amount: { requests }, sql: backend.sql });
    } finally {
      client.close();
    }
  };

  it('coupons: holds on a clean run, and the check fails on a counter that lost an issue and a missing outbox event', async () => {
    const scenario = couponsScenario('t1', 120);
    const result = await load(scenario, 120);
    expect(result.violations).toEqual([]);
    expect(result.outcomes['ISSUED']).toBe(40);
    expect(result.latency.count).toBe(120);
    await backend.sql.query(
      "update campaign_budget_slots set issued_yen = issued_yen - 1000 where tenant_id = 'coupons-t1' and campaign_id = 'c100k'",
    );
    await backend.sql.query("delete from outbox_events where id = (select id from outbox_events where tenant_id = 'coupons-t1' limit 1)");
    const violations = violationsOf(await scenario.check(backend.sql, result.outcomes));
    expect(violations.join('\n')).toMatch(/campaign c100k: issuedYen/);
    expect(violations.join('\n')).toMatch(/outbox events for 40 coupons/);
  });

  it('documents: holds on a clean run, and the check fails on a planted gap', async () => {
    const scenario = documentsScenario('t2', 3, 90);
    const result = await load(scenario, 90);
    expect(result.violations).toEqual([]);
    await backend.sql.query("delete from contract_documents where tenant_id = 'docs-t2-1' and doc_number = 10000005");
    const violations = violationsOf(await scenario.check(backend.sql, result.outcomes));
    expect(violations.join('\n')).toMatch(/tenant docs-t2-1: number 10000006 where 10000005 belongs/);
  });

  it('huddles: holds on a clean run, and the check fails on a session ended with members in it', async () => {
    const scenario = huddlesScenario('t3', 4, 3, 96);
    const result = await load(scenario, 96);
    expect(result.violations).toEqual([]);
    expect(Object.keys(result.outcomes)).toContain('JOINED');
    await backend.sql.query("insert into huddle_sessions (tenant_id, objective_id, ended_at) values ('huddles-t3', 'broken', now())");
    await backend.sql.query(
      "insert into huddle_participants (tenant_id, session_id, member_id) select tenant_id, id, 'ghost' from huddle_sessions where objective_id = 'broken'",
    );
    const violations = violationsOf(await scenario.check(backend.sql, result.outcomes));
    expect(violations).toContain('1 ended sessions still hold members');
  });

  it('writes a self-contained HTML report: when, which commit, which machine, what ran, and charts with scaled, titled axes', async () => {
    const result = await load(documentsScenario('t4', 1, 30), 30);
    const html = renderReport(result, {
      date: new Date('2026-12-01T09:30:00Z'),
      commit: 'abc1234',
      machine: 'bench-host: 2 x Some CPU',
      configuration: { scenario: 'documents', model: 'closed model: 8 requests in flight' },
      server: { 'pool size': '10 connections (DB_POOL_MAX)', 'in-flight limit': '10 operations (MAX_IN_FLIGHT)' },
      load: { cores: 2, before: [6.25, 5, 4], after: [7.5, 5.5, 4.25] },
    });
    expect(html).toMatch(/^<!doctype html>/);
    for (const fact of [
      '2026-12-01T09:30:00.000Z',
      'abc1234',
      'bench-host: 2 x Some CPU',
      'closed model: 8 requests in flight',
      '10 connections (DB_POOL_MAX)',
      '10 operations (MAX_IN_FLIGHT)',
      '6.25 / 5.00 / 4.00 before, 7.50 / 5.50 / 4.25 after (1 / 5 / 15 min; 2 cores)',
    ])
      expect(html).toContain(fact);
    expect(html).toContain('Latency histogram');
    expect(html).toContain('Throughput over time');
    expect(html).toContain('Latency over time');
    expect((html.match(/<svg/g) ?? []).length).toBe(3);
    for (const axis of ['latency (ms', '>requests<', 'time since the start (s)', 'answers per second (requests/s)', '>p99<'])
      expect(html).toContain(axis);
    // Each y axis carries five ticks from 0 to a round top.
    expect(html.match(/text-anchor="end">0</g)).toHaveLength(3);
    expect(html).not.toMatch(/<script|src=|href=/);
    expect(html).toContain('Invariants: all held.');
    // Every invariant with the counts it was judged on.
    expect(html).toContain('per-tenant numbers from 10000000, never repeated, never skipped');
    expect(html).toContain('30 documents in 1 tenants, 0 tenants with a number out of place');
    expect(html).toContain('30 documents for 30 OK answers');
  });

  it('marks a partial last second as such: its bar is a rate over the time it covers, not a drop', () => {
    const sample = (endMs: number) => ({ dueMs: 0, sentMs: 0, endMs, latencyMs: 5, outcome: 'OK' });
    // 100 answers in each of two whole seconds, then 25 in the quarter second the run had left.
    const samples = [
      ...Array.from({ length: 100 }, (_, i) => sample(i * 10)),
      ...Array.from({ length: 100 }, (_, i) => sample(1_000 + i * 10)),
      ...Array.from({ length: 25 }, (_, i) => sample(2_000 + i * 10)),
    ];
    const result = {
      ...({} as LoadResult),
      scenario: 'documents',
      model: 'closed' as const,
      concurrency: 1,
      offeredRate: null,
      requests: samples.length,
      wallMs: 2_250,
      requestsPerSecond: 100,
      latency: { count: samples.length, p50: 5, p95: 5, p99: 5, max: 5 },
      outcomes: { OK: samples.length },
      errors: {},
      checks: null,
      violations: null,
      samples,
    };
    const html = renderReport(result, {
      date: new Date(),
      commit: 'c',
      machine: 'm',
      configuration: {},
      server: {},
      load: { cores: 2, before: [1, 1, 1], after: [1, 1, 1] },
    });
    expect(html).toContain('<title>3*: 100</title>');
    expect(html).toContain('Second 3 is partial: the run ended 0.25 s into it');
    expect(html).toContain('its 25 answers scaled to a second (100 requests/s)');
    expect(html).toContain('<td>3* (0.25 s)</td><td>25</td>');
  });

  it('the open model (--rate) offers the rate and says what it achieved', async () => {
    const client = new LoadClient(backend.url, 16);
    try {
      const result = await runLoad({
        client,
        sessions: headerSessions(),
        scenario: documentsScenario('t5', 2, 60),
        concurrency: 16,
        rate: 100,
        amount: { requests: 60 },
        sql: backend.sql,
      });
      expect(result).toMatchObject({ model: 'open', offeredRate: 100, requests: 60, violations: [] });
      // Sixty requests due over 0.59 s at 100 per second: the run cannot be shorter than its schedule.
      expect(result.wallMs).toBeGreaterThanOrEqual(590);
      const lastDue = Math.max(...result.samples.map((s) => s.dueMs));
      // The last send leaves at its due time, or up to the timers' 1 ms grain before it.
      expect(lastDue).toBeGreaterThanOrEqual(588.5);
      expect(lastDue).toBeLessThanOrEqual(590);
      expect(formatResult(result)).toMatch(/offered\s+100\.0 requests\/s\nachieved\s+\d+\.\d requests\/s/);
    } finally {
      client.close();
    }
  });

  it('runs as a command against a given URL and database: prints the figures, writes JSON, exits 0', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'load-cli-'));
    const json = path.join(dir, 'summary.json');
    const { code, output } = await runScript('test/load/cli.ts', {}, [
      '--scenario',
      'documents',
      '--url',
      backend.url,
      '--database-url',
      backend.databaseUrl,
      '--requests',
      '60',
      '--concurrency',
      '4',
      '--json',
      json,
    ]);
    expect(output).toMatch(/requests\s+60 in/);
    expect(output).toMatch(/latency\s+p50 .* p95 .* p99 .* max/);
    expect(output).toContain('invariants    all held (checked in SQL)');
    expect(output).toMatch(/held {2}one document per OK answer: 60 documents for 60 OK answers/);
    expect(output).toMatch(/server +mode: the server at http:\/\/127\.0\.0\.1:\d+\/graphql, not started by this tool/);
    expect(output).toMatch(
      /machine load +[\d.]+ \/ [\d.]+ \/ [\d.]+ before, [\d.]+ \/ [\d.]+ \/ [\d.]+ after \(1 \/ 5 \/ 15 min; \d+ cores\)/,
    );
    expect(code).toBe(0);
    expect(JSON.parse(await readFile(json, 'utf8'))).toMatchObject({ scenario: 'documents', requests: 60, violations: [] });
  });
});
