import { print } from 'graphql';
import { CreateContractDocumentDocument } from '../generated/graphql.js';
import { LoadClient, runReleasedTogether } from '../load/client.js';
import { asUser, createContractRow, createTenant, serveOverHttp, type TestBackend } from './harness.js';

export interface DocumentScenarioResult {
  requests: number;
  succeeded: number;
  failures: string[];
  wallMs: number;
  /** Per tenant: the numbers in the table, ascending. */
  numbersByTenant: Map<string, number[]>;
}

/**
 * Every tenant's requests released together over real HTTP, then the table counted with SQL.
 */
export async function runDocumentScenario(
  backend: TestBackend,
  options: { tenants: number; perTenant: number },
): Promise<DocumentScenarioResult> {
  const tenants = Array.from({ length: options.tenants }, (_, i) => `doc-tenant-${i}`);
  const contracts = new Map<string, string>();
  for (const tenant of tenants) {
    await createTenant(backend, tenant);
    contracts.set(tenant, await createContractRow(backend, tenant));
  }
  const { url, server } = await serveOverHttp(backend);
  const total = options.tenants * options.perTenant;
  const client = new LoadClient(url, total);
  const query = print(CreateContractDocumentDocument);
  try {
    await client.open();
    const tasks = tenants.flatMap((tenant) =>
      Array.from(
        { length: options.perTenant },
        () => () => client.graphql(query, { input: { contractId: contracts.get(tenant) } }, asUser(tenant)),
      ),
    );
    const started = performance.now();
    const replies = await runReleasedTogether(tasks, total);
    const wallMs = performance.now() - started;
    const failures = replies
      .filter((r) => r.status !== 200 || r.body.errors?.length)
      .map((r) => String(r.body.errors?.[0]?.extensions?.['code'] ?? r.status));
    const numbersByTenant = new Map<string, number[]>();
    for (const tenant of tenants) {
      const { rows } = await backend.sql.query<{ doc_number: number }>(
        'select doc_number from contract_documents where tenant_id = $1 order by doc_number',
        [tenant],
      );
      numbersByTenant.set(
        tenant,
        rows.map((r) => r.doc_number),
      );
    }
    return { requests: total, succeeded: total - failures.length, failures, wallMs, numbersByTenant };
  } finally {
    client.close();
    await server.close();
  }
}

/** The numbers a tenant must hold after n documents: 10000000 .. 10000000 + n - 1. */
export function expectedNumbers(n: number): number[] {
  return Array.from({ length: n }, (_, i) => 10_000_000 + i);
}
