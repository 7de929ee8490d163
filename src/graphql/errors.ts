import { GraphQLError } from 'graphql';
import type { AppError } from '../core/errors.js';

/**
 * An AppError as GraphQL carries it: its extensions (code and details), at the place in the
 * operation where it was thrown when `thrown` is the GraphQLError graphql-js wrapped it in (whose
 * message also says which variable, for an error of input coercion).
 */
export function toGraphQLError(error: AppError, thrown?: GraphQLError): GraphQLError {
  return new GraphQLError(thrown?.message ?? error.message, {
    nodes: thrown?.nodes ?? null,
    source: thrown?.source ?? null,
    positions: thrown?.positions ?? null,
    path: thrown?.path ?? null,
    extensions: { ...error.extensions },
  });
}
