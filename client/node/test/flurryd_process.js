// client/node/test/flurryd_process.js — real flurryd processes for the integration test: each in
// its own fresh temporary directory (state dir, control socket, log), on a free 127.0.0.1 UDP
// port, started with --init, the binary read from FLURRYD.
//
// Contract: startServers(count, options) resolves to `count` ready flurryds with distinct node
// ids, or rejects with the log tail after stopping every one it started. A node id is one per
// host (flurryd refuses a second process with the same one) and other suites may run flurryds
// here at the same time: it asks for node ids firstNodeId, firstNodeId + 1, ... and moves to
// another free one, a bounded number of times, when flurryd says a node id is already served
// here. Every process is killed by PID (SIGKILL) and reaped by stop(), which is safe to call
// twice; a process still running when the test process exits is killed then too.

import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { accessSync, constants, mkdtempSync, openSync, closeSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { Client, FlurryError } from '../index.js';

const READY_TIMEOUT_MS = 60000; // ends only a wait for a flurryd that never serves (sanitizer builds start slowly)
const NODE_ID_TRIES = 16;
const NODE_ID_TAKEN = 'is already served on this host';

const running = new Set();
process.on('exit', () => {
  for (const server of running) {
    try {
      process.kill(server.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

export class NodeIdTaken extends Error {}

export function flurrydPath() {
  const binary = process.env.FLURRYD ?? '';
  try {
    accessSync(binary, constants.X_OK);
  } catch {
    throw new Error(`FLURRYD=${JSON.stringify(binary)} is not an executable flurryd; meson sets it (build it with: ninja -C build control/flurryd)`);
  }
  return binary;
}

// Every port freeUdpPort gave: never twice in one process. A test starting two flurryds asks
// for both ports before either binds, and the kernel's random pick may repeat.
const handedOut = new Set();

export async function freeUdpPort() {
  for (let tries = 0; tries < 1000; tries++) {
    const probe = dgram.createSocket('udp4');
    await new Promise((resolve) => probe.bind(0, '127.0.0.1', resolve));
    const { port } = probe.address();
    await new Promise((resolve) => probe.close(resolve));
    if (!handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('1000 ports picked on 127.0.0.1, each one handed out before');
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Flurryd {
  /** `flags` are added to flurryd's command line; `key` signs the readiness check. */
  static async start(nodeId, { flags = [], key } = {}) {
    const server = new Flurryd(nodeId, key);
    server.address = `127.0.0.1:${await freeUdpPort()}`;
    const log = openSync(server.logPath, 'w');
    const command = [
      '--init',
      '--state-dir', path.join(server.directory, 'state'),
      '--listen', server.address,
      '--control-socket', path.join(server.directory, 'ctl.sock'),
      '--node-id', String(nodeId),
      ...flags,
    ];
    server.process = spawn(flurrydPath(), command, { stdio: ['ignore', log, log] });
    closeSync(log);
    server.pid = server.process.pid;
    server.exited = new Promise((resolve) => server.process.once('exit', (code, signal) => resolve({ code, signal })));
    server.exitCode = null;
    server.exited.then((status) => {
      server.exitCode = status;
      running.delete(server);
    });
    running.add(server);
    return server;
  }

  constructor(nodeId, key) {
    this.nodeId = nodeId;
    this.key = key;
    this.directory = mkdtempSync(path.join(tmpdir(), `flurry-node-node${nodeId}-`));
    this.logPath = path.join(this.directory, 'flurryd.log');
  }

  logTail(lines = 15) {
    try {
      return readFileSync(this.logPath, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /**
   * Until it answers PING and issues an ID (a new node answers RETRY until its first ceiling is
   * durable), at most READY_TIMEOUT_MS. Rejects with the log tail (NodeIdTaken when that is why).
   */
  async waitReady() {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    const client = new Client({ servers: [this.address], timeoutMs: 100, attempts: 1, retryBudgetMs: 1000, key: this.key });
    try {
      while (Date.now() < deadline) {
        if (this.exitCode !== null) {
          const Failure = this.logTail().includes(NODE_ID_TAKEN) ? NodeIdTaken : Error;
          throw new Failure(`flurryd node ${this.nodeId} exited (${JSON.stringify(this.exitCode)}):\n${this.logTail()}`);
        }
        try {
          await client.ping();
          await client.get(1);
          return;
        } catch (error) {
          if (!(error instanceof FlurryError)) throw error;
          await sleep(50);
        }
      }
    } finally {
      await client.close();
    }
    throw new Error(`flurryd node ${this.nodeId} on ${this.address} did not serve within ${READY_TIMEOUT_MS} ms:\n${this.logTail()}`);
  }

  /** SIGKILL by PID and reap; a no-op once reaped. */
  async kill() {
    if (this.exitCode === null) {
      try {
        process.kill(this.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await this.exited;
    }
  }

  async stop() {
    await this.kill();
    rmSync(this.directory, { recursive: true, force: true });
  }
}

/**
 * `count` ready flurryds with distinct node ids (firstNodeId.. unless taken on this host), each
 * with `flags` and checked ready with `key`.
 */
export async function startServers(count, { firstNodeId = 1, flags = [], key } = {}) {
  const started = [];
  const candidates = Array.from({ length: count }, (_, i) => firstNodeId + i);
  while (candidates.length < count + NODE_ID_TRIES) {
    const id = 100 + Math.floor(Math.random() * 900);
    if (!candidates.includes(id)) candidates.push(id);
  }
  try {
    while (started.length < count) {
      if (candidates.length === 0) throw new Error('no free node id found');
      const server = await Flurryd.start(candidates.shift(), { flags, key });
      try {
        await server.waitReady();
      } catch (error) {
        await server.stop();
        if (error instanceof NodeIdTaken) continue;
        throw error;
      }
      started.push(server);
    }
  } catch (error) {
    await Promise.all(started.map((server) => server.stop()));
    throw error;
  }
  return started;
}
