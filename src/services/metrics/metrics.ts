import cluster from 'node:cluster';
import type { Kysely } from 'kysely';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { PoolCounts } from '../../db/pool.js';
import type { DB } from '../../db/schema.js';
import { outboxStats } from '../../features/outbox/housekeeping.js';
import type { AdmissionStats } from '../admission.js';
import { paymentStats } from '../../features/checkout/stats.js';
import { clusterScrape } from './cluster.js';

/** Latency buckets in seconds: fine below 100 ms, where the targets are. */
const LATENCY_BUCKETS = [0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10];
const DATABASE_GAUGE_TIMEOUT_MS = 1_000;
const DATABASE_GAUGE_REUSE_MS = 500;

export interface Metrics {
  registry: Registry;
  /** The Prometheus text a scrape of /metrics answers: this process's, or the whole cluster's. */
  scrape(): Promise<string>;
  requests: Histogram<'operation' | 'outcome'>;
  couponOutcomes: Counter<'status'>;
  checkoutOutcomes: Counter<'status'>;
  /** Payments set aside and PaymentIntents that did not match their order, by where the answer came from. */
  paymentAnswersRefused: Counter<'source'>;
  /** Deliveries to POST /webhooks/stripe by what became of them. */
  stripeWebhookEvents: Counter<'result'>;
  transactionRetries: Counter<'sqlstate'>;
  knownDocumentOperations: Counter;
  knownDocumentPath: Counter;
}

/**
 * One registry per app (tests run several apps in a process). Pool and outbox gauges are read when
 * Prometheus scrapes, so they cost nothing between scrapes.
 *
 * Counters and histograms carry no process label: across the HTTP processes of WEB_CONCURRENCY
 * they add up (see cluster.ts). What belongs to one process (its pool, memory, event loop) is
 * labelled with its `pid`; the outbox gauges read the shared database, so the same value from
 * every process is reported once.
 */
/**
 * A database read that several gauges of one scrape share: made once per DATABASE_GAUGE_REUSE_MS,
 * given up after DATABASE_GAUGE_TIMEOUT_MS. Null while the database is away: the gauges then report
 * nothing rather than fail the scrape.
 */
function sharedPerScrape<T>(read: () => Promise<T>): () => Promise<T | null> {
  let latest: { at: number; value: Promise<T | null> } | null = null;
  return () => {
    if (!latest || Date.now() - latest.at > DATABASE_GAUGE_REUSE_MS) {
      const value = Promise.race([
        read(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), DATABASE_GAUGE_TIMEOUT_MS).unref()),
      ]).catch(() => null);
      latest = { at: Date.now(), value };
    }
    return latest.value;
  };
}

/** What the payment gauges read: the checkouts waiting on the provider now, and how long the reconciler resends. */
export interface PaymentGaugeSources {
  waiting(): number;
  reconcileForMs: number;
}

/**
 * A gauge of the whole database (not of one process: `max` across the cluster) set from `stats`,
 * which one query answers per scrape; no answer leaves the gauge empty rather than stale.
 */
function databaseGauge<S>(registry: Registry, name: string, help: string, stats: () => Promise<S | null>, pick: (stats: S) => number) {
  new Gauge({
    name,
    help,
    registers: [registry],
    aggregator: 'max',
    async collect() {
      const current = await stats();
      if (current) this.set(pick(current));
      else this.reset();
    },
  });
}

function registerOutboxGauges(registry: Registry, db: Kysely<DB>): void {
  // The outbox gauges come from one query per scrape, whichever of them is collected first.
  const stats = sharedPerScrape(() => outboxStats(db, null));
  databaseGauge(registry, 'outbox_pending_events', 'Outbox events waiting for delivery.', stats, (s) => s.pending);
  databaseGauge(
    registry,
    'outbox_oldest_pending_age_seconds',
    'Age of the oldest pending outbox event (0 when none).',
    stats,
    (s) => s.oldestPendingAgeSeconds ?? 0,
  );
  databaseGauge(
    registry,
    'outbox_dead_events',
    'Outbox events that failed for all of OUTBOX_RETRY_FOR and wait for npm run outbox:requeue.',
    stats,
    (s) => s.dead,
  );
}

function registerPaymentGauges(registry: Registry, db: Kysely<DB>, payments: PaymentGaugeSources): void {
  const stats = sharedPerScrape(() => paymentStats(db, payments.reconcileForMs));
  databaseGauge(
    registry,
    'payments_pending',
    'Payments whose outcome is not known yet (their orders PENDING_PAYMENT).',
    stats,
    (s) => s.pending,
  );
  databaseGauge(
    registry,
    'payments_unsettled',
    'Payments set aside for an operator: the provider answered what does not match the order, or failed the same way for a day (npm run reconcile lists them).',
    stats,
    (s) => s.unsettled,
  );
  databaseGauge(
    registry,
    'payments_awaiting_customer',
    'Payments waiting on their customer to finish an authentication (3-D Secure), at most PAYMENTS_ACTION_TIMEOUT_MS each.',
    stats,
    (s) => s.awaitingCustomer,
  );
}

/** What the issue coalescer has counted since the process started (features/coupons/coalescer.ts). */
export interface IssueBatchCounts {
  batches: number;
  members: number;
  failed: number;
}

