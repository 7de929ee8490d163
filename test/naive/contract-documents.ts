import { sql, type Transaction } from 'kysely';
import type { DB } from '../../src/db/schema.js';
import type { ContractDocument } from '../../src/features/contracts/service.js';
import { notFound } from '../../src/core/errors.js';

/**
 * The numbering this project replaced, kept to prove the tests can fail: read max() + 1, then
 * insert. Two READ COMMITTED transactions read the same max, and the second insert hits the
 * unique (tenant_id, doc_number) constraint.
 */
export async function createContractDocumentNaive(trx: Transaction<DB>, tenantId: string, contractId: string): Promise<ContractDocument> {
  const contract = await trx
    .selectFrom('contracts')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', contractId)
    .executeTakeFirst();
  if (!contract) throw notFound('Contract');
  const row = await trx
    .insertInto('contract_documents')
    .values({
      tenant_id: tenantId,
      contract_id: contractId,
      doc_number: sql<number>`(select coalesce(max(doc_number), 9999999) + 1 from contract_documents where tenant_id = ${tenantId})`,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { id: row.id, contractId: row.contract_id, docNumber: row.doc_number, createdAt: row.created_at };
}
