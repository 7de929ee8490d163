import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { mutate, MutationError } from '../src/client/mutate.js';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { LoadClient, runLanes } from './load/client.js';
import { runOnSchedule } from './load/run.js';
import { checkNothingLost, figures, memberHeaders, type Sample, type Trial } from './support/dead-path.js';
import { createTestDatabaseUrl } from './support/harness.js';
import { bannerPort, captureOutput } from './support/scripts.js';
import { answeringProcess, httpProcesses, isAlive } from './support/server-processes.js';
import { waitFor } from './support/wait.js';

/**
 * One of two HTTP processes frozen (SIGSTOP) under steady load from the documented retrying
 * client: what a paused VM, a debugger or a process stuck in a loop looks like from outside. The
 * kernel still queues connections for it and its keep-alive connections stay open, so without a
 * heartbeat nothing notices. The primary must kill and replace it within HTTP_HEARTBEAT_TIMEOUT_MS
 * (the default, 15 s), every call must return by its deadline, and no acknowledged document may
 * be lost or doubled (counted in SQL).
 */

const PROJECT = new URL('..', import.meta.url).pathname;
const RATE = 30;
const DEADLINE_MS = 10_000;
/** Longer than the heartbeat timeout (15 s) and the deadline together: without the heartbeat, the process stays frozen throughout. */
const FREEZE_MS = 40_000;
const HEALTHY_ANSWERS = 20;
const TENANT = 'freeze';

let child: ChildProcess | null = null;
let frozen: number | null = null;

