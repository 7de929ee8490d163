import type { Transaction } from 'kysely';
import { OPERATOR_CANCELED, recordOperatorFinding, type OperatorFinding } from '../../features/checkout/record.js';
import type { DB } from '../../db/schema.js';
import { unsettledPayments } from '../../features/checkout/stats.js';
import { ledgerCheck } from '../../features/coupons/ledger.js';
import type { Database } from '../../db/database.js';
import { LONG_WORK_LIMIT_MS, withCallLimit } from '../../db/transaction-mark.js';
import { runInTransaction, transactionSettingsOf, type TransactionSettings } from '../../db/transaction.js';
import { openDatabase } from '../../process/open-database.js';
import { bootstrap, run } from '../../process/bootstrap.js';

const USAGE = [
  'usage: npm run reconcile [-- --tenant ID]',
  '         compares counters with facts and lists the payments set aside for an operator;',
  '         exit 1 when counters and facts disagree, or payments wait for an operator; 2 for an unknown tenant',
  '       npm run reconcile -- --tenant ID --settle ORDER_ID paid pi_…',
  '       npm run reconcile -- --tenant ID --settle ORDER_ID canceled',
  "         settles a pending payment by what the provider's dashboard shows for metadata order_id:",
  '         a succeeded PaymentIntent (paid, its id), or none (canceled: the coupon is given back);',
  '         says what it changed; exit 1 when the order was settled before, 2 when refused',
].join('\n');

interface SettleRequest {
  tenantId: string;
  orderId: string;
  finding: OperatorFinding;
}

class UsageError extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `--settle ORDER_ID paid pi_…|canceled`, or null when the arguments ask for the report. */
function parseSettle(args: string[], tenantId: string | null): SettleRequest | null {
  const at = args.indexOf('--settle');
  if (at < 0) return null;
  const [orderId, kind, intentId] = args.slice(at + 1);
  if (tenantId === null) throw new UsageError('--settle needs --tenant ID');
  if (orderId === undefined || !UUID.test(orderId)) throw new UsageError('--settle needs the order id (a UUID)');
  if (kind === 'canceled') return { tenantId, orderId, finding: { kind: 'canceled' } };
  if (kind === 'paid' && intentId !== undefined && /^pi_[A-Za-z0-9_]{1,250}$/.test(intentId)) {
    return { tenantId, orderId, finding: { kind: 'paid', intentId } };
  }
  throw new UsageError('--settle ORDER_ID takes "paid pi_…" (the succeeded PaymentIntent) or "canceled" (no charge at the provider)');
}

/** A refusal of the operator's request: nothing was changed; exit 2. */
class Refused extends Error {}

