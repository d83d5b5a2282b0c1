import { expect } from 'chai';
import pino from 'pino';
import { openDatabase, type Database } from '../../src/db/database.js';
import { parseLsn, ReadRouting, replicaName, type ReadPool } from '../../src/db/read-routing.js';
import { ConfigError, readMaxLagMsFromEnv, readUrlsFromEnv } from '../../src/config.js';
import { keepUpkeepInlineIn, testDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { ServiceMetrics } from '../../src/observability/metrics.js';
import { createApiKey, revokeApiKey } from '../../src/core/workspaces.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { startApi, type TestApi } from '../support/api.js';
import type { ApiResponse } from '../support/http.js';
import { fixture, type Fixture } from '../support/fixtures.js';
import { startReplicationPair, type ReplicationPair } from '../support/replication.js';
import { idOf, operator } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// Reads on a real hot standby (src/db/read-routing.ts): a primary and a standby streaming from it on loopback
// (test/support/replication.ts), the API with and without DATABASE_READ_URL's routing, every answer checked against the
// document. The lag bound is 1 s here, so that a stalled replay shows within the 2 s the switch is allowed.

const MAX_LAG_MS = 1000;
const GETS = [
  '/v1/fleets',
  '/v1/fleet/summary',
  '/v1/bookings/summary',
  '/v1/finance/overview',
  '/v1/receivables',
  '/v1/vehicles',
  '/v1/operations/today',
];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const staleness = (res: ApiResponse) => Number(res.headers.get('data-max-staleness-ms'));

describe('read replicas: reads on a hot standby within the lag bound, everything else on the primary', function () {
  this.timeout(120_000);
  let pair: ReplicationPair | undefined;
  let database: Database | undefined;
  let reads: ReadRouting | undefined;
  let routed: TestApi | undefined;
  let plain: TestApi | undefined;
  let metrics: ServiceMetrics;
  let f: Fixture;
  let key: string;
  const now = new Date('2026-11-22T08:30:00.000Z');

  before(async () => {
    pair = await startReplicationPair('frs_replicas');
    await keepUpkeepInlineIn(pair.primaryUrl);
    database = await openDatabase({ url: pair.primaryUrl, schema: 'migrate' });
    f = await fixture(database.db);
    const car = await f.vehicle({ plate: 'DXB 1' });
    await f.vehicle({ plate: 'DXB 2', state: 'in_service' });
    await f.booking({
      vehicleId: car,
      status: 'active',
      pickupAt: '2026-11-21T08:00:00Z',
      dropoffAt: '2026-11-24T08:00:00Z',
      amount: 45_000,
    });
    await f.invoice({ total: 45_000, dueDate: '2026-11-20' });
    key = (await createApiKey(database.db, operator, { workspaceId: f.ws.id })).key;
    await pair.caughtUp();
    metrics = new ServiceMetrics({ defaultMetrics: false });
    reads = await ReadRouting.start({
      database,
      primary: database.forRole('api'),
      urls: [pair.standbyUrl],
      maxLagMs: MAX_LAG_MS,
      logger: pino({ level: 'silent' }),
      metrics,
    });
    // (no workspace rate limit: the clients below ask as fast as they can)
    const limits = {
      workspace: { ratePerSecond: 0, concurrency: 0 },
      authFailures: { perMinute: 0, trustedProxies: [] },
    };
    routed = await startApi({ now, database, reads, keyCache: true, limits });
    plain = await startApi({ now, database, limits });
    // Building the apps (the document's validators) held the event loop for seconds, and no probe ran meanwhile: the
    // standby's data counted as that much older, and the primary answered. The next probes bring it back.
    for (const until = Date.now() + 2000; reads!.choose().name === 'primary';) {
      expect(Date.now(), 'the standby is chosen again within 2 s').to.be.below(until);
      await sleep(10);
    }
  });
  after(async () => {
    // (the clusters are stopped whatever closing the rest throws)
    try {
      await routed?.close();
      await plain?.close();
      await reads?.close();
      await database?.close();
    } finally {
      await pair?.stop();
    }
  });

  const readsBy = async (pool: string) =>
    (await metrics.reads.get()).values.find((v) => v.labels.pool === pool)?.value ?? 0;
  const standbyName = () => reads!.replicaNames[0];

  it("answers reads from the standby (its pg_stat_activity shows the API's statements), with the figures and tags of the primary", async () => {
    const before = await readsBy(standbyName());
    let byStandby = 0;
    for (const path of GETS) {
      const asked = performance.now();
      const [fromStandby, fromPrimary] = [await routed!.get(path, key), await plain!.get(path, key)];
      expect(fromStandby.status, path).to.equal(200);
      expect(fromStandby.body, path).to.deep.equal(fromPrimary.body);
      expect(fromStandby.headers.get('etag'), path).to.equal(fromPrimary.headers.get('etag'));
      // the standby's bound, plus the time the answer took (a pause of a loaded machine may send one to the primary: 0)
      if (staleness(fromStandby) > 0) byStandby++;
      expect(staleness(fromStandby), path).to.be.within(0, MAX_LAG_MS + Math.ceil(performance.now() - asked));
      expect(staleness(fromPrimary), path).to.equal(0);
    }
    expect(byStandby, 'answers the standby gave').to.be.greaterThan(0);
    expect(await readsBy(standbyName())).to.equal(before + byStandby);
    // the standby served them: its sessions ran the answers' statements (each reads by workspace_id), in recovery
    const sessions = await pair!.onStandby<{ n: number; recovery: boolean }>(
      `SELECT count(*)::int AS n, pg_is_in_recovery() AS recovery FROM pg_stat_activity
       WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%workspace_id%'`,
    );
    expect(sessions[0]).to.deep.equal({ n: sessions[0].n, recovery: true });
    expect(sessions[0].n).to.be.greaterThan(0);
    const roles = await pair!.onStandby<{ role: string }>(
      `SELECT rolname AS role FROM pg_roles WHERE rolname = current_database() || '_api'`,
    );
    expect(roles).to.have.length(1);
    expect(
      (await metrics.replicaLag.get()).values.find((v) => v.labels.replica === standbyName())?.value,
    ).to.be.at.most(MAX_LAG_MS / 1000);
  });

  it('spreads reads across the replicas within the bound, round robin', async () => {
    // (the one standby twice: two pools, two names)
    const twice = (await ReadRouting.start({
      database: database!,
      primary: database!.forRole('api'),
      urls: [pair!.standbyUrl, pair!.standbyUrl],
      maxLagMs: MAX_LAG_MS,
      logger: pino({ level: 'silent' }),
    }))!;
    try {
      const [a, b] = twice.replicaNames;
      expect([a, b]).to.deep.equal([standbyName(), `${standbyName()}#2`]);
      // (the primary writes all the time, the key cache's heartbeats: the first probes may find the standby a record behind)
      // (each is probed on its own: wait until both are within the bound at once, i.e. two choices name both)
      for (const until = Date.now() + 2000; new Set(Array.from({ length: 2 }, () => twice.choose().name)).size < 2;) {
        expect(Date.now(), 'both are chosen within 2 s').to.be.below(until);
        await sleep(10);
      }
      const chosen = Array.from({ length: 4 }, () => twice.choose().name);
      expect(chosen).to.deep.equal(chosen[0] === a ? [a, b, a, b] : [b, a, b, a]);
    } finally {
      await twice.close();
    }
  });

  it('shows a write on the primary through the API within the bound', async () => {
    const count = async () => (await routed!.get('/v1/fleet/summary', key)).body;
    const before = await count();
    const wrote = Date.now();
    await f.vehicle({ plate: 'DXB 3' });
    let seen = await count();
    while (JSON.stringify(seen) === JSON.stringify(before)) {
      expect(Date.now() - wrote, 'the new vehicle shows within the bound').to.be.below(MAX_LAG_MS);
      await sleep(10);
      seen = await count();
    }
    const ms = Date.now() - wrote;
    console.log(`      write on the primary → seen through the API in ${ms} ms`);
    expect(seen).to.deep.equal((await plain!.get('/v1/fleet/summary', key)).body);
  });

  /** Polls `path` every 20 ms (with writes on the primary every 50 ms, so that its position moves) until `done`. */
  async function until(done: (res: ApiResponse) => boolean, limitMs: number): Promise<number> {
    const started = Date.now();
    let writes = 0;
    const writer = setInterval(() => void f.customer({ name: `Writer ${++writes}` }).catch(() => undefined), 50);
    try {
      for (;;) {
        const res = await routed!.get('/v1/fleet/summary', key);
        expect(res.status).to.equal(200);
        if (done(res)) return Date.now() - started;
        expect(Date.now() - started, `within ${limitMs} ms`).to.be.below(limitMs);
        await sleep(20);
      }
    } finally {
      clearInterval(writer);
    }
  }

  it("moves reads to the primary within 2 s of the standby's replay pausing, and back after it resumes", async () => {
    expect(staleness(await routed!.get('/v1/fleet/summary', key))).to.be.greaterThan(0);
    await pair!.onStandby('SELECT pg_wal_replay_pause()');
    let resumed = false;
    try {
      const toPrimary = await until((res) => staleness(res) === 0, 2000);
      await pair!.onStandby('SELECT pg_wal_replay_resume()');
      resumed = true;
      const back = await until((res) => staleness(res) > 0, 2000);
      console.log(
        `      replay paused → reads on the primary in ${toPrimary} ms; resumed → back on the standby in ${back} ms`,
      );
    } finally {
      if (!resumed) await pair!.onStandby('SELECT pg_wal_replay_resume()');
    }
  });

  it('keeps the test operation, idempotency and key revocation on the primary: the same answers as without a replica, even with replay paused', async () => {
    await pair!.onStandby('SELECT pg_wal_replay_pause()');
    try {
      for (const [n, api] of [plain!, routed!].entries()) {
        const { key: own, id } = await createApiKey(database!.db, operator, { workspaceId: f.ws.id });
        const endpoint = await createEndpoint(database!.db, operator, {
          workspaceId: await idOf(database!.db, f.slug),
          url: `https://hooks.example.ae/fleet-${n}`,
          events: ['invoice.issued'],
          policy: processConfig().destinationPolicy,
        });
        const other = await createEndpoint(database!.db, operator, {
          workspaceId: await idOf(database!.db, f.slug),
          url: `https://hooks.example.ae/other-${n}`,
          events: ['invoice.issued'],
          policy: processConfig().destinationPolicy,
        });
        const send = (endpointId: string) =>
          api.request('POST', `/v1/webhooks/${endpointId}/test`, {
            key: own,
            headers: { 'idempotency-key': `k-${id}` },
          });
        const first = await send(endpoint.id);
        expect(first.status).to.equal(202);
        expect(staleness(first)).to.equal(0);
        expect((await send(endpoint.id)).body).to.deep.equal(first.body);
        expect((await send(other.id)).status).to.equal(409);
        expect((await database!.db('deliveries').where({ id: first.body.deliveryId }).first()).event).to.equal(
          'webhook.test',
        );
        expect((await api.get('/v1/me', own)).status).to.equal(200);
        await revokeApiKey(database!.db, operator, { keyId: id, workspaceId: 'every' });
        // refused at once: the key cache hears of it from the primary, and a look-up reads the primary
        for (let i = 0; i < 50; i++) {
          const res = await api.get('/v1/fleets', own);
          if (res.status === 401) {
            expect(res.body.error.reason).to.equal('revoked');
            break;
          }
          expect(i, 'the revoked key is refused within 500 ms').to.be.below(49);
          await sleep(10);
        }
      }
    } finally {
      await pair!.onStandby('SELECT pg_wal_replay_resume()');
    }
  });

  it("refuses a replica that is not a standby of this primary's database (here the standby's other database), logging it once", async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
    const own = new ServiceMetrics({ defaultMetrics: false });
    const otherDatabase = pair!.standbyUrl.replace(/\/[^/]+$/, '/postgres');
    const other = (await ReadRouting.start({
      database: database!,
      primary: database!.forRole('api'),
      urls: [otherDatabase],
      maxLagMs: MAX_LAG_MS,
      logger,
      metrics: own,
    }))!;
    try {
      await sleep(600);
      expect(other.choose().name).to.equal('primary');
      expect((await own.replicaUp.get()).values).to.deep.equal([{ value: 0, labels: { replica: standbyName() } }]);
      const refusals = lines
        .map((line) => JSON.parse(line))
        .filter((line) => line.msg.startsWith('read replica refused'));
      expect(refusals).to.have.length(1);
      expect(refusals[0]).to.deep.include({ level: 50, replica: standbyName() });
      expect(refusals[0].msg).to.equal(
        "read replica refused: it is not a standby of this primary's database but of another database (postgres, the primary's frs_replicas); each URL of DATABASE_READ_URL must name one standby server of it",
      );
    } finally {
      await other.close();
    }
  });

  it("runs a read again on the primary as soon as a probe finds its replica silent, not after the statement's limit", async () => {
    const standbyPort = Number(new URL(pair!.standbyUrl).port);
    const proxy = await startTcpProxy(standbyPort);
    const silent = (await ReadRouting.start({
      database: database!,
      primary: database!.forRole('api'),
      urls: [pair!.standbyUrl.replace(`:${standbyPort}/`, `:${proxy.port}/`)],
      maxLagMs: MAX_LAG_MS,
      logger: pino({ level: 'silent' }),
    }))!;
    const one = async ({ db, name }: ReadPool) => ({ name, one: (await db.raw('SELECT 1 AS one')).rows[0].one });
    try {
      for (const until = Date.now() + 2000; silent.choose().name === 'primary';) {
        expect(Date.now()).to.be.below(until);
        await sleep(10);
      }
      expect(await silent.read(one)).to.deep.equal({ name: silent.replicaNames[0], one: 1 });
      // the server goes silent (no reset): the read's statement waits on it until a probe gives up on it
      proxy.freeze();
      const started = performance.now();
      expect(await silent.read(one)).to.deep.equal({ name: 'primary', one: 1 });
      const ms = Math.round(performance.now() - started);
      console.log(`      replica silent → the read running on it answered by the primary after ${ms} ms`);
      expect(ms).to.be.below(2000);
    } finally {
      proxy.thaw();
      await silent.close();
      await proxy.close();
    }
  });

  it('moves reads to the primary when the standby stops, with no error to any request made meanwhile', async () => {
    await pair!.caughtUp();
    const statuses: number[] = [];
    let stoppedAt = 0;
    let firstOnPrimary = 0;
    let running = true;
    // four clients asking all the time, before, during and after the stop
    const clients = Array.from({ length: 4 }, async () => {
      while (running) {
        const res = await routed!.get(GETS[statuses.length % GETS.length], key);
        statuses.push(res.status);
        if (stoppedAt && !firstOnPrimary && staleness(res) === 0) firstOnPrimary = Date.now();
      }
    });
    await sleep(300);
    stoppedAt = Date.now();
    await pair!.crashStandby();
    const stopped = Date.now();
    await sleep(1500);
    running = false;
    await Promise.all(clients);
    const failed = statuses.filter((status) => status !== 200);
    console.log(
      `      standby stopped (pg_ctl stop -m immediate, ${stopped - stoppedAt} ms) → reads on the primary ${firstOnPrimary - stoppedAt} ms after the stop began; ${statuses.length} requests, ${failed.length} errors`,
    );
    expect(failed).to.deep.equal([]);
    expect(firstOnPrimary).to.be.greaterThan(0);
    expect(staleness(await routed!.get('/v1/fleets', key))).to.equal(0);
    expect(await readsBy('primary')).to.be.greaterThan(0);
    // and back on it once it answers again within the bound
    await pair!.startStandby();
    await until((res) => staleness(res) > 0, 10_000);
  });
});

