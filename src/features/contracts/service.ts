import { sql, type Kysely, type Transaction } from 'kysely';
import type { ContractDocumentRow, ContractRow, DB } from '../../db/schema.js';
import { notFound } from '../../core/errors.js';

export interface ContractDocument {
  id: string;
  contractId: string;
  docNumber: number;
  createdAt: Date;
}

export interface Contract {
  id: string;
  tenantId: string;
  title: string;
  createdAt: Date;
  /** Present when the service already knows them (a new contract has none). */
  documents?: ContractDocument[];
}

/** Document numbers are eight digits; a tenant's first document gets this one. */
const FIRST_DOC_NUMBER = 10_000_000;

const toContract = (row: ContractRow): Contract => ({
  id: row.id,
  tenantId: row.tenant_id,
  title: row.title,
  createdAt: row.created_at,
});

const toDocument = (row: ContractDocumentRow): ContractDocument => ({
  id: row.id,
  contractId: row.contract_id,
  docNumber: row.doc_number,
  createdAt: row.created_at,
});

/**
 * Inserts a contract of the tenant.
 *
 * @example const contract = await insertContract(trx, tenantId, 'Lease 2027')
 */
async function insertContract(trx: Transaction<DB>, tenantId: string, title: string): Promise<Contract> {
  const tenant = await trx.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst();
  if (!tenant) throw notFound('Tenant');
  const row = await trx.insertInto('contracts').values({ tenant_id: tenantId, title }).returningAll().executeTakeFirstOrThrow();
  return { ...toContract(row), documents: [] };
}

/**
 * Takes the tenant's next document number. The upsert locks the tenant's sequence row until the
 * caller's transaction ends: concurrent numberings queue on that one row, and a rollback returns
 * the number, so numbers never repeat and never skip.
 *
 * @example const docNumber = await takeNextDocNumber(trx, tenantId)
 */
export async function takeNextDocNumber(trx: Transaction<DB>, tenantId: string): Promise<number> {
  const row = await trx
    .insertInto('document_sequences')
    .values({ tenant_id: tenantId, last_doc_number: FIRST_DOC_NUMBER })
    .onConflict((oc) =>
      oc.column('tenant_id').doUpdateSet({
        last_doc_number: sql<number>`document_sequences.last_doc_number + 1`,
        updated_at: sql<Date>`now()`,
      }),
    )
    .returning('last_doc_number')
    .executeTakeFirstOrThrow();
  return row.last_doc_number;
}

/**
 * Issues the contract's next document. A contract of another tenant is NOT_FOUND: the lookup is
 * keyed by the session's tenant, so it cannot even be seen. The existence check comes before the
 * number is taken, keeping the sequence row's lock as short as possible.
 *
 * @example const document = await createContractDocument(trx, tenantId, contractId)
 */
async function createContractDocument(trx: Transaction<DB>, tenantId: string, contractId: string): Promise<ContractDocument> {
  const contract = await trx
    .selectFrom('contracts')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', contractId)
    .executeTakeFirst();
  if (!contract) throw notFound('Contract');
  const docNumber = await takeNextDocNumber(trx, tenantId);
  const row = await trx
    .insertInto('contract_documents')
    .values({ tenant_id: tenantId, contract_id: contractId, doc_number: docNumber })
    .returningAll()
    .executeTakeFirstOrThrow();
  return toDocument(row);
}

/** How documents are issued (AppServices.documentIssuing; buildServices takes a stand-in); the naive-numbering test stands `max() + 1` in for it. */
export const documentIssuing = { createContractDocument };
export type DocumentIssuing = typeof documentIssuing;

/**
 * One contract of the tenant, or null.
 *
 * @example const contract = await findContract(trx, tenantId, contractId)
 */
export async function findContract(db: Kysely<DB>, tenantId: string, id: string): Promise<Contract | null> {
  const row = await db.selectFrom('contracts').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  return row ? toContract(row) : null;
}

/**
 * The tenant's contracts, newest first.
 *
 * @example const contracts = await listContracts(trx, tenantId, 100)
 */
export async function listContracts(db: Kysely<DB>, tenantId: string, limit: number): Promise<Contract[]> {
  const rows = await db
    .selectFrom('contracts')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .orderBy('created_at', 'desc')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(toContract);
}

/**
 * The first `first` documents of each contract, in number order, in one statement whatever the
 * number of contracts: each contract is a lateral index scan on (tenant_id, contract_id, doc_number).
 *
 * @example const byContract = await listDocumentsOfContracts(trx, tenantId, contractIds, 20)
 */
export async function listDocumentsOfContracts(
  db: Kysely<DB>,
  tenantId: string,
  contractIds: readonly string[],
  first: number,
): Promise<Map<string, ContractDocument[]>> {
  const { rows } = await sql<ContractDocumentRow>`
    select d.*
      from unnest(${contractIds}::uuid[]) as c(id)
      cross join lateral (
        select * from contract_documents
         where tenant_id = ${tenantId} and contract_id = c.id
         order by doc_number
         limit ${first}
      ) d`.execute(db);
  const byContract = new Map<string, ContractDocument[]>(contractIds.map((id) => [id, []]));
  for (const row of rows) byContract.get(row.contract_id)?.push(toDocument(row));
  return byContract;
}

/**
 * What createContract's audit row names.
 *
 * @example contractEntities({ contract }) // [contract.id]
 */
export const contractEntities = ({ contract }: { contract: Contract }): string[] => [contract.id];

/**
 * What createContractDocument's audit row names: the document and its contract.
 *
 * @example documentEntities({ document }) // [document.id, document.contractId]
 */
export const documentEntities = ({ document }: { document: ContractDocument }): string[] => [document.id, document.contractId];

/**
 * createContract's unit of work (runMutation calls it): a contract in the session's tenant.
 *
 * @example const { contract } = await createContract(trx, { tenantId, title: 'Lease 2027' })
 */
export async function createContract(
  trx: Transaction<DB>,
  { tenantId, title }: { tenantId: string; title: string },
): Promise<{ contract: Contract }> {
  return { contract: await insertContract(trx, tenantId, title) };
}

/**
 * createContractDocument's unit of work (runMutation calls it): the contract's next document, as
 * `issuing` numbers it (the original, or the naive twin a race test stands in). It carries no
 * bookkeeping of its own.
 *
 * @example const { document } = await issueNextDocument(trx, { tenantId, contractId }, bookkeeping, documentIssuing)
 */
export async function issueNextDocument(
  trx: Transaction<DB>,
  { tenantId, contractId }: { tenantId: string; contractId: string },
  _bookkeeping: unknown,
  issuing: DocumentIssuing,
): Promise<{ document: ContractDocument }> {
  return { document: await issuing.createContractDocument(trx, tenantId, contractId) };
}
