import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLoadArgs, UsageError } from './load/args.js';
import { LoadClient } from './load/client.js';
import { renderReport } from './load/report.js';
import { runLoad, type LoadResult } from './load/run.js';
import type { LoadScenario } from './load/scenario.js';
import { couponsScenario, headerSessions } from './load/scenarios/coupons.js';
import { documentsScenario } from './load/scenarios/documents.js';
import { huddlesScenario } from './load/scenarios/huddles.js';
import { percentile } from './load/stats.js';
import { createTestBackend, serveOverHttp, type TestBackend } from './support/harness.js';
import { runScript } from './support/scripts.js';

describe('npm run load: arguments', () => {
  it('defaults to the reference coupon scenario at 32 clients', () => {
    expect(parseLoadArgs(['--scenario', 'coupons'])).toMatchObject({ scenario: 'coupons', concurrency: 32, requests: 1_800, durationSeconds: null, url: null });
  });

  it('reads every option', () => {
    const args = parseLoadArgs([
      '--scenario', 'huddles', '--url', 'http://10.0.0.1:4000/graphql', '--database-url', 'postgres://x@y/z',
      '--concurrency', '8', '--duration', '30', '--json', 'out.json', '--report', 'out.html', '--secret', 's3cret',
    ]);
    expect(args).toEqual({
      scenario: 'huddles', url: 'http://10.0.0.1:4000/graphql', databaseUrl: 'postgres://x@y/z', concurrency: 8,
      requests: null, durationSeconds: 30, json: 'out.json', report: 'out.html', secret: 's3cret', help: false,
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

describe('npm run load: scenarios and their invariant checks', () => {
  let backend: TestBackend;
  let url: string;
  let stopServer: () => Promise<void>;
  beforeAll(async () => {
    backend = await createTestBackend();
    const served = await serveOverHttp(backend);
    url = served.url;
    stopServer = () => served.server.close();
  });
  afterAll(async () => {
    await stopServer();
    await backend.close();
  });

  const load = async (scenario: LoadScenario, requests: number): Promise<LoadResult> => {
    const client = new LoadClient(url, 8);
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
    await backend.sql.query("update campaign_budget_slots set issued_yen = issued_yen - 1000 where tenant_id = 'coupons-t1' and campaign_id = 'c100k'");
    await backend.sql.query("delete from outbox_events where id = (select id from outbox_events where tenant_id = 'coupons-t1' limit 1)");
    const violations = await scenario.check(backend.sql, result.outcomes);
    expect(violations.join('\n')).toMatch(/campaign c100k: issuedYen/);
    expect(violations.join('\n')).toMatch(/outbox events for 40 coupons/);
  });

  it('documents: holds on a clean run, and the check fails on a planted gap', async () => {
    const scenario = documentsScenario('t2', 3, 90);
    const result = await load(scenario, 90);
    expect(result.violations).toEqual([]);
    await backend.sql.query("delete from contract_documents where tenant_id = 'docs-t2-1' and doc_number = 10000005");
    const violations = await scenario.check(backend.sql, result.outcomes);
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
    const violations = await scenario.check(backend.sql, result.outcomes);
    expect(violations).toContain('1 ended sessions still hold members');
  });

  it('writes a self-contained HTML report with the histogram and the throughput over time', async () => {
    const result = await load(documentsScenario('t4', 1, 30), 30);
    const html = renderReport(result);
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('Latency histogram');
    expect(html).toContain('Throughput over time');
    expect((html.match(/<svg/g) ?? []).length).toBe(2);
    expect(html).not.toMatch(/<script|src=|href=/);
    expect(html).toContain('Invariants: all held.');
  });

  it('runs as a command against a given URL and database: prints the figures, writes JSON, exits 0', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'load-cli-'));
    const json = path.join(dir, 'summary.json');
    const { code, output } = await runScript('test/load/cli.ts', {}, [
      '--scenario', 'documents', '--url', url, '--database-url', backend.databaseUrl, '--requests', '60', '--concurrency', '4', '--json', json,
    ]);
    expect(output).toMatch(/requests\s+60 in/);
    expect(output).toMatch(/latency\s+p50 .* p95 .* p99 .* max/);
    expect(output).toContain('invariants    all held (checked in SQL)');
    expect(code).toBe(0);
    expect(JSON.parse(await readFile(json, 'utf8'))).toMatchObject({ scenario: 'documents', requests: 60, violations: [] });
  });
});
