// client/node/test/integration.test.js — the client against real flurryd processes (FLURRYD,
// flurryd_process.js): 1,000,000 IDs from concurrent callers of two clients, all unique; a
// SIGKILL of the server in use mid-run and failover to the other, every ID still unique; a
// flurryd with --auth required and a key file: the signed client is served (one re-sign for the
// node id on its first GET_IDS, none after), an unsigned client is refused auth_required, a
// wrong secret and an unknown key id get no answer (the server drops them) and say why. And the
// README's quick start, run as a user pastes it (but for the server's address).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { Client, FlurryError, Layout, readKeyFile } from '../index.js';
import { startServers } from './flurryd_process.js';

// Every answer here must come, from a real flurryd on loopback: an attempt timeout no answer
// comes near however loaded the machine (the killed server's in-flight calls pay it once, side by
// side), so the first exchange of a run is answered by the first server, not failed over.
const SLOW = 5000;
const started = [];
after(async () => {
  await Promise.all(started.map((server) => server.stop()));
});

async function servers(count, options) {
  const list = await startServers(count, options);
  started.push(...list);
  return list;
}

// IDs into a BigUint64Array, sorted: uniqueness without a million-entry Set.
function assertAllUnique(ids, expected) {
  assert.equal(ids.length, expected);
  const sorted = BigUint64Array.from(ids).sort();
  for (let i = 1; i < sorted.length; ++i) {
    if (sorted[i] === sorted[i - 1]) assert.fail(`ID ${sorted[i]} received twice`);
  }
}

