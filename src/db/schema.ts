import type { ColumnType, Generated, Selectable } from 'kysely';

/** Columns the database fills in: optional on insert, present on select. */
type Defaulted<T> = ColumnType<T, T | undefined, T>;

/** A jsonb value as pg returns it; written as JSON text. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

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
  adopted: Defaulted<boolean>;
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
  legacy_duplicate_number: Defaulted<boolean>;
}

export interface CampaignsTable {
  tenant_id: string;
  id: string;
  name: string;
  discount_yen: number;
  budget_yen: number;
  budget_slots: Defaulted<number>;
  created_at: Defaulted<Date>;
  adopted_overspend_yen: Defaulted<number>;
  budget_lease_coupons: Defaulted<number>;
  /** Issues are taken from then on (the campaign's creation, unless set); judged on the database's clock. */
  starts_at: Defaulted<Date>;
  /** Issues end then (refused at and after it); null: no end. */
  ends_at: Date | null;
  /** Its coupons are EXPIRED from then on; null: never. */
  coupons_expire_at: Date | null;
}

export interface CampaignBudgetSlotsTable {
  tenant_id: string;
  campaign_id: string;
  slot: number;
  budget_yen: number;
  issued_yen: Defaulted<number>;
  leased_yen: Defaulted<number>;
}

export interface CampaignBudgetLeasesTable {
  tenant_id: string;
  campaign_id: string;
  holder: string;
  budget_yen: number;
  issued_yen: Defaulted<number>;
  expires_at: Date;
}

export interface CouponsTable {
  tenant_id: string;
  id: Generated<string>;
  campaign_id: string;
  member_id: string;
  month: string;
  amount_yen: number;
  issued_at: Date;
  adopted: Defaulted<boolean>;
  legacy_duplicate: Defaulted<boolean>;
  redeemed_at: Date | null;
  voided_at: Date | null;
  /** The PENDING_PAYMENT order that holds the coupon (docs/design.md §11). */
  held_by_order_id: string | null;
}

export interface MemberMonthlyUsageTable {
  tenant_id: string;
  member_id: string;
  month: string;
  used_yen: number;
}

export type OutboxStatus = 'pending' | 'sent' | 'dead';

export interface OutboxEventsTable {
  tenant_id: string;
  id: Generated<string>;
  topic: string;
  payload: ColumnType<JsonValue, string, string>;
  created_at: Defaulted<Date>;
  status: Defaulted<OutboxStatus>;
  attempts: Defaulted<number>;
  next_attempt_at: Defaulted<Date>;
  claim_id: string | null;
  last_error: string | null;
  sent_at: Date | null;
  /** The W3C traceparent of the transaction that wrote the event (while tracing is on). */
  traceparent: Defaulted<string | null>;
  /** When `npm run outbox:requeue` gave a dead event back: its retry budget counts from then. */
  requeued_at: Date | null;
  /** When the relay last claimed it for a delivery. */
  last_attempt_at: Date | null;
}

export type OrderStatus = 'PENDING_PAYMENT' | 'PAID' | 'CANCELED' | 'REFUNDED';

export interface OrdersTable {
  tenant_id: string;
  id: string;
  member_id: string;
  status: OrderStatus;
  amount_yen: number;
  discount_yen: number;
  charged_yen: number;
  coupon_id: string | null;
  payment_intent_id: string | null;
  created_at: Date;
  settled_at: Date | null;
  refunded_yen: Defaulted<number>;
  failure_code: string | null;
}

export type PaymentIntentStatus = 'pending' | 'succeeded' | 'declined';

export interface PaymentIntentsTable {
  tenant_id: string;
  order_id: string;
  idempotency_key: string;
  amount_yen: number;
  currency: Defaulted<string>;
  payment_method: string;
  status: Defaulted<PaymentIntentStatus>;
  provider_intent_id: string | null;
  decline_code: string | null;
  resends: Defaulted<number>;
  last_error: string | null;
  created_at: Defaulted<Date>;
  next_attempt_at: Date;
  settled_at: Date | null;
  provider_status: string | null;
  action_since: Date | null;
  same_failures: Defaulted<number>;
  set_aside_at: Date | null;
}

export interface ProviderEventsTable {
  event_id: string;
  type: string;
  tenant_id: string | null;
  order_id: string | null;
  received_at: Defaulted<Date>;
  claimed_at: Defaulted<Date>;
  handled_at: Date | null;
  result: string | null;
}

