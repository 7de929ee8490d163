import { sql, type Kysely, type Transaction } from 'kysely';
import Stripe from 'stripe';
import type { Clock } from '../../core/clock.js';
import { TryAgainError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { DB } from '../../db/schema.js';
import { runInTransaction, type TransactionSettings } from '../../db/transaction.js';
import { reportedIntent } from '../payments/stripe.js';
import type { PaymentProvider, ReportedIntent } from '../payments/provider.js';
import { PASS_DEADLINE_MS } from './reconciler.js';
import { settleAnswer, type OutcomeDeps } from './outcome.js';
import { loadPayment } from './pending.js';
import { recordListedRefunds, recordRefundsOfIntent, type RecordListed, type RefundSync } from './provider-refunds.js';
import { INTENT_ID, orderNamedBy } from './verify.js';

/**
 * Stripe's webhooks at POST /webhooks/stripe (docs/design.md §11). An event is trusted only once
 * its signature verifies on the raw body (`stripe.webhooks.constructEvent`, STRIPE_WEBHOOK_SECRET,
 * Stripe's default tolerance of 300 s): a missing, wrong or stale signature is a 400 that writes
 * nothing. A verified event is recorded by its id and acted on once: a repeat, and an event that
 * names no order of this server, are answered 2xx and change nothing. Its PaymentIntent settles
 * the order it names through the same statements as every other source (outcome.ts), only when it
 * matches that order (amount, currency, metadata order and tenant); one that does not is logged and
 * settles nothing. `payment_intent.payment_failed` cancels the PaymentIntent at Stripe before the
 * order is canceled, so that it cannot succeed later for a closed order.
 */

export interface WebhookDeps {
  /** STRIPE_WEBHOOK_SECRET; null: webhooks are not taken here. */
  secret: string | null;
  /** PAYMENTS_RECONCILE_FOR, for the payment's state (pending.ts). */
  reconcileForMs: number;
  /** How its outcomes are recorded: no turn is held, a call has the full PAYMENTS_TIMEOUT_MS; null without a provider. */
  outcome: OutcomeDeps | null;
  inTransaction<T>(work: (trx: Transaction<DB>) => Promise<T>): Promise<T>;
  /** Told what became of each delivery (a metric): a bounded set of words. */
  counted(result: WebhookOutcome): void;
}

type WebhookOutcome = 'acted' | 'repeat' | 'ignored' | 'refused' | 'busy' | 'off';

export interface WebhookResult {
  status: number;
  body: Record<string, unknown>;
}

/** The events that tell how a payment went: their PaymentIntent settles its order. */
const PAYMENT_EVENTS: readonly string[] = [
  'payment_intent.succeeded',
  'payment_intent.payment_failed',
  'payment_intent.canceled',
  'payment_intent.requires_action',
];

/**
 * The events that tell a charge was refunded, by this server or anyone else (the dashboard, another
 * client of the account): their PaymentIntent's refunds are asked for and recorded. charge.refunded
 * comes with every refund; refund.created and refund.updated (all refunds since Stripe's 2024-10-28
 * API version) say the same of one refund.
 */
const REFUND_EVENTS: readonly string[] = ['charge.refunded', 'refund.created', 'refund.updated'];

/** A second delivery of an event finds the first one acting for this long before it may act in its place. */
const CLAIM_HELD_SECONDS = 30;

const EVENT_ID = /^evt_[A-Za-z0-9_]{1,250}$/;

const answer = (deps: WebhookDeps, outcome: WebhookOutcome, status: number, body: Record<string, unknown>): WebhookResult => {
  deps.counted(outcome);
  return { status, body };
};

/** The event's PaymentIntent and the order it names, when it is one of the events acted on. */
function subjectOf(event: Stripe.Event): { intent: ReportedIntent; tenantId: string; orderId: string } | null {
  if (!PAYMENT_EVENTS.includes(event.type)) return null;
  const object = event.data?.object as unknown as Record<string, unknown> | undefined;
  if (object?.['object'] !== 'payment_intent') return null;
  const intent = reportedIntent(object);
  const order = orderNamedBy(intent);
  return order && { intent, ...order };
}

/** The PaymentIntent whose refunds a refund event is about (a charge's, or a refund's), when it is one. */
function refundedIntentOf(event: Stripe.Event): string | null {
  if (!REFUND_EVENTS.includes(event.type)) return null;
  const object = event.data?.object as unknown as Record<string, unknown> | undefined;
  const intentId = object?.['payment_intent'];
  const refundOrCharge = object?.['object'] === 'charge' || object?.['object'] === 'refund';
  return refundOrCharge && typeof intentId === 'string' && INTENT_ID.test(intentId) ? intentId : null;
}

/**
 * Records the event by its id and claims it: true when this delivery acts on it; false for a repeat
 * already handled; null while another delivery of it is acting (Stripe sends it again later).
 */
async function claimEvent(trx: Transaction<DB>, event: Stripe.Event, subject: ReturnType<typeof subjectOf>): Promise<boolean | null> {
  const claimed = await sql`
    insert into provider_events (event_id, type, tenant_id, order_id)
    values (${event.id}, ${event.type.slice(0, 255)}, ${subject?.tenantId ?? null}, ${subject?.orderId ?? null})
    on conflict (event_id) do update set claimed_at = now()
     where provider_events.handled_at is null and provider_events.claimed_at < now() - make_interval(secs => ${CLAIM_HELD_SECONDS})
    returning 1`.execute(trx);
  if (claimed.rows.length > 0) return true;
  const seen = await trx.selectFrom('provider_events').select('handled_at').where('event_id', '=', event.id).executeTakeFirst();
  return seen?.handled_at ? false : null;
}

const markHandled = (trx: Transaction<DB>, eventId: string, result: string) =>
  trx
    .updateTable('provider_events')
    .set({ handled_at: sql`now()`, result: result.slice(0, 500) })
    .where('event_id', '=', eventId)
    .execute();

/**
 * Acts on a verified event: once, whatever the number of deliveries (answers 2xx, or 409/503 for
 * Stripe to send it again). A refund event whose refunds could not be asked for or recorded now is
 * left unhandled and answered 503: Stripe sends it again, and the reconciler's sweep finds its
 * refunds meanwhile. `recordListed` is how a list of refunds is recorded (a naive twin's otherwise).
 */
export async function actOnEvent(deps: WebhookDeps, event: Stripe.Event, recordListed = recordListedRefunds): Promise<WebhookResult> {
  if (typeof event?.id !== 'string' || !EVENT_ID.test(event.id) || typeof event.type !== 'string') {
    return answer(deps, 'refused', 400, { message: 'not a Stripe event' });
  }
  const subject = subjectOf(event);
  try {
    const claimed = await deps.inTransaction((trx) => claimEvent(trx, event, subject));
    if (claimed === false) return answer(deps, 'repeat', 200, { received: true, repeat: true });
    if (claimed === null) return answer(deps, 'busy', 409, { message: 'this event is being handled by another delivery' });
    const acted = await actOnSubject(deps, event, subject, recordListed);
    if (!acted.done) return answer(deps, 'busy', 503, { message: `the event could not be acted on now (${acted.result}); send it again` });
    await deps.inTransaction((trx) => markHandled(trx, event.id, acted.result));
    return answer(deps, acted.result.startsWith('settled') ? 'acted' : 'ignored', 200, { received: true, result: acted.result });
  } catch (error) {
    if (!(error instanceof TryAgainError)) throw error;
    return answer(deps, 'busy', 503, { message: 'the event could not be recorded now; send it again' });
  }
}

async function actOnSubject(
  deps: WebhookDeps,
  event: Stripe.Event,
  subject: ReturnType<typeof subjectOf>,
  recordListed: RecordListed,
): Promise<Pick<RefundSync, 'done' | 'result'>> {
  const refunded = refundedIntentOf(event);
  if (deps.outcome === null || (subject === null && refunded === null))
    return { done: true, result: 'not an event of an order of this server' };
  if (refunded !== null)
    return recordRefundsOfIntent({ outcome: deps.outcome, reconcileForMs: deps.reconcileForMs, recordListed }, refunded);
  return { done: true, result: await settleSubject(deps, deps.outcome, subject!) };
}

async function settleSubject(deps: WebhookDeps, outcome: OutcomeDeps, subject: NonNullable<ReturnType<typeof subjectOf>>): Promise<string> {
  const state = await deps.inTransaction((trx) => loadPayment(trx, subject, deps.reconcileForMs));
  if (state === null) return 'names no order of this server';
  if (state.payment === null) {
    if (subject.intent.status === 'succeeded' && state.order.status === 'CANCELED' && subject.intent.id !== null) {
      outcome.log.error(
        { orderId: state.order.id, intentId: subject.intent.id },
        'webhook: a PaymentIntent succeeded for a CANCELED order: refund it',
      );
    }
    return `order already ${state.order.status}`;
  }
  const settled = await settleAnswer(outcome, state.payment, { kind: 'intent', intent: subject.intent, failureCode: null });
  return settled.order
    ? `settled: order ${settled.order.status}`
    : settled.requiresAction
      ? 'settled: waits on its customer'
      : 'left pending';
}

/** The route's handler: the signature verified on the raw body, then the event acted on once. */
export async function handleStripeEvent(
  deps: WebhookDeps,
  rawBody: Buffer,
  signature: string | null,
  recordListed = recordListedRefunds,
): Promise<WebhookResult> {
  if (deps.secret === null) return answer(deps, 'off', 404, { message: 'Stripe webhooks are not configured here (STRIPE_WEBHOOK_SECRET)' });
  if (signature === null) return answer(deps, 'refused', 400, { message: 'missing Stripe-Signature' });
  let event: Stripe.Event;
  try {
    event = Stripe.webhooks.constructEvent(rawBody, signature, deps.secret);
  } catch {
    return answer(deps, 'refused', 400, { message: 'the Stripe-Signature does not verify (wrong, stale or not for this body)' });
  }
  return actOnEvent(deps, event, recordListed);
}

/** What the webhook's deps are made of: the process's parts, and the counters to tell. */
export interface WebhookParts {
  db: Kysely<DB>;
  transactions: TransactionSettings;
  provider: PaymentProvider | null;
  secret: string | null;
  options: { timeoutMs: number; reconcileForMs: number; actionTimeoutMs: number };
  log: Logger;
  clock: Clock;
  refused(source: 'answer' | 'webhook'): void;
  counted(result: WebhookOutcome): void;
}

/**
 * A webhook's deps: short transactions on `db` (a delivery holds no connection while Stripe is
 * asked), each call to Stripe its full PAYMENTS_TIMEOUT_MS, and a disagreeing PaymentIntent logged
 * and left (onMismatch 'log'): an event writes nothing it does not settle.
 */
export function webhookDeps(parts: WebhookParts): WebhookDeps {
  const inTransaction = async <T>(work: (trx: Transaction<DB>) => Promise<T>) =>
    (await runInTransaction(parts.db, parts.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, work)).value;
  const outcome: OutcomeDeps | null =
    parts.provider === null
      ? null
      : {
          provider: parts.provider,
          inTransaction,
          ask: (call) => call(parts.options.timeoutMs),
          actionTimeoutMs: parts.options.actionTimeoutMs,
          countsFailures: false,
          onMismatch: 'log',
          refused: parts.refused,
          log: parts.log.child({ source: 'stripe webhook' }),
          clock: parts.clock,
        };
  return { secret: parts.secret, reconcileForMs: parts.options.reconcileForMs, outcome, inTransaction, counted: parts.counted };
}

/**
 * Stripe's events are kept this long, then deleted by the retention pass: Stripe resends an event
 * for up to three days, and a repeat older than this would find no record (and act on nothing new:
 * the order it names is settled).
 */
const PROVIDER_EVENTS_KEPT_DAYS = 30;

/** One retention batch of handled events past PROVIDER_EVENTS_KEPT_DAYS; how many were deleted. */
export async function deleteOldProviderEvents(trx: Transaction<DB>, limit: number): Promise<number> {
  const result = await sql`
    delete from provider_events e
     using (select event_id from provider_events
             where handled_at is not null and received_at < now() - make_interval(days => ${PROVIDER_EVENTS_KEPT_DAYS})
             order by received_at limit ${limit} for update skip locked) old
     where e.event_id = old.event_id`.execute(trx);
  return Number(result.numAffectedRows ?? 0);
}
