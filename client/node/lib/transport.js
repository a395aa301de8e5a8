// client/node/lib/transport.js — the client's UDP sockets: one per server, connected to it.
//
// Contract:
//   * parseServer() checks "HOST:PORT" at construction (FlurryError invalid_argument). open()
//     resolves every HOST once (IPv4, dns.lookup), opens one udp4 socket per server and
//     connects it; on failure it closes what it opened and rejects (resolve_failed, system),
//     and a later open() tries again. Concurrent open() calls share one attempt.
//   * A connected socket receives only datagrams whose source is its server's address and port:
//     the kernel drops everything else, so an answer is only ever read from the server asked
//     (PROTOCOL.md "What a client can be sure of"). Every datagram is handed to
//     onDatagram(serverIndex, buffer); socket errors (an ICMP port unreachable shows as one) are
//     swallowed: the attempt waiting on that server times out as if nothing came.
//   * Sockets are unref'd: an idle client does not keep the process alive. A call in flight
//     does, through its own timers.
//   * send() resolves to null or the Error of a failed send; it never rejects. close() closes
//     every socket and is safe to call more than once.

import dgram from 'node:dgram';
import { promises as dns } from 'node:dns';

import { FlurryError, invalidArgument } from './errors.js';

/** "HOST:PORT" into {name, host, port}; throws FlurryError invalid_argument. */
export function parseServer(text) {
  if (typeof text !== 'string') throw invalidArgument('a server must be a string "HOST:PORT"');
  const colon = text.lastIndexOf(':');
  if (colon <= 0 || colon === text.length - 1) {
    throw invalidArgument(`server '${text}' is not HOST:PORT, e.g. 127.0.0.1:7420`);
  }
  const portText = text.slice(colon + 1);
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
  if (port < 1 || port > 65535) throw invalidArgument(`server '${text}': port must be a number 1..65535`);
  return { name: text, host: text.slice(0, colon), port };
}

export class Transport {
  /**
   * @param {string[]} servers "HOST:PORT" each (checked already by parseServer)
   * @param {(server: number, datagram: Buffer) => void} onDatagram
   */
  constructor(servers, onDatagram) {
    this.servers = servers.map(parseServer);
    this.onDatagram = onDatagram;
    this.sockets = null; // once open: one connected socket per server
    this.opening = null;
    this.closed = false;
  }

  get serverCount() {
    return this.servers.length;
  }

  name(server) {
    return this.servers[server].name;
  }

  /** Resolves when every socket is connected; see the contract for errors. */
  open() {
    if (this.sockets !== null) return Promise.resolve();
    if (this.opening === null) {
      this.opening = this.#open().finally(() => {
        this.opening = null;
      });
    }
    return this.opening;
  }

  async #open() {
    const addresses = [];
    for (const server of this.servers) {
      try {
        const { address } = await dns.lookup(server.host, { family: 4 });
        addresses.push(address);
      } catch (error) {
        throw new FlurryError(
          'resolve_failed',
          `server '${server.name}': cannot resolve '${server.host}' to an IPv4 address: ${error.code ?? error.message}`,
          { cause: error },
        );
      }
    }
    const sockets = [];
    try {
      for (let index = 0; index < this.servers.length; ++index) {
        const socket = dgram.createSocket({ type: 'udp4' });
        sockets.push(socket);
        socket.on('error', () => {}); // see the contract: the waiting attempt times out
        socket.on('message', (datagram) => this.onDatagram(index, datagram));
        await new Promise((resolve, reject) => {
          socket.once('error', reject);
          socket.connect(this.servers[index].port, addresses[index], () => {
            socket.off('error', reject);
            resolve();
          });
        });
        socket.unref();
      }
    } catch (error) {
      for (const socket of sockets) closeQuietly(socket);
      throw new FlurryError('system', `cannot open a UDP socket connected to the servers: ${error.message}`, { cause: error });
    }
    if (this.closed) {
      for (const socket of sockets) closeQuietly(socket);
      throw new FlurryError('closed', 'the client is closed');
    }
    this.sockets = sockets;
  }

  /** Sends one datagram to `server`; resolves to null, or the Error of a failed send. */
  send(server, datagram) {
    return new Promise((resolve) => {
      try {
        this.sockets[server].send(datagram, (error) => resolve(error ?? null));
      } catch (error) {
        resolve(error);
      }
    });
  }

  close() {
    this.closed = true;
    if (this.sockets === null) return Promise.resolve();
    const sockets = this.sockets;
    this.sockets = null;
    return Promise.all(sockets.map((socket) => new Promise((resolve) => closeQuietly(socket, resolve)))).then(() => {});
  }
}

function closeQuietly(socket, done = () => {}) {
  try {
    socket.close(done);
  } catch {
    done(); // already closed
  }
}
