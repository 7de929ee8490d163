import { sql, type Kysely } from 'kysely';
import type { Clock } from '../../core/clock.js';
import type { DB } from '../../db/schema.js';
import { runInTransaction, type TransactionSettings } from '../../db/transaction.js';
import type { Logger } from '../../core/logger.js';
import { shortReason, type ChargeOutcome, type ChargeRequest, type PaymentProvider } from '../payments/provider.js';
import { recordOutcome } from './record.js';
import { paymentStats } from './stats.js';

export interface ReconcileOptions {
  /** PAYMENTS_TIMEOUT_MS: one call's limit. */
  timeoutMs: number;
  /** PAYMENTS_RECONCILE_AFTER_MS: the first resend's wait, doubled for each resend after it. */
  reconcileAfterMs: number;
  /** PAYMENTS_RECONCILE_FOR: how long after the order a payment is resent; after it, it is reported, never resent. */
  reconcileForMs: number;
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
  /** When the last report of unsettled payments was logged (one reconciler, one state). */
  reported: { at: number; count: number };
}

export interface ReconcilePass {
  /** Payments resent in this pass. */
  resent: number;
  paid: number;
  declined: number;
  /** Resent and still not known. */
  unknown: number;
  /** Pending past PAYMENTS_RECONCILE_FOR: no longer resent, waiting for an operator. */
  unsettled: number;
}

/** A pass never runs longer than this (its statements' limit); the calls have PAYMENTS_TIMEOUT_MS each. */
const PASS_DEADLINE_MS = 10_000;
/** The longest wait between two resends of one payment. */
const LONGEST_RESEND_WAIT_MS = 3_600_000;
/** How often the same count of unsettled payments is logged again. */
const REPORT_AGAIN_MS = 10 * 60_000;

interface DuePayment {
  tenant_id: string;
  order_id: string;
  idempotency_key: string;
  amount_yen: number;
  payment_method: string;
  resends: number;
}

/**
 * Claims up to a batch of payments whose resend is due, as the outbox relay claims its events:
 * SKIP LOCKED lets reconcilers of several processes work side by side, and the claim commits at
 * once and moves next_attempt_at past the resend's wait (PAYMENTS_RECONCILE_AFTER_MS, doubled per
 * resend, at most an hour, never below two calls' limit), so the calls happen outside any
 * transaction and a reconciler that dies mid-pass leaves its payments to the next pass. A payment
 * older than PAYMENTS_RECONCILE_FOR is never claimed: Stripe may have forgotten its key by then.
 */
async function claimDue(deps: ReconcileDeps): Promise<DuePayment[]> {
  const { reconcileAfterMs, reconcileForMs, timeoutMs, batchSize } = deps.options;
  const { value } = await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, async (trx) => {
    const claimed = await sql<DuePayment>`
      update payment_intents p
         set resends = p.resends + 1,
             next_attempt_at = now() + make_interval(secs => greatest(${(2 * timeoutMs) / 1000}::float8,
                                 least(${LONGEST_RESEND_WAIT_MS / 1000}::float8, ${reconcileAfterMs / 1000}::float8 * power(2, least(p.resends, 20)))))
        from (select tenant_id, order_id from payment_intents
               where status = 'pending' and next_attempt_at <= now()
                 and created_at > now() - make_interval(secs => ${reconcileForMs / 1000})
               order by next_attempt_at, order_id
               limit ${batchSize}
               for update skip locked) due
       where p.tenant_id = due.tenant_id and p.order_id = due.order_id
      returning p.tenant_id, p.order_id, p.idempotency_key, p.amount_yen, p.payment_method, p.resends`.execute(trx);
    return claimed.rows;
  });
  return value;
}

const toRequest = (due: DuePayment): ChargeRequest => ({
  idempotencyKey: due.idempotency_key,
  tenantId: due.tenant_id,
  orderId: due.order_id,
  amountYen: due.amount_yen,
  paymentMethod: due.payment_method,
});

/** Records what one resend came to: the outcome (first writer wins), or why it still is not known. */
async function recordResend(deps: ReconcileDeps, due: DuePayment, outcome: ChargeOutcome): Promise<void> {
  const now = deps.clock();
  const { tenant_id: tenantId, order_id: orderId } = due;
  await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, async (trx) => {
    if (outcome.kind !== 'unknown') return void (await recordOutcome(trx, tenantId, orderId, outcome, now));
    await trx
      .updateTable('payment_intents')
      .set({ last_error: shortReason(outcome.reason) })
      .where('tenant_id', '=', tenantId)
      .where('order_id', '=', orderId)
      .where('status', '=', 'pending')
      .execute();
  });
}

/**
 * One pass of the reconciler (docs/design.md §11). It never guesses: for every pending payment
 * that is due it sends the same request with the same Idempotency-Key again, and the provider
 * answers the one outcome (or makes the charge now, when the first request never reached it).
 * What it learns it records like the request would have, conditionally, so that a late answer to
 * the request and the reconciler agree and neither overwrites the other. A payment still not
 * known waits for its next resend; one pending past PAYMENTS_RECONCILE_FOR is reported in the log
 * (and the payments_unsettled metric) for an operator, never dropped and never resent.
 */
export async function reconcileOnce(deps: ReconcileDeps): Promise<ReconcilePass> {
  const due = await claimDue(deps);
  const outcomes = await Promise.all(due.map((payment) => deps.provider.charge(toRequest(payment), deps.options.timeoutMs)));
  const pass: ReconcilePass = { resent: due.length, paid: 0, declined: 0, unknown: 0, unsettled: 0 };
  const recorded = await Promise.allSettled(due.map((payment, i) => recordResend(deps, payment, outcomes[i]!)));
  for (const [i, outcome] of outcomes.entries()) {
    const payment = due[i]!;
    const fields = { orderId: payment.order_id, tenantId: payment.tenant_id, resends: payment.resends };
    const failed = recorded[i]!;
    if (failed.status === 'rejected') {
      deps.log.warn({ ...fields, err: failed.reason }, 'reconciler: could not record a payment outcome; it is resent when due again');
    }
    if (outcome.kind === 'unknown') {
      pass.unknown++;
      deps.log.warn({ ...fields, reason: outcome.reason }, 'reconciler: the payment provider gave no outcome; resent later');
    } else {
      if (outcome.kind === 'succeeded') pass.paid++;
      else pass.declined++;
      deps.log.info({ ...fields, outcome: outcome.kind }, 'reconciler: payment settled');
    }
  }
  pass.unsettled = (await paymentStats(deps.db, deps.options.reconcileForMs)).unsettled;
  reportUnsettled(deps, pass.unsettled);
  return pass;
}

/** Says so when payments wait for an operator: when their number changes, and every REPORT_AGAIN_MS while it does not. */
function reportUnsettled(deps: ReconcileDeps, count: number): void {
  const { reported } = deps;
  if (count === 0 || (count === reported.count && Date.now() - reported.at < REPORT_AGAIN_MS)) {
    reported.count = count;
    return;
  }
  reported.at = Date.now();
  reported.count = count;
  deps.log.error(
    { unsettled: count },
    'payments stayed unknown for all of PAYMENTS_RECONCILE_FOR and are no longer resent: their orders stay PENDING_PAYMENT; ' +
      'find each at the provider by metadata order_id (npm run reconcile lists them)',
  );
}
