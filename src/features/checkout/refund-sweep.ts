import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from '../../core/logger.js';
import type { DB } from '../../db/schema.js';
import { runInTransaction, type TransactionSettings } from '../../db/transaction.js';
import type { ReportedIntent, ReportedRefund } from '../payments/provider.js';
import type { OutcomeDeps } from './outcome.js';
import { isMade, recordListedRefunds, recordOrderRefunds, type RecordListed } from './provider-refunds.js';
import { orderNamedBy } from './verify.js';

/**
 * The reconciler's sweep over the refunds of the Stripe account (docs/design.md §11): what a lost
 * refund event missed. Refund events are the fast way to learn of a refund made elsewhere, but one
 * can be lost for good (an endpoint down past Stripe's three days of resends, an event not enabled
 * on it, no STRIPE_WEBHOOK_SECRET at all). So the reconciler lists the account's refunds by creation
 * time (GET /v1/refunds?created[gte]=…, newest first, each with its PaymentIntent expanded, whose
 * metadata names the order), from where the last sweep left off, and records each it does not know
 * through the same statements as the events (provider-refunds.ts).
 *
 * Bounded: one sweep per PAYMENTS_RECONCILE_AFTER_MS for the whole account, of at most SWEEP_PAGES
 * pages of 100, and no call per refund (the list describes each PaymentIntent). Its cost follows the
 * account's refunds, not its orders, and it finds a refund of any order whatever the order's age
 * (Stripe keeps refunds, where it keeps events 30 days). Its place (refund_sweeps) moves only past
 * refunds recorded or known, and holds at one that could not be recorded now.
 */

/** Pages of 100 refunds one sweep reads at most; a sweep that stops there goes on after the last it read, in the next pass. */
export const SWEEP_PAGES = 10;
/**
 * A sweep reads again the refunds made this long before the newest it had seen: one made in the
 * same second, or committed at Stripe a moment after it was stamped, may be listed after the sweep
 * read. What is read again and known costs one indexed look-up per PaymentIntent.
 */
const SWEEP_OVERLAP_SECONDS = 120;

export interface SweepDeps {
  /** The background loops' connections. */
  db: Kysely<DB>;
  transactions: TransactionSettings;
  log: Logger;
  /** PAYMENTS_RECONCILE_AFTER_MS: how often the account's refunds are swept; PAYMENTS_RECONCILE_FOR, for the payments' state. */
  options: { reconcileAfterMs: number; reconcileForMs: number };
}

/**
 * Where the sweeps are: every refund created up to `through` is known. While a sweep goes on below
 * its first pages, `resumeAfter` is the last refund it read and `newest` the newest it saw.
 */
interface SweepPlace {
  through: number;
  resumeAfter: string | null;
  newest: number | null;
}

const inPass = <T>(deps: SweepDeps, work: (trx: Transaction<DB>) => Promise<T>) =>
  runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + 10_000 }, work);

/** Claims the sweep when it is due (one reconciler at a time, committed at once): its place and its number. */
async function claimSweep(deps: SweepDeps): Promise<(SweepPlace & { sweepNo: string }) | null> {
  const { value } = await inPass(deps, async (trx) => {
    const { rows } = await sql<SweepPlace & { sweepNo: string }>`
      update refund_sweeps set sweep_no = sweep_no + 1, next_sweep_at = now() + make_interval(secs => ${deps.options.reconcileAfterMs / 1000})
       where name = 'refunds' and next_sweep_at <= now()
      returning through_created::float8 as through, resume_after as "resumeAfter", newest_created::float8 as newest, sweep_no::text as "sweepNo"`.execute(
      trx,
    );
    return rows[0] ?? null;
  });
  return value;
}

/**
 * Moves the place, unless a later sweep was claimed meanwhile (its place is then the newer word). A
 * sweep that stopped at its page limit goes on in the next pass.
 */
async function saveSweep(deps: SweepDeps, sweepNo: string, place: SweepPlace): Promise<void> {
  await inPass(deps, (trx) =>
    sql`update refund_sweeps set through_created = ${place.through}, resume_after = ${place.resumeAfter}, newest_created = ${place.newest},
                                next_sweep_at = case when ${place.resumeAfter}::text is null then next_sweep_at else now() end
         where name = 'refunds' and sweep_no = ${sweepNo}`.execute(trx),
  );
}

