import type { LoadResult } from './run.js';

const escape = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

function bars(values: number[], labels: string[], color: string, width = 720, height = 220): string {
  const max = Math.max(1, ...values);
  const barWidth = width / Math.max(1, values.length);
  const rects = values
    .map((value, i) => {
      const h = (value / max) * (height - 20);
      return `<rect x="${(i * barWidth).toFixed(1)}" y="${(height - 20 - h).toFixed(1)}" width="${Math.max(1, barWidth - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${color}"><title>${escape(labels[i]!)}: ${value}</title></rect>`;
    })
    .join('');
  const axis = [0, Math.floor(values.length / 2), values.length - 1]
    .filter((i, n, all) => i >= 0 && all.indexOf(i) === n)
    .map((i) => `<text x="${(i * barWidth).toFixed(1)}" y="${height - 4}" font-size="11">${escape(labels[i] ?? '')}</text>`)
    .join('');
  return `<svg width="${width}" height="${height}" role="img">${rects}${axis}<text x="${width - 4}" y="12" font-size="11" text-anchor="end">max ${max}</text></svg>`;
}

/** Latency histogram on log-spaced buckets, from 1 ms to the slowest request. */
function latencyHistogram(result: LoadResult): string {
  const edges = [1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 2000, 5000, Infinity];
  const counts = edges.map(() => 0);
  for (const sample of result.samples) counts[edges.findIndex((edge) => sample.latencyMs <= edge)]!++;
  const labels = edges.map((edge, i) => (edge === Infinity ? `>${edges[i - 1]} ms` : `≤${edge} ms`));
  return bars(counts, labels, '#3b6ea8');
}

/** Requests answered per second over the run. */
function throughput(result: LoadResult): string {
  const seconds = Math.max(1, Math.ceil(result.wallMs / 1000));
  const perSecond = Array.from({ length: seconds }, () => 0);
  for (const sample of result.samples) perSecond[Math.min(seconds - 1, Math.floor(sample.endMs / 1000))]!++;
  return bars(perSecond, perSecond.map((_, i) => `${i + 1} s`), '#5a9e5a');
}

/** One self-contained HTML page: no scripts, no external assets. */
export function renderReport(result: LoadResult, title = `Load test: ${result.scenario}`): string {
  const rows = (record: Record<string, number>) =>
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
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2rem;max-width:800px}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}.ok{color:#2a7a2a}.bad{color:#b00020}</style>
</head><body>
<h1>${escape(title)}</h1>
<table><tr><th>requests</th><td>${result.requests}</td></tr><tr><th>concurrency</th><td>${result.concurrency}</td></tr>
<tr><th>wall time</th><td>${(result.wallMs / 1000).toFixed(2)} s</td></tr><tr><th>requests per second</th><td>${result.requestsPerSecond.toFixed(1)}</td></tr>
<tr><th>p50 / p95 / p99 / max</th><td>${latency.p50.toFixed(1)} / ${latency.p95.toFixed(1)} / ${latency.p99.toFixed(1)} / ${latency.max.toFixed(1)} ms</td></tr></table>
${verdict}
<h2>Outcomes</h2><table><tr><th>outcome</th><th>count</th></tr>${rows(result.outcomes)}</table>
<h2>Latency histogram</h2>${latencyHistogram(result)}
<h2>Throughput over time</h2>${throughput(result)}
</body></html>
`;
}
