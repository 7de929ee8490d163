import type { Kysely, Transaction } from 'kysely';
import type { DB, TenantRow } from '../../db/schema.js';
import { badInput } from '../../core/errors.js';

export interface Tenant {
  id: string;
  name: string;
  monthlyCapYen: number;
  createdAt: Date;
}

/** The cap of the reference scenario (docs/design.md §1); a tenant may set its own. */
export const DEFAULT_MONTHLY_CAP_YEN = 2000;

const toTenant = (row: TenantRow): Tenant => ({
  id: row.id,
  name: row.name,
  monthlyCapYen: row.monthly_cap_yen,
  createdAt: row.created_at,
});

/**
 * Creates the tenant, or returns null when the id is taken (the primary key decides, not a read).
 *
 * @example const tenant = await insertTenant(trx, { id: 'shop-1', name: 'Shop', monthlyCapYen: 2000 })
 */
async function insertTenant(trx: Transaction<DB>, input: { id: string; name: string; monthlyCapYen: number }): Promise<Tenant | null> {
  const row = await trx
    .insertInto('tenants')
    .values({ id: input.id, name: input.name, monthly_cap_yen: input.monthlyCapYen })
    .onConflict((oc) => oc.column('id').doNothing())
    .returningAll()
    .executeTakeFirst();
  return row ? toTenant(row) : null;
}

/**
 * What createTenant's audit row names; the row belongs to the new tenant, not to the operator's session (`auditTenant`).
 *
 * @example tenantEntities({ tenant }) // [tenant.id]
 */
export const tenantEntities = ({ tenant }: { tenant: Tenant }): string[] => [tenant.id];
/**
 * The tenant a createTenant audit row belongs to: the one created.
 *
 * @example tenantOfCreated({ tenant }) // tenant.id
 */
export const tenantOfCreated = ({ tenant }: { tenant: Tenant }): string => tenant.id;

/**
 * createTenant's unit of work (runMutation calls it): the tenant, or BAD_USER_INPUT on `id` when the id is taken.
 *
 * @example const { tenant } = await createTenant(trx, { id: 'shop-1', name: 'Shop', monthlyCapYen: 2000 })
 */
export async function createTenant(
  trx: Transaction<DB>,
  input: { id: string; name: string; monthlyCapYen: number },
): Promise<{ tenant: Tenant }> {
  const tenant = await insertTenant(trx, input);
  if (tenant === null) throw badInput(`A tenant with id "${input.id}" already exists`, 'id');
  return { tenant };
}

/**
 * One tenant by its id, or null.
 *
 * @example const tenant = await findTenant(db, 'shop-1')
 */
export async function findTenant(db: Kysely<DB>, id: string): Promise<Tenant | null> {
  const row = await db.selectFrom('tenants').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? toTenant(row) : null;
}
