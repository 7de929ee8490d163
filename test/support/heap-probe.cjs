// Loaded with NODE_OPTIONS="--expose-gc --require …/heap-probe.cjs" into a server the memory test
// starts: in the process whose entry is HEAP_PROBE_ENTRY (tsx's own launcher loads it too, and
// stays out), a loopback listener on a port of its own (printed on stderr) answers each request with the heap used and the
// buffers' memory after a full garbage collection. Resident memory also counts what the allocator has not given back
// yet, which on a busy machine can stay for minutes; the heap after a full collection is what the
// process still holds.
'use strict';
const http = require('node:http');

const entry = process.env.HEAP_PROBE_ENTRY;
if (entry && process.argv[1] === entry) {
  if (typeof globalThis.gc !== 'function') throw new Error('heap-probe.cjs needs --expose-gc');
  const probe = http.createServer((_request, response) => {
    globalThis.gc();
    const { heapUsed, external } = process.memoryUsage();
    response.end(JSON.stringify({ heapUsed, external }));
  });
  probe.listen(0, '127.0.0.1', () => process.stderr.write(`heap probe: http://127.0.0.1:${probe.address().port}\n`));
  // The probe must not keep a server that was told to stop alive.
  probe.unref();
}
