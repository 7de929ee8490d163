import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';
import { fullJitter, runInTransaction, type TransactionSettings } from '../../db/transaction.js';
import type { Logger } from '../../core/logger.js';
import { contextFrom, inSpan, SpanKind, trace, tracing, untraced } from '../../core/tracing.js';
import { outboxStats } from './housekeeping.js';
import type { OutboxEvent, OutboxSink } from './sinks.js';

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

/**
 * How the outbox relay of this process last did, for /ready and the metrics.
 *
 * @example relayHealth().healthySince
 */
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
 *
 * @example const claim = await claimBatch(deps)
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
 *
 * @example const pass = await deliverClaim(deps, claim)
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
 *
 * @example const { delivered } = await relayOnce(deps)
 */
export async function relayOnce(deps: RelayDeps): Promise<PassResult> {
  const claim = await untraced(() => claimBatch(deps));
  if (claim.events.length === 0) return { claimed: 0, sent: 0, retried: 0, dead: 0 };
  return inSpan('outbox relay pass', { root: true, attributes: { 'app.outbox.claimed': claim.events.length } }, () =>
    deliverClaim(deps, claim),
  );
}
