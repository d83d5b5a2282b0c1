import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ROOT_DIR } from '../src/config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { startEmbeddedPostgres, stopEmbeddedPostgres, type EmbeddedDatabase } from '../src/db/embedded.js';
import { createApiKey, createWorkspace } from '../src/core/workspaces.js';
import { createEndpoint } from '../src/core/webhooks/endpoints.js';
import { recordEvent } from '../src/webhooks/record-event.js';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { createApp } from '../src/api/app.js';
import { listen } from '../src/http/edge.js';
import { expectDocumented, PUBLIC_API, type ApiResponse } from './support/http.js';
import { testDatabase } from './support/database.js';
import { proxiedTestDatabase } from './support/tcp-proxy.js';
import { freePort } from './support/ports.js';
import { startReceiver, type Receiver } from './support/receiver.js';
import { bookingConfirmedData, sleep } from './webhooks/support.js';
import { idOf, operator } from './support/actors.js';
import { processConfig } from '../src/config.js';

// The database crashes under load (`pg_ctl stop -m immediate`, as a power cut or an OOM kill would leave it) and comes
// back 8 seconds later. The service runs as `npm start` runs it (the API and the worker in one process, on a
// DATABASE_URL), on a PostgreSQL cluster of this test's own: crashing the suite's shared one would fail the other tests.
// While the database is away every call must be a documented 503 with Retry-After, answered within 5 s; the process
// must stay up and log the outage once, not once per try; within 10 s of the database's return every call is 200
// again; and every event committed before, during (none can be) or after the outage is delivered, signed.

const OUTAGE_MS = 8000;
const OPERATIONS = ['/v1/me', '/v1/fleet/summary', '/v1/receivables'];
const CLIENTS = 6;

interface Call {
  path: string;
  startedAt: number;
  ms: number;
  status: number;
  retryAfter: string | null;
  problem?: string;
}

