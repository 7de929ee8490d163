import type { Logger } from '../core/logger.js';
import type { DatabasePath, Trouble } from './client.js';
import { resourceShortageWords } from './sqlstate.js';

/**
 * A stretch of time in which this server's writes fail for want of resources (a full disk, no
 * memory, an I/O error: class 53 or 58 but 53300, see sqlstate.ts). It begins with the first
 * statement of any pool that fails so, and ends only when a write of the health check's own
 * succeeds again (database.ts): a request that happens to fit in a page with room left proves
 * nothing about the next one.
 */
interface ResourceEpisode {
  sqlState: string;
  /** What ran out, in the words a client reads (sqlstate.ts). */
  reason: string;
  /** The database's own message of the first failure (file names included: the log is the operator's). */
  firstMessage: string;
  since: number;
  /** Statements that failed so during the episode. */
  failures: number;
}

export interface ResourceWatch {
  /** The episode under way, or null while writes work. */
  current(): ResourceEpisode | null;
  /** A write of the health check's succeeded: the episode, if any, is over. */
  writesWork(): void;
  stop(): void;
}

/**
 * Follows the path's 'resources' trouble and logs each episode twice, when it begins and when it
 * ends, however many requests fail in between: during a full disk every write fails, and a line
 * per request would bury the one that says why.
 */
export function watchResources(path: DatabasePath, log: Logger): ResourceWatch {
  let episode: ResourceEpisode | null = null;

  const onTrouble = (trouble: Trouble) => {
    if (trouble.kind !== 'resources') return;
    if (episode) {
      episode.failures++;
      return;
    }
    const reason = resourceShortageWords(trouble.sqlState);
    episode = { sqlState: trouble.sqlState, reason, firstMessage: trouble.message, since: Date.now(), failures: 1 };
    log.error(
      { sqlState: trouble.sqlState, reason: trouble.message },
      `${reason}: writes answer TRY_AGAIN and /ready 503 until a write succeeds again`,
    );
  };
  path.on('trouble', onTrouble);

  return {
    current: () => episode,
    writesWork() {
      if (!episode) return;
      log.info(
        { sqlState: episode.sqlState, forMs: Date.now() - episode.since, failedStatements: episode.failures },
        'the database accepts writes again',
      );
      episode = null;
    },
    stop() {
      path.off('trouble', onTrouble);
    },
  };
}
