import { print } from 'graphql';
import type pg from 'pg';
import { CreateContractDocumentDocument, CreateContractDocument as CreateContract, CreateTenantDocument } from '../../generated/graphql.js';
import type { LoadClient } from '../client.js';
import { replyOutcome, undecided, type LoadScenario } from '../scenario.js';
import type { Session } from './coupons.js';

const QUERY = print(CreateContractDocumentDocument);

/**
 * `tenants` tenants with one contract each; request i numbers a document of tenant i mod tenants.
 * Holds when every tenant's numbers run 10000000.. without a gap or repeat, one per OK answer.
 */
export function documentsScenario(runId: string, tenants: number, total: number | null): LoadScenario {
  const tenantIds = Array.from({ length: tenants }, (_, i) => `docs-${runId}-${i}`);
  const contracts = new Map<string, string>();
  return {
    name: 'documents',
    async setup(client: LoadClient, sessions: Session) {
      for (const tenantId of tenantIds) {
        await client.mutation(print(CreateTenantDocument), { input: { id: tenantId, name: tenantId } }, sessions.operator);
        const reply = await client.mutation(print(CreateContract), { input: { title: 'Load test' } }, sessions.admin(tenantId));
        const id = (reply.body.data?.['createContract'] as { contract?: { id: string } } | undefined)?.contract?.id;
        if (!id) throw new Error(`createContract failed: ${JSON.stringify(reply.body.errors)}`);
        contracts.set(tenantId, id);
      }
    },
    request(index, client, sessions) {
      if (total !== null && index >= total) return null;
      const tenantId = tenantIds[index % tenants]!;
      return () =>
        client.graphql(QUERY, { input: { contractId: contracts.get(tenantId) } }, sessions.member(tenantId, `writer-${index % 97}`));
    },
    outcomeOf: replyOutcome,
    async check(sql: pg.Pool, outcomes) {
      const misplaced: string[] = [];
      let documents = 0;
      for (const tenantId of tenantIds) {
        const { rows } = await sql.query<{ doc_number: number }>(
          'select doc_number from contract_documents where tenant_id = $1 order by doc_number',
          [tenantId],
        );
        documents += rows.length;
        const broken = rows.findIndex((row, i) => row.doc_number !== 10_000_000 + i);
        if (broken >= 0) misplaced.push(`tenant ${tenantId}: number ${rows[broken]!.doc_number} where ${10_000_000 + broken} belongs`);
      }
      const answered = outcomes['OK'] ?? 0;
      const unknown = undecided(outcomes);
      return [
        {
          invariant: 'per-tenant numbers from 10000000, never repeated, never skipped',
          counted: `${documents} documents in ${tenants} tenants, ${misplaced.length} tenants with a number out of place`,
          violations: misplaced,
        },
        {
          invariant: 'one document per OK answer',
          counted: `${documents} documents for ${answered} OK answers${unknown > 0 ? ` and ${unknown} requests whose effect is not known` : ''}`,
          violations:
            documents >= answered && documents <= answered + unknown
              ? []
              : [`${documents} documents in the table for ${answered} OK answers${unknown > 0 ? ` (and ${unknown} unknown)` : ''}`],
        },
      ];
    },
  };
}
