/**
 * Every group of variables, in reading order and in the order of the docs' table: a group's
 * variables live in its own file beside this one. Identity comes first: whether this environment
 * may run without a secret is the first thing start-up says.
 */
import { couponVariables } from './coupons.js';
import { databaseVariables } from './database.js';
import { edgeVariables } from './edge.js';
import { embeddedPostgresVariables } from './embedded-postgres.js';
import { huddleVariables } from './huddles.js';
import { idempotencyVariables } from './idempotency.js';
import { identityVariables } from './identity.js';
import { migrationVariables } from './migrations.js';
import { outboxVariables } from './outbox.js';
import { paymentVariables } from './payments.js';
import { processVariables } from './process.js';
import { requestVariables } from './requests.js';
import { retentionVariables } from './retention.js';
import { serverVariables } from './server.js';
import { shutdownVariables } from './shutdown.js';
import { tracingVariables } from './tracing.js';

export const CONFIG_TABLE = {
  identity: identityVariables,
  process: processVariables,
  database: databaseVariables,
  requests: requestVariables,
  server: serverVariables,
  embeddedPostgres: embeddedPostgresVariables,
  coupons: couponVariables,
  idempotency: idempotencyVariables,
  outbox: outboxVariables,
  payments: paymentVariables,
  huddles: huddleVariables,
  retention: retentionVariables,
  migrations: migrationVariables,
  shutdown: shutdownVariables,
  edge: edgeVariables,
  tracing: tracingVariables,
};
