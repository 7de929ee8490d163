import { setTimeout as sleep } from 'node:timers/promises';
import type { AppServices } from '../../services/services.js';
import type { Logger } from '../../core/logger.js';
import { giveBackExpiredLeases } from '../../features/coupons/leases.js';
import { runInTransaction, type UnitOfWork } from '../../db/transaction.js';
import { deleteEndedSessions } from '../../features/huddles/cleanup.js';
import { deleteExpiredKeys } from '../../features/idempotency/service.js';
import { deleteSentEvents, outboxStats } from '../../features/outbox/housekeeping.js';
import { PASS_DEADLINE_MS, relayHealth, relayOnce, type RelayDeps } from '../../features/outbox/relay.js';
import { logSink, webhookSink, type OutboxSink } from '../../features/outbox/sinks.js';
import { inSpan } from '../../core/tracing.js';
import type { ReconcileDeps } from '../../features/checkout/reconciler.js';
import { deleteOldProviderEvents } from '../../features/checkout/webhook.js';

export interface Workers {
  /** Stops the loops; waits for the passes in progress up to `limitMs` (their database calls end when the pool closes). */
  stop(limitMs?: number): Promise<void>;
}

/**
 * How long stopping waits for a pass in progress. A pass is itself bounded (PASS_DEADLINE_MS, the
 * client-side limit of each statement, the webhook's timeout); a shutdown need not wait all of it.
 */
const WORKERS_STOP_LIMIT_MS = 5_000;

/**
 * Runs `pass` again and again: at once while it reports more work, otherwise after `intervalMs`.
 * A failing pass is logged and retried on the next tick; stop() waits for the pass in progress,
 * up to its limit.
 */
export function loop(name: string, intervalMs: number, log: Logger, pass: () => Promise<boolean>): Workers {
  const stopping = new AbortController();
  const done = (async () => {
    while (!stopping.signal.aborted) {
      let more = false;
      try {
        more = await pass();
      } catch (error) {
        log.error({ err: error, worker: name }, 'worker pass failed; will try again');
      }
      if (!more) await sleep(intervalMs, undefined, { signal: stopping.signal }).catch(() => undefined);
    }
  })();
  return {
    async stop(limitMs = WORKERS_STOP_LIMIT_MS) {
      stopping.abort();
      const finished = await Promise.race([done.then(() => true), sleep(limitMs, false)]);
      if (!finished)
        log.warn(
          { worker: name, waitedMs: limitMs },
          'a background pass was still running at shutdown; its connection is closed with the pool',
        );
    },
  };
}

/** The relay's sink: the webhook, signed with the current secret and, during a rotation, the previous one; else the log. */
export function outboxSink(services: AppServices): OutboxSink {
  const { webhookUrl, webhookTimeoutMs, webhookSecret, webhookPreviousSecret } = services.config.outbox;
  if (!webhookUrl) return logSink(services.log);
  const secrets = [webhookSecret, webhookPreviousSecret].filter((secret): secret is string => secret !== null);
  // Outside development the configuration refuses a URL without a secret (src/core/config.ts).
  if (secrets.length === 0) services.log.warn('outbox: NOTIFY_WEBHOOK_SECRET is not set: deliveries are unsigned (development only)');
  return webhookSink(webhookUrl, webhookTimeoutMs, secrets);
}

export function relayDeps(services: AppServices, sink: OutboxSink = outboxSink(services)): RelayDeps {
  const { batchSize, leaseMs, retryForMs, maxAttempts, retryBaseDelayMs, retryMaxDelayMs } = services.config.outbox;
  return {
    db: services.backgroundPool,
    transactions: services.transactions,
    sink,
    log: services.log,
    options: { batchSize, leaseMs, retryForMs, maxAttempts, retryBaseDelayMs, retryMaxDelayMs },
    health: relayHealth(),
  };
}

/**
 * One retention pass: a batch of sent outbox events, a batch of ended huddle sessions (with
 * their participants) and a batch of Stripe's handled events past their age, each batch a short transaction of its own under the
 * transaction timeouts. True while a batch came back full: more is waiting.
 */
export async function retentionPass(services: AppServices): Promise<boolean> {
  const { log, config } = services;
  const { outboxSentHours, huddleEndedHours, batchSize } = config.retention;
  const inPass = <T>(work: UnitOfWork<T>) =>
    runInTransaction(services.backgroundPool, services.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, work).then(
      (r) => r.value,
    );
  const outboxEvents = await inPass((trx) => deleteSentEvents(trx, outboxSentHours, batchSize));
  const huddles = await inPass((trx) => deleteEndedSessions(trx, huddleEndedHours, batchSize));
  const providerEvents = await inPass((trx) => deleteOldProviderEvents(trx, batchSize));
  if (outboxEvents + huddles.sessions + providerEvents > 0) {
    log.info(
      { outboxEvents, huddleSessions: huddles.sessions, huddleParticipants: huddles.participants, providerEvents },
      'retention: old rows deleted',
    );
  }
  return outboxEvents === batchSize || huddles.sessions === batchSize || providerEvents === batchSize;
}

