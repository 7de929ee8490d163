import type { LoadResult, PartSummary, SecondFigures } from './run.js';
import type { LatencySummary } from './stats.js';
import type { ThresholdVerdict } from './thresholds.js';

const escape = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** Where and how a run was made: the page says it, so a report read later can be compared. */
export interface ReportContext {
  date: Date;
  commit: string;
  machine: string;
  /** What ran and how: scenario, model, rate, connections, amount, target. */
  configuration: Record<string, string>;
  /** The server's mode and settings (pool, in-flight limit, ...), or what is known of a server given by URL. */
  server: Record<string, string>;
  /** The machine's load averages (1, 5 and 15 minutes) before the set-up and after the run. */
  load: MachineLoad;
}

export interface MachineLoad {
  cores: number;
  before: number[];
  after: number[];
}

/** Load averages in words: the three figures, before and after, against the number of cores. */
export function describeLoad(load: MachineLoad): string {
  const figures = (values: number[]) => values.map((value) => value.toFixed(2)).join(' / ');
  return `${figures(load.before)} before, ${figures(load.after)} after (1 / 5 / 15 min; ${load.cores} cores)`;
}

interface Chart {
  values: number[];
  /** One label per bar, under the x axis (some are skipped when they would overlap). */
  labels: string[];
  xTitle: string;
  yTitle: string;
  color: string;
  /** Bars drawn in another colour (the warm-up, a partial second), by index. */
  marked?: { index: number; color: string }[];
  /** A reference line (the offered rate), one value per bar, drawn dashed and labelled. */
  reference?: { values: number[]; label: string };
  /** Vertical lines before the bar of `index` (where a stage or the measured part begins), labelled. */
  dividers?: { index: number; label: string }[];
}

interface LineChart {
  series: { name: string; color: string; values: number[] }[];
  labels: string[];
  xTitle: string;
  yTitle: string;
}

const WIDTH = 760;
const HEIGHT = 260;
const PLOT = { left: 64, right: 12, top: 12, bottom: 48 };

/** A round number at or above `max` whose halves and quarters read well on an axis. */
function niceCeiling(max: number): number {
  if (max <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(max));
  return [1, 2, 2.5, 5, 10].map((step) => step * magnitude).find((candidate) => candidate >= max)!;
}

/** The frame of a chart: both axes drawn, ticked and titled with their units, for values up to `top`. */
function frame(top: number, labels: string[], xTitle: string, yTitle: string) {
  const plotWidth = WIDTH - PLOT.left - PLOT.right;
  const plotHeight = HEIGHT - PLOT.top - PLOT.bottom;
  const y = (value: number) => PLOT.top + plotHeight - (value / top) * plotHeight;
  const slot = plotWidth / Math.max(1, labels.length);
  const yTicks = [0, 0.25, 0.5, 0.75, 1]
    .map((share) => {
      const value = top * share;
      return `<line x1="${PLOT.left - 4}" x2="${PLOT.left}" y1="${y(value)}" y2="${y(value)}" stroke="#333"/><text x="${PLOT.left - 6}" y="${y(value) + 4}" font-size="11" text-anchor="end">${Number(value.toPrecision(3))}</text>`;
    })
    .join('');
  const labelEvery = Math.max(1, Math.ceil(labels.length / 12));
  const xTicks = labels
    .map((label, i) =>
      i % labelEvery === 0
        ? `<text x="${(PLOT.left + (i + 0.5) * slot).toFixed(1)}" y="${HEIGHT - PLOT.bottom + 16}" font-size="11" text-anchor="middle">${escape(label)}</text>`
        : '',
    )
    .join('');
  const axes =
    `<line x1="${PLOT.left}" x2="${PLOT.left}" y1="${PLOT.top}" y2="${y(0)}" stroke="#333"/>` +
    `<line x1="${PLOT.left}" x2="${WIDTH - PLOT.right}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>` +
    `<text x="${PLOT.left + plotWidth / 2}" y="${HEIGHT - 8}" font-size="12" text-anchor="middle">${escape(xTitle)}</text>` +
    `<text transform="translate(14 ${PLOT.top + plotHeight / 2}) rotate(-90)" font-size="12" text-anchor="middle">${escape(yTitle)}</text>`;
  return { y, slot, decorations: `${axes}${yTicks}${xTicks}` };
}