/** The order locked for the settlement, or a refusal: an unknown tenant or order, or a PaymentIntent another order holds. */
async function lockForSettlement(trx: Transaction<DB>, request: SettleRequest) {
  const { tenantId, orderId, finding } = request;
  const tenant = await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst();
  if (tenant === undefined) throw new Refused(`no tenant ${tenantId}`);
  const order = await trx
    .selectFrom('orders')
    .select(['status', 'coupon_id'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', orderId)
    .forUpdate()
    .executeTakeFirst();
  if (order === undefined) throw new Refused(`no order ${orderId} in tenant ${tenantId}`);
  if (finding.kind === 'paid') {
    // Any tenant's: one PaymentIntent is one payment.
    const holder = await trx
      .selectFrom('orders')
      .select(['tenant_id', 'id'])
      .where('payment_intent_id', '=', finding.intentId)
      .where((eb) => eb.or([eb('tenant_id', '!=', tenantId), eb('id', '!=', orderId)]))
      .executeTakeFirst();
    if (holder)
      throw new Refused(`refused: ${finding.intentId} already settles order ${holder.id} of tenant ${holder.tenant_id}; nothing changed`);
  }
  return order;
}

/** What the settlement changed, in words; null when it changed nothing (the order was settled before). */
async function settle(database: Database, transactions: TransactionSettings, request: SettleRequest): Promise<string | null> {
  const { tenantId, orderId, finding } = request;
  const { value } = await runInTransaction(database.db, transactions, { deadline: Date.now() + LONG_WORK_LIMIT_MS }, async (trx) => {
    const before = await lockForSettlement(trx, request);
    if (before.status !== 'PENDING_PAYMENT') return { before: before.status, after: null };
    const after = await recordOperatorFinding(trx, tenantId, orderId, finding, new Date());
    return { before: before.status, after };
  });
  if (value.after === null) return null;
  const { after } = value;
  const coupon = after.couponId === null ? '' : `, coupon ${after.couponId} ${after.status === 'PAID' ? 'redeemed' : 'given back'}`;
  const event = after.status === 'PAID' ? 'order.paid' : 'order.canceled';
  const intent = finding.kind === 'paid' ? ` with ${finding.intentId}` : ` (${OPERATOR_CANCELED})`;
  return `order ${orderId}: ${value.before} -> ${after.status}${intent}${coupon}, ${event} event written`;
}

async function settleAndSay(database: Database, transactions: TransactionSettings, request: SettleRequest): Promise<void> {
  const changed = await settle(database, transactions, request);
  if (changed !== null) {
    console.log(changed);
    process.exitCode = 0;
    return;
  }
  const { status } = await database.db
    .selectFrom('orders')
    .select('status')
    .where('tenant_id', '=', request.tenantId)
    .where('id', '=', request.orderId)
    .executeTakeFirstOrThrow();
  console.log(`order ${request.orderId}: ${status} (it was settled before; nothing changed)`);
  process.exitCode = 1;
}

async function report(database: Database, tenantId: string | null): Promise<void> {
  if (tenantId !== null) {
    const tenant = await withCallLimit(LONG_WORK_LIMIT_MS, () =>
      database.db.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst(),
    );
    if (tenant === undefined) throw new Refused(`no tenant ${tenantId}`);
  }
  const ledger = await withCallLimit(LONG_WORK_LIMIT_MS, () => ledgerCheck(database.db, tenantId));
  const unsettled = await withCallLimit(LONG_WORK_LIMIT_MS, () => unsettledPayments(database.db, tenantId));
  const print = (title: string, rows: object[]) => {
    console.log(`${title}: ${rows.length}`);
    if (rows.length > 0) console.table(rows);
  };
  print('campaign counters that differ from their coupons', ledger.campaignDrift);
  print('member-month counters that differ from their coupons', ledger.usageDrift);
  print('members over the monthly cap', ledger.membersOverCap);
  print('campaigns over budget', ledger.campaignsOverBudget);
  print('legacy: campaigns adopted over budget (not drift)', ledger.legacyOverspend);
  print('legacy: members adopted over the cap (not drift)', ledger.legacyMembersOverCap);
  print('payments set aside for an operator (find each at the provider by metadata order_id)', unsettled);
  console.log(ledger.ok ? 'ledger OK' : 'ledger DRIFT');
  process.exitCode = ledger.ok && unsettled.length === 0 ? 0 : 1;
}

/** `npm run reconcile`: the ledger and the payments that wait for an operator, or an operator's settlement of one. */
run(async () => {
  const args = process.argv.slice(2);
  if (args.includes('--help')) return void console.log(USAGE);
  const tenantIndex = args.indexOf('--tenant');
  const tenantId = tenantIndex >= 0 ? (args[tenantIndex + 1] ?? null) : null;
  let settlement: SettleRequest | null;
  try {
    settlement = parseSettle(args, tenantId);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${error.message}\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  const { config, log } = bootstrap({ servesHttp: false });
  const opened = await openDatabase({ config, log, schema: 'require-current' }, 'mutation-backend-reconcile');
  try {
    if (settlement) await settleAndSay(opened.database, transactionSettingsOf(config), settlement);
    else await report(opened.database, tenantId);
  } catch (error) {
    if (!(error instanceof UsageError) && !(error instanceof Refused)) throw error;
    console.error(error.message);
    process.exitCode = 2;
  } finally {
    await opened.close();
  }
});
