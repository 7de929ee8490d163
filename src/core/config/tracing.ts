import { z } from 'zod';
import { custom, group, httpUrl, oneOf, refuse, text, wholeNumber } from './kinds.js';

const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
const EXPORTERS = ['otlp', 'console', 'none'];
/** Probes and scrapes: a trace each every few seconds, saying nothing. */
const DEFAULT_UNTRACED_PATHS = ['/health', '/ready', '/metrics'];

const ratio = z
  .string()
  .refine((raw) => /^\d*\.?\d+$/.test(raw) && Number(raw) <= 1, {
    error: (issue) => `expected a ratio from 0 to 1, got "${String(issue.input)}"`,
  })
  .transform(Number);

/** OTEL_TRACES_EXPORTER as the SDKs read it; unset (null): whether an endpoint is set decides (src/core/config.ts). */
const exporters = z.string().transform((raw, ctx) => {
  const names = raw.split(',').map((exporter) => exporter.trim());
  if (names.some((exporter) => !EXPORTERS.includes(exporter)) || (names.includes('none') && names.length > 1)) {
    const expected = 'otlp, console or both (comma-separated), or none alone';
    return refuse(ctx, `expected ${expected}, got "${raw}" (zipkin and jaeger are not built in: use OTLP)`);
  }
  return { otlp: names.includes('otlp'), console: names.includes('console') };
});

/** Request paths separated by commas, or `none` to trace every path. */
const untracedPaths = z.string().transform((raw, ctx) => {
  if (raw === 'none') return [];
  const paths = raw.split(',').map((entry) => entry.trim());
  const wrong = paths.filter((entry) => !/^\/[\x21-\x7e]*$/.test(entry));
  return wrong.length > 0 ? refuse(ctx, `expected paths such as /health,/ready (or none), got "${wrong.join('", "')}"`) : paths;
});

/** OpenTelemetry tracing, from the standard OTEL_* variables (docs/operations.md). */
export const tracingVariables = group('Traces (OpenTelemetry)', {
  otlpEndpoint: httpUrl({
    name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    shown: '(none: tracing off unless `OTEL_TRACES_EXPORTER` names an exporter)',
  }).describe('base URL of an OTLP/HTTP collector; spans go to its `/v1/traces`'),
  otlpTracesEndpoint: httpUrl({ name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' }).describe(
    'the traces URL itself; wins over `OTEL_EXPORTER_OTLP_ENDPOINT`',
  ),
  protocol: oneOf({
    name: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    words: ['http/protobuf', 'http/json'],
    default: 'http/protobuf',
    expected: 'http/protobuf or http/json (OTLP over HTTP)',
  }).describe('the encoding of OTLP over HTTP'),
  sampler: oneOf({ name: 'OTEL_TRACES_SAMPLER', words: SAMPLERS, default: 'parentbased_always_on' }).describe(
    'which requests make a trace',
  ),
  samplerRatio: custom({ name: 'OTEL_TRACES_SAMPLER_ARG', shown: '1', accepts: 'a ratio, 0 to 1', default: 1, schema: ratio }).describe(
    'the ratio of the `traceidratio` samplers',
  ),
  serviceName: text({
    name: 'OTEL_SERVICE_NAME',
    default: 'mutation-backend',
    pattern: /^[\x21-\x7e]{1,255}$/,
    expected: 'a name without spaces',
    accepts: 'a name without spaces',
  }).describe('the `service.name` of every span'),
  exporters: custom({
    name: 'OTEL_TRACES_EXPORTER',
    shown: '`otlp` when an endpoint is set, else none',
    accepts: '`otlp`, `console`, both comma-separated, or `none`',
    schema: exporters,
  }).describe(
    'where spans go: `console` prints every span on stdout as it ends (a first look without a collector); `otlp` with no endpoint ' +
      'sends to `http://localhost:4318/v1/traces`',
  ),
  excludedPaths: custom({
    name: 'TRACES_EXCLUDED_PATHS',
    accepts: 'paths separated by commas, or `none`',
    default: DEFAULT_UNTRACED_PATHS,
    schema: untracedPaths,
  }).describe(
    'request paths that make no trace, nor do their queries (probes and scrapes would be a trace every few seconds); `none` traces every path',
  ),
  scheduleDelayMs: wholeNumber({ name: 'OTEL_BSP_SCHEDULE_DELAY', default: 5_000, min: 0, max: 600_000 }).describe(
    'milliseconds the batch processor waits before it sends spans',
  ),
  statementText: oneOf({
    name: 'TRACES_STATEMENT_TEXT',
    words: ['unprepared', 'all'],
    default: 'unprepared',
    expected: 'unprepared or all',
  }).describe(
    'which statement spans carry `db.query.text`: `unprepared` (every statement but the prepared ones of the hot path, which their ' +
      "span's name and `db.query.summary` identify: their text is several kilobytes, the same on every span, and encoding it was the " +
      'costliest part of tracing a request), or `all`',
  ),
});