/** A bar chart with both axes drawn, ticked and titled with their units. */
function barChart(chart: Chart): string {
  const top = niceCeiling(Math.max(...chart.values, ...(chart.reference?.values ?? [])));
  const { y, slot, decorations } = frame(top, chart.labels, chart.xTitle, chart.yTitle);
  const bars = chart.values
    .map((value, i) => {
      const x = PLOT.left + i * slot;
      const color = chart.marked?.find((mark) => mark.index === i)?.color ?? chart.color;
      return `<rect x="${x.toFixed(1)}" y="${y(value).toFixed(1)}" width="${Math.max(1, slot - 1).toFixed(1)}" height="${(y(0) - y(value)).toFixed(1)}" fill="${color}"><title>${escape(chart.labels[i]!)}: ${Number(value.toPrecision(4))}</title></rect>`;
    })
    .join('');
  return `<svg width="${WIDTH}" height="${HEIGHT}" role="img">${bars}${referenceLine(chart, y, slot)}${dividers(chart, slot)}${decorations}</svg>`;
}

/** The offered rate over the bars: a dashed step line, labelled at its right end. */
function referenceLine(chart: Chart, y: (value: number) => number, slot: number): string {
  const reference = chart.reference;
  if (!reference || reference.values.length === 0) return '';
  const points = reference.values
    .flatMap((value, i) => [
      `${(PLOT.left + i * slot).toFixed(1)},${y(value).toFixed(1)}`,
      `${(PLOT.left + (i + 1) * slot).toFixed(1)},${y(value).toFixed(1)}`,
    ])
    .join(' ');
  const last = reference.values.at(-1)!;
  return (
    `<polyline points="${points}" fill="none" stroke="#b00020" stroke-dasharray="6 4"/>` +
    `<text x="${WIDTH - PLOT.right}" y="${y(last) - 4}" font-size="11" text-anchor="end" fill="#b00020">${escape(reference.label)}</text>`
  );
}

/** Where the stages and the measured part begin: a vertical line and a label at the top. */
function dividers(chart: Chart, slot: number): string {
  return (chart.dividers ?? [])
    .map(({ index, label }) => {
      const x = (PLOT.left + index * slot).toFixed(1);
      return `<line x1="${x}" x2="${x}" y1="${PLOT.top}" y2="${HEIGHT - PLOT.bottom}" stroke="#555" stroke-dasharray="2 3"/><text x="${x}" y="${PLOT.top + 10}" font-size="10" dx="3">${escape(label)}</text>`;
    })
    .join('');
}

/** Lines over the same x slots as a bar chart, with a legend. */
function lineChart(chart: LineChart): string {
  const top = niceCeiling(Math.max(...chart.series.flatMap((series) => series.values)));
  const { y, slot, decorations } = frame(top, chart.labels, chart.xTitle, chart.yTitle);
  const lines = chart.series
    .map((series) => {
      const points = series.values.map((value, i) => `${(PLOT.left + (i + 0.5) * slot).toFixed(1)},${y(value).toFixed(1)}`).join(' ');
      const dots = series.values
        .map(
          (value, i) =>
            `<circle cx="${(PLOT.left + (i + 0.5) * slot).toFixed(1)}" cy="${y(value).toFixed(1)}" r="2" fill="${series.color}"><title>${escape(series.name)}, ${escape(chart.labels[i]!)}: ${value.toFixed(1)}</title></circle>`,
        )
        .join('');
      return `<polyline points="${points}" fill="none" stroke="${series.color}" stroke-width="1.5"/>${dots}`;
    })
    .join('');
  const legend = chart.series
    .map(
      (series, i) =>
        `<rect x="${PLOT.left + 10 + i * 70}" y="${PLOT.top}" width="10" height="10" fill="${series.color}"/><text x="${PLOT.left + 24 + i * 70}" y="${PLOT.top + 9}" font-size="11">${escape(series.name)}</text>`,
    )
    .join('');
  return `<svg width="${WIDTH}" height="${HEIGHT}" role="img">${lines}${legend}${decorations}</svg>`;
}

