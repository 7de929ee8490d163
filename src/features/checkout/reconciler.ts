import { sql, type Kysely } from 'kysely';
import type { Clock } from '../../core/clock.js';
import type { DB } from '../../db/schema.js';
import { runInTransaction, type TransactionSettings } from '../../db/transaction.js';
import type { Logger } from '../../core/logger.js';
import type { PaymentProvider, ReportedIntent } from '../payments/provider.js';
import { cancelKeyOf, settleAnswer, type OutcomeDeps, type Settlement } from './outcome.js';
import { chargeRequestOf, questionFor, type PendingPayment } from './pending.js';
import { recordDeclined } from './record.js';
import { reconcileRefunds } from './refunds.js';
import { sweepRefunds } from './refund-sweep.js';
import { paymentStats } from './stats.js';
import { intentMismatch } from './verify.js';

interface ReconcileOptions {
  /** PAYMENTS_TIMEOUT_MS: one call's limit. */
  timeoutMs: number;
  /** PAYMENTS_RECONCILE_AFTER_MS: the first look's wait, doubled for each look after it. */
  reconcileAfterMs: number;
  /** PAYMENTS_RECONCILE_FOR: how long after its order a payment's create request may be sent again; after it, it is searched for. */
  reconcileForMs: number;
  /** PAYMENTS_ACTION_TIMEOUT_MS: an authentication not finished by then is given up. */
  actionTimeoutMs: number;
  batchSize: number;
}

export interface ReconcileDeps {
  /** The background loops' own connections: a flood of requests cannot starve the reconciler. */
  db: Kysely<DB>;
  transactions: TransactionSettings;
  provider: PaymentProvider;
  log: Logger;
  clock: Clock;
  options: ReconcileOptions;
  /** When the last report of payments set aside was logged (one reconciler, one state). */
  reported: { at: number; count: number };
  /** Told of every payment set aside (a metric). */
  refused(source: 'answer' | 'webhook'): void;
}

export interface ReconcilePass {
  /** Payments asked about in this pass (a look-up, a resend of the create, a search or a cancel). */
  resent: number;
  paid: number;
  declined: number;
  /** Asked and still not known (a customer still authenticating included). */
  unknown: number;
  /** Set aside for an operator: never asked again. */
  unsettled: number;
  /** Refunds asked about in this pass. */
  refunds: number;
  /** Refunds the provider made that this server learnt of in this pass's sweep (made elsewhere, or its own whose answer was lost). */
  foundRefunds: number;
}

/** A pass never runs longer than this (its statements' limit); the calls have PAYMENTS_TIMEOUT_MS each. */
export const PASS_DEADLINE_MS = 10_000;
/** The longest wait between two looks at one payment. */
const LONGEST_RESEND_WAIT_MS = 3_600_000;
/** How often the same count of payments set aside is logged again. */
const REPORT_AGAIN_MS = 10 * 60_000;

interface DuePayment {
  tenant_id: string;
  order_id: string;
  idempotency_key: string;
  amount_yen: number;
  payment_method: string;
  resends: number;
  provider_intent_id: string | null;
  key_young: boolean;
  action_expired: boolean;
}

/** A payment as the reconciler claimed it, and whether its customer's time to authenticate is over. */
interface ClaimedPayment extends PendingPayment {
  actionExpired: boolean;
  resends: number;
}

/**
 * Claims up to a batch of pending payments whose look is due, as the outbox relay claims its
 * events: SKIP LOCKED lets reconcilers of several processes work side by side, and the claim
 * commits at once and moves next_attempt_at past the next wait (PAYMENTS_RECONCILE_AFTER_MS, doubled
 * per look, at most an hour, never below two calls' limit; no later than the end of a waiting
 * authentication's PAYMENTS_ACTION_TIMEOUT_MS), so the calls happen outside any transaction and a
 * reconciler that dies mid-pass leaves its payments to the next pass. A payment set aside is never claimed.
 */