describe('read replicas: settings, and a replica that does not answer', () => {
  it('reads DATABASE_READ_URL as comma-separated postgres URLs, refusing anything else by name without echoing it', () => {
    expect(readUrlsFromEnv({})).to.deep.equal([]);
    expect(
      readUrlsFromEnv({ DATABASE_READ_URL: 'postgres://u:p@r1:5432/fleet, postgresql://u:p@r2/fleet' }),
    ).to.deep.equal(['postgres://u:p@r1:5432/fleet', 'postgresql://u:p@r2/fleet']);
    for (const value of ['postgres://u:p@r1/fleet,mysql://u:secret@r2/fleet', 'r1:5432', 'postgres://u:p@r1/fleet,']) {
      expect(() => readUrlsFromEnv({ DATABASE_READ_URL: value }), value)
        .to.throw(ConfigError, /^DATABASE_READ_URL must be postgres:\/\/ URLs/)
        .and.satisfy((err: Error) => !err.message.includes('secret'));
    }
    expect(replicaName('postgres://user:secret@10.0.0.7:6432/fleet')).to.equal('10.0.0.7:6432');
    expect(replicaName('postgres://user:secret@replica-1/fleet')).to.equal('replica-1:5432');
  });

  it('bounds FRS_READ_MAX_LAG_MS: 5000 by default, a whole number of milliseconds from 100, else a ConfigError naming it', () => {
    expect(readMaxLagMsFromEnv({})).to.equal(5000);
    expect(readMaxLagMsFromEnv({ FRS_READ_MAX_LAG_MS: '250' })).to.equal(250);
    for (const value of ['99', '-1', '1.5', 'soon', '60001']) {
      expect(() => readMaxLagMsFromEnv({ FRS_READ_MAX_LAG_MS: value }), value).to.throw(
        ConfigError,
        /^FRS_READ_MAX_LAG_MS must be a whole number of milliseconds from 100 to 60000, got "/,
      );
    }
  });

  it('compares WAL positions as numbers', () => {
    expect(parseLsn('0/0')).to.equal(0n);
    expect(parseLsn('16/B374D848')).to.equal((0x16n << 32n) + 0xb374d848n);
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).to.equal(true);
  });

  it("without replicas changes nothing: no routing, the primary's pool answers", async () => {
    const database = await testDatabase();
    expect(
      await ReadRouting.start({
        database,
        primary: database.forRole('api'),
        urls: [],
        logger: pino({ level: 'silent' }),
      }),
    ).to.equal(undefined);
  });

  it('skips a replica that does not answer, from the first request on, and no read waits for it', async () => {
    const database = await testDatabase();
    const primary = database.forRole('api');
    const metrics = new ServiceMetrics({ defaultMetrics: false });
    const reads = (await ReadRouting.start({
      database,
      primary,
      urls: [`postgres://postgres:x@127.0.0.1:${await freePort()}/fleet`],
      logger: pino({ level: 'silent' }),
      metrics,
    }))!;
    try {
      const pool = reads.choose();
      expect(pool).to.deep.include({ name: 'primary' });
      expect(pool.maxStalenessMs()).to.equal(0);
      expect(pool.db).to.equal(primary);
      const started = Date.now();
      expect(await reads.read(async ({ db }) => (await db.raw('SELECT 1 AS one')).rows[0].one)).to.equal(1);
      expect(Date.now() - started).to.be.below(500);
      expect((await metrics.replicaUp.get()).values[0]).to.deep.include({ value: 0 });
    } finally {
      await reads.close();
    }
  });
});
