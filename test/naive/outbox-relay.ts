import { sql } from 'kysely';
import { fullJitter, runInTransaction } from '../../src/db/transaction.js';
import { claimBatch, PASS_DEADLINE_MS, type PassResult, type RelayDeps } from '../../src/features/outbox/relay.js';

/**
 * The relay pass this project replaced: a failed event is dead after `maxAttempts` deliveries,
 * however short the outage that failed them, and a retry always sits out its own backoff, even
 * once the receiver is back and taking everything.
 */
export async function countingRelayOnce(deps: RelayDeps, maxAttempts: number): Promise<PassResult> {
  const claim = await claimBatch(deps);
  if (claim.events.length === 0) return { claimed: 0, sent: 0, retried: 0, dead: 0 };
  const outcomes = await Promise.allSettled(claim.events.map((event) => deps.sink.deliver(event)));
  let sent = 0;
  let dead = 0;
  await runInTransaction(deps.db, deps.transactions, { deadline: Date.now() + PASS_DEADLINE_MS }, async (trx) => {
    sent = 0;
    dead = 0;
    for (const [i, event] of claim.events.entries()) {
      if (outcomes[i]!.status === 'fulfilled') {
        sent++;
        await sql`update outbox_events set status = 'sent', sent_at = now(), claim_id = null
                   where tenant_id = ${event.tenantId} and id = ${event.id} and claim_id = ${claim.claimId}`.execute(trx);
        continue;
      }
      const isDead = event.attempts >= maxAttempts;
      if (isDead) dead++;
      const delayMs = fullJitter({ baseDelayMs: deps.options.retryBaseDelayMs, maxDelayMs: deps.options.retryMaxDelayMs }, event.attempts);
      await sql`update outbox_events
                   set status = ${isDead ? 'dead' : 'pending'}, claim_id = null,
                       next_attempt_at = now() + make_interval(secs => ${delayMs / 1000})
                 where tenant_id = ${event.tenantId} and id = ${event.id} and claim_id = ${claim.claimId}`.execute(trx);
    }
  });
  return { claimed: claim.events.length, sent, retried: claim.events.length - sent - dead, dead };
}
