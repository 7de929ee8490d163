import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

/** Where `npm run bench` writes what it measured on this machine, and where `npm run sim` reads it (committed). */
export const DEFAULT_CALIBRATION = fileURLToPath(new URL('./calibration.json', import.meta.url));

/** One row of the bench's hot comparison as measured: the figures the simulation must reproduce, and the costs it is built from. */
export interface CalibratedRow {
  label: string;
  requestsPerSecond: number;
  p99Ms: number;
  /** Mean budget-row hold per ISSUED at the server (UPDATE to the commit's answer), or null. */
  lockHoldMs: number | null;
  retriesPerRequest: number;
  strandedAtFirstRefusalYen: number | null;
  /** CPU ms per request of each process: server, PostgreSQL, delay proxy, load generator. */
  cpuMsPerRequest: Record<string, number>;
  /** What the whole machine was busy with during the row, in cores (other people's work included). */
  machineBusyCores: number;
  /** Rows whose server batched issues (COUPON_ISSUE_BATCH_MAX): the share of requests batches carried and the mean issues a batch; absent or null elsewhere. */
  batching?: { share: number; membersPerBatch: number } | null;
}

export interface Calibration {
  measured: string;
  machine: string;
  commit: string;
  cores: number;
  /** The round trip the delay proxy adds (twice its delay each way). */
  proxyRttMs: number;
  /** `select 1` through the bench's delay proxy, and straight to PostgreSQL, in ms. */
  rttMs: number;
  directRttMs: number;
  /** A budget row's hold per issue with one client on one row: the hold without this machine's queue for its cores. */
  quietHoldMs: number;
  hot: { clients: number; members: number; discountYen: number; leaseCoupons: number; slots: number };
  /** COUPON_ISSUE_BATCH_MAX of the servers of the rows marked batched. */
  batchMax?: number;
  rows: CalibratedRow[];
}

export async function readCalibration(file = DEFAULT_CALIBRATION): Promise<Calibration> {
  return JSON.parse(await readFile(file, 'utf8')) as Calibration;
}
