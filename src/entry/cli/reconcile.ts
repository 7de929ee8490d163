import { recordOperatorFinding, type OperatorFinding } from '../../features/checkout/record.js';
import { unsettledPayments } from '../../features/checkout/stats.js';
import { ledgerCheck } from '../../features/coupons/ledger.js';
import type { Database } from '../../db/database.js';
import { LONG_WORK_LIMIT_MS, withCallLimit } from '../../db/scope.js';
import { runInTransaction, transactionSettingsOf, type TransactionSettings } from '../../db/transaction.js';
import { openDatabase } from '../../process/open-database.js';
import { bootstrap, run } from '../../process/bootstrap.js';

const USAGE = [
  'usage: npm run reconcile [-- --tenant ID]',
  '         compares counters with facts and lists the payments nobody resends any more;',
  '         exit 1 when counters and facts disagree, or payments wait for an operator',
  '       npm run reconcile -- --tenant ID --settle ORDER_ID paid pi_…',
  '       npm run reconcile -- --tenant ID --settle ORDER_ID canceled',
  "         settles a pending payment by what the provider's dashboard shows for metadata order_id:",
  '         a succeeded PaymentIntent (paid, its id), or none (canceled: the coupon is given back)',
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

async function settle(database: Database, transactions: TransactionSettings, request: SettleRequest): Promise<void> {
  const { tenantId, orderId, finding } = request;
  const { value: order } = await runInTransaction(database.db, transactions, { deadline: Date.now() + LONG_WORK_LIMIT_MS }, async (trx) => {
    const pending = await trx
      .selectFrom('orders')
      .select('status')
      .where('tenant_id', '=', tenantId)
      .where('id', '=', orderId)
      .executeTakeFirst();
    if (pending === undefined) throw new UsageError(`no order ${orderId} in tenant ${tenantId}`);
    return recordOperatorFinding(trx, tenantId, orderId, finding, new Date());
  });
  const expected = finding.kind === 'paid' ? 'PAID' : 'CANCELED';
  console.log(`order ${orderId}: ${order.status}${order.status === expected ? '' : ' (it was settled before; nothing changed)'}`);
  process.exitCode = order.status === expected ? 0 : 1;
}

async function report(database: Database, tenantId: string | null, reconcileForMs: number): Promise<void> {
  const ledger = await withCallLimit(LONG_WORK_LIMIT_MS, () => ledgerCheck(database.db, tenantId));
  const unsettled = await withCallLimit(LONG_WORK_LIMIT_MS, () => unsettledPayments(database.db, reconcileForMs, tenantId));
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
  print('payments still unknown after PAYMENTS_RECONCILE_FOR (find each at the provider by metadata order_id)', unsettled);
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
    if (settlement) await settle(opened.database, transactionSettingsOf(config), settlement);
    else await report(opened.database, tenantId, config.payments.reconcileForMs);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(error.message);
    process.exitCode = 2;
  } finally {
    await opened.close();
  }
});
