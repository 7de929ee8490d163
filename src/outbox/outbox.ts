import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/schema.js';
import { fullJitter, runInTransaction, type TransactionSettings } from '../db/transaction.js';
import type { Logger } from '../logger.js';
import { contextFrom, inSpan, SpanKind, trace, traceparentOf, tracing, untraced } from '../tracing.js';

export interface OutboxEvent {
  tenantId: string;
  id: string;
  topic: string;
  payload: unknown;
  attempts: number;
  createdAt: Date;
  /** The trace of the request that wrote it, which its delivery continues. */
  traceparent: string | null;
}

/** Where events go. A sink throws to say "not delivered"; the relay then retries later. */
export interface OutboxSink {
  name: string;
  deliver(event: OutboxEvent): Promise<void>;
}

export function logSink(log: Logger): OutboxSink {
  return {
    name: 'log',
    async deliver(event) {
      log.info({ eventId: event.id, topic: event.topic, tenantId: event.tenantId }, 'outbox event delivered');
    },
  };
}

/**
 * POSTs the event as JSON. The event id is the Idempotency-Key, so a receiver can drop the
 * repeats that at-least-once delivery produces (a relay that dies after sending, before marking).
 */
export function webhookSink(url: string, timeoutMs: number): OutboxSink {
  return {
    name: 'webhook',
    async deliver(event) {
      // The delivery's trace context goes along, so the receiver's work joins the same trace.
      const traceparent = traceparentOf();
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': event.id, ...(traceparent ? { traceparent } : {}) },
        body: JSON.stringify({
          id: event.id,
          tenantId: event.tenantId,
          topic: event.topic,
          payload: event.payload,
          createdAt: event.createdAt,
        }),
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`webhook answered ${response.status}`);
    },
  };
}

export interface RelayOptions {
  batchSize: number;
  /** How long a claim holds its events; a relay that dies is replaced after this. */
  leaseMs: number;
  maxAttempts: number;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
}

export interface RelayDeps {
  db: Kysely<DB>;
  transactions: TransactionSettings;
  sink: OutboxSink;
  log: Logger;
  options: RelayOptions;
}

export interface PassResult {
  claimed: number;
  sent: number;
  retried: number;
  dead: number;
}

/** A background pass never runs longer than this; the next tick starts afresh. */
export const PASS_DEADLINE_MS = 10_000;

export interface Claim {
  claimId: string;
  events: OutboxEvent[];
}

/**
 * Claims up to a batch of due events. SKIP LOCKED lets several relays claim side by side without
 * waiting on each other or taking the same event; the claim commits at once and leases the events
 * (next_attempt_at moves past the lease), so delivery happens outside any transaction and a relay
 * that dies mid-batch leaves its events to the next one when the lease runs out.
 */
export async function claimBatch(deps: RelayDeps): Promise<Claim> {
  const claimId = randomUUID();
  const { value: rows } = await runInTransaction(
    deps.db,
    deps.transactions,
    { deadline: Date.now() + PASS_DEADLINE_MS },
    async (trx) =>
      (
        await sql<{
          tenant_id: string;
          id: string;
          topic: string;
          payload: unknown;
          attempts: number;
          created_at: Date;
          traceparent: string | null;
        }>`
          update outbox_events e
             set attempts = e.attempts + 1,
                 claim_id = ${claimId},
                 next_attempt_at = now() + make_interval(secs => ${deps.options.leaseMs / 1000})
            from (select tenant_id, id from outbox_events
                   where status = 'pending' and next_attempt_at <= now()
                   order by next_attempt_at, id
                   limit ${deps.options.batchSize}
                   for update skip locked) due
           where e.tenant_id = due.tenant_id and e.id = due.id
          returning e.tenant_id, e.id, e.topic, e.payload, e.attempts, e.created_at, e.traceparent`.execute(trx)
      ).rows,
  );
  return {
    claimId,
    events: rows.map((r) => ({
      tenantId: r.tenant_id,
      id: r.id,
      topic: r.topic,
      payload: r.payload,
      attempts: r.attempts,
      createdAt: r.created_at,
      traceparent: r.traceparent,
    })),
  };
}

