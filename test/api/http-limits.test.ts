import net from 'node:net';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import pino from 'pino';
import { testDatabase } from '../support/database.js';
import { createApp } from '../../src/api/app.js';
import { listen } from '../../src/http/edge.js';
import { DEFAULT_HTTP_LIMITS, logDroppedConnections, type HttpLimits } from '../../src/http/http-limits.js';
import { DEFAULT_SHED_LAG_MS } from '../../src/http/load-shedding.js';
import { validators } from '../../src/contract/validators.js';
import { addressKey } from '../../src/http/auth-failures.js';
import { ConfigError, httpLimitsFromEnv, shedLagFromEnv } from '../../src/config.js';

// What one client can hold of the HTTP server (src/http/http-limits.ts) and the load shedder (src/http/load-shedding.ts),
// on the real app. The time-outs are shortened for the tests; the production values are checked on the server object.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A connected socket that collects what it receives; `closed` resolves when the server closes it. */
async function connect(port: number, from?: string) {
  const socket = net.connect({ port, host: '127.0.0.1', localAddress: from });
  const received: Buffer[] = [];
  socket.on('data', (chunk) => received.push(chunk));
  socket.on('error', () => undefined);
  const closed = once(socket, 'close').then(() => Date.now());
  await once(socket, 'connect');
  return { socket, closed, text: () => Buffer.concat(received).toString('latin1') };
}

/** Resolves with the close time, or with undefined if the socket is still open after `ms`. */
const closedWithin = (closed: Promise<number>, ms: number) => Promise.race([closed, sleep(ms).then(() => undefined)]);

/** The status, headers and body of the first answer in `text`. */
function parseAnswer(text: string) {
  const end = text.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(
    lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine.split(' ')[1]), headers, body: text.slice(end + 4) };
}