/** Dead events wait for someone: say so once when the relay starts. */
async function reportDeadEvents(services: AppServices): Promise<void> {
  const { dead } = await outboxStats(services.pool, null);
  if (dead > 0) services.log.warn({ dead }, 'dead outbox events are waiting: npm run outbox:requeue gives them back to the relay');
}

/** Payments one reconciler pass resends at most: each is a call of up to PAYMENTS_TIMEOUT_MS, made side by side. */
const RECONCILE_BATCH = 50;

/** The reconciler's dependencies, on the background loops' connections; null without a payment provider. */
export function reconcileDeps(services: AppServices): ReconcileDeps | null {
  if (services.payments === null) return null;
  const { timeoutMs, reconcileAfterMs, reconcileForMs, actionTimeoutMs } = services.config.payments;
  return {
    db: services.backgroundPool,
    transactions: services.transactions,
    provider: services.payments,
    log: services.log,
    clock: services.clock,
    options: { timeoutMs, reconcileAfterMs, reconcileForMs, actionTimeoutMs, batchSize: RECONCILE_BATCH },
    reported: { at: 0, count: 0 },
    refused: (source) => services.metrics.paymentAnswersRefused.inc({ source }),
  };
}

/** Expired keys deleted per statement: small batches keep each delete's locks short. */
const EXPIRY_BATCH = 1_000;

/** Campaigns whose expired budget leases one pass gives back (one statement each). */
const LEASE_EXPIRY_BATCH = 100;

/**
 * The background loops: the outbox relay, stale-huddle cleanup, expiry of idempotency keys
 * and of budget leases, retention (sent outbox events, ended huddle sessions) and the payment reconciler (when there is a
 * payment provider). Several processes may run them against
 * one database. They run on connections of their own (services.backgroundPool, one per loop),
 * which admission never hands to a request.
 */
export function startWorkers(services: AppServices): Workers {
  const { log, config } = services;
  const deps = relayDeps(services);
  log.info({ sink: deps.sink.name }, 'outbox relay started');
  void reportDeadEvents(services).catch((error: unknown) => log.warn({ err: error }, 'could not count dead outbox events'));
  const loops = [
    loop('outbox-relay', config.outbox.pollIntervalMs, log, async () => {
      const result = await relayOnce(deps);
      if (result.claimed > 0) log.debug(result, 'outbox pass');
      return result.claimed === config.outbox.batchSize;
    }),
    // Background passes are root spans of their own, sampled like requests.
    loop('huddle-cleanup', config.huddles.cleanupIntervalMs, log, () =>
      inSpan('huddle cleanup pass', { root: true }, async () => {
        const { staleAfterMs, cleanupBatchSize } = config.huddles;
        const { value } = await runInTransaction(
          services.backgroundPool,
          services.transactions,
          { deadline: Date.now() + PASS_DEADLINE_MS },
          (trx) => services.huddleOperations.cleanupHuddles(trx, null, staleAfterMs, cleanupBatchSize),
        );
        if (value.participantsRemoved + value.sessionsEnded > 0) log.info(value, 'stale huddles cleaned up');
        return value.objectives === cleanupBatchSize;
      }),
    ),
    loop('idempotency-expiry', config.idempotency.cleanupIntervalMs, log, () =>
      inSpan('idempotency key expiry pass', { root: true }, async () => {
        const deleted = await deleteExpiredKeys(services.backgroundPool, EXPIRY_BATCH);
        if (deleted > 0) log.info({ deleted }, 'expired idempotency keys deleted');
        return deleted === EXPIRY_BATCH;
      }),
    ),
    // Every third of the lease TTL, as holders renew: a killed process's lease is back within a TTL of expiring.
    loop('budget-lease-expiry', config.coupons.budgetLeaseTtlMs / 3, log, () =>
      inSpan('budget lease expiry pass', { root: true }, async () => {
        const given = await giveBackExpiredLeases(services.backgroundPool, services.budgetLeases.leasing, LEASE_EXPIRY_BATCH);
        if (given.leases > 0) log.info(given, 'expired budget leases given back');
        return given.campaigns === LEASE_EXPIRY_BATCH;
      }),
    ),
    loop('retention', config.retention.intervalMs, log, () => inSpan('retention pass', { root: true }, () => retentionPass(services))),
  ];
  const reconcile = reconcileDeps(services);
  if (reconcile === null) log.warn('payment reconciler off: no payment provider (STRIPE_SECRET_KEY is not set)');
  else log.info({ provider: reconcile.provider.name }, 'payment reconciler started');
  if (reconcile) {
    loops.push(
      loop('payment-reconciler', config.payments.reconcileIntervalMs, log, () =>
        inSpan('payment reconciler pass', { root: true }, async () => {
          const pass = await services.checkout.reconcile(reconcile);
          if (pass.resent > 0) log.info(pass, 'payment reconciler pass');
          return pass.resent === RECONCILE_BATCH;
        }),
      ),
    );
  }
  return {
    async stop(limitMs = WORKERS_STOP_LIMIT_MS) {
      await Promise.all(loops.map((l) => l.stop(limitMs)));
    },
  };
}
