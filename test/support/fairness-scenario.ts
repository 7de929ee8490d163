import { print } from 'graphql';
import { CreateContractDocumentDocument } from '../generated/graphql.js';
import { LoadClient, type GraphQLReply } from '../load/client.js';
import { countBy, summarize, type LatencySummary } from '../load/stats.js';
import { asTenantAdmin, asUser, createContractRow, createTenant, serveOverHttp, type TestBackend } from './harness.js';

/** Turns and waiting room of the scenario: a small server, so that 8 flooding clients exceed it. */
export const FAIRNESS_ENV = { DB_POOL_MAX: '4', MAX_IN_FLIGHT: '4', TENANT_QUEUE_MAX: '2', DB_POOL_ACQUIRE_TIMEOUT_MS: '3000' };

const FLOODING_CLIENTS = 8;
const VICTIM_REQUESTS = 30;

/**
 * The most expensive document the default limits let through: 24 contracts with 50 documents
 * each and every field (cost 4,897 of 5,000).
 */
const EXPENSIVE_QUERY = '{ contracts(first: 24) { id title createdAt documents(first: 50) { id contractId docNumber createdAt } } }';

export interface FairnessResult {
  alone: LatencySummary;
  duringFlood: LatencySummary;
  /** Codes of B's failed requests (empty when B was always served). */
  victimErrors: string[];
  /** A's answers during the flood: OK or an error code. */
  floodOutcomes: Record<string, number>;
  /** Retry-After of A's TRY_AGAIN answers. */
  floodRetryAfter: (string | undefined)[];
}

const codeOf = (reply: GraphQLReply) => String(reply.body.errors?.[0]?.extensions?.['code'] ?? 'OK');

/**
 * Tenant B sends a simple query and a createContractDocument one after the other, first alone and
 * then while tenant A floods the server from 8 clients with the most expensive allowed document.
 */
export async function runFairnessScenario(backend: TestBackend): Promise<FairnessResult> {
  await createTenant(backend, 'flooder');
  await createTenant(backend, 'victim');
  await backend.sql.query(
    `with made as (insert into contracts (tenant_id, title) select 'flooder', 'Contract ' || n from generate_series(1, 24) n returning id)
     insert into contract_documents (tenant_id, contract_id, doc_number)
     select 'flooder', id, 10000000 + row_number() over () - 1 from made cross join generate_series(1, 50)`,
  );
  const contractId = await createContractRow(backend, 'victim');
  const { url, server } = await serveOverHttp(backend);
  const client = new LoadClient(url, FLOODING_CLIENTS + 1);
  const createDocument = print(CreateContractDocumentDocument);
  const victimErrors: string[] = [];
  const victimRound = async () => {
    const latencies: number[] = [];
    for (let i = 0; i < VICTIM_REQUESTS; i++) {
      const reply =
        i % 2 === 0
          ? await client.graphql('{ contracts(first: 1) { id } }', {}, asUser('victim'))
          : await client.graphql(createDocument, { input: { contractId } }, asUser('victim'));
      latencies.push(reply.latencyMs);
      if (codeOf(reply) !== 'OK') victimErrors.push(codeOf(reply));
    }
    return summarize(latencies);
  };
  try {
    await client.open();
    const alone = await victimRound();
    let flooding = true;
    const floodReplies: GraphQLReply[] = [];
    const flood = Array.from({ length: FLOODING_CLIENTS }, async () => {
      while (flooding) floodReplies.push(await client.graphql(EXPENSIVE_QUERY, {}, asUser('flooder')));
    });
    // Let the flood fill the turns and the flooder's waiting room first.
    while (floodReplies.length < FLOODING_CLIENTS) await new Promise((resolve) => setTimeout(resolve, 10));
    const duringFlood = await victimRound();
    flooding = false;
    await Promise.all(flood);
    const shed = floodReplies.filter((reply) => codeOf(reply) === 'TRY_AGAIN');
    return {
      alone,
      duringFlood,
      victimErrors,
      floodOutcomes: countBy(floodReplies, codeOf),
      floodRetryAfter: shed.map((reply) => reply.headers['retry-after'] as string | undefined),
    };
  } finally {
    client.close();
    await server.close();
  }
}

