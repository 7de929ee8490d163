import type { ColumnType, Generated, Selectable } from 'kysely';

/** Columns the database fills in: optional on insert, present on select. */
type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface TenantsTable {
  id: string;
  name: string;
  monthly_cap_yen: Defaulted<number>;
  created_at: Defaulted<Date>;
}

export interface ContractsTable {
  tenant_id: string;
  id: Generated<string>;
  title: string;
  created_at: Defaulted<Date>;
}

export interface DocumentSequencesTable {
  tenant_id: string;
  last_doc_number: number;
  updated_at: Defaulted<Date>;
}

export interface ContractDocumentsTable {
  tenant_id: string;
  id: Generated<string>;
  contract_id: string;
  doc_number: number;
  created_at: Defaulted<Date>;
}

export interface SchemaMigrationsTable {
  version: string;
  applied_at: Defaulted<Date>;
}

export interface DB {
  tenants: TenantsTable;
  contracts: ContractsTable;
  document_sequences: DocumentSequencesTable;
  contract_documents: ContractDocumentsTable;
  schema_migrations: SchemaMigrationsTable;
}

export type TenantRow = Selectable<TenantsTable>;
export type ContractRow = Selectable<ContractsTable>;
export type ContractDocumentRow = Selectable<ContractDocumentsTable>;
