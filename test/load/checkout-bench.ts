import { print } from 'graphql';
import pg from 'pg';
import { CheckoutDocument } from '../generated/graphql.js';
import { TEST_STRIPE_KEY } from '../support/checkout-run.js';
import { startStripeStub } from '../support/stripe-stub.js';
import { LoadClient, runLanes } from './client.js';
import { measureThreeDSecure } from './checkout-3ds-bench.js';
import { countBy, summarize } from './stats.js';
import { BENCH_ACTION_SECRET, currentCommit, machineDescription, startScratchDatabase, startServerProcess } from './target.js';

/**
 * Checkout's throughput while the payment provider takes its time: 48 clients in a closed loop,
 * each a member of its own, a pool of 4 connections (DB_POOL_MAX=4, so MAX_IN_FLIGHT 4), and a
 * Stripe stub that answers after 400 ms or 50 ms. The split design (the call with no connection and
 * no turn held) against the charge inside transaction 1, beside the bound a held connection gives:
 * DB_POOL_MAX / the provider's latency. The server runs as its own process, as in production
 * (NODE_ENV=production, workers off). Then the 3-D Secure row (checkout-3ds-bench.ts): every purchase
 * waits `--authenticate` ms on its customer.
 *
 *   npm run bench:checkout [-- --seconds 15 --clients 48 --pool 4 --latency 400,50 --authenticate 2000]
 */

interface Args {
  seconds: number;
  clients: number;
  pool: number;
  latencies: number[];
  authenticateMs: number;
}

const USAGE = 'usage: npm run bench:checkout [-- --seconds 15 --clients 48 --pool 4 --latency 400,50 --authenticate 2000]';

function parseArgs(argv: string[]): Args {
  const args: Args = { seconds: 15, clients: 48, pool: 4, latencies: [400, 50], authenticateMs: 2_000 };
  for (let i = 0; i < argv.length; i++) {
    const value = argv[i + 1] ?? '';
    if (argv[i] === '--seconds') args.seconds = Number(value);
    else if (argv[i] === '--clients') args.clients = Number(value);
    else if (argv[i] === '--pool') args.pool = Number(value);
    else if (argv[i] === '--latency') args.latencies = value.split(',').map(Number);
    else if (argv[i] === '--authenticate') args.authenticateMs = Number(value);
    else throw new Error(`unknown argument ${argv[i]}; ${USAGE}`);
    i++;
  }
  if (![args.seconds, args.clients, args.pool, args.authenticateMs, ...args.latencies].every((n) => Number.isInteger(n) && n > 0)) {
    throw new Error('--seconds, --clients, --pool, --latency and --authenticate take whole numbers above 0');
  }
  return args;
}

interface Row {
  label: string;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  answers: Record<string, number>;
}

const DESIGNS = [
  { algorithm: 'split', name: 'split (ours)' },
  { algorithm: 'charge-inside', name: 'charge inside transaction 1' },
];

