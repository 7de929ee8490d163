import { writeFile } from 'node:fs/promises';
import { adoptLegacyData, type AdoptionReport } from '../../features/adoption/adopt.js';
import { LONG_WORK_LIMIT_MS, withCallLimit } from '../../db/transaction-mark.js';
import { openDatabase } from '../../process/open-database.js';
import { bootstrap, run } from '../../process/bootstrap.js';

const USAGE = `usage: npm run db:adopt -- --tenant ID [--dry-run] [--json FILE]

Moves the legacy tables (campaigns, issued_coupons, contract_documents) into the "legacy" schema,
brings up this project's schema, and adopts every row: duplicate coupons are marked (unredeemed
extras voided), counters are rebuilt from the coupons, over-budget campaigns and members over the
cap are reported, document sequences continue after each tenant's highest number. One transaction;
--dry-run prints what it would do and changes nothing. The coupon data belongs to tenant ID.`;

function printReport(report: AdoptionReport) {
  const { rows, duplicateCoupons } = report;
  console.log(
    report.dryRun ? 'DRY RUN: nothing was changed.' : report.alreadyAdopted ? 'Already adopted: nothing was changed.' : 'Adopted.',
  );
  console.log(`legacy tables moved to schema "legacy": ${report.movedTables.join(', ') || 'none'}`);
  console.log(`migrations applied: ${report.migrationsApplied.join(', ') || 'none'}`);
  console.log(
    `rows adopted: ${rows.tenants} tenants, ${rows.contracts} contracts, ${rows.documents} documents, ` +
      `${rows.campaigns} campaigns, ${rows.coupons} coupons, ${rows.usageRows} member-month counters`,
  );
  console.log(
    `duplicate coupons: ${duplicateCoupons.groups} member/campaign pairs; ${duplicateCoupons.voided} unredeemed extras voided, ` +
      `${duplicateCoupons.keptRedeemed} redeemed extras kept valid`,
  );
  const table = (title: string, items: object[]) => {
    console.log(`${title}: ${items.length}`);
    if (items.length > 0) console.table(items);
  };
  table('campaigns over budget (adopted as they are; reported as legacy from now on)', report.overspend);
  table('members over the monthly cap', report.membersOverCap);
  table('document sequences set', report.sequences);
  table('document numbers used more than once (reported, not renumbered)', report.duplicateDocumentNumbers);
}

run(async () => {
  const args = process.argv.slice(2);
  if (args.includes('--help')) {
    console.log(USAGE);
    return;
  }
  const valueOf = (flag: string) => {
    const index = args.indexOf(flag);
    return index >= 0 ? args[index + 1] : undefined;
  };
  const tenantId = valueOf('--tenant');
  const unknown = args.filter(
    (arg, i) => arg.startsWith('--') && !['--tenant', '--dry-run', '--json'].includes(arg) && args[i - 1] !== '--json',
  );
  if (!tenantId || !/^[A-Za-z0-9_-]{1,64}$/.test(tenantId) || unknown.length > 0) {
    console.error(
      `${unknown.length ? `unknown option ${unknown[0]}` : '--tenant needs an id of 1 to 64 letters, digits, "_" or "-"'}\n\n${USAGE}`,
    );
    process.exitCode = 2;
    return;
  }
  const { config, log } = bootstrap({ servesHttp: false });
  // No migrations first: the legacy tables may hold the very names the migrations create.
  const opened = await openDatabase({ config, log, schema: 'leave' }, 'mutation-backend-adopt');
  try {
    const report = await withCallLimit(LONG_WORK_LIMIT_MS, () =>
      adoptLegacyData(opened.database.db, { tenantId, dryRun: args.includes('--dry-run') }),
    );
    printReport(report);
    const json = valueOf('--json');
    if (json) await writeFile(json, `${JSON.stringify(report, null, 2)}\n`);
  } finally {
    await opened.close();
  }
});
