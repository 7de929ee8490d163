import { lexicographicSortSchema, printSchema, type GraphQLSchema } from 'graphql';
import { builder } from './builder.js';
import './scalars.js';
import './session-type.js';
import '../tenants/graphql.js';
import '../contracts/graphql.js';
import '../coupons/graphql.js';
import '../huddles/graphql.js';
import '../worker/graphql.js';
import '../audit/graphql.js';

export const schema: GraphQLSchema = builder.toSchema();

/** The committed schema/schema.graphql is exactly this text; a test compares them. */
export function printedSchema(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