describe('a database outage under load', function () {
  this.timeout(180_000);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-outage-'));
  // As root the cluster runs as the postgres user, who must be able to enter the folder.
  fs.chmodSync(dataDir, 0o755);
  const clusterDir = path.join(dataDir, 'postgres');
  let cluster: EmbeddedDatabase | undefined;
  let database: Database | undefined;
  let service: ChildProcess | undefined;
  let receiver: Receiver | undefined;

  after(async () => {
    if (service && service.exitCode === null && service.signalCode === null) {
      service.kill('SIGTERM');
      await new Promise((resolve) => service!.once('exit', resolve));
    }
    await receiver?.close();
    await database?.close();
    await cluster?.stop().catch(() => undefined);
    await stopEmbeddedPostgres(clusterDir).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 503 with Retry-After within 5 s while it is away, 200 within 10 s of its return, and loses no event', async () => {
    const pgPort = await freePort();
    cluster = await startEmbeddedPostgres(clusterDir, pgPort, 'fleet');
    database = await openDatabase({ url: cluster.url, schema: 'migrate', poolMax: 4 });
    const { db } = database;
    const workspace = await createWorkspace(db, operator, { slug: 'outage' });
    const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, 'outage') });
    receiver = await startReceiver(() => ({ status: 204, delayMs: 30 }));
    const endpointUrl = receiver.endpointUrl();
    receiver.setSecret(
      endpointUrl,
      (
        await createEndpoint(db, operator, {
          workspaceId: await idOf(db, 'outage'),
          url: endpointUrl,
          policy: processConfig().destinationPolicy,
        })
      ).secret,
    );

    const port = await freePort();
    let output = '';
    service = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT_DIR, 'src', 'main.ts')], {
      cwd: ROOT_DIR,
      // (the per-workspace limits off: six clients calling as fast as they can are far past 100 requests a second, and
      // this test is about what an outage does, not about their 429s)
      env: {
        ...process.env,
        DATABASE_URL: cluster.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        FRS_METRICS_PORT: '0',
        FRS_ADMIN_PORT: '0',
        LOG_LEVEL: 'info',
        FRS_SEED_DEMO: '0',
        FRS_API_RATE_LIMIT: '0',
        FRS_API_CONCURRENCY: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    service.stdout!.on('data', (chunk) => (output += chunk));
    service.stderr!.on('data', (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => service!.once('exit', resolve));
    for (const deadline = Date.now() + 60_000; !/Ready .* after launch/.test(output); await sleep(50)) {
      if (Date.now() > deadline || service.exitCode !== null) throw new Error(`the service did not start:\n${output}`);
    }
    const base = `http://127.0.0.1:${port}`;

    // Six clients calling three operations in turn, and a writer recording an event every 20 ms, until told to stop.
    const calls: Call[] = [];
    let loading = true;
    const client = async (offset: number) => {
      for (let i = offset; loading; i++) {
        const pathname = OPERATIONS[i % OPERATIONS.length];
        const startedAt = Date.now();
        const call: Call = { path: pathname, startedAt, ms: 0, status: 0, retryAfter: null };
        try {
          const res = await fetch(base + pathname, {
            headers: { authorization: `Bearer ${key}` },
            signal: AbortSignal.timeout(15_000),
          });
          const text = await res.text();
          Object.assign(call, {
            ms: Date.now() - startedAt,
            status: res.status,
            retryAfter: res.headers.get('retry-after'),
          });
          const response: ApiResponse = { status: res.status, headers: res.headers, text, body: JSON.parse(text) };
          expectDocumented(PUBLIC_API, 'GET', pathname, response);
          if (res.status === 200 && pathname === '/v1/me') expect(response.body.workspace.slug).to.equal('outage');
          if (res.status === 503) expect(response.body.error.code).to.equal('unavailable');
        } catch (err) {
          call.ms = Date.now() - startedAt;
          call.problem = (err as Error).message;
        }
        calls.push(call);
        if (call.status !== 200) await sleep(20);
      }
    };
    const committed: string[] = [];
    let writeFailures = 0;
    const writer = async () => {
      while (loading) {
        try {
          const { eventId } = await recordEvent(db, {
            workspaceId: workspace.id,
            event: 'booking.confirmed',
            data: bookingConfirmedData(),
            source: 'publish',
          });
          committed.push(eventId);
        } catch {
          writeFailures++; // the database was away: nothing was committed (the writer did not reach it)
        }
        await sleep(20);
      }
    };
    const load = [...Array.from({ length: CLIENTS }, (_, i) => client(i)), writer()];

    await sleep(1500);
    const crashedAt = Date.now();
    await stopEmbeddedPostgres(clusterDir, 'immediate');
    const committedBefore = committed.length;
    await sleep(OUTAGE_MS);
    const restartingAt = Date.now();
    cluster = await startEmbeddedPostgres(clusterDir, pgPort, 'fleet');
    const backAt = Date.now();
    await sleep(12_000);
    loading = false;
    await Promise.all(load);

    // Every call is documented; none is a 500, none hangs; the outage's answers are 503 with Retry-After, fast.
    expect(
      calls.filter((c) => c.problem),
      JSON.stringify(calls.filter((c) => c.problem).slice(0, 3)),
    ).to.deep.equal([]);
    expect(calls.filter((c) => c.status >= 500 && c.status !== 503)).to.deep.equal([]);
    const during = calls.filter((c) => c.startedAt > crashedAt + 100 && c.startedAt + c.ms < restartingAt);
    expect(during.length).to.be.above(50);
    expect(during.filter((c) => c.status !== 503)).to.deep.equal([]);
    expect(new Set(during.map((c) => c.retryAfter))).to.deep.equal(new Set(['5']));
    const slowest = Math.max(...calls.filter((c) => c.status === 503).map((c) => c.ms));
    expect(slowest).to.be.below(5000);
    // Back to 200 within 10 s of the database's return (counted from the start command), and 200 from then on.
    const lastRefused = Math.max(...calls.filter((c) => c.status !== 200).map((c) => c.startedAt + c.ms));
    expect(lastRefused - restartingAt).to.be.below(10_000);
    const afterwards = calls.filter((c) => c.startedAt > lastRefused);
    expect(afterwards.length).to.be.above(50);
    expect(afterwards.every((c) => c.status === 200)).to.equal(true);

    // The process stayed up.
    expect(service.exitCode).to.equal(null);
    expect(service.signalCode).to.equal(null);

    // Every committed event is delivered, signed: the deliveries are read once the database is back.
    expect(committedBefore).to.be.above(10);
    expect(committed.length).to.be.above(committedBefore + 10);
    const deliveries: Array<{ id: string; event_id: string }> = await db('deliveries')
      .whereIn('event_id', committed)
      .select('id', 'event_id');
    expect(new Set(deliveries.map((d) => d.event_id)).size).to.equal(committed.length);
    for (const deadline = Date.now() + 60_000; ; await sleep(200)) {
      const received = new Set(receiver.requests.filter((r) => r.verified?.ok).map((r) => r.deliveryId));
      const missing = deliveries.filter((d) => !received.has(d.id));
      if (missing.length === 0) break;
      if (Date.now() > deadline)
        throw new Error(`${missing.length} of ${deliveries.length} committed events were not delivered`);
    }
    expect(receiver.requests.filter((r) => !r.verified?.ok)).to.deep.equal([]);

    // The outage is logged once per loop that met it, not once per try; nothing is logged as a defect.
    const lines = output
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string });
    const outageLines = lines.filter((l) => l.msg.includes('database unavailable'));
    expect(outageLines.length).to.be.above(0);
    expect(new Set(outageLines.map((l) => l.msg)).size).to.equal(outageLines.length);
    expect(lines.filter((l) => /unhandled|failed; retrying/.test(l.msg))).to.deep.equal([]);
    expect(lines.some((l) => /delivery sweep: database available again/.test(l.msg))).to.equal(true);

    const calledDuring = calls.filter((c) => c.startedAt >= crashedAt && c.startedAt < backAt);
    console.log(
      `      outage ${OUTAGE_MS} ms; ${calls.length} calls (${calledDuring.length} while it was away, slowest 503 ${slowest} ms); ` +
        `all 200 again ${lastRefused - restartingAt} ms after the database was started again (pg_ctl start took ${backAt - restartingAt} ms); ` +
        `${committed.length} events committed (${committedBefore} before the crash, ${writeFailures} writes refused), ${deliveries.length} delivered, 0 lost`,
    );

    service.kill('SIGTERM');
    expect(await exited).to.equal(0);
  });
});

