import { bootstrap, onShutdown, run } from '../../process/bootstrap.js';
import { openDatabase } from '../../process/open-database.js';
import { buildServices } from '../../services/services.js';
import { startWorkers } from './index.js';

/** `npm run worker`: the background loops alone, beside any number of servers and other workers. */
run(async () => {
  const { config, log } = bootstrap({ servesHttp: false });
  const opened = await openDatabase({ config, log, schema: 'require-current', watchDatabase: true }, 'mutation-backend-worker');
  const workers = startWorkers(buildServices(config, opened.database, log));
  onShutdown(log, async () => {
    await workers.stop();
    await opened.close();
  });
});
