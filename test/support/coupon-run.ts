import { setTimeout as sleep } from 'node:timers/promises';
import { LoadClient, runReleasedTogether, type GraphQLReply } from '../load/client.js';
import { runLoad, type LoadResult } from '../load/run.js';
import { replyOutcome } from '../load/scenario.js';
import {
  checkCouponInvariants,
  couponLoad,
  couponRequests,
  headerSessions,
  referenceScenario,
  RefusalProbe,
  sendIssue,
  setupCouponScenario,
  type CouponScenario,
  type InvariantReport,
} from '../load/scenarios/coupons.js';
import { countBy } from '../load/stats.js';
import { serveOverHttp, type TestBackend } from './harness.js';

export interface CouponRunResult extends LoadResult {
  invariants: InvariantReport;
}

/**
 * The limit of a test that runs the reference scenario: its 1,800 requests take a few seconds on a
 * quiet machine and have taken 90 s at 20 requests/s on two cores that other work kept busy. The
 * limit is there to catch a hang, not to time the run.
 */
export const REFERENCE_SCENARIO_TIMEOUT_MS = 600_000;

/**
 * The reference scenario over real HTTP at `concurrency` clients, in a tenant of its own, through
 * the load tool's runner; the invariants are counted in SQL afterwards.
 */
export async function runReferenceScenario(backend: TestBackend, concurrency: number, seed = concurrency): Promise<CouponRunResult> {
  const { url, server } = await serveOverHttp(backend);
  const client = new LoadClient(url, concurrency);
  const scenario = referenceScenario(`c${concurrency}-${seed}`);
  const requests = scenario.members.length * scenario.campaigns.length * scenario.sends;
  try {
    const result = await runLoad({
      client,
      sessions: headerSessions(),
      scenario: couponLoad(scenario, requests),
      concurrency,
      amount: { requests },
      sql: null,
    });
    return { ...result, invariants: await checkCouponInvariants(backend.sql, scenario, result.outcomes['ISSUED'] ?? 0) };
  } finally {
    client.close();
    await server.close();
  }
}

export function describeRun(label: string, result: CouponRunResult): string {
  return (
    `${label}: ${result.requests} requests in ${result.wallMs.toFixed(0)} ms, ` +
    `${result.requestsPerSecond.toFixed(0)} req/s, p99 ${result.latency.p99.toFixed(1)} ms; ` +
    `outcomes ${JSON.stringify(result.outcomes)}; violations ${result.invariants.violations.length}` +
    (result.invariants.violations.length ? ` ${JSON.stringify(result.invariants.violations)}` : '')
  );
}

/**
 * A database URL whose sessions start without the role's timeouts (lock_timeout and
 * statement_timeout 0), as a pooler's server connection opened before the role's defaults were
 * set: the one statement finds them missing and every issue runs as the transaction.
 */
export function withoutRoleTimeouts(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('options', '-c lock_timeout=0 -c statement_timeout=0');
  return url.toString();
}

export interface SpreadRunResult {
  requests: number;
  outcomes: Record<string, number>;
  invariants: InvariantReport;
  /** Reruns by SQLSTATE over the backends during the run: 40001 counts issues that met a race and ran again. */
  retries: Record<string, number>;
  /** TRY_AGAIN answers sent again, by their reason: what a client does, and what a busy machine makes happen. */
  resent: Record<string, number>;
}

/** Resends after a TRY_AGAIN; a client past this many is one that gives up, and its answer stands. */
const TRY_AGAIN_RESENDS = 5;

/**
 * One user action as the retry contract asks a client to carry it (docs/client-guide.md): a
 * TRY_AGAIN is sent again after its `retryAfterMs`, and counted by its reason in `resent`. The
 * request is the same one (an issue without a key: a TRY_AGAIN wrote nothing, or, when its reason
 * is a lost answer, the resend finds the coupon and answers ALREADY_ISSUED).
 */
export async function resendingTryAgain(send: () => Promise<GraphQLReply>, resent: Record<string, number>): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const reply = await send();
    const outcome = replyOutcome(reply);
    const extensions = reply.body.errors?.[0]?.extensions;
    if (outcome !== 'TRY_AGAIN' || attempt === TRY_AGAIN_RESENDS) return outcome;
    const reason = String(extensions?.['reason'] ?? 'none');
    resent[reason] = (resent[reason] ?? 0) + 1;
    await sleep(Number(extensions?.['retryAfterMs'] ?? 100));
  }
}

/** transaction_retries_total of the backends, by SQLSTATE. */
async function retriesOf(backends: TestBackend[]): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const backend of backends) {
    for (const { labels, value } of (await backend.services.metrics.transactionRetries.get()).values) {
      const state = String(labels['sqlstate']);
      totals[state] = (totals[state] ?? 0) + value;
    }
  }
  return totals;
}

/**
 * `scenario` over real HTTP against several backends of one database (each a server process of
 * its own, as far as leases go: its own holder), all released together at `concurrency`. The
 * members' campaigns go round the backends, each member's sends of a campaign (a double tap) to the
 * same one, so that every backend issues its share. Counted in SQL afterwards, and every BUDGET_EXCEEDED checked as it
 * comes (RefusalProbe).
 */
export async function runSpread(backends: TestBackend[], scenario: CouponScenario, concurrency: number): Promise<SpreadRunResult> {
  const served = await Promise.all(backends.map((backend) => serveOverHttp(backend)));
  const clients = served.map(({ url }) => new LoadClient(url, concurrency));
  const sessions = headerSessions();
  const probe = new RefusalProbe(backends[0]!.sql, scenario.tenantId);
  const retriesBefore = await retriesOf(backends);
  try {
    await setupCouponScenario(clients[0]!, scenario, sessions);
    for (const client of clients) await client.open();
    const requests = couponRequests(scenario, 1);
    const clientOf = (i: number) => clients[Math.floor(i / scenario.sends) % clients.length]!;
    const resent: Record<string, number> = {};
    const outcomes = await runReleasedTogether(
      requests.map((request, i) => async () => {
        const outcome = await resendingTryAgain(() => sendIssue(clientOf(i), scenario, sessions, request, i), resent);
        if (outcome === 'BUDGET_EXCEEDED') probe.refused(request.campaignId);
        return outcome;
      }),
      concurrency,
    );
    const counts = countBy(outcomes, (outcome) => outcome);
    const invariants = await checkCouponInvariants(backends[0]!.sql, scenario, counts['ISSUED'] ?? 0);
    const refusals = await probe.check();
    invariants.checks.push(refusals);
    invariants.violations.push(...refusals.violations);
    const retriesAfter = await retriesOf(backends);
    const retries = Object.fromEntries(
      Object.entries(retriesAfter)
        .map(([state, n]) => [state, n - (retriesBefore[state] ?? 0)] as const)
        .filter(([, n]) => n > 0),
    );
    return { requests: requests.length, outcomes: counts, invariants, retries, resent };
  } finally {
    for (const client of clients) client.close();
    for (const { server } of served) await server.close();
  }
}
