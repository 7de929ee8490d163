import { builder } from '../builder.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requireIdentifier, requireText, requireYen } from '../validate.js';
import {
  DEFAULT_MONTHLY_CAP_YEN,
  createTenant,
  findTenant,
  tenantEntities,
  tenantOfCreated,
  type Tenant,
} from '../../features/tenants/service.js';

const TenantType = builder.objectRef<Tenant>('Tenant').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    monthlyCapYen: t.exposeInt('monthlyCapYen', { description: "A member's coupon total per calendar month, in yen." }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const CreateTenantInput = builder.inputType('CreateTenantInput', {
  fields: (t) => ({
    id: t.id({ description: '1 to 64 letters, digits, "_" or "-"; the x-hasura-tenant-id of its sessions.' }),
    name: t.string(),
    monthlyCapYen: t.int({ required: false, defaultValue: DEFAULT_MONTHLY_CAP_YEN }),
  }),
});

const CreateTenantPayload = builder.objectRef<{ tenant: Tenant }>('CreateTenantPayload').implement({
  fields: (t) => ({ tenant: t.expose('tenant', { type: TenantType }) }),
});

defineMutation('createTenant', {
  access: { operator: true },
  description: 'Creates a tenant. Platform operator only (role operator).',
  input: CreateTenantInput,
  type: CreateTenantPayload,
  prepare: (input) => ({
    id: requireIdentifier(input.id, 'id'),
    name: requireText(input.name, 'name', 200),
    monthlyCapYen: requireYen(input.monthlyCapYen ?? DEFAULT_MONTHLY_CAP_YEN, 'monthlyCapYen'),
  }),
  call: (values) => ({
    work: createTenant,
    input: values,
    entities: tenantEntities,
    auditTenant: tenantOfCreated,
  }),
});

builder.queryField('tenant', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: TenantType,
    nullable: true,
    description: "The session's tenant.",
    resolve: (_root, _args, ctx) => runRead(ctx, (trx) => findTenant(trx, ctx.session.tenantId)),
  }),
);
