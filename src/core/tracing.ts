import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context as TraceContext,
  type Link,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { suppressTracing, W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  type Sampler,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TracingConfig } from './config.js';

/**
 * OpenTelemetry tracing, on only when an exporter is configured (an OTLP endpoint, or the console).
 * The HTTP, GraphQL, pool, runner and relay layers ask `tracing.enabled` before they do anything,
 * so a server without a collector pays a boolean check per layer and nothing else.
 */
export const tracing = { enabled: false, preparedStatementText: false };

/** Request paths that make no trace (TRACES_EXCLUDED_PATHS): probes and scrapes. */
let untracedPaths = new Set<string>();

let provider: NodeTracerProvider | null = null;
/** The started provider's own tracer: a stopped and restarted provider gets a fresh one. */
let tracer: Tracer = trace.getTracer('mutation-backend');

function samplerOf(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * Starts exporting spans to the configured collector; a no-op without an endpoint. Returns what
 * flushes and stops it (shutdown waits for the spans still batched).
 */
export function startTracing(config: TracingConfig): () => Promise<void> {
  if (config.tracesEndpoint === null && !config.console) return async () => {};
  if (provider) throw new Error('tracing is already started in this process');
  const spanProcessors: SpanProcessor[] = [];
  if (config.tracesEndpoint !== null) {
    const Exporter = config.protocol === 'http/json' ? JsonExporter : ProtobufExporter;
    spanProcessors.push(
      new BatchSpanProcessor(new Exporter({ url: config.tracesEndpoint }), { scheduledDelayMillis: config.scheduleDelayMs }),
    );
  }
  // Each span printed as it ends, for a first look: batching would only delay what a reader waits for.
  if (config.console) spanProcessors.push(new SimpleSpanProcessor(new ConsoleSpanExporter()));
  const started = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName }),
    sampler: samplerOf(config),
    spanProcessors,
  });
  started.register({ propagator: new W3CTraceContextPropagator() });
  provider = started;
  tracer = started.getTracer('mutation-backend');
  untracedPaths = new Set(config.excludedPaths);
  tracing.preparedStatementText = config.preparedStatementText;
  tracing.enabled = true;
  return stopTracing;
}

/** Whether a request to `path` makes a trace: not a probe's or a scrape's (TRACES_EXCLUDED_PATHS). */
export function isTracedPath(path: string): boolean {
  return !untracedPaths.has(path);
}

/** Sends the spans still batched and stops tracing (shutdown calls it); a no-op when it is off. */
export async function stopTracing(): Promise<void> {
  const running = provider;
  if (!running) return;
  tracing.enabled = false;
  provider = null;
  await running.shutdown();
  // A later start in the same process (a test file's next backend) registers afresh.
  trace.disable();
  context.disable();
  propagation.disable();
}

export interface SpanSpec {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
  /** The parent; the active context when left out. */
  parent?: TraceContext;
  /** A new trace, whatever is active. */
  root?: boolean;
  /**
   * Nothing the work does makes a span of its own (a statement): the span is not made the active
   * context, which spares a context switch around every statement.
   */
  leaf?: boolean;
}

/** Marks a span failed by `error` (its code, a SQLSTATE for a statement, else its name) and ends it. */
function endFailed(span: Span, error: unknown): void {
  const code = (error as { code?: unknown } | null)?.code;
  const message = typeof code === 'string' ? code : error instanceof Error ? error.name : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.end();
}

/**
 * Runs `work` in a span (active while it runs, ended when it settles; an error marks it failed).
 * Without tracing it runs `work` with no span at all.
 */
export function inSpan<T>(name: string, spec: SpanSpec, work: (span: Span | null) => Promise<T>): Promise<T> {
  if (!tracing.enabled) return work(null);
  const parent = spec.root ? ROOT_CONTEXT : (spec.parent ?? context.active());
  const options = {
    kind: spec.kind ?? SpanKind.INTERNAL,
    ...(spec.attributes ? { attributes: spec.attributes } : {}),
    ...(spec.links ? { links: spec.links } : {}),
  };
  if (spec.leaf) {
    const span = tracer.startSpan(name, options, parent);
    let pending: Promise<T>;
    try {
      pending = work(span);
    } catch (error) {
      // As from an async function: a throw before the first await is a rejection, the span ended.
      endFailed(span, error);
      return Promise.reject(error as Error);
    }
    return pending.then(
      (value) => {
        span.end();
        return value;
      },
      (error: unknown) => {
        endFailed(span, error);
        throw error;
      },
    );
  }
  return tracer.startActiveSpan(name, options, parent, async (span) => {
    try {
      const value = await work(span);
      span.end();
      return value;
    } catch (error) {
      endFailed(span, error);
      throw error;
    }
  });
}

/** Starts a span the caller ends (a request whose end comes from an event, not a promise). */
export function startSpan(name: string, spec: SpanSpec): { span: Span; context: TraceContext } | null {
  if (!tracing.enabled) return null;
  const parent = spec.root ? ROOT_CONTEXT : (spec.parent ?? context.active());
  const span = tracer.startSpan(
    name,
    { kind: spec.kind ?? SpanKind.INTERNAL, ...(spec.attributes ? { attributes: spec.attributes } : {}) },
    parent,
  );
  return { span, context: trace.setSpan(parent, span) };
}

/** The trace context a carrier (request headers, a stored `traceparent`) names, for a span's parent. */
export function contextFrom(carrier: Record<string, string | undefined>): TraceContext {
  return propagation.extract(ROOT_CONTEXT, carrier, {
    get: (headers, key) => headers[key.toLowerCase()],
    keys: (headers) => Object.keys(headers),
  });
}

/** The W3C `traceparent` of a span's context, for a response header, an outbox row or a webhook. */
export function traceparentOf(ctx: TraceContext = context.active()): string | null {
  if (!tracing.enabled) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier['traceparent'] ?? null;
}

/**
 * A link to the span active now, for the span of work set off here that runs as work of its own
 * (a trace of its own, `root`): the trace it came from stays one click away. None without tracing.
 */
export function linksToActiveSpan(): Link[] | undefined {
  if (!tracing.enabled) return undefined;
  const span = trace.getSpan(context.active());
  return span ? [{ context: span.spanContext() }] : undefined;
}

/** The ids a log line carries beside the request id, when a sampled or recorded span is active. */
export function currentTraceIds(): { trace_id: string; span_id: string } | null {
  if (!tracing.enabled) return null;
  const span = trace.getSpan(context.active());
  const ids = span?.spanContext();
  return ids && trace.isSpanContextValid(ids) ? { trace_id: ids.traceId, span_id: ids.spanId } : null;
}

/**
 * Runs `work` with tracing suppressed: its transactions and statements make no spans. For work
 * that belongs to no request (start-up, a relay's empty poll) or to one that makes no trace (a
 * probe), whose spans would each be a trace of their own.
 */
export function untraced<T>(work: () => T): T {
  return tracing.enabled ? context.with(suppressTracing(context.active()), work) : work();
}

export { context as traceContext, SpanKind, SpanStatusCode, trace };
