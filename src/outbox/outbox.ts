import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
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
  /** An event is retried this long from when it was written (or given back); then it is dead. */
  retryForMs: number;
  /** Also dead after this many deliveries; null: the time budget alone decides. */
  maxAttempts: number | null;
  retryBaseDelayMs: number;
  retryMaxDelayMs: number;
}

export interface RelayDeps {
  db: Kysely<DB>;
  transactions: TransactionSettings;
  sink: OutboxSink;
  log: Logger;
  options: RelayOptions;
  /** What this relay has seen of the receiver; one per relay (relayHealth()). */
  health: RelayHealth;
}

/**
 * Whether the receiver took anything lately. `healthySince` is the claim time of the first pass
 * that delivered after one in which every delivery failed (or after the relay started): retries
 * that failed before it were failed by the outage, not by their own content, and are brought
 * forward; one that fails again later is not, so an event the receiver always refuses keeps its
 * backoff.
 */
export interface RelayHealth {
  healthySince: Date | null;
  lastPassFailedAll: boolean;
}

export function relayHealth(): RelayHealth {
  return { healthySince: null, lastPassFailedAll: false };
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
  /** The database's time of the claim (null when nothing was claimed). */
  claimedAt: Date | null;
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
          claimed_at: Date;
        }>`
          update outbox_events e
             set attempts = e.attempts + 1,
                 claim_id = ${claimId},
                 last_attempt_at = now(),
                 next_attempt_at = now() + make_interval(secs => ${deps.options.leaseMs / 1000})
            from (select tenant_id, id from outbox_events
                   where status = 'pending' and next_attempt_at <= now()
                   order by next_attempt_at, id
                   limit ${deps.options.batchSize}
                   for update skip locked) due
           where e.tenant_id = due.tenant_id and e.id = due.id
          returning e.tenant_id, e.id, e.topic, e.payload, e.attempts, e.created_at, e.traceparent, now() as claimed_at`.execute(trx)
      ).rows,
  );
  return {
    claimId,
    claimedAt: rows[0]?.claimed_at ?? null,
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

/**
 * Delivers a claimed batch and records each outcome; only the claim's owner may mark its events.
 *
 * A failed event waits its backoff (full jitter, OUTBOX_RETRY_BASE_MS to OUTBOX_RETRY_MAX_MS), its
 * last attempt falling at the end of its time budget (OUTBOX_RETRY_FOR); after that it is dead.
 * A pass that delivers brings the next batch of retries failed by an outage forward to now
 * (RelayHealth): once the receiver is back, the backlog goes out as fast as it takes it, instead of
 * sitting out the delays it earned while the receiver was down.
 */
export async function deliverClaim(deps: RelayDeps, claim: Claim): Promise<PassResult> {
  const outcomes = await Promise.allSettled(claim.events.map((event) => tracedDelivery(deps.sink, event)));
  const sent = claim.events.filter((_, i) => outcomes[i]!.status === 'fulfilled');
  const failed = claim.events.flatMap((event, i) => {
    const outcome = outcomes[i]!;
    return outcome.status === 'rejected' ? [{ event, reason: String(outcome.reason).slice(0, 500) }] : [];
  });
  const { retryForMs, maxAttempts, retryBaseDelayMs, retryMaxDelayMs, batchSize } = deps.options;
  const { health } = deps;
  if (sent.length > 0 && (health.healthySince === null || health.lastPassFailedAll)) health.healthySince = claim.claimedAt;
  health.lastPassFailedAll = sent.length === 0 && failed.length > 0;
  const { value: dead } = await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, async (trx) => {
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
      if (health.healthySince) await pullRetriesForward(trx, health.healthySince, batchSize);
    }
    if (failed.length === 0) return 0;
    const delaysMs = failed.map(({ event }) => fullJitter({ baseDelayMs: retryBaseDelayMs, maxDelayMs: retryMaxDelayMs }, event.attempts));
    const marked = await sql<{ status: string }>`
      update outbox_events e
         set status = case when f.budget_end <= now() or (${maxAttempts}::int is not null and e.attempts >= ${maxAttempts}::int)
                           then 'dead' else 'pending' end,
             claim_id = null,
             last_error = f.reason,
             next_attempt_at = least(now() + make_interval(secs => f.delay_ms / 1000.0), f.budget_end)
        from (select t.tenant_id, t.id, t.reason, t.delay_ms,
                     coalesce(o.requeued_at, o.created_at) + make_interval(secs => ${retryForMs / 1000}) as budget_end
                from unnest(${failed.map((f) => f.event.tenantId)}::text[], ${failed.map((f) => f.event.id)}::uuid[],
                            ${failed.map((f) => f.reason)}::text[], ${delaysMs}::float8[]) as t(tenant_id, id, reason, delay_ms)
                join outbox_events o on o.tenant_id = t.tenant_id and o.id = t.id) f
       where e.tenant_id = f.tenant_id and e.id = f.id and e.claim_id = ${claim.claimId}
      returning e.status`.execute(trx);
    return marked.rows.filter((row) => row.status === 'dead').length;
  });
  for (const { event, reason } of failed) {
    deps.log.warn({ eventId: event.id, attempts: event.attempts, error: reason }, 'outbox delivery failed');
  }
  if (dead > 0) {
    const { dead: totalDead } = await outboxStats(deps.db, null);
    deps.log.error(
      { dead, totalDead },
      'outbox events failed for all of OUTBOX_RETRY_FOR and are now dead; npm run outbox:requeue gives them back',
    );
  }
  return { claimed: claim.events.length, sent: sent.length, retried: failed.length - dead, dead };
}