describe('HTTP limits: what one client can hold of the server', () => {
  let server: Server;
  let port: number;
  const warnings: Array<Record<string, unknown>> = [];
  const limits: HttpLimits = {
    ...DEFAULT_HTTP_LIMITS,
    headersTimeoutMs: 500,
    requestTimeoutMs: 800,
    checkIntervalMs: 100,
    maxConnections: 3,
  };

  before(async () => {
    const database = await testDatabase();
    server = await listen(
      await createApp({ db: database.forRole('api'), logger: pino({ level: 'silent' }) }),
      0,
      '127.0.0.1',
      limits,
    );
    port = (server.address() as AddressInfo).port;
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line)) });
    logDroppedConnections(server, logger, limits.maxConnections);
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('listens with 10 s for headers, 15 s for a request, 5 s keep-alive, checked every second, and 1024 connections by default', async () => {
    expect(DEFAULT_HTTP_LIMITS).to.deep.equal({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 15_000,
      keepAliveTimeoutMs: 5_000,
      checkIntervalMs: 1_000,
      maxConnections: 1024,
      maxConnectionsPerAddress: 64,
    });
    const database = await testDatabase();
    const defaults = await listen(
      await createApp({ db: database.forRole('api'), logger: pino({ level: 'silent' }) }),
      0,
      '127.0.0.1',
    );
    try {
      // (the 15 s request time-out is kept per request, so one operation can lift it: Node's server-wide one is off)
      expect(defaults).to.include({
        headersTimeout: 10_000,
        requestTimeout: 0,
        keepAliveTimeout: 5_000,
        maxConnections: 1024,
      });
      expect((defaults as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval).to.equal(
        1_000,
      );
    } finally {
      defaults.close();
    }
    expect(httpLimitsFromEnv({}).maxConnections).to.equal(1024);
    expect(httpLimitsFromEnv({ FRS_MAX_CONNECTIONS: '50' }).maxConnections).to.equal(50);
    expect(httpLimitsFromEnv({ FRS_MAX_CONNECTIONS: '0' }).maxConnections).to.equal(0);
    expect(() => httpLimitsFromEnv({ FRS_MAX_CONNECTIONS: 'lots' })).to.throw(
      ConfigError,
      /FRS_MAX_CONNECTIONS must be a whole number/,
    );
  });

  it('closes a connection whose headers trickle in (slowloris) once the headers time-out has passed, with 408', async () => {
    const { socket, closed, text } = await connect(port);
    const started = Date.now();
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    // one byte of an endless header every 50 ms
    const trickle = setInterval(() => socket.writable && socket.write('X-Slow: a\r\n'.slice(0, 1)), 50);
    try {
      const at = await closedWithin(closed, 3000);
      expect(at, 'closed by the server').to.be.a('number');
      // the time-out (500 ms) plus at most one check interval (100 ms), and a little for a busy machine
      expect(at! - started).to.be.within(450, 1200);
      const answer = parseAnswer(text());
      expect(answer.status).to.equal(408);
      expect(answer.headers).to.include({ connection: 'close', 'content-length': '0', 'cache-control': 'no-store' });
      expect(answer.headers['x-request-id']).to.match(/^req_/);
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
  });

  it('closes the connection after answering a request that carries a body, instead of draining it', async () => {
    // a chunked body that never ends, and a Content-Length never sent whole: the answer comes, then the close
    for (const head of ['Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n', 'Content-Length: 100000\r\n\r\nhello']) {
      const { socket, closed, text } = await connect(port);
      try {
        socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n${head}`);
        const at = await closedWithin(closed, 400);
        expect(at, `${head.split(':')[0]}: closed by the server before the request time-out`).to.be.a('number');
        const answer = parseAnswer(text());
        expect(answer.status).to.equal(200);
        expect(answer.headers.connection).to.equal('close');
        expect(JSON.parse(answer.body)).to.deep.equal({ status: 'ok' });
      } finally {
        socket.destroy();
      }
    }
    // without a body the connection stays open for the next request
    const { socket, closed, text } = await connect(port);
    try {
      socket.write(
        'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n',
      );
      expect(await closedWithin(closed, 300), 'kept alive').to.equal(undefined);
      expect(text().match(/HTTP\/1.1 200 OK/g)).to.have.length(2);
      expect(text())
        .to.match(/connection: keep-alive/i)
        .and.not.match(/connection: close/i);
    } finally {
      socket.destroy();
    }
  });

  it('answers an Expect other than 100-continue with 417 in the error body and closes the connection, its body unread (L3c)', async () => {
    const { socket, closed, text } = await connect(port);
    try {
      // a body announced and never sent whole: without the answer it would hold the connection past every time-out
      socket.write(
        'POST /v1/bookings HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"a":',
      );
      const trickle = setInterval(() => socket.writable && socket.write(' '), 50);
      try {
        expect(await closedWithin(closed, 600), 'closed by the server before the request time-out (800 ms)').to.be.a(
          'number',
        );
      } finally {
        clearInterval(trickle);
      }
      const answer = parseAnswer(text());
      expect(answer.status).to.equal(417);
      expect(answer.headers).to.include({
        connection: 'close',
        'cache-control': 'no-store',
        'content-type': 'application/json; charset=utf-8',
      });
      const body = JSON.parse(answer.body);
      expect(body).to.deep.equal({
        error: {
          code: 'expectation_failed',
          message: 'The only expectation this server meets is Expect: 100-continue.',
          reason: 'Expect',
          requestId: answer.headers['x-request-id'],
        },
      });
      expect(validators.ErrorResponse(body), JSON.stringify(validators.ErrorResponse.errors)).to.equal(true);
    } finally {
      socket.destroy();
    }
    // 100-continue is met: the app answers
    const plain = await connect(port);
    try {
      plain.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n');
      await sleep(200);
      expect(plain.text()).to.match(/^HTTP\/1.1 100 Continue\r\n\r\nHTTP\/1.1 200 OK/);
    } finally {
      plain.socket.destroy();
    }
  });

  it('closes a connection beyond the cap as soon as it is accepted; the others keep working', async () => {
    const held = [await connect(port), await connect(port), await connect(port)];
    try {
      await sleep(100);
      const extra = await connect(port);
      expect(await closedWithin(extra.closed, 1000), 'the fourth connection is closed').to.be.a('number');
      expect(extra.text(), 'with no answer').to.equal('');
      // the operator is told, naming the setting (the client cannot be)
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.include({
        dropped: 1,
        maxConnections: 3,
        msg: 'connections closed unanswered: FRS_MAX_CONNECTIONS (3) were open',
      });
      for (const { socket, closed } of held)
        (expect(await closedWithin(closed, 10), 'the first three stay open').to.equal(undefined),
          socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'));
      await sleep(200);
      for (const { text } of held) expect(parseAnswer(text()).status).to.equal(200);
    } finally {
      for (const { socket } of held) socket.destroy();
    }
    // once they are gone, a new connection is served again
    await sleep(100);
    const again = await connect(port);
    again.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    await closedWithin(again.closed, 2000);
    expect(parseAnswer(again.text()).status).to.equal(200);
  });
});

describe('HTTP limits: connections per client address', () => {
  it('closes, unanswered, a connection of an address that holds its share; other addresses are served', async () => {
    const database = await testDatabase();
    const limits: HttpLimits = { ...DEFAULT_HTTP_LIMITS, maxConnectionsPerAddress: 2 };
    const server = await listen(
      await createApp({ db: database.forRole('api'), logger: pino({ level: 'silent' }) }),
      0,
      '127.0.0.1',
      limits,
    );
    const warnings: Array<Record<string, unknown>> = [];
    logDroppedConnections(
      server,
      pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line)) }),
      limits.maxConnections,
      2,
    );
    const { port } = server.address() as AddressInfo;
    const held = [await connect(port, '127.0.0.2'), await connect(port, '127.0.0.2')];
    try {
      await sleep(100);
      const third = await connect(port, '127.0.0.2');
      expect(await closedWithin(third.closed, 1000), 'the third connection of 127.0.0.2 is closed').to.be.a('number');
      expect(third.text()).to.equal('');
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.include({ address: '127.0.0.2', maxConnectionsPerAddress: 2 });
      // another address is served meanwhile, and so are the two held
      const other = await connect(port, '127.0.0.3');
      other.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      await closedWithin(other.closed, 2000);
      expect(parseAnswer(other.text()).status).to.equal(200);
      for (const { socket } of held) socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await sleep(200);
      for (const { text } of held) expect(parseAnswer(text()).status).to.equal(200);
    } finally {
      for (const { socket } of held) socket.destroy();
      server.closeAllConnections();
      server.close();
    }
  });

  it('counts an IPv6 client by its /64, as the rate limits do: a host picking fresh addresses of its /64 meets the cap', async () => {
    // This machine cannot hold two addresses of one IPv6 /64 to connect from (loopback is ::1/128), so the connections
    // are real ones over 127.0.0.1 and the server's view of each peer is set, before the cap's listener sees it, to
    // the IPv6 address the test names: the cap's own code counts them.
    const database = await testDatabase();
    const limits: HttpLimits = { ...DEFAULT_HTTP_LIMITS, maxConnectionsPerAddress: 2 };
    const server = await listen(
      await createApp({ db: database.forRole('api'), logger: pino({ level: 'silent' }) }),
      0,
      '127.0.0.1',
      limits,
    );
    const warnings: Array<Record<string, unknown>> = [];
    logDroppedConnections(
      server,
      pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line)) }),
      limits.maxConnections,
      2,
    );
    const peers: string[] = [];
    server.prependListener('connection', (socket: net.Socket) =>
      Object.defineProperty(socket, 'remoteAddress', { value: peers.shift() }),
    );
    const { port } = server.address() as AddressInfo;
    const from = async (peer: string) => {
      peers.push(peer);
      const connection = await connect(port);
      await sleep(50);
      return connection;
    };
    // two addresses of 2001:db8:1:2::/64 (one written short, one in full)
    const held = [await from('2001:db8:1:2::a'), await from('2001:0db8:0001:0002:ffff:0:0:b')];
    try {
      const third = await from('2001:db8:1:2:4:5:6:7');
      expect(await closedWithin(third.closed, 1000), 'a third address of the same /64 is closed').to.be.a('number');
      expect(third.text()).to.equal('');
      expect(warnings.map((w) => w.address)).to.deep.equal(['2001:db8:1:2::/64']);
      // the next /64 is another client, served
      const other = await from('2001:db8:1:3::a');
      other.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      await closedWithin(other.closed, 2000);
      expect(parseAnswer(other.text()).status).to.equal(200);
      for (const { socket } of held) socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      await sleep(200);
      for (const { text } of held) expect(parseAnswer(text()).status).to.equal(200);
    } finally {
      for (const { socket } of held) socket.destroy();
      server.closeAllConnections();
      server.close();
    }
    // The key both limits use: an IPv4 address (and its IPv4-mapped form) as itself, IPv6 by its /64.
    expect(
      ['192.0.2.7', '::ffff:192.0.2.7', '2001:db8::1', '2001:db8:0:0:ffff::2', '2001:db8:0:1::1'].map(addressKey),
    ).to.deep.equal(['192.0.2.7', '192.0.2.7', '2001:db8:0:0::/64', '2001:db8:0:0::/64', '2001:db8:0:1::/64']);
  });

  it('is set by FRS_MAX_CONNECTIONS_PER_ADDRESS (64 by default, 0 lifts it)', () => {
    expect(httpLimitsFromEnv({}).maxConnectionsPerAddress).to.equal(64);
    expect(httpLimitsFromEnv({ FRS_MAX_CONNECTIONS_PER_ADDRESS: '0' }).maxConnectionsPerAddress).to.equal(0);
    expect(() => httpLimitsFromEnv({ FRS_MAX_CONNECTIONS_PER_ADDRESS: '-1' })).to.throw(
      ConfigError,
      /FRS_MAX_CONNECTIONS_PER_ADDRESS must be a whole number/,
    );
  });
});

describe('load shedding', () => {
  /** Writes each request on a connection of its own, then blocks the event loop for `stallMs`, then reads the answers. */
  async function answersAfterStall(port: number, paths: string[], stallMs: number) {
    const connections = await Promise.all(paths.map(() => connect(port)));
    await sleep(50); // the server has accepted them
    for (const [i, { socket }] of connections.entries())
      socket.write(`GET ${paths[i]} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const until = Date.now() + stallMs;
    while (Date.now() < until); // the process's event loop stalls, as under a load it cannot keep up with
    await Promise.all(connections.map(({ closed }) => closedWithin(closed, 5000)));
    return connections.map(({ text }) => parseAnswer(text()));
  }

  async function start(shedEventLoopLagMs: number) {
    const database = await testDatabase();
    const server = await listen(
      await createApp({ db: database.forRole('api'), logger: pino({ level: 'silent' }), shedEventLoopLagMs }),
      0,
      '127.0.0.1',
    );
    const port = (server.address() as AddressInfo).port;
    await fetch(`http://127.0.0.1:${port}/v1/me`); // the first request starts the lag sampler
    await sleep(100);
    return { server, port };
  }

  it('answers a request that waited behind a 300 ms stall with 503 overloaded and Retry-After; the probes and later requests go through', async () => {
    expect(DEFAULT_SHED_LAG_MS).to.equal(200);
    expect(shedLagFromEnv({})).to.equal(200);
    expect(shedLagFromEnv({ FRS_SHED_EVENT_LOOP_LAG_MS: '0' })).to.equal(0);
    expect(() => shedLagFromEnv({ FRS_SHED_EVENT_LOOP_LAG_MS: '-1' })).to.throw(
      ConfigError,
      /FRS_SHED_EVENT_LOOP_LAG_MS/,
    );
    const { server, port } = await start(DEFAULT_SHED_LAG_MS);
    try {
      const [me, health, ready] = await answersAfterStall(port, ['/v1/me', '/healthz', '/readyz'], 300);
      expect(me.status).to.equal(503);
      expect(me.headers['retry-after']).to.equal('1');
      expect(me.headers['x-request-id']).to.match(/^req_/);
      const body = JSON.parse(me.body);
      expect(validators.ErrorResponse(body), JSON.stringify(validators.ErrorResponse.errors)).to.equal(true);
      expect(body.error).to.deep.equal({
        code: 'overloaded',
        message: 'The service is overloaded just now. Try again in 1 second(s).',
        requestId: me.headers['x-request-id'],
      });
      expect(health.status).to.equal(200);
      expect(ready.status).to.equal(200);
      // the loop keeps up again: the next request is served (here: 401, no key)
      await sleep(150);
      expect((await fetch(`http://127.0.0.1:${port}/v1/me`)).status).to.equal(401);
    } finally {
      server.close();
    }
  });

  it('sheds nothing when switched off (0)', async () => {
    const { server, port } = await start(0);
    try {
      const [me] = await answersAfterStall(port, ['/v1/me'], 300);
      expect(me.status).to.equal(401);
    } finally {
      server.close();
    }
  });
});