async function measure(databaseUrl: string, sql: pg.Pool, args: Args, latencyMs: number, algorithm: string, name: string): Promise<Row> {
  const stub = await startStripeStub({ secretKey: TEST_STRIPE_KEY, latencyMs });
  const server = await startServerProcess('test/support/checkout-server.ts', {
    DATABASE_URL: databaseUrl,
    NODE_ENV: 'production',
    ACTION_SECRET: BENCH_ACTION_SECRET,
    RUN_WORKERS: 'false',
    DB_POOL_MAX: String(args.pool),
    STRIPE_SECRET_KEY: TEST_STRIPE_KEY,
    STRIPE_API_URL: stub.url,
    CHECKOUT_ALGORITHM: algorithm,
  });
  const tenantId = `bench-${algorithm}-${latencyMs}`;
  await sql.query('insert into tenants (id, name, monthly_cap_yen) values ($1, $1, 1000000) on conflict do nothing', [tenantId]);
  const client = new LoadClient(server.url, args.clients);
  const query = print(CheckoutDocument);
  try {
    await client.open();
    const until = performance.now() + args.seconds * 1_000;
    const started = performance.now();
    const replies = await runLanes(
      (index) =>
        performance.now() >= until
          ? null
          : () =>
              client.graphql(
                query,
                { input: { amountYen: 1_000, paymentMethod: 'pm_card_visa' } },
                {
                  'x-action-secret': BENCH_ACTION_SECRET,
                  'x-hasura-role': 'user',
                  'x-hasura-tenant-id': tenantId,
                  'x-hasura-user-id': `client-${index % args.clients}`,
                },
              ),
      args.clients,
    );
    const elapsedS = (performance.now() - started) / 1_000;
    const answers = countBy(replies, (reply) => {
      const answer = reply.body.data?.['checkout'] as { status: string } | undefined;
      return answer?.status ?? String(reply.body.errors?.[0]?.extensions?.['code'] ?? `HTTP ${reply.status}`);
    });
    const paid = replies.filter((reply) => (reply.body.data?.['checkout'] as { status?: string } | undefined)?.status === 'PAID');
    const latency = summarize(paid.map((reply) => reply.latencyMs));
    return {
      label: `checkout, provider ${latencyMs} ms, ${name}`,
      requestsPerSecond: paid.length / elapsedS,
      p50: latency.p50,
      p99: latency.p99,
      answers,
    };
  } finally {
    client.close();
    await server.stop();
    await stub.close();
  }
}

const args = parseArgs(process.argv.slice(2));
const scratch = await startScratchDatabase();
const sql = new pg.Pool({ connectionString: scratch.databaseUrl, max: 2 });
try {
  const rows: Row[] = [];
  for (const latencyMs of args.latencies) {
    for (const design of DESIGNS) {
      // The first server migrates the scratch database; the rest find it current.
      rows.push(await measure(scratch.databaseUrl, sql, args, latencyMs, design.algorithm, design.name));
      console.error(`measured ${rows.at(-1)!.label}`);
    }
  }
  console.log(`\nCheckout with a slow payment provider: ${args.clients} clients, DB_POOL_MAX=${args.pool}, ${args.seconds} s per row`);
  console.log(`${machineDescription()}, commit ${currentCommit()}\n`);
  console.log(
    '| row | paid/s | bound with a held connection (DB_POOL_MAX / latency) | bound of the clients (clients / latency) | p50 ms | p99 ms | answers |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | --- |');
  for (const row of rows) {
    const latencyMs = Number(/provider (\d+) ms/.exec(row.label)![1]);
    const held = (args.pool * 1_000) / latencyMs;
    const clients = (args.clients * 1_000) / latencyMs;
    console.log(
      `| ${row.label} | ${row.requestsPerSecond.toFixed(1)} | ${held.toFixed(1)} | ${clients.toFixed(1)} | ${row.p50.toFixed(0)} | ${row.p99.toFixed(0)} | ${JSON.stringify(row.answers)} |`,
    );
  }
  const latencyMs = args.latencies.at(-1)!;
  const tds = await measureThreeDSecure(scratch.databaseUrl, sql, { ...args, latencyMs });
  console.error(`measured ${tds.label}`);
  const customersBound = (args.clients * 1_000) / (args.authenticateMs + 2 * latencyMs);
  console.log(`\n3-D Secure: each purchase waits ${args.authenticateMs} ms on its customer; /metrics sampled ${tds.samples} times\n`);
  console.log(
    '| row | paid/s | bound of the customers (clients / (authentication + 2 calls)) | p50 ms | p99 ms | waiting on customers at once (max) | pool connections in use (mean, max of ' +
      `${args.pool}) | turns held (mean, max) | answers |`,
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |');
  console.log(
    `| ${tds.label} | ${tds.purchasesPerSecond.toFixed(1)} | ${customersBound.toFixed(1)} | ${tds.p50.toFixed(0)} | ${tds.p99.toFixed(0)} | ${tds.awaitingMax} | ${tds.poolInUseMean.toFixed(2)}, ${tds.poolInUseMax} | ${tds.inFlightMean.toFixed(2)}, ${tds.inFlightMax} | ${JSON.stringify(tds.answers)} |`,
  );
} finally {
  await sql.end();
  await scratch.stop();
}
