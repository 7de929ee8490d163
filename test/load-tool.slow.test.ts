import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLoadArgs, UsageError } from './load/args.js';
import { LoadClient } from './load/client.js';
import { startDelayProxy } from './load/delay-proxy.js';
import { renderReport } from './load/report.js';
import { partSummary, perSecond, runLoad, type LoadResult, type Sample } from './load/run.js';
import { replyOutcome, violationsOf, type LoadScenario } from './load/scenario.js';
import { couponsScenario, headerSessions } from './load/scenarios/coupons.js';
import { documentsScenario } from './load/scenarios/documents.js';
import { huddlesScenario } from './load/scenarios/huddles.js';
import { describeModel, exitCodeOf, formatResult } from './load/cli.js';
import { liveLine } from './load/live.js';
import { constantRate, parseStages, stagedRate } from './load/schedule.js';
import { percentile, summarize } from './load/stats.js';
import { beyondReach, judge, parseThreshold, type Threshold } from './load/thresholds.js';
import { CreateCampaignDocument } from './generated/graphql.js';
import { asTenantAdmin, createTenant, createTestDatabaseUrl, gqlOk, serveTestBackend, type ServedBackend } from './support/harness.js';
import { benchServerEnv, startServerProcess } from './load/target.js';
import { listenOnLoopback, type LoopbackServer } from './support/ports.js';
import { captureOutput, runScript, spawnScript } from './support/scripts.js';