/**
 * Makes the `count` soonest retries that last failed before `failedBefore` due now (events waiting
 * out a backoff, not those a relay holds), so the next pass takes them. SKIP LOCKED: a relay that
 * is claiming them has them already.
 */
async function pullRetriesForward(trx: Transaction<DB>, failedBefore: Date, count: number): Promise<void> {
  await sql`
    update outbox_events e set next_attempt_at = now()
      from (select tenant_id, id from outbox_events
             where status = 'pending' and claim_id is null and next_attempt_at > now() and last_attempt_at < ${failedBefore}
             order by next_attempt_at, id
             limit ${count}
             for update skip locked) waiting
     where e.tenant_id = waiting.tenant_id and e.id = waiting.id`.execute(trx);
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

/**
 * Deletes up to `limit` events sent more than `olderThanHours` ago (OUTBOX_RETENTION_HOURS);
 * pending and dead events are never deleted. No request touches a sent event, and SKIP LOCKED
 * passes over any row another pass holds, so the delete waits for nobody and nobody for it.
 */
export async function deleteSentEvents(trx: Transaction<DB>, olderThanHours: number, limit: number): Promise<number> {
  const result = await sql`
    delete from outbox_events e
     using (select tenant_id, id from outbox_events
             where status = 'sent' and sent_at < now() - make_interval(hours => ${olderThanHours})
             order by sent_at
             limit ${limit}
             for update skip locked) old
     where e.tenant_id = old.tenant_id and e.id = old.id`.execute(trx);
  return Number(result.numAffectedRows ?? 0);
}

export interface RequeueFilter {
  tenantId?: string;
  topic?: string;
  /** Only events written at least this long ago. */
  olderThanMs?: number;
  /** Only events written at most this long ago. */
  newerThanMs?: number;
}

/** Dead events given back per statement: a big backlog is requeued in short statements. */
const REQUEUE_BATCH = 1_000;

function deadEvents(db: Kysely<DB> | Transaction<DB>, filter: RequeueFilter) {
  let query = db.selectFrom('outbox_events').where('status', '=', 'dead');
  if (filter.tenantId !== undefined) query = query.where('tenant_id', '=', filter.tenantId);
  if (filter.topic !== undefined) query = query.where('topic', '=', filter.topic);
  if (filter.olderThanMs !== undefined)
    query = query.where('created_at', '<=', sql<Date>`now() - make_interval(secs => ${filter.olderThanMs / 1000})`);
  if (filter.newerThanMs !== undefined)
    query = query.where('created_at', '>=', sql<Date>`now() - make_interval(secs => ${filter.newerThanMs / 1000})`);
  return query;
}

/** How many dead events match `filter`. */
export async function countDead(db: Kysely<DB>, filter: RequeueFilter): Promise<number> {
  const row = await deadEvents(db, filter)
    .select(sql<number>`count(*)::int`.as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}

/**
 * Gives dead events matching `filter` back to the relay: pending, due now, with a fresh time
 * budget (OUTBOX_RETRY_FOR counts from `requeued_at`) and no attempts. Returns how many.
 */
export async function requeueDead(db: Kysely<DB>, filter: RequeueFilter): Promise<number> {
  let total = 0;
  for (;;) {
    const result = await sql`
      update outbox_events e
         set status = 'pending', attempts = 0, next_attempt_at = now(), requeued_at = now(), claim_id = null
        from (${deadEvents(db, filter).select(['tenant_id', 'id']).limit(REQUEUE_BATCH)}) d
       where e.tenant_id = d.tenant_id and e.id = d.id and e.status = 'dead'`.execute(db);
    const changed = Number(result.numAffectedRows ?? 0);
    total += changed;
    if (changed < REQUEUE_BATCH) return total;
  }
}
