import http from 'node:http';
import { Writable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/core/config.js';
import { createLogger } from '../src/core/logger.js';
import { startBackend } from '../src/entry/backend.js';
import { startTracing } from '../src/core/tracing.js';
import { relayOnce } from '../src/features/outbox/relay.js';
import { webhookSink } from '../src/features/outbox/sinks.js';
import { relayDeps } from '../src/entry/worker/index.js';
import { CreateCampaignDocument, IssueCouponDocument } from './generated/graphql.js';
import { listenOnLoopback } from './support/ports.js';
import { waitFor } from './support/wait.js';
import { captureOutput, spawnScript, stopScript } from './support/scripts.js';
import {
  asTenantAdmin,
  asUser,
  createTenant,
  createTestBackend,
  createTestDatabaseUrl,
  gqlOk,
  serveTestBackend,
  type ServedBackend,
} from './support/harness.js';

/** A span as OTLP/JSON carries it, with its attributes flattened. */
interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
  events: { name: string }[];
  /** OTLP's status: code 2 is ERROR. */
  status?: { code?: number; message?: string };
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}

const valueOf = (value: OtlpValue) =>
  value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.boolValue ?? value.doubleValue));

/** A real OTLP/HTTP receiver: it keeps what the exporter posts to /v1/traces (JSON) and the raw bodies. */
async function startReceiver() {
  const spans: ExportedSpan[] = [];
  const raw: { contentType: string; body: Buffer }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      // The exporter may compress what it sends (Content-Encoding: gzip).
      const received = Buffer.concat(chunks);
      const body = req.headers['content-encoding'] === 'gzip' ? gunzipSync(received) : received;
      const contentType = req.headers['content-type'] ?? '';
      raw.push({ contentType, body });
      if (contentType.includes('json')) {
        const parsed = JSON.parse(body.toString()) as {
          resourceSpans: {
            scopeSpans: { spans: (Omit<ExportedSpan, 'attributes'> & { attributes?: { key: string; value: OtlpValue }[] })[] }[];
          }[];
        };
        for (const resource of parsed.resourceSpans) {
          for (const scope of resource.scopeSpans) {
            for (const span of scope.spans) {
              spans.push({
                ...span,
                attributes: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, valueOf(a.value)])),
                links: span.links ?? [],
                events: span.events ?? [],
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': contentType.includes('json') ? 'application/json' : 'application/x-protobuf' }).end('{}');
    });
  });
  const { origin, close } = await listenOnLoopback(server);
  return { url: `${origin}/v1/traces`, spans, raw, close };
}

/** A webhook receiver for the relay: it records the headers of every delivery. */
async function startWebhook() {
  const deliveries: http.IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    deliveries.push(req.headers);
    req.resume();
    req.on('end', () => res.writeHead(200).end());
  });
  const { origin, close } = await listenOnLoopback(server);
  return {
    url: `${origin}/hook`,
    deliveries,
    close,
  };
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const CALLER = `00-${TRACE_ID}-${CALLER_SPAN}-01`;

