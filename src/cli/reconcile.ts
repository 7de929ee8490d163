import { ledgerCheck } from '../coupons/ledger.js';
import { LONG_WORK_LIMIT_MS, withCallLimit } from '../db/scope.js';
import { openDatabase } from '../process/open-database.js';
import { bootstrap, run } from '../process/bootstrap.js';

/**
 * `npm run reconcile [-- --tenant ID]`: compares counters with facts and lists limits exceeded.
 * Exit 0 when everything agrees, 1 on any drift.
 */
run(async () => {
  const args = process.argv.slice(2);
  if (args.includes('--help')) {
    console.log('usage: npm run reconcile [-- --tenant ID]   (exit 1 when counters and facts disagree)');
    return;
  }
  const tenantIndex = args.indexOf('--tenant');
  const tenantId = tenantIndex >= 0 ? (args[tenantIndex + 1] ?? null) : null;
  const { config, log } = bootstrap({ servesHttp: false });
  const opened = await openDatabase({ config, log, schema: 'require-current' }, 'mutation-backend-reconcile');
  try {
    const report = await withCallLimit(LONG_WORK_LIMIT_MS, () => ledgerCheck(opened.database.db, tenantId));
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
    console.log(report.ok ? 'ledger OK' : 'ledger DRIFT');
    process.exitCode = report.ok ? 0 : 1;
  } finally {
    await opened.close();
  }
});
