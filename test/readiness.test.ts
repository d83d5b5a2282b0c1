import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { expect } from 'chai';
import type { Knex } from 'knex';
import pino from 'pino';
import { testDatabase } from './support/database.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { createApp } from '../src/api/app.js';
import { listen } from '../src/http/edge.js';
import { DEFAULT_HTTP_LIMITS } from '../src/http/http-limits.js';
import { createKnex, SERVICE_TIMEOUTS } from '../src/db/database.js';
import { ReadinessProbe } from '../src/observability/health.js';
import { ServiceMetrics, startMetricsListener } from '../src/observability/metrics.js';

// /readyz is public: a flood of probes must cost the database at most one statement a second, and the answer must
// still follow the database within a second or two. The statements are counted on the wire: a proxy between the
// API's pool and PostgreSQL reads the client's protocol messages and counts every statement sent ('Q', a simple
// query; 'E', an execute of the extended protocol), whatever sent it.

/** The statements sent through a proxy, as the SQL text of each simple query (`<execute>` for an extended one). */
function statementCounter() {
  const statements: string[] = [];
  const pending = new Map<number, { buffer: Buffer; started: boolean }>();
  const onClientBytes = (connection: number, chunk: Buffer) => {
    const state = pending.get(connection) ?? { buffer: Buffer.alloc(0), started: false };
    pending.set(connection, state);
    state.buffer = Buffer.concat([state.buffer, chunk]);
    for (;;) {
      // The startup message has no type byte; every message after it is a type byte and a length that counts itself.
      const header = state.started ? 5 : 4;
      if (state.buffer.length < header) break;
      const length = state.started ? state.buffer.readInt32BE(1) + 1 : state.buffer.readInt32BE(0);
      if (state.buffer.length < length) break;
      const type = state.started ? String.fromCharCode(state.buffer[0]) : '';
      if (type === 'Q') statements.push(state.buffer.toString('utf8', 5, length - 1));
      if (type === 'E') statements.push('<execute>');
      state.buffer = state.buffer.subarray(length);
      state.started = true;
    }
  };
  return { statements, onClientBytes };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function readyz(url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: await res.json() };
}