describe('tracing with OpenTelemetry, exported to a real OTLP/HTTP receiver', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let backend: ServedBackend;
  const lines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    receiver = await startReceiver();
    const log = createLogger(
      'info',
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line));
          done();
        },
      }),
    );
    backend = await serveTestBackend({
      log,
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '20',
        LOCK_TIMEOUT_MS: '100',
      },
    });
    await createTenant(backend, 'traced');
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'traced', name: 'Traced', discountYen: 100, budgetYen: 100_000 } },
      asTenantAdmin('traced'),
    );
  });
  afterAll(async () => {
    await backend.close();
    await receiver.close();
  });

  const issue = (member: string, traceparent: string) =>
    fetch(backend.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent, ...asUser('traced', member) },
      body: JSON.stringify({
        query: print(IssueCouponDocument),
        variables: { input: { campaignId: 'traced' } },
        operationName: 'IssueCoupon',
      }),
    });

  it('continues the caller’s trace through HTTP, the operation, the transaction and every statement', async () => {
    const response = await issue('tracer', CALLER);
    expect(((await response.json()) as { data: { issueCoupon: { status: string } } }).data.issueCoupon.status).toBe('ISSUED');
    const answered = response.headers.get('traceparent');
    expect(answered).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));

    const inTrace = () => receiver.spans.filter((s) => s.traceId === TRACE_ID);
    const server = await waitFor(() => inTrace().find((s) => s.name === 'POST /graphql'), 'server span');
    expect(server).toMatchObject({
      parentSpanId: CALLER_SPAN,
      kind: 2,
      attributes: { 'http.request.method': 'POST', 'http.response.status_code': 200 },
    });
    expect(answered).toBe(`00-${TRACE_ID}-${server.spanId}-01`);

    const operation = await waitFor(() => inTrace().find((s) => s.name === 'mutation issueCoupon'), 'operation span');
    expect(operation).toMatchObject({
      parentSpanId: server.spanId,
      attributes: { 'graphql.operation.type': 'mutation', 'graphql.operation.name': 'IssueCoupon', 'app.outcome': 'ISSUED' },
    });
    const transaction = await waitFor(
      () => inTrace().find((s) => s.name === 'transaction' && s.parentSpanId === operation.spanId),
      'attempt',
    );
    expect(transaction.attributes).toMatchObject({ 'app.transaction.attempt': 1, 'app.transaction.outcome': 'committed' });
    // The issue is one statement in its own implicit transaction: no BEGIN, no COMMIT.
    const statements = await waitFor(() => {
      const found = inTrace().filter((s) => s.parentSpanId === transaction.spanId);
      return found.some((s) => s.name.startsWith('coupons.issue.one')) ? found.filter((s) => s.name !== 'pool.connect') : undefined;
    }, 'statement spans');
    // Named for any campaign, or for the campaign's shape once the process knows it (coupons.issue.one.row).
    expect(statements.map((s) => s.name)).toEqual([expect.stringMatching(/^coupons\.issue\.one(\.row)?$/)]);
    for (const statement of statements) {
      expect(statement.attributes).toMatchObject({ 'db.system.name': 'postgresql' });
      // A prepared statement is named, not spelled out (TRACES_STATEMENT_TEXT=unprepared, the default).
      expect(statement.attributes).toMatchObject({ 'db.query.summary': statement.name, 'db.operation.name': 'WITH' });
      expect(statement.attributes).not.toHaveProperty('db.query.text');
    }
    expect(inTrace().some((s) => s.name === 'pool.connect')).toBe(true);

    const logged = lines.find((line) => line['msg'] === 'request completed' && line['trace_id'] === TRACE_ID);
    expect(logged).toMatchObject({ span_id: server.spanId, operation: 'issueCoupon', outcome: 'ISSUED' });
  });

  it('traces the known-document path as the pipeline: the operation span under the server span, the transaction under it', async () => {
    const answered = async () => (await backend.services.metrics.knownDocumentPath.get()).values[0]?.value ?? 0;
    const send = (member: string, traceId: string) =>
      fetch(backend.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          traceparent: `00-${traceId}-${'1'.repeat(16)}-01`,
          ...asUser('traced', member),
        },
        body: JSON.stringify({ query: `${print(IssueCouponDocument)} # known`, variables: { input: { campaignId: 'traced' } } }),
      });
    // New, then compiled in the pipeline: the third is the path's.
    for (const member of ['known-1', 'known-2']) await (await send(member, '9'.repeat(32))).text();
    const before = await answered();
    const traceId = '8'.repeat(32);
    expect(((await (await send('known-3', traceId)).json()) as { data: { issueCoupon: { status: string } } }).data.issueCoupon.status).toBe(
      'ISSUED',
    );
    expect(await answered()).toBe(before + 1);
    const inTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    const server = await waitFor(() => inTrace().find((s) => s.name === 'POST /graphql'), 'server span');
    const operation = await waitFor(() => inTrace().find((s) => s.name === 'mutation issueCoupon'), 'operation span');
    expect(operation).toMatchObject({
      parentSpanId: server.spanId,
      attributes: { 'graphql.operation.type': 'mutation', 'app.outcome': 'ISSUED' },
    });
    await waitFor(() => inTrace().find((s) => s.name === 'transaction' && s.parentSpanId === operation.spanId), 'attempt');
  });

  it('shows each attempt of a retried transaction, with the SQLSTATE that ended it', async () => {
    const traceId = 'a'.repeat(32);
    const holder = await backend.sql.connect();
    try {
      await holder.query('begin');
      await holder.query("select * from campaign_budget_slots where tenant_id = 'traced' and campaign_id = 'traced' for update");
      const pending = issue('retrier', `00-${traceId}-${'b'.repeat(16)}-01`);
      await sleep(400);
      await holder.query('commit');
      expect(((await (await pending).json()) as { data: { issueCoupon: { status: string } } }).data.issueCoupon.status).toBe('ISSUED');
    } finally {
      holder.release();
    }
    const attempts = await waitFor(() => {
      const found = receiver.spans.filter((s) => s.traceId === traceId && s.name === 'transaction');
      return found.some((s) => s.attributes['app.transaction.outcome'] === 'committed') ? found : undefined;
    }, 'attempt spans');
    const sorted = attempts.sort(
      (a, b) => Number(a.attributes['app.transaction.attempt']) - Number(b.attributes['app.transaction.attempt']),
    );
    expect(sorted.length).toBeGreaterThan(1);
    expect(sorted[0]!.attributes).toMatchObject({
      'db.response.status_code': '55P03',
      'app.transaction.retried': true,
      'app.transaction.outcome': 'failed',
    });
    expect(sorted.at(-1)!.attributes).toMatchObject({ 'app.transaction.outcome': 'committed' });
    // The lock wait is a long statement span inside the first attempt, the one statement.
    const waited = receiver.spans.filter(
      (s) => s.traceId === traceId && s.parentSpanId === sorted[0]!.spanId && s.name.startsWith('coupons.issue.one'),
    );
    expect(waited.length).toBe(1);
    // A statement that failed ends its span as failed, with the SQLSTATE that ended it.
    expect(waited[0]!.status).toMatchObject({ code: 2, message: '55P03' });
  });

  it('carries the trace through the outbox to the webhook, however late the relay runs', async () => {
    const traceId = 'c'.repeat(32);
    await issue('notified', `00-${traceId}-${'d'.repeat(16)}-01`);
    const { rows } = await backend.sql.query<{ traceparent: string | null }>(
      "select traceparent from outbox_events where tenant_id = 'traced' and payload->>'memberId' = 'notified'",
    );
    expect(rows[0]!.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    const writer = rows[0]!.traceparent!.split('-')[2];

    const webhook = await startWebhook();
    try {
      await relayOnce(relayDeps(backend.services, webhookSink(webhook.url, 5_000)));
      const delivered = webhook.deliveries.find((headers) => String(headers['traceparent']).includes(traceId));
      expect(delivered).toBeDefined();
      const delivery = await waitFor(
        () => receiver.spans.find((s) => s.traceId === traceId && s.name === 'outbox deliver coupon.issued'),
        'delivery span',
      );
      expect(delivery).toMatchObject({ parentSpanId: writer, kind: 4 });
      expect(delivery.links).toEqual([expect.objectContaining({ traceId, spanId: writer })]);
      expect(String(delivered!['traceparent'])).toBe(`00-${traceId}-${delivery.spanId}-01`);
      const pass = await waitFor(() => receiver.spans.find((s) => s.name === 'outbox relay pass'), 'relay pass span');
      expect(pass.parentSpanId ?? '').toBe('');
      expect(pass.traceId).not.toBe(traceId);
    } finally {
      await webhook.close();
    }
  });

  it('traces a budget lease refill a request sets off as work of its own, linked to the request, not inside its trace', async () => {
    await gqlOk(
      backend.app.fetch,
      CreateCampaignDocument,
      { input: { id: 'traced-leased', name: 'Traced leased', discountYen: 100, budgetYen: 10_000, budgetLeaseCoupons: 20 } },
      asTenantAdmin('traced'),
    );
    const traceId = 'e'.repeat(32);
    const response = await fetch(backend.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${'f'.repeat(16)}-01`, ...asUser('traced', 'leaser') },
      body: JSON.stringify({ query: print(IssueCouponDocument), variables: { input: { campaignId: 'traced-leased' } } }),
    });
    expect(((await response.json()) as { data: { issueCoupon: { status: string } } }).data.issueCoupon.status).toBe('ISSUED');
    // The issue had no lease yet: the refill runs after it, in the background, as one statement.
    const refillStatement = await waitFor(
      () => receiver.spans.find((s) => String(s.attributes['db.query.text'] ?? '').includes('insert into campaign_budget_leases')),
      'refill statement span',
    );
    const refill = await waitFor(() => receiver.spans.find((s) => s.name === 'budget lease refill'), 'refill span');
    expect(refill.parentSpanId ?? '').toBe('');
    expect(refill.traceId).not.toBe(traceId);
    expect(refill.attributes).toMatchObject({ 'app.campaign.id': 'traced-leased' });
    // Linked to the span that set it off: the issue's attempt, in the request's trace.
    expect(refill.links).toEqual([expect.objectContaining({ traceId })]);
    const setOffBy = receiver.spans.find((s) => s.traceId === traceId && s.spanId === refill.links[0]!.spanId);
    expect(setOffBy?.name).toBe('transaction');
    expect(refillStatement).toMatchObject({ traceId: refill.traceId, parentSpanId: refill.spanId });
  });
});

describe('tracing off (no OTLP endpoint)', () => {
  it('answers without traceparent and stores none', async () => {
    const backend = await createTestBackend();
    try {
      await createTenant(backend, 'untraced');
      const response = await backend.app.fetch(
        new Request('http://test.local/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', traceparent: CALLER, ...asUser('untraced') },
          body: JSON.stringify({ query: '{ viewer { role } }' }),
        }),
      );
      expect(response.status).toBe(200);
      expect(response.headers.get('traceparent')).toBeNull();
    } finally {
      await backend.close();
    }
  });
});

describe('tracing over OTLP/HTTP protobuf, the default protocol', () => {
  it('sends protobuf to the traces endpoint', async () => {
    const receiver = await startReceiver();
    const backend = await createTestBackend({
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url.replace(/\/v1\/traces$/, ''), OTEL_BSP_SCHEDULE_DELAY: '20' },
    });
    try {
      await backend.app.fetch(
        new Request('http://test.local/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: '{ viewer { role } }' }),
        }),
      );
      const sent = await waitFor(() => receiver.raw.find((r) => r.body.includes('POST /graphql')), 'a protobuf export');
      expect(sent.contentType).toBe('application/x-protobuf');
    } finally {
      await backend.close();
      await receiver.close();
    }
  });
});

describe('what makes a trace: requests, not start-up, probes or scrapes', () => {
  it('sends no span without a parent from start-up, and none for /health, /ready and /metrics', async () => {
    const receiver = await startReceiver();
    const config = loadConfig({
      NODE_ENV: 'test',
      DATABASE_URL: await createTestDatabaseUrl(),
      PORT: '0',
      RUN_WORKERS: 'false',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    });
    const stopTracing = startTracing(config.tracing);
    try {
      // The server's own start-up: connect, the schema check and migrations, then listen.
      const backend = await startBackend({ config, log: createLogger('silent') });
      const base = `http://127.0.0.1:${backend.http.port}`;
      for (const path of ['/health', '/ready', '/metrics']) expect((await fetch(`${base}${path}`)).status).toBe(200);
      const answered = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ viewer { role } }' }),
      });
      expect(answered.status).toBe(200);
      await backend.stop();
    } finally {
      // Shutting down sends every span still batched: after it, the receiver has them all.
      await stopTracing();
      await receiver.close();
    }
    const ids = new Set(receiver.spans.map((span) => span.spanId));
    const roots = receiver.spans.filter((span) => !span.parentSpanId || !ids.has(span.parentSpanId));
    expect(roots.map((span) => span.name)).toEqual(['POST /graphql']);
    expect(roots[0]!.kind).toBe(2);
    expect(receiver.spans.filter((span) => span.traceId !== roots[0]!.traceId)).toEqual([]);
    expect(receiver.spans.map((span) => span.attributes['url.path']).filter((path) => path !== undefined)).toEqual(['/graphql']);
  });

  it('traces every path with TRACES_EXCLUDED_PATHS=none, and only the listed ones make none', async () => {
    for (const [setting, traced] of [
      ['none', ['GET /health', 'GET /ready']],
      ['/ready', ['GET /health']],
    ] as const) {
      const receiver = await startReceiver();
      const backend = await createTestBackend({
        env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', TRACES_EXCLUDED_PATHS: setting },
      });
      try {
        for (const path of ['/health', '/ready'])
          expect((await backend.app.fetch(new Request(`http://test.local${path}`))).status).toBe(200);
      } finally {
        await backend.close();
        await receiver.close();
      }
      const servers = receiver.spans.filter((span) => span.kind === 2).map((span) => span.name);
      expect({ setting, servers: servers.sort() }).toEqual({ setting, servers: [...traced] });
    }
  });
});