/** Below this share of a second, the last window is called partial (a run ending 10 ms short of a second is not). */
const WHOLE_SECOND = 0.99;

/** How much of its second the run's last second covers: the run rarely ends on a whole second. */
function lastSecondShare(result: LoadResult): number {
  const endMs = result.warmupMs + result.wallMs;
  return Math.min(1, endMs / 1000 - (result.perSecond.length - 1));
}

const WARMUP_COLOR = '#c9c9c9';

/** Latency histogram on log-spaced buckets, from 1 ms to the slowest request. */
function latencyHistogram(result: LoadResult): string {
  const edges = [1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 2000, 5000, Infinity];
  const counts = edges.map(() => 0);
  for (const sample of result.samples) if (!sample.warmup) counts[edges.findIndex((edge) => sample.latencyMs <= edge)]!++;
  const labels = edges.map((edge, i) => (edge === Infinity ? `>${edges[i - 1]}` : `≤${edge}`));
  return barChart({ values: counts, labels, xTitle: 'latency (ms, upper bound of each bucket)', yTitle: 'requests', color: '#3b6ea8' });
}

/**
 * Requests answered in each second of the run, against the offered rate in the open model. The
 * last second is usually partial: its bar is its answers per second of the time it covers, drawn
 * lighter and labelled, so that it does not read as a drop in throughput. The warm-up's bars are
 * grey; a dotted line marks where the measured part and each stage begin.
 */
function throughput(result: LoadResult): { chart: string; note: string } {
  const seconds = result.perSecond;
  const lastSeconds = lastSecondShare(result);
  const partial = lastSeconds < WHOLE_SECOND;
  const last = seconds.length - 1;
  const rates = seconds.map((second, i) => (i === last && partial ? second.count / lastSeconds : second.count));
  const marked = [
    ...seconds.flatMap((second, i) => (second.warmup ? [{ index: i, color: WARMUP_COLOR }] : [])),
    ...(partial ? [{ index: last, color: '#b7d7b7' }] : []),
  ];
  const offered = seconds.map((second, i) =>
    second.offered === null ? null : i === last && partial ? second.offered / lastSeconds : second.offered,
  );
  const chart = barChart({
    values: rates,
    labels: rates.map((_, i) => (i === last && partial ? `${i + 1}*` : String(i + 1))),
    xTitle: 'time since the start (s)',
    yTitle: 'answers per second (requests/s)',
    color: '#5a9e5a',
    marked,
    ...(offered.every((value) => value !== null)
      ? {
          reference: {
            values: offered as number[],
            label: result.offeredRate !== null ? `offered ${result.offeredRate} requests/s` : 'offered (stages)',
          },
        }
      : {}),
    dividers: secondDividers(seconds),
  });
  const note = partial
    ? `<p>* Second ${last + 1} is partial: the run ended ${lastSeconds.toFixed(2)} s into it. Its lighter bar is its ${seconds[last]!.count} answers scaled to a second (${rates[last]!.toFixed(0)} requests/s), not a count of a whole second.</p>`
    : '';
  return { chart, note };
}

/** Where the measured part and each stage begin, by second. */
function secondDividers(seconds: SecondFigures[]): { index: number; label: string }[] {
  const found: { index: number; label: string }[] = [];
  seconds.forEach((second, i) => {
    const before = seconds[i - 1];
    const labels = [
      ...(before?.warmup && !second.warmup ? ['measured'] : []),
      ...(second.stage !== null && (before === undefined || before.stage !== second.stage) ? [`stage ${second.stage}`] : []),
    ];
    if (labels.length > 0) found.push({ index: i, label: labels.join(', ') });
  });
  return found;
}

