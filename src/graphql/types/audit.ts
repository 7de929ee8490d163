import { builder } from '../builder.js';
import { badInput } from '../../core/errors.js';
import { runRead } from '../read.js';
import { requirePageSize } from '../validate.js';
import { listAudit, type AuditRecord } from '../../features/audit/service.js';

const PAGE_DEFAULT = 50;
const PAGE_MAX = 500;

const AuditEntryType = builder.objectRef<AuditRecord>('AuditEntry').implement({
  description: 'One committed mutation: who did what, to which entities, in which request.',
  fields: (t) => ({
    id: t.id({ resolve: (r) => String(r.id), description: 'Increasing; pass the last one as `after` for the next page.' }),
    tenantId: t.string({ resolve: (r) => r.tenantId, description: 'Empty for platform-level operations.' }),
    actorUserId: t.exposeString('actorUserId', { nullable: true }),
    role: t.exposeString('role'),
    operation: t.exposeString('operation'),
    entityIds: t.exposeStringList('entityIds'),
    requestId: t.exposeString('requestId'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.queryField('auditLog', (t) =>
  t.withAuth({ tenantAdmin: true, operator: true }).field({
    type: [AuditEntryType],
    description: "The audit trail, oldest first: the tenant's rows for its admin, every row for the platform operator.",
    args: {
      limit: t.arg.int({ required: false, defaultValue: PAGE_DEFAULT, description: `1 to ${PAGE_MAX}.` }),
      after: t.arg.id({ required: false, description: 'Only rows after this id.' }),
    },
    complexity: ({ limit }) => ({ field: 1, multiplier: limit ?? PAGE_DEFAULT }),
    resolve: (_root, { limit, after }, ctx) => {
      const { tenantId } = ctx.session;
      const size = requirePageSize(limit ?? PAGE_DEFAULT, 'limit', PAGE_MAX);
      if (after != null && !/^\d{1,18}$/.test(after)) throw badInput('after must be an id from a previous page', 'after');
      return runRead(ctx, (trx) => listAudit(trx, tenantId, size, after == null ? null : Number(after)));
    },
  }),
);