describe('TRACES_STATEMENT_TEXT=all', () => {
  it('puts the text of a prepared statement on its span too, each run of whitespace as one space', async () => {
    const receiver = await startReceiver();
    const backend = await createTestBackend({
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '20',
        TRACES_STATEMENT_TEXT: 'all',
      },
    });
    try {
      await createTenant(backend, 'spelled');
      await gqlOk(
        backend.app.fetch,
        CreateCampaignDocument,
        { input: { id: 'spelled', name: 'Spelled', discountYen: 100, budgetYen: 100_000 } },
        asTenantAdmin('spelled'),
      );
      await gqlOk(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'spelled' } }, asUser('spelled', 'reader'));
      const statement = await waitFor(() => receiver.spans.find((s) => s.name === 'coupons.issue.one'), 'the statement span');
      const text = String(statement.attributes['db.query.text']);
      expect(text).toMatch(/^with .*\$1.* from decision d left join coupon k on true$/);
      expect(text).not.toMatch(/\s\s|\n/);
      expect(statement.attributes).toMatchObject({ 'db.query.summary': 'coupons.issue.one' });
    } finally {
      await backend.close();
      await receiver.close();
    }
  });
});

describe('OTEL_TRACES_EXPORTER=console', () => {
  it('prints each span of a request on stdout, with no collector, from the real entry point', async () => {
    const server = spawnScript('src/entry/main.ts', {
      DATABASE_URL: await createTestDatabaseUrl(),
      PORT: '0',
      RUN_WORKERS: 'false',
      OTEL_TRACES_EXPORTER: 'console',
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
    });
    const output = captureOutput(server);
    try {
      const base = await waitFor(
        () => /GraphQL and GraphiQL: (http:\/\/localhost:\d+)\/graphql/.exec(output())?.[1],
        'the banner',
        120_000,
      );
      expect((await fetch(`${base}/health`)).status).toBe(200);
      const answered = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: CALLER },
        body: JSON.stringify({ query: '{ viewer { role } }' }),
      });
      expect(answered.status).toBe(200);
      await waitFor(() => (output().includes("name: 'POST /graphql'") ? true : undefined), 'the server span printed', 30_000);
      const printed = output();
      expect(printed).toContain(`traceId: '${TRACE_ID}'`);
      expect(printed).toContain("name: 'query viewer'");
      expect(printed).not.toContain("name: 'GET /health'");
    } finally {
      await stopScript(server);
    }
  });
});
