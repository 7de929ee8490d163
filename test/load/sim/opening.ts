import { simulate, type Costs, type Design } from './hot-path.js';

/**
 * The opening second of the seed's question (a first-come coupon at 10,000 requests a second): the
 * campaign opens at 10:00:00 on the database's clock, and `rate` members arrive over its first
 * second (Poisson), half of them in time for a coupon. Run on the deployment the steady-state search
 * found to keep up with `rate`, and on half of it (half the server processes and half the
 * database's cores): how long after 10:00:00 the last of them is answered, that is, how long the
 * queue the opening makes takes to drain, with the p50 and p99 a member waits.
 */

export interface OpeningCandidate {
  label: string;
  design: Design;
  costs: Costs;
  processes: number;
  dbCores: number;
  batchMax: number;
  poolPerProcess: number;
}

const ROUND_TRIP_MS = 1;

export function openingSecond(rate: number, candidates: OpeningCandidate[]): void {
  console.log(
    `\nThe opening second: ${rate.toLocaleString('en')} members arrive over the first second after startsAt (Poisson), ` +
      `${(rate / 2).toLocaleString('en')} coupons; ${ROUND_TRIP_MS} ms round trip; on the deployment found above to keep up with ${rate.toLocaleString('en')}/s, and on half of it\n`,
  );
  console.log(
    '| design | server processes | database cores | last answer ms after 10:00:00 | queue drained ms after the last arrival | p50 ms | p99 ms | ISSUED | stranded coupons |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const candidate of candidates) {
    for (const share of [1, 0.5]) {
      const processes = Math.max(1, Math.round(candidate.processes * share));
      const dbCores = Math.max(1, Math.round(candidate.dbCores * share));
      const deployment = {
        ratePerSecond: rate,
        processes,
        poolPerProcess: candidate.poolPerProcess,
        dbCores,
        rttMs: ROUND_TRIP_MS,
        batchMax: candidate.batchMax,
      };
      const r = simulate(candidate.design, candidate.costs, deployment, { requests: rate, budgetCoupons: rate / 2 });
      console.log(
        `| ${candidate.label} | ${processes} | ${dbCores} | ${r.wallMs.toFixed(0)} | ${Math.max(0, r.wallMs - r.lastArrivalMs).toFixed(0)} | ` +
          `${r.p50Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.issued} | ${r.strandedAtEnd} |`,
      );
    }
  }
}
