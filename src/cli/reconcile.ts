import { unsettledPayments } from '../checkout/stats.js';
import { ledgerCheck } from '../coupons/ledger.js';
import { LONG_WORK_LIMIT_MS, withCallLimit } from '../db/scope.js';
import { openDatabase } from '../process/open-database.js';
import { bootstrap, run } from '../process/bootstrap.js';

/**
 * `npm run reconcile [-- --tenant ID]`: compares counters with facts, lists limits exceeded and the
 * payments nobody resends any more. Exit 0 when everything agrees, 1 on any drift or such payment.
 */
run(async () => {
  const args = process.argv.slice(2);
  if (args.includes('--help')) {
    console.log('usage: npm run reconcile [-- --tenant ID]   (exit 1 when counters and facts disagree, or payments wait for an operator)');
    return;
  }
  const tenantIndex = args.indexOf('--tenant');
  const tenantId = tenantIndex >= 0 ? (args[tenantIndex + 1] ?? null) : null;
  const { config, log } = bootstrap({ servesHttp: false });
  const opened = await openDatabase({ config, log, schema: 'require-current' }, 'mutation-backend-reconcile');
  try {
    const report = await withCallLimit(LONG_WORK_LIMIT_MS, () => ledgerCheck(opened.database.db, tenantId));
    const unsettled = await withCallLimit(LONG_WORK_LIMIT_MS, () =>
      unsettledPayments(opened.database.db, config.payments.reconcileForMs, tenantId),
    );
    const print = (title: string, rows: object[]) => {
      console.log(`${title}: ${rows.length}`);
      if (rows.length > 0) console.table(rows);
    };
    print('campaign counters that differ from their coupons', report.campaignDrift);
    print('member-month counters that differ from their coupons', report.usageDrift);
    print('members over the monthly cap', report.membersOverCap);
    print('campaigns over budget', report.campaignsOverBudget);
    print('legacy: campaigns adopted over budget (not drift)', report.legacyOverspend);
    print('legacy: members adopted over the cap (not drift)', report.legacyMembersOverCap);
    print('payments still unknown after PAYMENTS_RECONCILE_FOR (find each at the provider by metadata order_id)', unsettled);
    console.log(report.ok ? 'ledger OK' : 'ledger DRIFT');
    process.exitCode = report.ok && unsettled.length === 0 ? 0 : 1;
  } finally {
    await opened.close();
  }
});
