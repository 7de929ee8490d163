import { parseDuration } from '../../core/config.js';
import { countDead, requeueDead, type RequeueFilter } from '../../features/outbox/housekeeping.js';
import { openDatabase } from '../../process/open-database.js';
import { bootstrap, run } from '../../process/bootstrap.js';

const USAGE = `usage: npm run outbox:requeue -- [--tenant ID] [--topic TOPIC] [--older-than AGE] [--newer-than AGE] [--dry-run]

Gives dead outbox events back to the relay: pending, due now, with a fresh OUTBOX_RETRY_FOR.
Without a filter, every dead event. AGE is how long ago the event was written: 90s, 30m, 12h, 3d.
  --dry-run   count what would be given back, change nothing`;

class UsageError extends Error {
  readonly exitCode = 2;
}

function parseArgs(argv: string[]): { filter: RequeueFilter; dryRun: boolean; help: boolean } {
  const filter: RequeueFilter = {};
  let dryRun = false;
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]!;
    const value = () => {
      const next = argv[++i];
      if (next === undefined || next.startsWith('--')) throw new UsageError(`${flag} needs a value\n\n${USAGE}`);
      return next;
    };
    const age = () => {
      const raw = value();
      const ms = parseDuration(raw);
      if (ms === null) throw new UsageError(`${flag} needs an age such as 30m, 12h or 3d, got "${raw}"\n\n${USAGE}`);
      return ms;
    };
    if (flag === '--tenant') filter.tenantId = value();
    else if (flag === '--topic') filter.topic = value();
    else if (flag === '--older-than') filter.olderThanMs = age();
    else if (flag === '--newer-than') filter.newerThanMs = age();
    else if (flag === '--dry-run') dryRun = true;
    else if (flag === '--help' || flag === '-h') help = true;
    else throw new UsageError(`unknown option ${flag}\n\n${USAGE}`);
  }
  return { filter, dryRun, help };
}

/** What the filter selects, in words. */
function describe(filter: RequeueFilter): string {
  const parts = [
    filter.tenantId !== undefined ? `tenant ${filter.tenantId}` : null,
    filter.topic !== undefined ? `topic ${filter.topic}` : null,
    filter.olderThanMs !== undefined ? `written more than ${filter.olderThanMs / 1000} s ago` : null,
    filter.newerThanMs !== undefined ? `written less than ${filter.newerThanMs / 1000} s ago` : null,
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'all';
}

/**
 * `npm run outbox:requeue`: dead outbox events (delivery failed for all of OUTBOX_RETRY_FOR) go
 * back to the relay, filtered by tenant, topic and age. Never migrates; exit 2 on bad arguments or
 * a database without this schema.
 */
run(async () => {
  const { filter, dryRun, help } = parseArgs(process.argv.slice(2));
  if (help) {
    console.log(USAGE);
    return;
  }
  const { config, log } = bootstrap({ servesHttp: false });
  const opened = await openDatabase({ config, log, schema: 'require-current' }, 'mutation-backend-outbox-requeue');
  try {
    if (dryRun) {
      console.log(`${await countDead(opened.database.db, filter)} dead events would be given back (${describe(filter)})`);
      return;
    }
    const requeued = await requeueDead(opened.database.db, filter);
    log.info({ requeued, filter }, 'dead outbox events given back to the relay');
    console.log(`${requeued} dead events given back to the relay (${describe(filter)})`);
  } finally {
    await opened.close();
  }
});