export interface RefundSweepsTable {
  name: string;
  through_created: ColumnType<string, string | number, string | number>;
  resume_after: string | null;
  newest_created: ColumnType<string | null, string | number | null, string | number | null>;
  sweep_no: ColumnType<string, string | number | undefined, string | number>;
  next_sweep_at: Defaulted<Date>;
}

export type RefundStatus = 'pending' | 'succeeded' | 'failed';

/** refundOrder's own refund, or one made elsewhere and learnt from the provider. */
export type RefundOrigin = 'refund_order' | 'provider';

export interface RefundsTable {
  tenant_id: string;
  id: string;
  order_id: string;
  /** Null for a refund made elsewhere (origin 'provider'). */
  idempotency_key: string | null;
  origin: Defaulted<RefundOrigin>;
  amount_yen: number;
  status: Defaulted<RefundStatus>;
  provider_refund_id: string | null;
  failure_code: string | null;
  resends: Defaulted<number>;
  last_error: string | null;
  created_at: Defaulted<Date>;
  next_attempt_at: Date;
  settled_at: Date | null;
}

export interface HuddleSessionsTable {
  tenant_id: string;
  id: Generated<string>;
  objective_id: string;
  started_at: Defaulted<Date>;
  ended_at: Date | null;
}

export interface HuddleParticipantsTable {
  tenant_id: string;
  session_id: string;
  member_id: string;
  joined_at: Defaulted<Date>;
  last_heartbeat_at: Defaulted<Date>;
  left_at: Date | null;
}

export interface IdempotencyKeysTable {
  tenant_id: string;
  user_id: string;
  role: string;
  key: string;
  fingerprint: string;
  operation: string;
  response: ColumnType<JsonValue | null, string | null, string | null>;
  created_at: Defaulted<Date>;
  expires_at: ColumnType<Date, Date | string, Date | string>;
}

export interface AuditLogTable {
  tenant_id: string;
  id: Generated<number>;
  actor_user_id: string | null;
  role: string;
  operation: string;
  entity_ids: string[];
  request_id: string;
  created_at: Defaulted<Date>;
}

export interface AdoptionsTable {
  id: Generated<number>;
  tenant_id: string;
  adopted_at: Defaulted<Date>;
  report: ColumnType<JsonValue, string, string>;
}

export interface SchemaMigrationsTable {
  version: string;
  applied_at: Defaulted<Date>;
}

/** A CREATE INDEX CONCURRENTLY the migrator started and has not yet recorded as applied. */
export interface SchemaMigrationBuildsTable {
  index_name: string;
  version: string;
  started_at: Defaulted<Date>;
}

export interface DB {
  tenants: TenantsTable;
  contracts: ContractsTable;
  document_sequences: DocumentSequencesTable;
  contract_documents: ContractDocumentsTable;
  campaigns: CampaignsTable;
  campaign_budget_slots: CampaignBudgetSlotsTable;
  campaign_budget_leases: CampaignBudgetLeasesTable;
  coupons: CouponsTable;
  member_monthly_usage: MemberMonthlyUsageTable;
  outbox_events: OutboxEventsTable;
  orders: OrdersTable;
  payment_intents: PaymentIntentsTable;
  provider_events: ProviderEventsTable;
  refunds: RefundsTable;
  refund_sweeps: RefundSweepsTable;
  huddle_sessions: HuddleSessionsTable;
  huddle_participants: HuddleParticipantsTable;
  idempotency_keys: IdempotencyKeysTable;
  audit_log: AuditLogTable;
  adoptions: AdoptionsTable;
  schema_migrations: SchemaMigrationsTable;
  schema_migration_builds: SchemaMigrationBuildsTable;
}

export type TenantRow = Selectable<TenantsTable>;
export type ContractRow = Selectable<ContractsTable>;
export type ContractDocumentRow = Selectable<ContractDocumentsTable>;
export type CampaignRow = Selectable<CampaignsTable>;
export type CouponRow = Selectable<CouponsTable>;
export type OrderRow = Selectable<OrdersTable>;
export type RefundRow = Selectable<RefundsTable>;
export type HuddleSessionRow = Selectable<HuddleSessionsTable>;
export type HuddleParticipantRow = Selectable<HuddleParticipantsTable>;
export type AuditLogRow = Selectable<AuditLogTable>;