afterEach(async () => {
  if (frozen !== null && isAlive(frozen)) process.kill(frozen, 'SIGCONT');
  if (child && child.exitCode === null) {
    const closed = new Promise((resolve) => child!.once('close', resolve));
    child.kill('SIGTERM');
    await Promise.race([closed, sleep(30_000)]);
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  child = null;
  frozen = null;
});

/** One createContractDocument through mutate(), with a key of its own. */
async function send(url: string, contractId: string, key: string, deadlineMs = DEADLINE_MS): Promise<Omit<Sample, 'sentMs'>> {
  const started = performance.now();
  try {
    await mutate(
      CreateContractDocumentDocument,
      { input: { contractId } },
      { url, headers: memberHeaders(TENANT), idempotencyKey: key, deadlineMs },
    );
    return { key, latencyMs: performance.now() - started, code: 'OK', reason: null, retryAfter: null };
  } catch (error) {
    if (!(error instanceof MutationError)) throw error;
    return { key, latencyMs: performance.now() - started, code: error.code, reason: null, retryAfter: null };
  }
}

describe('an HTTP process that freezes (WEB_CONCURRENCY=2)', () => {
  it(
    'is killed and replaced by the primary within the heartbeat timeout, while every call returns by its deadline and nothing is lost',
    { timeout: 600_000 },
    async ({ annotate }) => {
      const databaseUrl = await createTestDatabaseUrl();
      const direct = new pg.Pool({ connectionString: databaseUrl, max: 2 });
      await direct.query('insert into tenants (id, name) values ($1, $1)', [TENANT]);
      const contractId = (
        await direct.query<{ id: string }>("insert into contracts (tenant_id, title) values ($1, 'C') returning id", [TENANT])
      ).rows[0]!.id;
      child = spawn(process.execPath, ['--import', 'tsx', 'src/entry/main.ts'], {
        cwd: PROJECT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: {
          ...process.env,
          NODE_ENV: 'development',
          LOG_LEVEL: 'info',
          DATABASE_URL: databaseUrl,
          PORT: '0',
          WEB_CONCURRENCY: '2',
          RUN_WORKERS: 'false',
        },
      });
      const output = captureOutput(child);
      await waitFor(() => (/GraphQL and GraphiQL:/.test(output()) || child!.exitCode !== null ? true : undefined), 'the banner', 120_000);
      expect(child.exitCode, output()).toBeNull();
      const port = bannerPort(output())!;
      const url = `http://127.0.0.1:${port}/graphql`;
      const primary = child.pid!;
      const original = httpProcesses(primary);
      expect(original).toHaveLength(2);

      // The load: RATE calls a second, each with its own key, until `endMs`.
      const samples: Sample[] = [];
      const healthy: number[] = [];
      let endMs = Infinity;
      let markHealthy!: () => void;
      const enough = new Promise<void>((resolve) => (markHealthy = resolve));
      const started = performance.now();
      const load = runOnSchedule(
        (index, dueMs) =>
          dueMs >= endMs
            ? null
            : async () => {
                const sentMs = performance.now() - started;
                const sample = { sentMs, ...(await send(url, contractId, `freeze-${index}`)) };
                samples.push(sample);
                if (sample.code === 'OK' && healthy.length < HEALTHY_ANSWERS && healthy.push(sample.latencyMs) === HEALTHY_ANSWERS)
                  markHealthy();
              },
        RATE,
        started,
      );
      await enough;
      // How late a call may return past its deadline: the machine's own slowness on healthy answers, plus a second.
      const margin = 1_000 + Math.max(...healthy);

      frozen = original[0]!;
      const frozenAt = performance.now();
      process.kill(frozen, 'SIGSTOP');
      const gone = await waitFor(() => (isAlive(frozen!) ? undefined : performance.now()), 'the frozen process gone', FREEZE_MS).catch(
        () => null,
      );
      const goneAfterMs = gone === null ? null : gone - frozenAt;
      // Its successor: a process the primary did not have before, answering requests.
      const successor = await waitFor(() => httpProcesses(primary).find((pid) => !original.includes(pid)), 'a successor', 60_000).catch(
        () => null,
      );
      let successorAnswers = false;
      for (let tries = 0; successor !== null && !successorAnswers && tries < 60; tries++) {
        successorAnswers = (await answeringProcess(port, [successor, original[1]!])) === successor;
        if (!successorAnswers) await sleep(250);
      }
      const restMs = FREEZE_MS - (performance.now() - frozenAt);
      if (restMs > 0) await sleep(restMs);
      if (isAlive(frozen)) process.kill(frozen, 'SIGCONT');
      const thawedMs = performance.now() - started;
      endMs = thawedMs + DEADLINE_MS;
      await load;
      samples.sort((a, b) => a.sentMs - b.sentMs);

      const late = samples.filter((s) => s.latencyMs > DEADLINE_MS + margin);
      const frozenFromMs = frozenAt - started;
      const during = samples.filter((s) => s.sentMs >= frozenFromMs && s.sentMs < thawedMs);
      const ok = samples.filter((s) => s.code === 'OK');
      const documentsBeforeResends = (
        await direct.query<{ n: number }>('select count(*)::int as n from contract_documents where tenant_id = $1', [TENANT])
      ).rows[0]!.n;
      await annotate(
        `one of 2 HTTP processes SIGSTOPped for ${FREEZE_MS} ms at ${RATE}/s, deadline ${DEADLINE_MS} ms: ` +
          `killed and gone after ${goneAfterMs === null ? 'never' : Math.round(goneAfterMs)} ms; all ${JSON.stringify(figures(samples))}; ` +
          `sent while frozen ${JSON.stringify(figures(during))}; ${ok.length} OK answers, ${documentsBeforeResends} documents in SQL`,
      );

      expect(goneAfterMs, 'the frozen process was never killed').not.toBeNull();
      expect(output()).toContain('an HTTP process stopped answering its heartbeat');
      expect(successor).not.toBeNull();
      expect(successorAnswers).toBe(true);
      expect(late.map((s) => `${s.key} sent at ${Math.round(s.sentMs)} ms returned after ${Math.round(s.latencyMs)} ms`)).toEqual([]);
      // Nothing but answers and the client's own verdicts on lost attempts: no refusal, no server error.
      expect([...new Set(samples.map((s) => s.code))].filter((code) => !['OK', 'TRY_AGAIN', 'NETWORK', 'DEADLINE'].includes(code))).toEqual(
        [],
      );
      expect(documentsBeforeResends).toBeGreaterThanOrEqual(ok.length);
      // Every call that did not end OK is resent with its key, side by side (a busy machine leaves
      // thousands): each then completes exactly once; checkNothingLost resends what is still open and counts.
      const unsettled = samples.filter((s) => s.code !== 'OK');
      await runLanes(
        (i) =>
          i < unsettled.length
            ? async () => {
                const resent = await send(url, contractId, unsettled[i]!.key, 60_000);
                if (resent.code === 'OK') unsettled[i]!.code = 'OK';
              }
            : null,
        16,
      );
      const client = new LoadClient(url, 4);
      try {
        const trial: Trial = { graphqlUrl: url, sql: direct, tenantId: TENANT, contractId };
        expect(await checkNothingLost(client, trial, samples)).toEqual([]);
      } finally {
        client.close();
        await direct.end();
      }
    },
  );
});