export interface MemberFairnessResult {
  /** A member of the flooding member's own tenant, during the flood. */
  sameTenantMember: LatencySummary;
  /** The flooding member's tenant admin, during the flood. */
  sameTenantAdmin: LatencySummary;
  /** A member of another tenant, during the same flood: the yardstick. */
  otherTenantMember: LatencySummary;
  /** Codes of the failed requests of the three above, by who sent them. */
  victimErrors: Record<string, string[]>;
  floodOutcomes: Record<string, number>;
  floodRetryAfter: (string | undefined)[];
}

/**
 * One member of tenant A floods from 8 clients with the most expensive allowed document while
 * another member of A, A's admin and a member of tenant B each send a simple query and a
 * createContractDocument one after the other, all at the same time.
 */
export async function runMemberFairnessScenario(backend: TestBackend): Promise<MemberFairnessResult> {
  const [shared, other] = ['shared', 'other'];
  await createTenant(backend, shared);
  await createTenant(backend, other);
  await backend.sql.query(
    `with made as (insert into contracts (tenant_id, title) select $1, 'Contract ' || n from generate_series(1, 24) n returning id)
     insert into contract_documents (tenant_id, contract_id, doc_number)
     select $1, id, 10000000 + row_number() over () - 1 from made cross join generate_series(1, 50)`,
    [shared],
  );
  await backend.sql.query(
    `insert into document_sequences (tenant_id, last_doc_number) values ($1, 10000000 + 24 * 50 - 1)
     on conflict (tenant_id) do update set last_doc_number = excluded.last_doc_number`,
    [shared],
  );
  const contracts = { [shared]: await createContractRow(backend, shared), [other]: await createContractRow(backend, other) };
  const { url, server } = await serveOverHttp(backend);
  const client = new LoadClient(url, FLOODING_CLIENTS + 3);
  const createDocument = print(CreateContractDocumentDocument);
  const victimErrors: Record<string, string[]> = { sameTenantMember: [], sameTenantAdmin: [], otherTenantMember: [] };
  const victim = async (who: keyof typeof victimErrors, tenant: string, headers: Record<string, string>) => {
    const latencies: number[] = [];
    for (let i = 0; i < VICTIM_REQUESTS; i++) {
      const reply =
        i % 2 === 0
          ? await client.graphql('{ contracts(first: 1) { id } }', {}, headers)
          : await client.graphql(createDocument, { input: { contractId: contracts[tenant] } }, headers);
      latencies.push(reply.latencyMs);
      if (codeOf(reply) !== 'OK') victimErrors[who]!.push(codeOf(reply));
    }
    return summarize(latencies);
  };
  try {
    await client.open();
    let flooding = true;
    const floodReplies: GraphQLReply[] = [];
    const flood = Array.from({ length: FLOODING_CLIENTS }, async () => {
      while (flooding) floodReplies.push(await client.graphql(EXPENSIVE_QUERY, {}, asUser(shared, 'flooder')));
    });
    // Let the flood fill the turns and the tenant's waiting room first.
    while (floodReplies.length < FLOODING_CLIENTS) await new Promise((resolve) => setTimeout(resolve, 10));
    const [sameTenantMember, sameTenantAdmin, otherTenantMember] = await Promise.all([
      victim('sameTenantMember', shared, asUser(shared, 'member-2')),
      victim('sameTenantAdmin', shared, asTenantAdmin(shared)),
      victim('otherTenantMember', other, asUser(other, 'member-3')),
    ]);
    flooding = false;
    await Promise.all(flood);
    const shed = floodReplies.filter((reply) => codeOf(reply) === 'TRY_AGAIN');
    return {
      sameTenantMember: sameTenantMember!,
      sameTenantAdmin: sameTenantAdmin!,
      otherTenantMember: otherTenantMember!,
      victimErrors,
      floodOutcomes: countBy(floodReplies, codeOf),
      floodRetryAfter: shed.map((reply) => reply.headers['retry-after'] as string | undefined),
    };
  } finally {
    client.close();
    await server.close();
  }
}