describe('/readyz under a flood of probes', function () {
  this.timeout(30_000);
  let proxy: TcpProxy;
  let counter: ReturnType<typeof statementCounter>;
  let db: Knex;
  let server: Server;
  let metricsServer: Server;
  let apiUrl: string;
  let metricsUrl: string;
  let proxiedUrl: string;

  beforeEach(async () => {
    const database = await testDatabase();
    counter = statementCounter();
    proxy = await startTcpProxy(Number(new URL(database.url).port), { onClientBytes: counter.onClientBytes });
    const url = new URL(database.url);
    url.port = String(proxy.port);
    proxiedUrl = url.toString();
    // The API's pool as in production (its time-outs), but connecting as the owner: no SET ROLE to count.
    db = createKnex(proxiedUrl, 10, undefined, SERVICE_TIMEOUTS.api);
    // Knex asks a new handle's first connection for the server's version, once: not a probe's cost.
    await db.raw('SELECT 1');
    counter.statements.length = 0;
    const logger = pino({ level: 'silent' });
    // (the flood stands for many clients' probes: from this one address it would meet the per-address connection cap)
    server = await listen(await createApp({ db, logger }), 0, '127.0.0.1', {
      ...DEFAULT_HTTP_LIMITS,
      maxConnectionsPerAddress: 0,
    });
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    metricsServer = await startMetricsListener({
      metrics: new ServiceMetrics({ defaultMetrics: false }),
      db,
      logger,
      port: 0,
      host: '127.0.0.1',
    });
    metricsUrl = `http://127.0.0.1:${(metricsServer.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    server.close();
    metricsServer.close();
    await db.destroy();
    await proxy.close();
  });

  it('200 probes at once, then probes without pause for 3 s, on both listeners, cost one statement a second', async () => {
    const started = Date.now();
    const flood = await Promise.all(Array.from({ length: 200 }, (_, i) => readyz(i % 2 ? apiUrl : metricsUrl)));
    expect(flood.map((r) => r.status)).to.deep.equal(Array(200).fill(200));
    const floodSeconds = (Date.now() - started) / 1000;
    // One check answers them all, unless the flood itself takes longer than a result may be kept.
    expect(
      counter.statements.length,
      `the 200 concurrent probes (${floodSeconds} s): ${counter.statements.slice(0, 6).join(' | ')}`,
    ).to.be.within(1, Math.ceil(floodSeconds));
    let probes = 0;
    while (Date.now() - started < 3000) {
      const answers = await Promise.all([readyz(apiUrl), readyz(metricsUrl), readyz(apiUrl), readyz(metricsUrl)]);
      for (const answer of answers) expect(answer.status).to.equal(200);
      probes += answers.length;
    }
    const seconds = (Date.now() - started) / 1000;
    console.log(
      `      ${200 + probes} probes in ${seconds.toFixed(1)} s: ${counter.statements.length} statements: ${counter.statements.join(' | ')}`,
    );
    expect(probes).to.be.above(100);
    // The first check, then one per second at most: 4 over a little more than 3 s.
    expect(counter.statements.length).to.be.within(2, 1 + Math.ceil(seconds));
    // The schema is read once, by the first check; the later ones only ask whether the database answers.
    expect(counter.statements[0]).to.equal('SELECT name FROM knex_migrations');
    expect(counter.statements.slice(1)).to.deep.equal(Array(counter.statements.length - 1).fill('SELECT 1'));
  });

  it('turns 503 not_ready within two seconds of the database going away, and 200 within two seconds of its return', async () => {
    expect((await readyz(apiUrl)).status).to.equal(200);
    proxy.cut();
    const cutAt = Date.now();
    let answer = await readyz(apiUrl);
    while (answer.status === 200 && Date.now() - cutAt < 5000) answer = (await sleep(50), await readyz(apiUrl));
    const downMs = Date.now() - cutAt;
    expect(answer.status).to.equal(503);
    expect(answer.body.error).to.include({ code: 'not_ready', reason: 'database' });
    expect((await readyz(metricsUrl)).status, 'the metrics listener shares the result').to.equal(503);
    counter.statements.length = 0;
    proxy.restore();
    const restoredAt = Date.now();
    answer = await readyz(apiUrl);
    while (answer.status !== 200 && Date.now() - restoredAt < 5000) answer = (await sleep(50), await readyz(apiUrl));
    const upMs = Date.now() - restoredAt;
    console.log(`      not ready ${downMs} ms after the cut, ready ${upMs} ms after the return`);
    expect(answer).to.deep.equal({ status: 200, body: { status: 'ready' } });
    expect(downMs).to.be.below(2000);
    expect(upMs).to.be.below(2000);
    // After an outage the schema is read again (another database may have taken this one's place).
    expect(counter.statements[0]).to.equal('SELECT name FROM knex_migrations');
  });

  it('a connection that comes after the time-out runs no statement', async () => {
    // a pool of one connection, held by someone else until after the probe's time-out
    const single = createKnex(proxiedUrl, 1);
    try {
      const held = await single.client.acquireConnection();
      counter.statements.length = 0;
      const probe = new ReadinessProbe(single, { timeoutMs: 200 });
      const answer = await probe.check();
      expect(answer).to.deep.include({ ready: false, check: 'database' });
      await single.client.releaseConnection(held);
      await sleep(300);
      expect(counter.statements, 'statements after the time-out').to.deep.equal([]);
    } finally {
      await single.destroy();
    }
  });
});

describe('a readiness check that outlasts its time-out', () => {
  it('is cancelled in the database, not left running', async () => {
    const { db } = await testDatabase();
    // knex_migrations locked by a transaction of the test: the check's read of it waits for the lock
    const locker = await db.transaction();
    const probeDb = createKnex((await testDatabase()).url, 2);
    try {
      await locker.raw('LOCK TABLE knex_migrations IN ACCESS EXCLUSIVE MODE');
      const probe = new ReadinessProbe(probeDb, { timeoutMs: 300 });
      const started = Date.now();
      const answer = await probe.check();
      expect(Date.now() - started).to.be.below(1000);
      expect(answer).to.deep.equal({
        ready: false,
        check: 'database',
        message: 'The database did not answer within 300 ms.',
      });
      const waiting = async () =>
        (
          await db.raw(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'SELECT name FROM knex_migrations' AND state = 'active'`,
          )
        ).rows[0].n;
      for (let i = 0; i < 20 && (await waiting()) > 0; i++) await sleep(50);
      expect(await waiting(), 'readiness statements still running').to.equal(0);
    } finally {
      await locker.rollback();
      await probeDb.destroy();
    }
  });
});
