import type { Attributes } from '@opentelemetry/api';
import type { DatabaseConnection } from 'kysely';
import { inSpan, SpanKind, tracing } from '../core/tracing.js';
import { preparedNameOf } from './prepared.js';

// Each statement a span while tracing is on (OpenTelemetry's database conventions), its attributes
// built once per prepared statement.

/** What a statement's span carries: its name and attributes (OpenTelemetry's database conventions). */
interface StatementSpan {
  name: string;
  attributes: Attributes;
}

const operationOf = (sql: string) => (/^\s*(\w+)/.exec(sql)?.[1] ?? '').toUpperCase();

/** The span of a statement that is not a prepared one: named by its first word, with its text. */
function unpreparedSpan(sql: string): StatementSpan {
  const operation = operationOf(sql);
  return {
    name: operation || 'SQL',
    attributes: { 'db.system.name': 'postgresql', 'db.system': 'postgresql', 'db.query.text': sql, 'db.operation.name': operation },
  };
}

/**
 * A prepared statement's spans, built once each and shared by every span of it: named by the
 * statement, its name as the summary, and its text only with TRACES_STATEMENT_TEXT=all (then with
 * each run of whitespace as one space). The hot path's statements are 6 to 8 KB of indented SQL,
 * the same on every span of one name, and the collector's encoder walks every character of every
 * span's text: with it, the text was the costliest part of tracing a request.
 */
const preparedSpans = new Map<string, { named: StatementSpan; withText: StatementSpan }>();

function statementSpan(sql: string): StatementSpan {
  const name = preparedNameOf(sql);
  if (name === undefined) return unpreparedSpan(sql);
  let spans = preparedSpans.get(sql);
  if (!spans) {
    const named = {
      name,
      attributes: {
        'db.system.name': 'postgresql',
        'db.system': 'postgresql',
        'db.query.summary': name,
        'db.operation.name': operationOf(sql),
      },
    };
    const withText = { name, attributes: { ...named.attributes, 'db.query.text': sql.replace(/\s+/g, ' ').trim() } };
    preparedSpans.set(sql, (spans = { named, withText }));
  }
  return tracing.preparedStatementText ? spans.withText : spans.named;
}

/** Each connection's traced face, made once: the pool hands the same connections out again and again. */
const tracedConnections = new WeakMap<DatabaseConnection, DatabaseConnection>();

/**
 * A connection whose every statement is a span (OpenTelemetry's database conventions: the text
 * as sent, with placeholders, never the values). A lock wait shows as a long statement span.
 */
export function tracedConnection(connection: DatabaseConnection): DatabaseConnection {
  let traced = tracedConnections.get(connection);
  if (traced) return traced;
  const executeQuery: DatabaseConnection['executeQuery'] = (compiled) => {
    const { name, attributes } = statementSpan(compiled.sql);
    return inSpan(name, { kind: SpanKind.CLIENT, attributes, leaf: true }, () => connection.executeQuery(compiled));
  };
  const bound = new Map<PropertyKey, unknown>();
  traced = new Proxy(connection, {
    get: (target, property) => {
      if (property === 'executeQuery') return executeQuery;
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function') return value;
      let method = bound.get(property);
      if (method === undefined) bound.set(property, (method = (value as (...args: unknown[]) => unknown).bind(target)));
      return method;
    },
  });
  tracedConnections.set(connection, traced);
  return traced;
}
