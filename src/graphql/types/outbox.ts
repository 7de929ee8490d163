import { builder } from '../builder.js';
import { runRead } from '../read.js';
import { outboxStats, type OutboxStats } from '../../features/outbox/housekeeping.js';

const OutboxStatsType = builder.objectRef<OutboxStats>('OutboxStats').implement({
  fields: (t) => ({
    pending: t.exposeInt('pending', { description: 'Events waiting for delivery (including ones waiting to be retried).' }),
    dead: t.exposeInt('dead', { description: 'Events that failed every attempt; they need a person.' }),
    oldestPendingAgeSeconds: t.exposeFloat('oldestPendingAgeSeconds', {
      nullable: true,
      description: 'Age of the oldest pending event; null when none is pending.',
    }),
  }),
});

builder.queryField('outboxStats', (t) =>
  t.withAuth({ tenantAdmin: true, operator: true }).field({
    type: OutboxStatsType,
    description: "The notification outbox of the session's tenant (every tenant for the platform operator). Admins only.",
    resolve: (_root, _args, ctx) => runRead(ctx, (trx) => outboxStats(trx, ctx.session.tenantId)),
  }),
);