async function claimDue(deps: ReconcileDeps): Promise<ClaimedPayment[]> {
  const { reconcileAfterMs, reconcileForMs, timeoutMs, actionTimeoutMs, batchSize } = deps.options;
  const secs = (ms: number) => sql`make_interval(secs => ${ms / 1000}::float8)`;
  const { value } = await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, async (trx) => {
    const claimed = await sql<DuePayment>`
      update payment_intents p
         set resends = p.resends + 1,
             next_attempt_at = least(
               now() + make_interval(secs => greatest(${(2 * timeoutMs) / 1000}::float8,
                 least(${LONGEST_RESEND_WAIT_MS / 1000}::float8, ${reconcileAfterMs / 1000}::float8 * power(2, least(p.resends, 20))))),
               case when p.action_since + ${secs(actionTimeoutMs)} > now() then p.action_since + ${secs(actionTimeoutMs)} end)
        from (select tenant_id, order_id from payment_intents
               where status = 'pending' and set_aside_at is null and next_attempt_at <= now()
               order by next_attempt_at, order_id
               limit ${batchSize}
               for update skip locked) due
       where p.tenant_id = due.tenant_id and p.order_id = due.order_id
      returning p.tenant_id, p.order_id, p.idempotency_key, p.amount_yen, p.payment_method, p.resends, p.provider_intent_id,
                p.created_at > now() - ${secs(reconcileForMs)} as key_young,
                coalesce(p.action_since <= now() - ${secs(actionTimeoutMs)}, false) as action_expired`.execute(trx);
    return claimed.rows;
  });
  return value.map(toClaimed);
}

const toClaimed = (due: DuePayment): ClaimedPayment => ({
  tenantId: due.tenant_id,
  orderId: due.order_id,
  amountYen: due.amount_yen,
  intentId: due.provider_intent_id,
  request: chargeRequestOf({
    idempotencyKey: due.idempotency_key,
    tenantId: due.tenant_id,
    orderId: due.order_id,
    amountYen: due.amount_yen,
    paymentMethod: due.payment_method,
  }),
  keyYoung: due.key_young,
  setAside: false,
  actionExpired: due.action_expired,
  resends: due.resends,
});

/** The reconciler's way of recording: the background connections, a pass's deadline, every call its full limit. */
function backgroundOutcomeDeps(deps: ReconcileDeps): OutcomeDeps {
  return {
    provider: deps.provider,
    inTransaction: async (work) =>
      (await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, work)).value,
    ask: (call) => call(deps.options.timeoutMs),
    actionTimeoutMs: deps.options.actionTimeoutMs,
    countsFailures: true,
    onMismatch: 'set-aside',
    refused: deps.refused,
    log: deps.log,
    clock: deps.clock,
  };
}

const NOTHING_SETTLED: Settlement = { order: null, requiresAction: false, clientSecret: null };

/** The failure code of an order whose payment, searched for after its key's lifetime, was never made. */
const NO_PAYMENT_FOUND = 'no_payment_found';

/**
 * The PaymentIntents a search found for an order, the one that says most first (a charge, then one
 * still open, then the rest); null when one that names the order does not match it (the search's
 * answer is then not to be believed, and "none" would be a guess).
 */
function mostTelling(intents: ReportedIntent[], payment: PendingPayment): ReportedIntent[] | null {
  const named = intents.filter((intent) => intent.orderId === payment.orderId);
  const mine = named.filter((intent) => intentMismatch(intent, { ...payment, intentId: null }) === null);
  if (mine.length < named.length) return null;
  const rank = (status: string | null) => (status === 'succeeded' ? 0 : status === 'canceled' ? 2 : 1);
  return mine.sort((a, b) => rank(a.status) - rank(b.status));
}

/**
 * A payment whose key the provider may have forgotten, and which never named a PaymentIntent: it
 * is searched for by its order's id, never created. None found means none was ever made (the
 * create never reached the provider): the order is CANCELED, its coupon given back. Two succeeded
 * PaymentIntents for one order set it aside.
 */
async function settleBySearch(outcome: OutcomeDeps, payment: PendingPayment): Promise<Settlement> {
  const found = await outcome.ask((timeoutMs) => outcome.provider.findByOrder(payment.orderId, timeoutMs));
  if (found === null) return NOTHING_SETTLED;
  if (found.kind !== 'found') return settleAnswer(outcome, payment, found);
  const intents = mostTelling(found.intents, payment);
  if (intents === null)
    return settleAnswer(outcome, payment, { kind: 'refused', reason: 'a PaymentIntent naming the order does not match it' });
  if (intents.filter((intent) => intent.status === 'succeeded').length > 1) {
    return settleAnswer(outcome, payment, { kind: 'refused', reason: 'two succeeded PaymentIntents name the order' });
  }
  const [first] = intents;
  if (first) return settleAnswer(outcome, payment, { kind: 'intent', intent: first, failureCode: null });
  const now = outcome.clock();
  const order = await outcome.inTransaction((trx) =>
    recordDeclined(trx, { ...payment, intentId: null, failureCode: NO_PAYMENT_FOUND, now }),
  );
  return { order, requiresAction: false, clientSecret: null };
}

