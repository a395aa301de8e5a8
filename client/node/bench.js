// client/node/bench.js — a small bounded benchmark of the Node.js client against a running
// flurryd (perf/clients_compare runs it):
//   * get(1), one request in flight: requests/s, p50/p99 (microseconds);
//   * next() through the prefetch buffer: IDs/s.
// Every ID is checked for duplicates. Each phase runs for --seconds (1..60) or 1,000,000
// calls, whichever ends first.
//
//   node client/node/bench.js --server 127.0.0.1:7420 --seconds 3
import { Client } from './index.js';

function option(name, fallback) {
  const at = process.argv.indexOf(name);
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

const server = option('--server', '127.0.0.1:7420');
const seconds = Math.min(60, Math.max(1, Number(option('--seconds', '3'))));
const callsMax = 1_000_000;
const seen = new Set();
let duplicates = 0;
const keep = (id) => {
  if (seen.has(id)) duplicates += 1;
  seen.add(id);
};
const percentile = (sorted, fraction) =>
  Number(sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]) / 1000;

const plain = new Client({ servers: [server] });
try {
  const latencies = [];
  const start = process.hrtime.bigint();
  const end = start + BigInt(seconds * 1e9);
  while (latencies.length < callsMax) {
    const before = process.hrtime.bigint();
    if (before >= end) break;
    for (const id of await plain.get(1)) keep(id);
    latencies.push(process.hrtime.bigint() - before);
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  latencies.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  console.log(`Node get(1), 1 in flight: ${(latencies.length / elapsed).toFixed(0)} req/s, ` +
              `p50 ${percentile(latencies, 0.5).toFixed(1)} us, p99 ${percentile(latencies, 0.99).toFixed(1)} us`);
} finally {
  await plain.close();
}

const prefetching = new Client({ servers: [server], prefetch: 4096 });
try {
  let calls = 0;
  const start = process.hrtime.bigint();
  const end = start + BigInt(seconds * 1e9);
  while (calls < callsMax && process.hrtime.bigint() < end) {
    keep(await prefetching.next());
    calls += 1;
  }
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(`Node next() with prefetch: ${(calls / elapsed).toFixed(0)} IDs/s`);
} finally {
  await prefetching.close();
}
console.log(`Node: ${seen.size} IDs checked, ${duplicates} duplicates`);
process.exitCode = duplicates === 0 ? 0 : 1;