/** p50, p95 and p99 of the requests answered in each second: where in the run latency rose. */
function latencyOverTime(result: LoadResult): { chart: string; rows: string } {
  const seconds = result.perSecond;
  const lastSeconds = lastSecondShare(result);
  const partial = lastSeconds < WHOLE_SECOND;
  const labels = seconds.map((_, i) => (i === seconds.length - 1 && partial ? `${i + 1}*` : String(i + 1)));
  const chart = lineChart({
    series: [
      { name: 'p50', color: '#3b6ea8', values: seconds.map((s) => s.p50) },
      { name: 'p95', color: '#d08c1a', values: seconds.map((s) => s.p95) },
      { name: 'p99', color: '#b00020', values: seconds.map((s) => s.p99) },
    ],
    labels,
    xTitle: 'time since the start (s, by when each request was answered)',
    yTitle: 'latency (ms)',
  });
  const rows = seconds
    .map((second, i) => {
      const label = `${escape(labels[i]!)}${i === seconds.length - 1 && partial ? ` (${lastSeconds.toFixed(2)} s)` : ''}`;
      const phase = [second.warmup ? 'warm-up' : '', second.stage !== null ? `stage ${second.stage}` : ''].filter(Boolean).join(', ');
      return `<tr><td>${label}</td><td>${escape(phase)}</td><td>${second.count}</td><td>${second.errors}</td><td>${second.unanswered}</td><td>${second.p50.toFixed(1)}</td><td>${second.p95.toFixed(1)}</td><td>${second.p99.toFixed(1)}</td></tr>`;
    })
    .join('');
  return { chart, rows };
}

/** Each invariant the run checked in SQL, with the counts its verdict rests on. */
function invariants(result: LoadResult): string {
  if (result.checks === null) return '<p>Invariants: not checked (no database URL).</p>';
  const held = result.checks.every((check) => check.violations.length === 0);
  const rows = result.checks
    .map(
      (check) =>
        `<tr><td>${escape(check.invariant)}</td><td>${escape(check.counted)}</td><td class="${check.violations.length ? 'bad' : 'ok'}">${check.violations.length ? `VIOLATED: ${escape(check.violations.join('; '))}` : 'held'}</td></tr>`,
    )
    .join('');
  return `<p class="${held ? 'ok' : 'bad'}">${held ? 'Invariants: all held.' : 'Invariants violated.'}</p><table><tr><th>invariant</th><th>counted in SQL</th><th>verdict</th></tr>${rows}</table>`;
}

const table = (rows: [string, string][]) =>
  `<table>${rows.map(([key, value]) => `<tr><th>${escape(key)}</th><td>${escape(value)}</td></tr>`).join('')}</table>`;

/** Bytes in the largest unit that keeps the figure at or above 1. */
export function describeBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
}

/** A part's latency in one line: every statistic the summary keeps. */
export function describeLatency(latency: LatencySummary): string {
  const ms = (value: number) => value.toFixed(1);
  return `mean ${ms(latency.mean)}  min ${ms(latency.min)}  p50 ${ms(latency.p50)}  p90 ${ms(latency.p90)}  p95 ${ms(latency.p95)}  p99 ${ms(latency.p99)}  max ${ms(latency.max)} ms`;
}

/** A threshold's value in its own unit. */
export function describeThresholdValue(verdict: ThresholdVerdict): string {
  if (verdict.metric === 'errors') return `${verdict.value.toFixed(2)}%`;
  if (verdict.metric === 'rate') return `${verdict.value.toFixed(1)} requests/s`;
  return `${verdict.value.toFixed(1)} ms`;
}