/** What the reconciler asks about one claimed payment, as the design asks it (naive twins change the steps). */
export interface ReconcileSteps {
  /** A customer's authentication past PAYMENTS_ACTION_TIMEOUT_MS: given up at the provider, and settled by what it answers. */
  abandon(outcome: OutcomeDeps, payment: ClaimedPayment): Promise<Settlement>;
  /** Anything else: a look-up by the id, the create again while its key is young, else a search. */
  ask(outcome: OutcomeDeps, payment: ClaimedPayment): Promise<Settlement>;
  /** The account's refunds, when the sweep is due: what a lost refund event missed (refund-sweep.ts); how many were recorded. */
  sweepRefunds(deps: ReconcileDeps, outcome: OutcomeDeps): Promise<number>;
}

export const SPLIT_STEPS: ReconcileSteps = {
  async abandon(outcome, payment) {
    const answer = await outcome.ask((timeoutMs) => outcome.provider.cancel(payment.intentId!, cancelKeyOf(payment.orderId), timeoutMs));
    return answer === null ? NOTHING_SETTLED : settleAnswer(outcome, payment, answer, { failureCode: null, cancelled: true });
  },
  async ask(outcome, payment) {
    const question = questionFor(outcome.provider, payment);
    if (question === null) return settleBySearch(outcome, payment);
    const answer = await outcome.ask(question);
    return answer === null ? NOTHING_SETTLED : settleAnswer(outcome, payment, answer);
  },
  sweepRefunds: (deps, outcome) => sweepRefunds(deps, outcome),
};

/**
 * One pass of the reconciler (docs/design.md §11). It never guesses and never replays what is known:
 * a payment that named its PaymentIntent is looked up by it; one that did not is sent the same create
 * request with the same key while the key is young (the provider answers the one outcome, or makes
 * the charge now when the first request never reached it), and searched for by its order's id after.
 * An authentication not finished within PAYMENTS_ACTION_TIMEOUT_MS is canceled at the provider, and
 * what the cancel answers is recorded (it may have succeeded at the last second). Everything is
 * recorded like the request would have, conditionally, so that late answers, webhooks and the
 * reconciler agree. Refunds whose outcome is not known are asked about the same way (refunds.ts),
 * and the account's refunds are swept for any this server does not know of (refund-sweep.ts).
 */
export async function reconcileOnce(deps: ReconcileDeps, steps: ReconcileSteps = SPLIT_STEPS): Promise<ReconcilePass> {
  const due = await claimDue(deps);
  const outcome = backgroundOutcomeDeps(deps);
  const settled = await Promise.allSettled(
    due.map((payment) => (payment.actionExpired && payment.intentId !== null ? steps.abandon : steps.ask)(outcome, payment)),
  );
  const pass: ReconcilePass = { resent: due.length, paid: 0, declined: 0, unknown: 0, unsettled: 0, refunds: 0, foundRefunds: 0 };
  for (const [i, result] of settled.entries()) {
    const fields = { orderId: due[i]!.orderId, tenantId: due[i]!.tenantId, resends: due[i]!.resends };
    const status = result.status === 'fulfilled' ? result.value.order?.status : undefined;
    if (result.status === 'rejected')
      deps.log.warn({ ...fields, err: result.reason }, 'reconciler: a payment could not be settled; asked again when due');
    if (status === 'PAID') pass.paid++;
    else if (status === 'CANCELED') pass.declined++;
    else pass.unknown++;
    if (status === 'PAID' || status === 'CANCELED') deps.log.info({ ...fields, status }, 'reconciler: payment settled');
  }
  pass.refunds = await reconcileRefunds(deps);
  pass.foundRefunds = await steps.sweepRefunds(deps, outcome);
  pass.unsettled = (await paymentStats(deps.db, deps.options.reconcileForMs)).unsettled;
  reportSetAside(deps, pass.unsettled);
  return pass;
}

/** Says so when payments wait for an operator: when their number changes, and every REPORT_AGAIN_MS while it does not. */
function reportSetAside(deps: ReconcileDeps, count: number): void {
  const { reported } = deps;
  if (count === 0 || (count === reported.count && Date.now() - reported.at < REPORT_AGAIN_MS)) {
    reported.count = count;
    return;
  }
  reported.at = Date.now();
  reported.count = count;
  deps.log.error(
    { unsettled: count },
    'payments are set aside for an operator: their orders stay PENDING_PAYMENT; find each at the provider by metadata order_id ' +
      '(npm run reconcile lists them, npm run reconcile -- --settle settles one)',
  );
}