/**
 * issueCoupon's batches (COUPON_ISSUE_BATCH_MAX above 1), read at scrape time from the coalescer's
 * counts: how many statements carried several issues, how many issues they carried, and how many
 * failed whole (their members then ran alone). Members over batches is the batch size an operator
 * sizes the knob by.
 */
function registerBatchCounters(registry: Registry, counts: () => IssueBatchCounts): void {
  const counter = (name: string, help: string, read: (c: IssueBatchCounts) => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(read(counts()));
      },
    });
  counter(
    'coupon_issue_batches_total',
    'issueCoupon statements that carried a batch of issues (COUPON_ISSUE_BATCH_MAX above 1).',
    (c) => c.batches,
  );
  counter('coupon_issue_batched_members_total', 'issueCoupon requests carried by those batches.', (c) => c.members);
  counter(
    'coupon_issue_batches_failed_total',
    'Batches that failed whole; their members ran alone, each in a statement of its own.',
    (c) => c.failed,
  );
}

/** What this process holds now: its payment calls, its pool's connections, its GraphQL operations. */
function registerProcessGauges(
  registry: Registry,
  thisProcess: { pid: string },
  pool: PoolCounts,
  admission: { stats(): AdmissionStats },
  payments: PaymentGaugeSources,
): void {
  new Gauge({
    name: 'payments_waiting',
    help: 'Checkouts waiting on the payment provider now, holding no turn and no connection (at most PAYMENTS_MAX_WAITING), per process.',
    labelNames: ['pid'] as const,
    registers: [registry],
    collect() {
      this.set(thisProcess, payments.waiting());
    },
  });
  new Gauge({
    name: 'db_pool_connections',
    help: 'Database pool connections by state (in use, idle, requests waiting for one), per process.',
    labelNames: ['state', 'pid'] as const,
    registers: [registry],
    collect() {
      this.set({ state: 'in_use', ...thisProcess }, pool.totalCount - pool.idleCount);
      this.set({ state: 'idle', ...thisProcess }, pool.idleCount);
      this.set({ state: 'waiting', ...thisProcess }, pool.waitingCount);
    },
  });
  new Gauge({
    name: 'graphql_operations',
    help: 'GraphQL operations executing (in_flight, at most MAX_IN_FLIGHT) and waiting for a turn (queued), per process.',
    labelNames: ['state', 'pid'] as const,
    registers: [registry],
    collect() {
      const { inFlight, queued } = admission.stats();
      this.set({ state: 'in_flight', ...thisProcess }, inFlight);
      this.set({ state: 'queued', ...thisProcess }, queued);
    },
  });
}

/** The metrics the code records as it goes, rather than gauges read at scrape time. */
function createRecorded(registry: Registry) {
  return {
    requests: new Histogram({
      name: 'graphql_request_duration_seconds',
      help: 'GraphQL requests by root field and outcome (status or error code), with their latency.',
      labelNames: ['operation', 'outcome'] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    couponOutcomes: new Counter({
      name: 'coupon_issue_outcomes_total',
      help: 'issueCoupon answers by status.',
      labelNames: ['status'] as const,
      registers: [registry],
    }),
    checkoutOutcomes: new Counter({
      name: 'checkout_outcomes_total',
      help: 'checkout answers by status (PAID, DECLINED, PENDING, COUPON_UNAVAILABLE).',
      labelNames: ['status'] as const,
      registers: [registry],
    }),
    paymentAnswersRefused: new Counter({
      name: 'payment_answers_refused_total',
      help: 'Answers of the payment provider that settled nothing because they did not match their order or could not be read (source: answer, webhook).',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
    stripeWebhookEvents: new Counter({
      name: 'stripe_webhook_events_total',
      help: 'Deliveries to POST /webhooks/stripe: acted, repeat, ignored (names no pending order), refused (signature), busy, off.',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    knownDocumentOperations: new Counter({
      name: 'graphql_known_document_operations_total',
      help: 'GraphQL operations run from a document parsed and validated before (on /graphql and /actions): neither read nor validated again.',
      registers: [registry],
    }),
    knownDocumentPath: new Counter({
      name: 'graphql_known_document_path_total',
      help: "GraphQL operations of a plain POST answered by the known-document path: a document parsed, validated and compiled before, without Yoga's per-request pipeline.",
      registers: [registry],
    }),
    transactionRetries: new Counter({
      name: 'transaction_retries_total',
      help: 'Transactions rerun after a serialization failure (40001), deadlock (40P01), lock timeout (55P03), or a connection lost before COMMIT (unanswered, connect, 08xxx, 57P0x, 25006).',
      labelNames: ['sqlstate'] as const,
      registers: [registry],
    }),
  };
}

export function createMetrics(
  pool: PoolCounts,
  db: Kysely<DB>,
  admission: { stats(): AdmissionStats },
  payments: PaymentGaugeSources,
  issueBatches: () => IssueBatchCounts,
): Metrics {
  const registry = new Registry();
  const thisProcess = { pid: String(process.pid) };
  collectDefaultMetrics({ register: registry, labels: thisProcess });
  const recorded = createRecorded(registry);
  registerProcessGauges(registry, thisProcess, pool, admission, payments);
  registerOutboxGauges(registry, db);
  registerPaymentGauges(registry, db, payments);
  registerBatchCounters(registry, issueBatches);
  // A forked HTTP process of WEB_CONCURRENCY answers for the whole cluster.
  const scrape = cluster.isWorker ? clusterScrape(registry) : () => registry.metrics();
  return { registry, scrape, ...recorded };
}
