import { builder } from '../graphql/builder.js';
import { ACTOR_ROLES, requireTenantActor } from '../graphql/auth.js';
import { badInput } from '../graphql/errors.js';
import { runMutation } from '../graphql/mutation.js';
import { requireText } from '../graphql/validate.js';
import {
  createContractDocument,
  findContract,
  insertContract,
  listContracts,
  listDocuments,
  type Contract,
  type ContractDocument,
} from './service.js';

const TITLE_MAX_LENGTH = 200;
const CONTRACTS_PAGE_MAX = 100;

export const ContractDocumentType = builder.objectRef<ContractDocument>('ContractDocument').implement({
  fields: (t) => ({
    id: t.expose('id', { type: 'UUID' }),
    contractId: t.expose('contractId', { type: 'UUID' }),
    docNumber: t.exposeInt('docNumber', {
      description: "Per-tenant document number: from 10000000, never repeated, never skipped.",
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

export const ContractType = builder.objectRef<Contract>('Contract').implement({
  fields: (t) => ({
    id: t.expose('id', { type: 'UUID' }),
    title: t.exposeString('title'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    documents: t.field({
      type: [ContractDocumentType],
      description: 'Documents in number order.',
      resolve: (contract, _args, ctx) => contract.documents ?? listDocuments(ctx.db, contract.tenantId, contract.id),
    }),
  }),
});

const CreateContractInput = builder.inputType('CreateContractInput', {
  fields: (t) => ({ title: t.string({ description: `1 to ${TITLE_MAX_LENGTH} characters.` }) }),
});

const CreateContractPayload = builder.objectRef<{ contract: Contract }>('CreateContractPayload').implement({
  fields: (t) => ({ contract: t.expose('contract', { type: ContractType }) }),
});

const CreateContractDocumentInput = builder.inputType('CreateContractDocumentInput', {
  fields: (t) => ({ contractId: t.field({ type: 'UUID' }) }),
});

const CreateContractDocumentPayload = builder
  .objectRef<{ document: ContractDocument }>('CreateContractDocumentPayload')
  .implement({ fields: (t) => ({ document: t.expose('document', { type: ContractDocumentType }) }) });

builder.mutationField('createContract', (t) =>
  t.field({
    extensions: { roles: ACTOR_ROLES },
    type: CreateContractPayload,
    description: "Creates a contract in the session's tenant.",
    args: { input: t.arg({ type: CreateContractInput }) },
    resolve: async (_root, { input }, ctx) => {
      const { tenantId } = requireTenantActor(ctx);
      const title = requireText(input.title, 'title', TITLE_MAX_LENGTH);
      return runMutation(ctx, {
        operation: 'createContract',
        work: async (trx) => ({ contract: await insertContract(trx, tenantId, title) }),
        entities: ({ contract }) => [contract.id],
      });
    },
  }),
);

builder.mutationField('createContractDocument', (t) =>
  t.field({
    extensions: { roles: ACTOR_ROLES },
    type: CreateContractDocumentPayload,
    description:
      "Issues the contract's next document with the tenant's next number. A contract of another tenant is NOT_FOUND.",
    args: { input: t.arg({ type: CreateContractDocumentInput }) },
    resolve: async (_root, { input }, ctx) => {
      const { tenantId } = requireTenantActor(ctx);
      return runMutation(ctx, {
        operation: 'createContractDocument',
        work: async (trx) => ({ document: await createContractDocument(trx, tenantId, input.contractId) }),
        entities: ({ document }) => [document.id, document.contractId],
      });
    },
  }),
);

builder.queryField('contract', (t) =>
  t.field({
    type: ContractType,
    nullable: true,
    description: "A contract of the session's tenant, or null.",
    args: { id: t.arg({ type: 'UUID' }) },
    resolve: (_root, { id }, ctx) => findContract(ctx.db, requireTenantActor(ctx).tenantId, id),
  }),
);

builder.queryField('contracts', (t) =>
  t.field({
    type: [ContractType],
    description: "The session's tenant's newest contracts.",
    args: { first: t.arg.int({ required: false, defaultValue: 20 }) },
    resolve: (_root, { first }, ctx) => {
      const limit = first ?? 20;
      if (limit < 1 || limit > CONTRACTS_PAGE_MAX) throw badInput(`first must be from 1 to ${CONTRACTS_PAGE_MAX}`, 'first');
      return listContracts(ctx.db, requireTenantActor(ctx).tenantId, limit);
    },
  }),
);
