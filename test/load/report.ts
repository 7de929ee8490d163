import type { LoadResult } from './run.js';

const escape = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** Where and how a run was made: the page says it, so a report read later can be compared. */
export interface ReportContext {
  date: Date;
  commit: string;
  machine: string;
  /** What ran and how: scenario, model, rate, connections, amount, target. */
  configuration: Record<string, string>;
}

interface Chart {
  values: number[];
  /** One label per bar, under the x axis (some are skipped when they would overlap). */
  labels: string[];
  xTitle: string;
  yTitle: string;
  color: string;
  /** A horizontal reference line (the offered rate), drawn dashed and labelled. */
  reference?: { value: number; label: string };
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

/** A bar chart with both axes drawn, ticked and titled with their units. */
function barChart(chart: Chart): string {
  const top = niceCeiling(Math.max(...chart.values, chart.reference?.value ?? 0));
  const plotWidth = WIDTH - PLOT.left - PLOT.right;
  const plotHeight = HEIGHT - PLOT.top - PLOT.bottom;
  const y = (value: number) => PLOT.top + plotHeight - (value / top) * plotHeight;
  const barWidth = plotWidth / Math.max(1, chart.values.length);
  const bars = chart.values
    .map((value, i) => {
      const x = PLOT.left + i * barWidth;
      return `<rect x="${x.toFixed(1)}" y="${y(value).toFixed(1)}" width="${Math.max(1, barWidth - 1).toFixed(1)}" height="${(y(0) - y(value)).toFixed(1)}" fill="${chart.color}"><title>${escape(chart.labels[i]!)}: ${value}</title></rect>`;
    })
    .join('');
  const yTicks = [0, 0.25, 0.5, 0.75, 1]
    .map((share) => {
      const value = top * share;
      return `<line x1="${PLOT.left - 4}" x2="${PLOT.left}" y1="${y(value)}" y2="${y(value)}" stroke="#333"/><text x="${PLOT.left - 6}" y="${y(value) + 4}" font-size="11" text-anchor="end">${Number(value.toPrecision(3))}</text>`;
    })
    .join('');
  const labelEvery = Math.max(1, Math.ceil(chart.values.length / 12));
  const xTicks = chart.labels
    .map((label, i) =>
      i % labelEvery === 0
        ? `<text x="${(PLOT.left + (i + 0.5) * barWidth).toFixed(1)}" y="${HEIGHT - PLOT.bottom + 16}" font-size="11" text-anchor="middle">${escape(label)}</text>`
        : '',
    )
    .join('');
  const reference = chart.reference
    ? `<line x1="${PLOT.left}" x2="${WIDTH - PLOT.right}" y1="${y(chart.reference.value)}" y2="${y(chart.reference.value)}" stroke="#b00020" stroke-dasharray="6 4"/><text x="${WIDTH - PLOT.right}" y="${y(chart.reference.value) - 4}" font-size="11" text-anchor="end" fill="#b00020">${escape(chart.reference.label)}</text>`
    : '';
  const axes =
    `<line x1="${PLOT.left}" x2="${PLOT.left}" y1="${PLOT.top}" y2="${y(0)}" stroke="#333"/>` +
    `<line x1="${PLOT.left}" x2="${WIDTH - PLOT.right}" y1="${y(0)}" y2="${y(0)}" stroke="#333"/>` +
    `<text x="${PLOT.left + plotWidth / 2}" y="${HEIGHT - 8}" font-size="12" text-anchor="middle">${escape(chart.xTitle)}</text>` +
    `<text transform="translate(14 ${PLOT.top + plotHeight / 2}) rotate(-90)" font-size="12" text-anchor="middle">${escape(chart.yTitle)}</text>`;
  return `<svg width="${WIDTH}" height="${HEIGHT}" role="img">${bars}${reference}${axes}${yTicks}${xTicks}</svg>`;
}

/** Latency histogram on log-spaced buckets, from 1 ms to the slowest request. */
function latencyHistogram(result: LoadResult): string {
  const edges = [1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 2000, 5000, Infinity];
  const counts = edges.map(() => 0);
  for (const sample of result.samples) counts[edges.findIndex((edge) => sample.latencyMs <= edge)]!++;
  const labels = edges.map((edge, i) => (edge === Infinity ? `>${edges[i - 1]}` : `≤${edge}`));
  return barChart({ values: counts, labels, xTitle: 'latency (ms, upper bound of each bucket)', yTitle: 'requests', color: '#3b6ea8' });
}

/** Requests answered in each second of the run, against the offered rate in the open model. */
function throughput(result: LoadResult): string {
  const seconds = Math.max(1, Math.ceil(result.wallMs / 1000));
  const perSecond = Array.from({ length: seconds }, () => 0);
  for (const sample of result.samples) perSecond[Math.min(seconds - 1, Math.floor(sample.endMs / 1000))]!++;
  return barChart({
    values: perSecond,
    labels: perSecond.map((_, i) => String(i + 1)),
    xTitle: 'time since the start (s)',
    yTitle: 'answers per second (requests/s)',
    color: '#5a9e5a',
    ...(result.offeredRate !== null ? { reference: { value: result.offeredRate, label: `offered ${result.offeredRate} requests/s` } } : {}),
  });
}

const table = (rows: [string, string][]) =>
  `<table>${rows.map(([key, value]) => `<tr><th>${escape(key)}</th><td>${escape(value)}</td></tr>`).join('')}</table>`;

/** One self-contained HTML page: no scripts, no external assets. */
export function renderReport(result: LoadResult, context: ReportContext, title = `Load test: ${result.scenario}`): string {
  const outcomes = (record: Record<string, number>) =>
    Object.entries(record)
      .sort((a, b) => b[1] - a[1])
      .map(([key, count]) => `<tr><td>${escape(key)}</td><td>${count}</td></tr>`)
      .join('') || '<tr><td colspan="2">none</td></tr>';
  const { latency } = result;
  const verdict =
    result.violations === null
      ? '<p>Invariants: not checked (no database URL).</p>'
      : result.violations.length === 0
        ? '<p class="ok">Invariants: all held.</p>'
        : `<p class="bad">Invariants violated:</p><ul>${result.violations.map((v) => `<li>${escape(v)}</li>`).join('')}</ul>`;
  const run = table([
    ['date', context.date.toISOString()],
    ['commit', context.commit],
    ['machine', context.machine],
    ...Object.entries(context.configuration),
  ]);
  const figures = table([
    ['requests', String(result.requests)],
    ['wall time', `${(result.wallMs / 1000).toFixed(2)} s`],
    ...(result.offeredRate !== null ? [['offered', `${result.offeredRate.toFixed(1)} requests/s`] as [string, string]] : []),
    ['achieved', `${result.requestsPerSecond.toFixed(1)} requests/s`],
    [
      'latency p50 / p95 / p99 / max',
      `${latency.p50.toFixed(1)} / ${latency.p95.toFixed(1)} / ${latency.p99.toFixed(1)} / ${latency.max.toFixed(1)} ms`,
    ],
  ]);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2rem;max-width:800px}table{border-collapse:collapse;margin-bottom:1rem}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}.ok{color:#2a7a2a}.bad{color:#b00020}</style>
</head><body>
<h1>${escape(title)}</h1>
<h2>Run</h2>${run}
<h2>Figures</h2>${figures}
${verdict}
<h2>Outcomes</h2><table><tr><th>outcome</th><th>count</th></tr>${outcomes(result.outcomes)}</table>
<h2>Latency histogram</h2>${latencyHistogram(result)}
<h2>Throughput over time</h2>${throughput(result)}
</body></html>
`;
}
