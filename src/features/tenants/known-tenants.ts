/**
 * The tenants one database was seen to hold, so that a session's tenant is looked up once rather
 * than on every request. It belongs to the services of that database (AppServices.knownTenants):
 * tenant ids are unique only within a database, so a process serving two databases keeps two.
 * Tenants are never deleted, so a hit stays true; a miss is never kept (the tenant may be created
 * the next moment).
 *
 * @example if (!knownTenants.has(tenantId)) knownTenants.add(tenantId)
 */
export class KnownTenants {
  private readonly ids = new Set<string>();

  /** Bounded so that sessions naming ever new tenants cannot grow it without end: it starts over when full. */
  constructor(private readonly max = 10_000) {}

  has(tenantId: string): boolean {
    return this.ids.has(tenantId);
  }

  /** The tenant was read from this database. */
  add(tenantId: string): void {
    if (this.ids.size >= this.max) this.ids.clear();
    this.ids.add(tenantId);
  }
}