test('integration: 1,000,000 IDs from concurrent callers of two clients are unique', { timeout: 240_000 }, async () => {
  const [one, two] = await servers(2, { firstNodeId: 1 });
  const clients = [
    new Client({ servers: [one.address, two.address], timeoutMs: SLOW, prefetch: 8192 }),
    new Client({ servers: [two.address, one.address], timeoutMs: SLOW, prefetch: 8192 }),
  ];
  try {
    const total = 1_000_000;
    const perClient = total / clients.length;
    const batches = 4; // callers using get()
    const singles = 4; // callers using next()
    const nextEach = 5_000;
    const getEach = (perClient - singles * nextEach) / batches;
    assert.ok(Number.isInteger(getEach) && getEach % 10_000 === 0);
    const work = [];
    for (const client of clients) {
      for (let i = 0; i < batches; ++i) {
        work.push(
          (async () => {
            const mine = [];
            for (let got = 0; got < getEach; got += 10_000) mine.push(...(await client.get(10_000)));
            return mine;
          })(),
        );
      }
      for (let i = 0; i < singles; ++i) {
        work.push(
          (async () => {
            const mine = [];
            for (let n = 0; n < nextEach; ++n) mine.push(await client.next());
            return mine;
          })(),
        );
      }
    }
    const ids = (await Promise.all(work)).flat();
    assertAllUnique(ids, total);
    // Both nodes served: the IDs carry both node ids.
    const layout = Layout.fromInfo(await clients[0].info());
    layout.validate({ nowUnixMs: Date.now() });
    const nodes = new Set([ids[0], ids.at(-1), ...ids.filter((_, i) => i % 997 === 0)].map((id) => layout.decode(id).node));
    assert.ok(nodes.has(one.nodeId) && nodes.has(two.nodeId), `nodes ${[...nodes]}`);
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
});

test('integration: a SIGKILL of the server in use fails over, every ID still unique', { timeout: 120_000 }, async () => {
  const [first, second] = await servers(2, { firstNodeId: 1 });
  const client = new Client({ servers: [first.address, second.address], timeoutMs: SLOW, attempts: 4 });
  try {
    const layout = Layout.fromInfo(await client.info());
    const ids = [];
    const total = 200_000;
    let killed = false;
    const callers = Array.from({ length: 4 }, async () => {
      while (ids.length < total) {
        const batch = await client.get(2_500);
        ids.push(...batch);
        if (!killed && ids.length >= total / 4) {
          killed = true;
          await first.kill();
        }
      }
    });
    await Promise.all(callers);
    assert.ok(killed);
    assert.ok(ids.length >= total);
    assertAllUnique(ids, ids.length);
    const counters = client.counters();
    assert.ok(counters.timeouts + counters.sendErrors >= 1, 'the killed server was given up on');
    assert.equal(layout.decode(ids.at(-1)).node, second.nodeId, 'the survivor serves');
    assert.equal(layout.decode(ids[0]).node, first.nodeId, 'the first server served before');
  } finally {
    await client.close();
  }
});

test('integration: --auth required: signed clients are served; unsigned and wrong keys are refused', { timeout: 120_000 }, async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'flurry-node-auth-'));
  try {
    const secret = '000102030405060708090a0b0c0d0e0f';
    const serverKeys = path.join(dir, 'keys.toml');
    const clientKey = path.join(dir, 'client.key');
    await writeFile(
      serverKeys,
      `[[key]]\nname = "node"\nid = 7\nsecret = "${secret}"\nopcodes = ["get_ids", "info", "get_seq"]\nsequences = ["*"]\n`,
      { mode: 0o600 },
    );
    await writeFile(clientKey, `# the node client's key\nid = 7\nsecret = "${secret}"\nname = "node"\n`, { mode: 0o600 });
    const key = await readKeyFile(clientKey);
    const [node] = await servers(1, { firstNodeId: 3, flags: ['--auth', 'required', '--key-file', serverKeys], key });

    const signed = new Client({ servers: [node.address], timeoutMs: SLOW, key });
    const prefetched = new Client({ servers: [node.address], timeoutMs: SLOW, key, prefetch: 4096 });
    const unsigned = new Client({ servers: [node.address], timeoutMs: SLOW });
    const wrongSecret = new Client({ servers: [node.address], timeoutMs: 200, attempts: 2, key: { id: 7, secret: 'ffeeddccbbaa99887766554433221100' } });
    const unknownKey = new Client({ servers: [node.address], timeoutMs: 200, attempts: 2, key: { id: 8, secret } });
    try {
      // The first GET_IDS is signed for any server and refused wrong_server naming the node:
      // one request more; the second call needs none. An attempt that timed out is one request
      // more whatever it was (a flurryd held up on a loaded machine), so the count is of
      // requests less timeouts.
      const answered = () => signed.counters().requests - signed.counters().timeouts;
      const first = await signed.get(1);
      assert.equal(answered(), 2);
      const more = await signed.get(50_000);
      const requestsAfter = answered();
      assert.equal((await signed.get(1)).length, 1);
      assert.equal(answered(), requestsAfter + 1);
      const ping = await signed.ping();
      assert.equal(ping.node, node.nodeId);
      const info = await signed.info();
      assert.equal(info.node, node.nodeId);
      const fromPrefetch = [];
      for (let i = 0; i < 20_000; ++i) fromPrefetch.push(await prefetched.next());
      const ids = [...first, ...more, ...fromPrefetch];
      assertAllUnique(ids, ids.length);
      // Only the late answer to an attempt that timed out fails to verify: at most one a timeout.
      assert.ok(signed.counters().unverifiedResponses <= signed.counters().timeouts, JSON.stringify(signed.counters()));

      const refused = await unsigned.get(1).then(() => null, (error) => error);
      assert.ok(refused instanceof FlurryError, String(refused));
      assert.equal(refused.code, 'unauthorized');
      assert.equal(refused.reason, 'auth_required');
      assert.match(refused.message, /answered UNAUTHORIZED \(auth_required\) to GET_IDS: this server requires authentication; give the client a key/);
      assert.equal((await unsigned.ping()).node, node.nodeId, 'unsigned PING is still served');

      for (const [client, what] of [[wrongSecret, 'a wrong secret'], [unknownKey, 'an unknown key id']]) {
        const error = await client.get(1).then(() => null, (e) => e);
        assert.ok(error instanceof FlurryError, `${what}: ${error}`);
        assert.equal(error.code, 'no_answer', `${what}: ${error.message}`);
        assert.match(error.message, /a server drops signed requests whose key id it does not know or whose MAC does not verify/);
      }
    } finally {
      await Promise.all([signed, prefetched, unsigned, wrongSecret, unknownKey].map((client) => client.close()));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('integration: the README quick start runs as pasted', { timeout: 60_000 }, async () => {
  const clientDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const readme = await readFile(path.join(clientDir, 'README.md'), 'utf8');
  const quickStart = /## Quick start[\s\S]*?```js\n([\s\S]*?)```/.exec(readme);
  assert.ok(quickStart, 'README.md has a quick start');
  assert.ok(quickStart[1].includes("'127.0.0.1:7420'"));
  const [node] = await servers(1, { firstNodeId: 4 });
  const app = await mkdtemp(path.join(tmpdir(), 'flurry-node-app-'));
  try {
    // What `npm install /path/to/flurry/client/node` makes: a link to the package.
    await mkdir(path.join(app, 'node_modules', '@flurry'), { recursive: true });
    await symlink(clientDir, path.join(app, 'node_modules', '@flurry', 'client'));
    await writeFile(path.join(app, 'quickstart.mjs'), quickStart[1].replace("'127.0.0.1:7420'", `'${node.address}'`));
    // The quick start keeps the client's defaults (5 attempts of 100 ms), which a fresh process
    // on a loaded machine can miss: "no answer from" says the machine was slow, not that the
    // quick start is wrong, so such a run is run again (at most 3 runs); any other failure fails.
    let stdout = '';
    for (let run = 1; ; ++run) {
      try {
        ({ stdout } = await promisify(execFile)(process.execPath, ['quickstart.mjs'], { cwd: app, timeout: 30_000 }));
        break;
      } catch (error) {
        if (run === 3 || !/no answer from/.test(String(error.stderr))) throw error;
      }
    }
    const ids = [...stdout.matchAll(/'(\d+)'/g)].map((match) => match[1]);
    assert.equal(ids.length, 5);
    assert.equal(new Set(ids).size, 5);
    assert.match(stdout, new RegExp(`node: ${node.nodeId}`));
  } finally {
    await rm(app, { recursive: true, force: true });
  }
});