function thresholdsTable(result: LoadResult): string {
  if (result.thresholds.length === 0) return '<p>No thresholds were given.</p>';
  const rows = result.thresholds
    .map(
      (verdict) =>
        `<tr><td>${escape(verdict.expression)}</td><td>${escape(describeThresholdValue(verdict))}</td><td class="${verdict.passed ? 'ok' : 'bad'}">${verdict.passed ? 'pass' : 'FAIL'}</td></tr>`,
    )
    .join('');
  const aborted = result.aborted
    ? `<p class="bad">Aborted ${(result.aborted.atMs / 1000).toFixed(1)} s into the run: ${escape(result.aborted.threshold)} could no longer be met.</p>`
    : '';
  return `${aborted}<table><tr><th>threshold</th><th>measured</th><th>verdict</th></tr>${rows}</table>`;
}

/** The figures of a part of the run (the measured part, or the warm-up apart). */
function partRows(part: PartSummary): [string, string][] {
  const errors = Object.values(part.errors).reduce((sum, count) => sum + count, 0);
  return [
    ['requests', String(part.requests)],
    ['errors', `${errors}${part.requests ? ` (${((errors / part.requests) * 100).toFixed(2)}%)` : ''}`],
    [
      'latency (ms) mean / min / p50 / p90 / p95 / p99 / max',
      [part.latency.mean, part.latency.min, part.latency.p50, part.latency.p90, part.latency.p95, part.latency.p99, part.latency.max]
        .map((v) => v.toFixed(1))
        .join(' / '),
    ],
    ['bytes received (response bodies)', describeBytes(part.bytesReceived)],
  ];
}

function figuresTable(result: LoadResult): string {
  return table([
    ...partRows(result),
    ['wall time (measured part)', `${(result.wallMs / 1000).toFixed(2)} s`],
    ...(result.offeredRate !== null ? [['offered', `${result.offeredRate.toFixed(1)} requests/s`] as [string, string]] : []),
    ['achieved', `${result.requestsPerSecond.toFixed(1)} requests/s`],
    ['unanswered at the end (TIMED_OUT)', String(result.timedOut)],
  ]);
}

function warmupSection(result: LoadResult): string {
  if (result.warmup === null) return '';
  return `<h2>Warm-up (left out of the figures above)</h2><p>The first ${(result.warmupMs / 1000).toFixed(1)} s: sent like the rest, judged by no threshold.</p>${table(partRows(result.warmup))}`;
}

/** One self-contained HTML page: no scripts, no external assets. */
export function renderReport(result: LoadResult, context: ReportContext, title = `Load test: ${result.scenario}`): string {
  const outcomes = (record: Record<string, number>) =>
    Object.entries(record)
      .sort((a, b) => b[1] - a[1])
      .map(([key, count]) => `<tr><td>${escape(key)}</td><td>${count}</td></tr>`)
      .join('') || '<tr><td colspan="2">none</td></tr>';
  const run = table([
    ['date', context.date.toISOString()],
    ['commit', context.commit],
    ['machine', context.machine],
    ['machine load', describeLoad(context.load)],
    ...Object.entries(context.configuration),
  ]);
  const server = table(Object.entries(context.server));
  const { chart: throughputChart, note: partialNote } = throughput(result);
  const { chart: latencyChart, rows: latencyRows } = latencyOverTime(result);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2rem;max-width:800px}table{border-collapse:collapse;margin-bottom:1rem}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}.ok{color:#2a7a2a}.bad{color:#b00020}</style>
</head><body>
<h1>${escape(title)}</h1>
<h2>Run</h2>${run}
<h2>Server</h2>${server}
<h2>Thresholds</h2>${thresholdsTable(result)}
<h2>Figures</h2>${figuresTable(result)}
${warmupSection(result)}
<h2>Invariants</h2>${invariants(result)}
<h2>Outcomes</h2><table><tr><th>outcome</th><th>count</th></tr>${outcomes(result.outcomes)}</table>
<h2>Latency histogram</h2>${latencyHistogram(result)}
<h2>Throughput over time</h2>${throughputChart}${partialNote}
<h2>Latency over time</h2>${latencyChart}
<table><tr><th>second</th><th>part</th><th>answers</th><th>errors</th><th>unanswered at the end</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th></tr>${latencyRows}</table>
</body></html>
`;
}
