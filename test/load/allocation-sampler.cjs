// Loaded with `node --require …/allocation-sampler.cjs` into the server `npm run profile` starts
// (test/load/profile.ts): V8's sampling heap profiler, counting every sampled allocation, the ones
// the garbage collector has taken back included (what a request allocates, not what stays). The
// first SIGUSR2 starts it, the second stops it and writes the profile to ALLOCATION_PROFILE_FILE;
// a process that exits while it samples writes it then.
'use strict';
const { Session } = require('node:inspector');
const { writeFileSync } = require('node:fs');

const file = process.env.ALLOCATION_PROFILE_FILE;
// Bytes between samples: about one sample per request's worth of allocations at the bench's load.
const SAMPLING_INTERVAL = 32 * 1024;

if (file) {
  const session = new Session();
  session.connect();
  let sampling = false;
  // An in-process session answers synchronously: the profile is written before the handler returns.
  const stop = () => {
    if (!sampling) return;
    sampling = false;
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (error) throw error;
      writeFileSync(file, JSON.stringify(result.profile));
    });
  };
  process.on('SIGUSR2', () => {
    if (sampling) return stop();
    sampling = true;
    session.post('HeapProfiler.startSampling', {
      samplingInterval: SAMPLING_INTERVAL,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  });
  process.on('exit', stop);
}