/** Delivers a claimed batch and records each outcome; only the claim's owner may mark its events. */
export async function deliverClaim(deps: RelayDeps, claim: Claim): Promise<PassResult> {
  const outcomes = await Promise.allSettled(claim.events.map((event) => tracedDelivery(deps.sink, event)));
  const sent = claim.events.filter((_, i) => outcomes[i]!.status === 'fulfilled');
  const failed = claim.events.flatMap((event, i) => {
    const outcome = outcomes[i]!;
    return outcome.status === 'rejected' ? [{ event, reason: String(outcome.reason).slice(0, 500) }] : [];
  });
  let dead = 0;
  await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, async (trx) => {
    dead = 0;
    if (sent.length > 0) {
      await trx
        .updateTable('outbox_events')
        .set({ status: 'sent', sent_at: sql<Date>`now()`, claim_id: null, last_error: null })
        .where('claim_id', '=', claim.claimId)
        .where('status', '=', 'pending')
        .where(
          'id',
          'in',
          sent.map((e) => e.id),
        )
        .execute();
    }
    for (const { event, reason } of failed) {
      const isDead = event.attempts >= deps.options.maxAttempts;
      if (isDead) dead++;
      const delayMs = fullJitter({ baseDelayMs: deps.options.retryBaseDelayMs, maxDelayMs: deps.options.retryMaxDelayMs }, event.attempts);
      await trx
        .updateTable('outbox_events')
        .set({
          status: isDead ? 'dead' : 'pending',
          claim_id: null,
          last_error: reason,
          next_attempt_at: sql<Date>`now() + make_interval(secs => ${delayMs / 1000})`,
        })
        .where('tenant_id', '=', event.tenantId)
        .where('id', '=', event.id)
        .where('claim_id', '=', claim.claimId)
        .execute();
    }
  });
  for (const { event, reason } of failed) {
    deps.log.warn({ eventId: event.id, attempts: event.attempts, error: reason }, 'outbox delivery failed');
  }
  if (dead > 0) deps.log.error({ dead }, 'outbox events gave up after the last attempt and are marked dead');
  return { claimed: claim.events.length, sent: sent.length, retried: failed.length - dead, dead };
}

/**
 * One delivery as a span that continues the trace of the request that wrote the event (and links
 * to it): a delivery retried hours later still sits in that request's trace. Without a stored
 * trace it belongs to the relay's pass.
 */
function tracedDelivery(sink: OutboxSink, event: OutboxEvent): Promise<void> {
  if (!tracing.enabled) return sink.deliver(event);
  const written = event.traceparent ? contextFrom({ traceparent: event.traceparent }) : null;
  const writer = written ? trace.getSpanContext(written) : undefined;
  return inSpan(
    `outbox deliver ${event.topic}`,
    {
      kind: SpanKind.PRODUCER,
      ...(written ? { parent: written } : {}),
      ...(writer ? { links: [{ context: writer }] } : {}),
      attributes: {
        'messaging.system': sink.name,
        'messaging.operation.type': 'send',
        'messaging.destination.name': event.topic,
        'messaging.message.id': event.id,
        'app.outbox.attempt': event.attempts,
      },
    },
    () => sink.deliver(event),
  );
}

/**
 * One relay pass. With tracing on, a pass that found events is a root span of its own (sampled like
 * a request); the claim, which runs every poll interval and mostly finds nothing, makes no spans.
 */
export async function relayOnce(deps: RelayDeps): Promise<PassResult> {
  const claim = await untraced(() => claimBatch(deps));
  if (claim.events.length === 0) return { claimed: 0, sent: 0, retried: 0, dead: 0 };
  return inSpan('outbox relay pass', { root: true, attributes: { 'app.outbox.claimed': claim.events.length } }, () =>
    deliverClaim(deps, claim),
  );
}

export interface OutboxStats {
  pending: number;
  dead: number;
  oldestPendingAgeSeconds: number | null;
}

/** Pending and dead counts and the age of the oldest pending event, for one tenant or all. */
export async function outboxStats(db: Kysely<DB>, tenantId: string | null): Promise<OutboxStats> {
  let query = db
    .selectFrom('outbox_events')
    .select([
      sql<number>`count(*) filter (where status = 'pending')::int`.as('pending'),
      sql<number>`count(*) filter (where status = 'dead')::int`.as('dead'),
      sql<number | null>`extract(epoch from now() - min(created_at) filter (where status = 'pending'))::float8`.as('oldest'),
    ])
    .where('status', 'in', ['pending', 'dead']);
  if (tenantId !== null) query = query.where('tenant_id', '=', tenantId);
  const row = await query.executeTakeFirstOrThrow();
  return { pending: row.pending, dead: row.dead, oldestPendingAgeSeconds: row.oldest };
}
