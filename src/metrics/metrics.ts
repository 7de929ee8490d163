import type { Kysely } from 'kysely';
import type pg from 'pg';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DB } from '../db/schema.js';
import { outboxStats, type OutboxStats } from '../worker/outbox.js';
import type { AdmissionStats } from '../http/admission.js';

/** Latency buckets in seconds: fine below 100 ms, where the targets are. */
const LATENCY_BUCKETS = [0.002, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10];
const OUTBOX_SCRAPE_TIMEOUT_MS = 1_000;
const OUTBOX_STATS_REUSE_MS = 500;

export interface Metrics {
  registry: Registry;
  requests: Histogram<'operation' | 'outcome'>;
  couponOutcomes: Counter<'status'>;
  transactionRetries: Counter<'sqlstate'>;
}

/**
 * One registry per app (tests run several apps in a process). Pool and outbox gauges are read when
 * Prometheus scrapes, so they cost nothing between scrapes.
 */
export function createMetrics(pool: pg.Pool, db: Kysely<DB>, admission: { stats(): AdmissionStats }): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Histogram({
    name: 'graphql_request_duration_seconds',
    help: 'GraphQL requests by root field and outcome (status or error code), with their latency.',
    labelNames: ['operation', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const couponOutcomes = new Counter({
    name: 'coupon_issue_outcomes_total',
    help: 'issueCoupon answers by status.',
    labelNames: ['status'] as const,
    registers: [registry],
  });
  const transactionRetries = new Counter({
    name: 'transaction_retries_total',
    help: 'Transactions rerun after a serialization failure (40001), deadlock (40P01) or lock timeout (55P03).',
    labelNames: ['sqlstate'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'db_pool_connections',
    help: 'Database pool connections by state: in use, idle, and requests waiting for one.',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      this.set({ state: 'in_use' }, pool.totalCount - pool.idleCount);
      this.set({ state: 'idle' }, pool.idleCount);
      this.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
  new Gauge({
    name: 'graphql_operations',
    help: 'GraphQL operations executing (in_flight, at most MAX_IN_FLIGHT) and waiting for a turn (queued).',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const { inFlight, queued } = admission.stats();
      this.set({ state: 'in_flight' }, inFlight);
      this.set({ state: 'queued' }, queued);
    },
  });
  // Both outbox gauges come from one query per scrape, whichever of them is collected first.
  let latest: { at: number; stats: Promise<OutboxStats | null> } | null = null;
  const currentStats = () => {
    if (!latest || Date.now() - latest.at > OUTBOX_STATS_REUSE_MS) {
      const stats = Promise.race([
        outboxStats(db, null),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), OUTBOX_SCRAPE_TIMEOUT_MS).unref()),
      ]).catch(() => null); // the database is away: report nothing rather than fail the scrape
      latest = { at: Date.now(), stats };
    }
    return latest.stats;
  };
  new Gauge({
    name: 'outbox_pending_events',
    help: 'Outbox events waiting for delivery.',
    registers: [registry],
    async collect() {
      const stats = await currentStats();
      if (stats) this.set(stats.pending);
      else this.reset();
    },
  });
  new Gauge({
    name: 'outbox_oldest_pending_age_seconds',
    help: 'Age of the oldest pending outbox event (0 when none).',
    registers: [registry],
    async collect() {
      const stats = await currentStats();
      if (stats) this.set(stats.oldestPendingAgeSeconds ?? 0);
      else this.reset();
    },
  });
  return { registry, requests, couponOutcomes, transactionRetries };
}
