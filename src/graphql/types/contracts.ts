import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import { builder } from '../builder.js';
import type { Context } from '../context.js';
import { defineMutation } from '../define-mutation.js';
import { runRead } from '../read.js';
import { requirePageSize, requireText } from '../validate.js';
import {
  findContract,
  contractEntities,
  createContract,
  documentEntities,
  issueNextDocument,
  listContracts,
  listDocumentsOfContracts,
  type Contract,
  type ContractDocument,
} from '../../features/contracts/service.js';

const TITLE_MAX_LENGTH = 200;
const CONTRACTS_PAGE_DEFAULT = 20;
const CONTRACTS_PAGE_MAX = 100;
const DOCUMENTS_PAGE_DEFAULT = 100;
const DOCUMENTS_PAGE_MAX = 1_000;

interface DocumentsKey {
  tenantId: string;
  contractId: string;
  first: number;
}

/**
 * Contract.documents for every contract of a request in one statement per page size: a list of
 * 100 contracts costs two queries, not 101.
 */
const documentsLoader = createContextCache(
  (ctx: Context) =>
    new DataLoader<DocumentsKey, ContractDocument[], string>(
      async (keys) => {
        const groups = new Map<string, DocumentsKey[]>();
        for (const key of keys) {
          const group = `${key.tenantId}\u0000${key.first}`;
          groups.set(group, [...(groups.get(group) ?? []), key]);
        }
        const found = new Map<DocumentsKey, ContractDocument[]>();
        for (const group of groups.values()) {
          const { tenantId, first } = group[0]!;
          const byContract = await runRead(ctx, (trx) =>
            listDocumentsOfContracts(
              trx,
              tenantId,
              group.map((k) => k.contractId),
              first,
            ),
          );
          for (const key of group) found.set(key, byContract.get(key.contractId) ?? []);
        }
        return keys.map((key) => found.get(key) ?? []);
      },
      { cacheKeyFn: (key) => `${key.tenantId}\u0000${key.contractId}\u0000${key.first}` },
    ),
);

const ContractDocumentType = builder.objectRef<ContractDocument>('ContractDocument').implement({
  fields: (t) => ({
    id: t.expose('id', { type: 'UUID' }),
    contractId: t.expose('contractId', { type: 'UUID' }),
    docNumber: t.exposeInt('docNumber', {
      description: 'Per-tenant document number: from 10000000, never repeated, never skipped.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

const ContractType = builder.objectRef<Contract>('Contract').implement({
  fields: (t) => ({
    id: t.expose('id', { type: 'UUID' }),
    title: t.exposeString('title'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    documents: t.field({
      type: [ContractDocumentType],
      description: `The contract's first documents in number order (\`first\`: 1 to ${DOCUMENTS_PAGE_MAX}).`,
      args: { first: t.arg.int({ required: false, defaultValue: DOCUMENTS_PAGE_DEFAULT }) },
      complexity: ({ first }) => ({ field: 1, multiplier: first ?? DOCUMENTS_PAGE_DEFAULT }),
      resolve: (contract, { first }, ctx) => {
        const size = requirePageSize(first ?? DOCUMENTS_PAGE_DEFAULT, 'first', DOCUMENTS_PAGE_MAX);
        if (contract.documents) return contract.documents.slice(0, size);
        return documentsLoader(ctx).load({ tenantId: contract.tenantId, contractId: contract.id, first: size });
      },
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

defineMutation('createContract', {
  access: { member: true, tenantAdmin: true },
  description: "Creates a contract in the session's tenant.",
  input: CreateContractInput,
  type: CreateContractPayload,
  prepare: (input) => requireText(input.title, 'title', TITLE_MAX_LENGTH),
  call: (title, { session }) => ({
    work: createContract,
    input: { tenantId: session.tenantId, title },
    entities: contractEntities,
  }),
});

defineMutation('createContractDocument', {
  access: { member: true, tenantAdmin: true },
  description: "Issues the contract's next document with the tenant's next number. A contract of another tenant is NOT_FOUND.",
  input: CreateContractDocumentInput,
  type: CreateContractDocumentPayload,
  call: ({ contractId }, { session, services }) => ({
    work: issueNextDocument,
    input: { tenantId: session.tenantId, contractId },
    needs: services.documentIssuing,
    entities: documentEntities,
  }),
});

builder.queryField('contract', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: ContractType,
    nullable: true,
    description: "A contract of the session's tenant, or null.",
    args: { id: t.arg({ type: 'UUID' }) },
    resolve: (_root, { id }, ctx) => runRead(ctx, (trx) => findContract(trx, ctx.session.tenantId, id)),
  }),
);

builder.queryField('contracts', (t) =>
  t.withAuth({ member: true, tenantAdmin: true }).field({
    type: [ContractType],
    description: `The session's tenant's newest contracts (\`first\`: 1 to ${CONTRACTS_PAGE_MAX}).`,
    args: { first: t.arg.int({ required: false, defaultValue: CONTRACTS_PAGE_DEFAULT }) },
    complexity: ({ first }) => ({ field: 1, multiplier: first ?? CONTRACTS_PAGE_DEFAULT }),
    resolve: (_root, { first }, ctx) => {
      const limit = requirePageSize(first ?? CONTRACTS_PAGE_DEFAULT, 'first', CONTRACTS_PAGE_MAX);
      return runRead(ctx, (trx) => listContracts(trx, ctx.session.tenantId, limit));
    },
  }),
);