/** A report's circumstances when a test reads only its figures. */
const BARE_CONTEXT = {
  date: new Date(),
  commit: 'c',
  machine: 'm',
  configuration: {},
  server: {},
  load: { cores: 2, before: [1, 1, 1], after: [1, 1, 1] },
};

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
      thresholds: [],
      abortOnFail: false,
      warmupSeconds: 0,
      stages: null,
      document: null,
      variables: null,
      tenant: null,
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
    // 20 members: the first campaign's budget is 100,000 yen scaled to them, and its name says so.
    const { rows } = await backend.sql.query<{ id: string; budget_yen: number }>(
      "select id, budget_yen from campaigns where tenant_id = 'coupons-t1' order by budget_yen, id",
    );
    expect(rows).toEqual([
      { id: 'c6667', budget_yen: 6_667 },
      { id: 'c20k-a', budget_yen: 20_000 },
      { id: 'c20k-b', budget_yen: 20_000 },
    ]);
    await backend.sql.query(
      "update campaign_budget_slots set issued_yen = issued_yen - 1000 where tenant_id = 'coupons-t1' and campaign_id = 'c6667'",
    );
    await backend.sql.query("delete from outbox_events where id = (select id from outbox_events where tenant_id = 'coupons-t1' limit 1)");
    const violations = violationsOf(await scenario.check(backend.sql, result.outcomes));
    expect(violations.join('\n')).toMatch(/campaign c6667: issuedYen/);
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
    const sample = (endMs: number): Sample => ({ dueMs: 0, sentMs: 0, endMs, latencyMs: 5, outcome: 'OK' });
    // 100 answers in each of two whole seconds, then 25 in the quarter second the run had left.
    const samples = [
      ...Array.from({ length: 100 }, (_, i) => sample(i * 10)),
      ...Array.from({ length: 100 }, (_, i) => sample(1_000 + i * 10)),
      ...Array.from({ length: 25 }, (_, i) => sample(2_000 + i * 10)),
    ];
    const result: LoadResult = {
      ...partSummary(samples),
      scenario: 'documents',
      model: 'closed',
      concurrency: 1,
      offeredRate: null,
      stages: null,
      warmupMs: 0,
      wallMs: 2_250,
      requestsPerSecond: 100,
      timedOut: 0,
      notSent: 0,
      warmup: null,
      perSecond: perSecond(samples, 2_250, 0, null),
      thresholds: [],
      aborted: null,
      checks: null,
      violations: null,
      samples,
    };
    const html = renderReport(result, BARE_CONTEXT);
    expect(html).toContain('<title>3*: 100</title>');
    expect(html).toContain('Second 3 is partial: the run ended 0.25 s into it');
    expect(html).toContain('its 25 answers scaled to a second (100 requests/s)');
    expect(html).toContain('<td>3* (0.25 s)</td><td></td><td>25</td><td>0</td><td>0</td>');
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
      expect(result).toMatchObject({ model: 'open', offeredRate: 100, requests: 60, notSent: 0, violations: [] });
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
    expect(output).toMatch(/latency\s+mean [\d.]+ {2}min [\d.]+ {2}p50 [\d.]+ {2}p90 [\d.]+ {2}p95 [\d.]+ {2}p99 [\d.]+ {2}max [\d.]+ ms/);
    expect(output).toMatch(/received\s+[\d.]+ KiB of response bodies/);
    expect(output).toContain('invariants    all held (checked in SQL)');
    expect(output).toMatch(/held {2}one document per OK answer: 60 documents for 60 OK answers/);
    expect(output).toMatch(/server +mode: the server at http:\/\/127\.0\.0\.1:\d+\/graphql, not started by this tool/);
    expect(output).toMatch(
      /machine load +[\d.]+ \/ [\d.]+ \/ [\d.]+ before, [\d.]+ \/ [\d.]+ \/ [\d.]+ after \(1 \/ 5 \/ 15 min; \d+ cores\)/,
    );
    expect(code).toBe(0);
    const summary = JSON.parse(await readFile(json, 'utf8')) as LoadResult;
    expect(summary).toMatchObject({
      scenario: 'documents',
      requests: 60,
      violations: [],
      timedOut: 0,
      notSent: 0,
      warmup: null,
      thresholds: [],
    });
    expect(Object.keys(summary.latency)).toEqual(['count', 'mean', 'min', 'p50', 'p90', 'p95', 'p99', 'max']);
    expect(summary.bytesReceived).toBeGreaterThan(60 * 100);
    expect(summary.perSecond.reduce((sum, second) => sum + second.count, 0)).toBe(60);
    expect(Object.keys(summary.perSecond[0]!)).toEqual([
      'second',
      'count',
      'p50',
      'p95',
      'p99',
      'errors',
      'unanswered',
      'warmup',
      'offered',
      'stage',
    ]);
    expect(summary).not.toHaveProperty('samples');
  });

  /** The CLI against the test backend, with a JSON summary to read back. */
  const command = async (extra: string[]) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'load-cli-'));
    const json = path.join(dir, 'summary.json');
    const { code, output } = await runScript('test/load/cli.ts', {}, [
      ...['--scenario', 'documents', '--url', backend.url, '--database-url', backend.databaseUrl, '--concurrency', '4'],
      ...['--json', json, ...extra],
    ]);
    const summary = (await readFile(json, 'utf8').then(
      (text) => JSON.parse(text) as LoadResult,
      () => null,
    ))!;
    return { code, output, summary };
  };

  it('--threshold: every threshold met exits 0, each printed with its value and verdict, in the JSON and the report', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'load-cli-'));
    const report = path.join(dir, 'report.html');
    const { code, output, summary } = await command([
      ...['--requests', '40', '--threshold', 'p99<600000', '--threshold', 'errors<50%', '--threshold', 'rate>0.01', '--report', report],
    ]);
    expect(code, output).toBe(0);
    const p99 = summary.latency.p99;
    expect(summary.thresholds).toEqual([
      { expression: 'p99<600000', metric: 'p99', limit: 600_000, value: p99, passed: true },
      { expression: 'errors<50%', metric: 'errors', limit: 50, value: 0, passed: true },
      { expression: 'rate>0.01', metric: 'rate', limit: 0.01, value: summary.requestsPerSecond, passed: true },
    ]);
    expect(output).toContain(`thresholds    pass  p99<600000: ${p99.toFixed(1)} ms`);
    expect(output).toContain('pass  errors<50%: 0.00%');
    const html = await readFile(report, 'utf8');
    expect(html).toContain(`<tr><td>p99&#60;600000</td><td>${p99.toFixed(1)} ms</td><td class="ok">pass</td></tr>`);
  });

  it('--threshold: one crossed exits 99 (1 stays an invariant violated), and says which', async () => {
    const { code, output, summary } = await command(['--requests', '40', '--threshold', 'p50<600000', '--threshold', 'max<0.001']);
    expect(code, output).toBe(99);
    expect(summary.violations).toEqual([]);
    expect(summary.thresholds.map((verdict) => [verdict.expression, verdict.passed])).toEqual([
      ['p50<600000', true],
      ['max<0.001', false],
    ]);
    expect(output).toContain(`FAIL  max<0.001: ${summary.latency.max.toFixed(1)} ms`);
    expect(summary.aborted).toBeNull();
  });

  it('--scenario operation: any operation of the schema, its variables in turn, the members of a tenant in turn, its answers by status and code', async () => {
    await createTenant(backend, 'op-tenant', 1_000_000);
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'welcome', name: 'Welcome', discountYen: 100, budgetYen: 1_000_000 } },
      asTenantAdmin('op-tenant'),
    );
    const dir = await mkdtemp(path.join(os.tmpdir(), 'load-operation-'));
    const [document, variables] = [path.join(dir, 'issue.graphql'), path.join(dir, 'variables.json')];
    await writeFile(document, 'mutation Issue($input: IssueCouponInput!) { issueCoupon(input: $input) { status } }\n');
    await writeFile(variables, JSON.stringify([{ input: { campaignId: 'welcome' } }, { input: { campaignId: 'no-such-campaign' } }]));
    const { code, output, summary } = await command([
      ...['--scenario', 'operation', '--document', document, '--variables', variables, '--tenant', 'op-tenant', '--requests', '20'],
    ]);
    expect(code, output).toBe(0);
    // Twenty members, each once: the even requests issue, the odd ones name a campaign that does not exist.
    expect(summary).toMatchObject({ scenario: 'operation Issue', outcomes: { ISSUED: 10, NOT_FOUND: 10 }, errors: { NOT_FOUND: 10 } });
    expect(output).toContain('invariants    none known for an arbitrary operation');
    const { rows } = await backend.sql.query<{ members: number }>(
      "select count(distinct member_id)::int as members from coupons where tenant_id = 'op-tenant'",
    );
    expect(rows[0]!.members).toBe(10);

    await writeFile(document, '{ noSuchField }');
    const refused = await runScript('test/load/cli.ts', {}, ['--scenario', 'operation', '--document', document, '--url', backend.url]);
    expect(refused.code).toBe(2);
    expect(refused.output).toMatch(/is not valid against the schema: Cannot query field "noSuchField" on type "Query"/);
  });

  it('--abort-on-fail: a duration run stops at the first second a threshold can no longer be met, and exits 99', async () => {
    const { code, output, summary } = await command(['--duration', '120', '--threshold', 'max<0.001', '--abort-on-fail']);
    expect(code, output).toBe(99);
    expect(summary.aborted).toMatchObject({ threshold: 'max<0.001' });
    // Judged at whole seconds: the first second had answers, every one slower than 0.001 ms.
    expect(summary.aborted!.atMs).toBeLessThan(120_000);
    expect(output).toMatch(/aborted +[\d.]+ s into the run: max<0.001 could no longer be met/);
    // Not a terminal: a progress line every 2 s, the first a quarter second in (this run lasts at least a second;
    // sixty requests may all be answered before a quarter second has passed).
    expect(output).toMatch(
      /^ +[\d.]+ s {2}measured {2}\d+\/s {2}p50 [\d.]+ ms {2}p99 [\d.]+ ms {2}in flight \d+ {2}answered \d+ {2}errors none$/m,
    );
  });

  it('--rate: what falls due while the generator cannot run is never sent; the figures and the JSON count it', async () => {
    // The first progress line comes 2 s in; the stop must land before the run's end, 8 s later
    // here, however slowly this busy machine hands the line to the test.
    const [RATE, SECONDS] = [10, 10];
    const json = path.join(await mkdtemp(path.join(os.tmpdir(), 'load-cli-')), 'summary.json');
    const child = spawnScript('test/load/cli.ts', {}, [
      ...['--scenario', 'documents', '--url', backend.url, '--database-url', backend.databaseUrl, '--concurrency', '4'],
      ...['--rate', String(RATE), '--duration', String(SECONDS), '--json', json],
    ]);
    const output = captureOutput(child);
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    // Not a terminal: the first progress line comes once the run's clock has begun.
    const progressed = new Promise<void>((resolve) =>
      child.stderr!.on('data', () => /^ +[\d.]+ s {2}measured/m.test(output()) && resolve()),
    );
    // A tool that ends before its first progress line fails here with what it printed, not at the test's timeout.
    const endedFirst = await Promise.race([progressed.then(() => false), exited.then(() => true)]);
    expect(endedFirst, output()).toBe(false);
    const clockBegunBy = performance.now();
    // The generator's process gets no CPU (a machine too busy to run it): its schedule goes on
    // without it. It runs again only after its duration is over, by its own clock (which began
    // before the line came): then its deadline is past, and what fell due meanwhile is never sent.
    process.kill(child.pid!, 'SIGSTOP');
    try {
      await sleep(clockBegunBy + SECONDS * 1000 - performance.now());
    } finally {
      process.kill(child.pid!, 'SIGCONT');
    }
    const code = await exited;
    expect(code, output()).toBe(0);
    const summary = JSON.parse(await readFile(json, 'utf8')) as LoadResult;
    // Sent before the stop, never sent after it: together, every request the schedule had due.
    expect(summary.requests).toBeGreaterThan(0);
    expect(summary.notSent).toBeGreaterThan(0);
    expect(summary.requests + summary.notSent).toBe(RATE * SECONDS);
    expect(summary.violations).toEqual([]);
    expect(output()).toMatch(
      new RegExp(
        `schedule +\\d+ requests sent more than 10 ms late \\(at most \\d+ ms\\); ${summary.notSent} due before the end were never sent: the load generator fell behind`,
      ),
    );
  });
});