/** The refunds made since `through` less the overlap, after `resumeAfter`, page after page; null when a page could not be had. */
async function readWindow(outcome: OutcomeDeps, place: SweepPlace): Promise<{ refunds: ReportedRefund[]; capped: boolean } | null> {
  const refunds: ReportedRefund[] = [];
  const window = { from: place.through - SWEEP_OVERLAP_SECONDS, to: null };
  for (let page = 0; page < SWEEP_PAGES; page++) {
    const startingAfter = refunds.at(-1)?.id ?? place.resumeAfter;
    const read = await outcome.ask((timeoutMs) => outcome.provider.listAccountRefunds({ ...window, startingAfter }, timeoutMs));
    if (read === null || read.kind !== 'found') {
      outcome.log.warn(
        { reason: read?.kind === undefined ? 'no time' : read.reason },
        'refund sweep: the account’s refunds could not be listed',
      );
      return null;
    }
    refunds.push(...read.refunds);
    if (!read.hasMore || read.refunds.length === 0) return { refunds, capped: false };
  }
  return { refunds, capped: true };
}

/** The listed refunds by their PaymentIntent, for each one whose metadata names an order of this server's shape. */
function byIntent(refunds: ReportedRefund[]): { intent: ReportedIntent; refunds: ReportedRefund[] }[] {
  const groups = new Map<string, { intent: ReportedIntent; refunds: ReportedRefund[] }>();
  for (const refund of refunds) {
    const intent = refund.intent;
    if (intent === null || intent.id === null || intent.id !== refund.paymentIntentId || orderNamedBy(intent) === null) continue;
    const group = groups.get(intent.id) ?? { intent, refunds: [] };
    group.refunds.push(refund);
    groups.set(intent.id, group);
  }
  return [...groups.values()];
}

/** Whether every refund made of the group is recorded already (the common case): nothing to ask or lock. */
async function allKnown(deps: SweepDeps, intent: ReportedIntent, refunds: ReportedRefund[]): Promise<boolean> {
  const ids = refunds.filter(isMade).map((refund) => refund.id);
  if (ids.some((id) => id === null)) return false;
  const { tenantId } = orderNamedBy(intent)!;
  const { value } = await inPass(deps, (trx) =>
    sql<{ n: number }>`select count(*)::int as n from refunds where tenant_id = ${tenantId} and provider_refund_id = any(${ids})`.execute(
      trx,
    ),
  );
  return value.rows[0]!.n === ids.length;
}

/** Where the sweeps go on from, after one that read `read` and could not record what was made at `failedAt`. */
function nextPlace(place: SweepPlace, read: { refunds: ReportedRefund[]; capped: boolean }, failedAt: number[]): SweepPlace {
  const created = read.refunds.map((refund) => refund.created).filter((time): time is number => time !== null);
  const newest = created.length === 0 ? place.newest : Math.max(place.newest ?? -Infinity, ...created);
  // Nothing is passed below a refund not recorded; a sweep that did not reach the bottom starts again from its place.
  if (failedAt.length > 0) {
    const through = read.capped || place.resumeAfter !== null ? place.through : Math.min(...failedAt);
    return { through, resumeAfter: null, newest: null };
  }
  if (read.capped) return { through: place.through, resumeAfter: read.refunds.at(-1)?.id ?? place.resumeAfter, newest };
  return { through: Math.max(place.through, newest ?? place.through), resumeAfter: null, newest: null };
}

/**
 * One sweep when it is due: the account's refunds since the last, each not known recorded against
 * the order its PaymentIntent names (or ignored: another client's charge). How many were recorded.
 */
export async function sweepRefunds(
  deps: SweepDeps,
  outcome: OutcomeDeps,
  recordListed: RecordListed = recordListedRefunds,
): Promise<number> {
  const claimed = await claimSweep(deps);
  if (claimed === null) return 0;
  const read = await readWindow(outcome, claimed);
  if (read === null) return 0;
  let recorded = 0;
  const failedAt: number[] = [];
  for (const group of byIntent(read.refunds)) {
    if (await allKnown(deps, group.intent, group.refunds)) continue;
    const synced = await recordOrderRefunds(
      { outcome, reconcileForMs: deps.options.reconcileForMs, recordListed },
      group.intent,
      group.refunds,
    );
    recorded += synced.recorded;
    if (!synced.done) failedAt.push(Math.min(...group.refunds.map((refund) => refund.created ?? claimed.through)));
  }
  await saveSweep(deps, claimed.sweepNo, nextPlace(claimed, read, failedAt));
  if (recorded > 0) deps.log.info({ recorded }, 'refund sweep: refunds made elsewhere recorded');
  return recorded;
}
