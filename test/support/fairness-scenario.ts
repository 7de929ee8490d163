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

/** The flooding member's clients in the member scenario: twice the tenant scenario's, so that a first-come line would hold them. */
const MEMBER_FLOODING_CLIENTS = 16;

type Victim = 'sameTenantMember' | 'sameTenantAdmin' | 'otherTenantMember';

/**
 * The most of the flooder's operations one request of the others may wait behind: the turns
 * (MAX_IN_FLIGHT), all the flooder's when it arrives and each answered while it waits, plus the
 * flooder's one turn in the rotation before its own, with room to spare: twice the turns. A
 * first-come line inside the tenant puts a tenant-mate behind every flooding request waiting (13
 * to 19 of them in a run with 16 flooding clients, against 1 to 6 with the rotation).
 */
export const MOST_WAITED_BEHIND = 2 * Number(FAIRNESS_ENV.MAX_IN_FLIGHT);

export interface MemberFairnessResult {
  /** A member of the flooding member's own tenant, during the flood. */
  sameTenantMember: LatencySummary;
  /** The flooding member's tenant admin, during the flood. */
  sameTenantAdmin: LatencySummary;
  /** A member of another tenant, during the same flood: the yardstick. */
  otherTenantMember: LatencySummary;
  /** Codes of the failed requests of the three above, by who sent them. */
  victimErrors: Record<Victim, string[]>;
  /**
   * For each request of the three above, how many of the flooder's operations were answered
   * (executed, not shed) between its sending and its answer: what it waited behind, counted in
   * operations instead of milliseconds, so that a busy machine does not change it.
   */
  floodServedDuring: Record<Victim, number[]>;
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
  const client = new LoadClient(url, MEMBER_FLOODING_CLIENTS + 3);
  const createDocument = print(CreateContractDocumentDocument);
  const victimErrors: Record<Victim, string[]> = { sameTenantMember: [], sameTenantAdmin: [], otherTenantMember: [] };
  const floodServedDuring: Record<Victim, number[]> = { sameTenantMember: [], sameTenantAdmin: [], otherTenantMember: [] };
  let floodServed = 0;
  const victim = async (who: Victim, tenant: string, headers: Record<string, string>) => {
    const latencies: number[] = [];
    for (let i = 0; i < VICTIM_REQUESTS; i++) {
      const servedBefore = floodServed;
      const reply =
        i % 2 === 0
          ? await client.graphql('{ contracts(first: 1) { id } }', {}, headers)
          : await client.graphql(createDocument, { input: { contractId: contracts[tenant] } }, headers);
      floodServedDuring[who].push(floodServed - servedBefore);
      latencies.push(reply.latencyMs);
      if (codeOf(reply) !== 'OK') victimErrors[who].push(codeOf(reply));
    }
    return summarize(latencies);
  };
  try {
    await client.open();
    let flooding = true;
    const floodReplies: GraphQLReply[] = [];
    const flood = Array.from({ length: MEMBER_FLOODING_CLIENTS }, async () => {
      while (flooding) {
        const reply = await client.graphql(EXPENSIVE_QUERY, {}, asUser(shared, 'flooder'));
        if (codeOf(reply) === 'OK') floodServed++;
        floodReplies.push(reply);
      }
    });
    // Let the flood fill the turns and the tenant's waiting room first.
    while (floodReplies.length < MEMBER_FLOODING_CLIENTS) await new Promise((resolve) => setTimeout(resolve, 10));
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
      floodServedDuring,
      floodOutcomes: countBy(floodReplies, codeOf),
      floodRetryAfter: shed.map((reply) => reply.headers['retry-after'] as string | undefined),
    };
  } finally {
    client.close();
    await server.close();
  }
}
