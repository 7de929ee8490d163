import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Logger } from '../../core/logger.js';

/**
 * WEB_CONCURRENCY > 1: a scrape of /metrics reaches one HTTP process, but must report the whole
 * server. That process asks the primary, which gathers every HTTP process's registry over the
 * cluster's IPC channel (prom-client's AggregatorRegistry) and answers with the sum: counters and
 * histograms add up; per-process gauges carry a `pid` label and stay apart.
 */

const SCRAPE_REQUEST = 'mutation-backend:scrape-request';
const SCRAPE_REPLY = 'mutation-backend:scrape-reply';
/** prom-client waits 5 s for every process; a little more for the reply to come back. */
const SCRAPE_TIMEOUT_MS = 6_000;

interface ScrapeReply {
  type: typeof SCRAPE_REPLY;
  id: number;
  text?: string;
  error?: string;
}

/** In the primary: answers each HTTP process's scrape with the aggregate of all of them. */
export function serveClusterScrapes(log: Logger): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: { type?: unknown; id?: unknown }) => {
    if (message?.type !== SCRAPE_REQUEST || typeof message.id !== 'number') return;
    const id = message.id;
    aggregator.clusterMetrics().then(
      (text) => worker.isConnected() && worker.send({ type: SCRAPE_REPLY, id, text } satisfies ScrapeReply),
      (error: Error) => {
        log.warn({ err: error }, 'could not gather the metrics of every HTTP process');
        if (worker.isConnected()) worker.send({ type: SCRAPE_REPLY, id, error: error.message } satisfies ScrapeReply);
      },
    );
  });
}

/**
 * In an HTTP process: offers `registry` to the primary's aggregation and returns the scrape
 * that asks the primary for the whole cluster's metrics.
 */
export function clusterScrape(registry: Registry): () => Promise<string> {
  AggregatorRegistry.setRegistries([registry]);
  // Constructing one installs prom-client's listener that answers the primary's requests.
  new AggregatorRegistry();
  let nextId = 0;
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = nextId++;
      const onMessage = (message: ScrapeReply) => {
        if (message?.type !== SCRAPE_REPLY || message.id !== id) return;
        settle();
        if (message.error !== undefined) reject(new Error(`metrics of the other HTTP processes: ${message.error}`));
        else resolve(message.text ?? '');
      };
      const timer = setTimeout(() => {
        settle();
        reject(new Error('the primary process did not answer the metrics request in time'));
      }, SCRAPE_TIMEOUT_MS);
      const settle = () => {
        clearTimeout(timer);
        process.off('message', onMessage);
      };
      process.on('message', onMessage);
      process.send!({ type: SCRAPE_REQUEST, id });
    });
}