describe('a database that goes silent without closing (a lost host, a network split)', function () {
  this.timeout(60_000);

  it('answers 503 with Retry-After within 5 s, gives up the stuck connections, and answers 200 again once it speaks', async () => {
    const { db } = await testDatabase();
    const slug = `silent-${process.pid}-${Date.now().toString(36)}`;
    await createWorkspace(db, operator, { slug });
    const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, slug) });
    // The API's own pool (its role, its time limits) reaches the database through a proxy that can stop forwarding.
    const { database, proxy, close } = await proxiedTestDatabase(3);
    const app = await createApp({ db: database.forRole('api'), logger: pino({ level: 'silent' }) });
    const server = await listen(app, 0, '127.0.0.1');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const call = async (pathname: string) => {
      const started = Date.now();
      const res = await fetch(base + pathname, {
        headers: { authorization: `Bearer ${key}` },
        signal: AbortSignal.timeout(20_000),
      });
      const text = await res.text();
      const response: ApiResponse = { status: res.status, headers: res.headers, text, body: JSON.parse(text) };
      expectDocumented(PUBLIC_API, 'GET', pathname, response);
      return {
        status: res.status,
        ms: Date.now() - started,
        retryAfter: res.headers.get('retry-after'),
        code: response.body.error?.code,
      };
    };
    try {
      // pooled connections that will be stuck when the database goes silent
      expect((await Promise.all(OPERATIONS.map(call))).map((c) => c.status)).to.deep.equal([200, 200, 200]);
      proxy.freeze();
      const silent = await Promise.all([...OPERATIONS, ...OPERATIONS].map(call));
      for (const answer of silent) expect(answer).to.include({ status: 503, retryAfter: '5', code: 'unavailable' });
      const slowest = Math.max(...silent.map((c) => c.ms));
      expect(slowest).to.be.below(5000);
      proxy.thaw();
      const thawedAt = Date.now();
      let answer = await call('/v1/me');
      while (answer.status !== 200 && Date.now() - thawedAt < 10_000) answer = await call('/v1/me');
      expect(answer.status).to.equal(200);
      expect((await Promise.all(OPERATIONS.map(call))).map((c) => c.status)).to.deep.equal([200, 200, 200]);
      console.log(
        `      silent database: ${silent.length} calls answered 503 within ${slowest} ms; 200 again ${Date.now() - thawedAt} ms after it spoke`,
      );
    } finally {
      server.close();
      await close();
    }
  });
});
