import { lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { builder } from './builder.js';
import './scalars.js';
import './types/viewer.js';
import './types/tenants.js';
import './types/contracts.js';
import './types/campaigns.js';
import './types/coupons.js';
import './types/ledger.js';
import './types/redeem-coupon.js';
import './types/orders.js';
import './types/refund-order.js';
import './types/huddles.js';
import './types/outbox.js';
import './types/audit.js';

export const schema: GraphQLSchema = builder.toSchema();

/** The committed schema/schema.graphql is exactly this text; a test compares them. */
export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