/** A server that answers `{ ping { status } }` at once, or as `answer` decides from the request's `i` variable. */
async function pingServer(answer: (i: number, res: http.ServerResponse) => void = (_i, res) => pong(res)): Promise<LoopbackServer> {
  const server = http.createServer((req, res) => {
    if (req.url === '/health') return void pong(res);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => answer((JSON.parse(Buffer.concat(chunks).toString()) as { variables: { i: number } }).variables.i, res));
  });
  return listenOnLoopback(server);
}

function pong(res: http.ServerResponse, body: unknown = { data: { ping: { status: 'PONG' } } }) {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** Request i sends `{ i }`, so that the server can answer each as a test needs. */
const numberedPing: LoadScenario = {
  name: 'ping',
  setup: async () => {},
  request: (index, client) => () => client.graphql('query Ping($i: Int) { ping { status } }', { i: index }, {}),
  outcomeOf: replyOutcome,
  check: async () => [],
};

describe('npm run load: warm-up, stages and a kept duration', () => {
  it('--warmup: what is due in the warm-up is sent but left out of the figures and the thresholds, and reported apart', async () => {
    // The first 50 requests (due in the first 0.5 s at 100/s) are answered TRY_AGAIN: a cold server.
    const stub = await pingServer((i, res) =>
      i < 50 ? pong(res, { errors: [{ message: 'busy', extensions: { code: 'TRY_AGAIN' } }] }) : pong(res),
    );
    const client = new LoadClient(`${stub.origin}/graphql`, 16);
    try {
      const result = await runLoad({
        client,
        sessions: headerSessions(),
        scenario: numberedPing,
        concurrency: 16,
        rate: 100,
        warmupMs: 500,
        amount: { requests: 50 },
        thresholds: [parseThreshold('errors<1%')],
        sql: null,
      });
      expect(result.warmup).toMatchObject({ requests: 50, outcomes: { TRY_AGAIN: 50 }, errors: { TRY_AGAIN: 50 } });
      expect(result).toMatchObject({ requests: 50, outcomes: { PONG: 50 }, errors: {}, warmupMs: 500 });
      expect(result.latency.count).toBe(50);
      expect(result.thresholds).toEqual([expect.objectContaining({ expression: 'errors<1%', value: 0, passed: true })]);
      expect(result.samples.filter((s) => s.warmup).every((s) => s.outcome === 'TRY_AGAIN' && s.dueMs < 500)).toBe(true);
      expect(result.perSecond[0]).toMatchObject({ warmup: true });
    } finally {
      client.close();
      await stub.close();
    }
  });

  it('a duration is kept: what is unanswered when it ends counts as TIMED_OUT then, and the run ends on time', async () => {
    const held: http.ServerResponse[] = [];
    // Answers the first 20 requests, then holds every other: a server that stopped answering.
    const stub = await pingServer((i, res) => (i < 20 ? pong(res) : void held.push(res)));
    const client = new LoadClient(`${stub.origin}/graphql`, 4);
    try {
      const result = await runLoad({
        client,
        sessions: headerSessions(),
        scenario: numberedPing,
        concurrency: 4,
        amount: { durationSeconds: 1 },
        settleMs: 0,
        sql: null,
      });
      expect(result.wallMs).toBe(1_000);
      expect(result).toMatchObject({ requests: 24, timedOut: 4, outcomes: { PONG: 20, TIMED_OUT: 4 }, errors: { TIMED_OUT: 4 } });
      for (const sample of result.samples.filter((s) => s.outcome === 'TIMED_OUT')) expect(sample.endMs).toBe(1_000);
      // Not answers: the last second's bar counts only what was answered in it.
      expect(result.perSecond.at(-1)).toMatchObject({ unanswered: 4 });
      expect(result.perSecond.reduce((sum, second) => sum + second.count, 0)).toBe(20);
      expect(formatResult(result)).toMatch(/requests +24 in 1\.00 s, 4 unanswered at the end \(TIMED_OUT\)/);
    } finally {
      for (const res of held) pong(res);
      client.close();
      await stub.close();
    }
  });

  it('--stages: the arrival rate ramps stage by stage, and the per-second figures and chart mark the stages', async () => {
    const stub = await pingServer();
    const client = new LoadClient(`${stub.origin}/graphql`, 32);
    const schedule = stagedRate(parseStages('1s:100,1s:100'));
    try {
      const result = await runLoad({
        client,
        sessions: headerSessions(),
        scenario: numberedPing,
        concurrency: 32,
        schedule,
        amount: { durationSeconds: 2 },
        sql: null,
      });
      // 0 to 100/s over the first second offers 50, then 100/s for a second offers 100: each sent, or
      // (a generator on a machine too busy to keep its schedule) counted as never sent.
      expect(result.requests + result.notSent).toBe(150);
      expect(result.requests).toBeGreaterThan(100);
      expect(result.offeredRate).toBeNull();
      expect(result.stages).toEqual([
        { startMs: 0, endMs: 1_000, fromRate: 0, toRate: 100 },
        { startMs: 1_000, endMs: 2_000, fromRate: 100, toRate: 100 },
      ]);
      expect(result.perSecond.map((second) => [second.offered, second.stage])).toEqual([
        [50, 1],
        [100, 2],
      ]);
      // Sent in order, each at its due time: the ramp's gaps shrink as the rate rises.
      const dues = result.samples.map((s) => s.dueMs).sort((a, b) => a - b);
      expect(dues[1]! - dues[0]!).toBeGreaterThan(dues[49]! - dues[48]!);
      const html = renderReport(result, BARE_CONTEXT);
      expect(html).toContain('>stage 1</text>');
      expect(html).toContain('>stage 2</text>');
      expect(html).toContain('offered (stages)');
      expect(describeModel(result)).toBe('open model in stages from 0/s: 1 s to 100/s, 1 s to 100/s; at most 32 connections');
    } finally {
      client.close();
      await stub.close();
    }
  });
});

describe('npm run load: thresholds, stages and the live line, by themselves', () => {
  it('reads thresholds, stages and the warm-up, and refuses what does not fit', () => {
    const args = parseLoadArgs([
      '--scenario',
      'coupons',
      '--threshold',
      'p99<500',
      '--threshold',
      'errors<1.5%',
      '--threshold',
      'rate > 300',
    ]);
    expect(args.thresholds).toEqual([
      { expression: 'p99<500', metric: 'p99', limit: 500 },
      { expression: 'errors<1.5%', metric: 'errors', limit: 1.5 },
      { expression: 'rate > 300', metric: 'rate', limit: 300 },
    ]);
    const staged = parseLoadArgs(['--scenario', 'coupons', '--stages', '10s:100,30s:400,10s:0', '--warmup', '10']);
    expect(staged).toMatchObject({ warmupSeconds: 10, durationSeconds: 40, requests: null, concurrency: 256 });
    expect(staged.stages).toEqual([
      { durationMs: 10_000, target: 100 },
      { durationMs: 30_000, target: 400 },
      { durationMs: 10_000, target: 0 },
    ]);
    for (const [argv, message] of [
      [['--threshold', 'p42<5'], /a threshold is p50\|p90\|p95\|p99\|max<MS/],
      [['--threshold', 'errors<5'], /a threshold is/],
      [['--abort-on-fail'], /needs a --threshold/],
      [['--stages', '10s:100', '--duration', '5'], /--stages sets the run's length/],
      [['--stages', '10s'], /a stage is DURATION:RATE/],
      [['--stages', '10s:0'], /every target is 0/],
      [['--stages', '10s:100', '--warmup', '10'], /leaves nothing of the stages' 10 s to measure/],
      [['--warmup', '0'], /number of seconds above 0/],
      [['--document', 'x.graphql'], /--document is for --scenario operation/],
    ] as [string[], RegExp][]) {
      expect(() => parseLoadArgs(['--scenario', 'coupons', ...argv])).toThrow(message);
    }
    expect(() => parseLoadArgs(['--scenario', 'operation'])).toThrow(/needs --document FILE/);
  });

  it('gives up on a threshold only when no rest of the run can meet it', () => {
    const [p99, max, errors, rate] = ['p99<100', 'max<100', 'errors<10%', 'rate>50'].map(parseThreshold) as Threshold[];
    const part = { latencies: [5, 5, 150], waiting: [], errors: 0, toSend: 97, elapsedMs: 1_000, lengthMs: null };
    // One of 100 above 100 ms: p99 (the 99th of 100) can still be below it; max cannot.
    expect(beyondReach([p99!], part)).toBeNull();
    expect(beyondReach([p99!, max!], part)).toBe(max);
    expect(beyondReach([p99!], { ...part, waiting: [200] })).toBe(p99);
    // A closed model for a duration: its size is not known, so more fast answers could always come.
    expect(beyondReach([p99!], { ...part, latencies: [150, 150], toSend: null })).toBeNull();
    expect(beyondReach([errors!], { ...part, errors: 10 })).toBe(errors);
    expect(beyondReach([errors!], { ...part, errors: 9 })).toBeNull();
    // 100 requests in all, one second gone already: at most 100 answers/s, never above 100/s.
    expect(beyondReach([parseThreshold('rate>100')], part)).not.toBeNull();
    expect(beyondReach([rate!], part)).toBeNull();
    expect(judge([p99!, rate!], { latency: summarize([1, 2, 3]), errors: 0, requests: 3, requestsPerSecond: 60 })).toEqual([
      { ...p99, value: 3, passed: true },
      { ...rate, value: 60, passed: true },
    ]);
  });

  it('schedules stages by their arrivals: a ramp offers the area under its rate', () => {
    const schedule = stagedRate(parseStages('10s:100,30s:400,10s:0'));
    // 0 to 100 over 10 s: 500; 100 to 400 over 30 s: 7,500; 400 to 0 over 10 s: 2,000.
    expect(schedule.dueBetween(0, 10_000)).toBe(500);
    expect(schedule.dueBetween(10_000, 40_000)).toBe(7_500);
    expect(schedule.dueBetween(40_000, 50_000)).toBe(2_000);
    expect(schedule.dueMs(9_999)).toBeLessThanOrEqual(50_000);
    expect(schedule.dueMs(10_000)).toBeNull();
    let last = -1;
    for (let i = 0; i < 10_000; i += 7) {
      const due = schedule.dueMs(i)!;
      expect(due).toBeGreaterThan(last);
      last = due;
    }
    expect(schedule.rateAt(25_000)).toBe(250);
    expect(constantRate(200).dueBetween(0, 1_000)).toBe(200);
  });

  it('exits 1 on an invariant violated whatever the thresholds, 99 on a threshold crossed or an abort, 0 otherwise', () => {
    const verdict = (passed: boolean) => ({ expression: 'p99<1', metric: 'p99' as const, limit: 1, value: 0, passed });
    const base = { violations: [], thresholds: [verdict(true)], aborted: null } as unknown as LoadResult;
    expect(exitCodeOf(base)).toBe(0);
    expect(exitCodeOf({ ...base, violations: null })).toBe(0);
    expect(exitCodeOf({ ...base, thresholds: [verdict(false)] })).toBe(99);
    expect(exitCodeOf({ ...base, aborted: { atMs: 1_000, threshold: 'p99<1' } })).toBe(99);
    expect(exitCodeOf({ ...base, violations: ['broken'], thresholds: [verdict(false)] })).toBe(1);
  });

  it('prints one live line: the last second, its p50 and p99, errors by code so far, what is in flight', () => {
    const line = liveLine({
      elapsedMs: 12_345,
      warmup: false,
      stage: { index: 2, of: 3 },
      offeredRate: 400,
      lastSecond: { answers: 412, p50: 8.06, p99: 41 },
      errors: { TRY_AGAIN: 2, NETWORK_ERROR: 1 },
      inFlight: 3,
      answered: 5_000,
    });
    expect(line).toBe(
      '    12.3 s  measured  stage 2/3  412/s (offered 400/s)  p50 8.1 ms  p99 41.0 ms  in flight 3  answered 5000  errors TRY_AGAIN 2, NETWORK_ERROR 1',
    );
  });
});

describe("the bench's server processes", () => {
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  it("a request the server takes and never answers fails NO_ANSWER after the bench's limit, and its socket is closed", async () => {
    const socketsClosed: Promise<void>[] = [];
    // Accepts and reads, never writes nor closes: a server that stopped answering.
    const silent = net.createServer((socket) => {
      socket.resume();
      socketsClosed.push(new Promise((resolve) => socket.once('close', () => resolve())));
    });
    const listening = await listenOnLoopback(silent);
    const client = new LoadClient(`${listening.origin}/graphql`, 1, { requestTimeoutMs: 300 });
    try {
      await expect(client.graphql('mutation { issueCoupon(input: { campaignId: "c" }) { status } }', {}, {})).rejects.toMatchObject({
        code: 'NO_ANSWER',
      });
      expect(socketsClosed).toHaveLength(1);
      await socketsClosed[0];
    } finally {
      client.close();
      await listening.close();
    }
  });

  it('a server whose warm-up fails is stopped before the error goes on; one whose warm-up passes is handed over running', async () => {
    const env = benchServerEnv(await createTestDatabaseUrl(), 'conditional');
    let failedPid = 0;
    const failed = startServerProcess('test/load/bench-server.ts', env, {
      warmUp: async (server) => {
        failedPid = server.child.pid!;
        expect((await fetch(server.metricsUrl)).status).toBe(200);
        throw new Error('the warm-up found no such campaign');
      },
    });
    await expect(failed).rejects.toThrow('the warm-up found no such campaign');
    expect(failedPid).toBeGreaterThan(0);
    expect(alive(failedPid)).toBe(false);

    const passed = await startServerProcess('test/load/bench-server.ts', env, { warmUp: async () => {} });
    try {
      expect(alive(passed.child.pid!)).toBe(true);
      expect((await fetch(passed.metricsUrl)).status).toBe(200);
    } finally {
      await passed.stop();
    }
    expect(alive(passed.child.pid!)).toBe(false);
  });
});
