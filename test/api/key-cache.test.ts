import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import pino from 'pino';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { fleetAdminOn } from '../support/cli.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';
import { createApiKey, createWorkspace, revokeApiKey, updateWorkspace } from '../../src/core/workspaces.js';
import { AUTH_CHANGES_CHANNEL, KeyCache, type KeyRecord } from '../../src/api/key-cache.js';
import { createKnex } from '../../src/db/database.js';
import { currentDatabaseName, setRoleStatement } from '../../src/db/roles.js';
import { idOf, operator } from '../support/actors.js';

// The API with its key cache (src/api/key-cache.ts): a key is checked from memory, yet a revoked key, an expired
// one and a frozen workspace are refused as promptly as without it.
const T0 = new Date('2026-11-22T08:00:00.000Z');

/** Polls `probe` until it returns true, at most `ms` milliseconds; returns how long it took. */
async function within(ms: number, probe: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await probe()) return Date.now() - started;
    if (Date.now() - started > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Revokes a key without the change being announced (triggers off), as if the announcement were lost. */
/**
 * A new key, once `cache` has heard it announced (a new key drops every cache, so that a key made after its hash was
 * tried works at once): a test that then shows the key kept is not undone by that announcement arriving late.
 */
async function createAnnouncedKey(
  cache: KeyCache,
  db: Knex,
  input: { workspaceSlug: string; role?: string; expiresAt?: string },
) {
  const generation = cache.generation;
  const { workspaceSlug, ...rest } = input;
  const created = await createApiKey(db, operator, { workspaceId: await idOf(db, workspaceSlug), ...rest });
  await within(2000, async () => cache.generation !== generation);
  return created;
}

async function revokeUnannounced(db: Knex, keyId: string): Promise<void> {
  await db.transaction(async (trx) => {
    await trx.raw(`SET LOCAL session_replication_role = replica`);
    await trx('api_keys').where({ id: keyId }).update({ revoked_at: trx.fn.now() });
  });
}

/** Connections as the API's role (as Database.connectAs makes them) that go through `proxy`. */
function connectVia(url: string, db: Knex, proxy: TcpProxy): () => Promise<pg.Client> {
  return async () => {
    const via = new URL(url);
    via.hostname = '127.0.0.1';
    via.port = String(proxy.port);
    const client = new pg.Client({ connectionString: via.href, keepAlive: true });
    await client.connect();
    const setRole = setRoleStatement(await currentDatabaseName(db), 'api');
    if (setRole)
      await client.query(setRole).catch(async (err) => {
        await client.end();
        throw err;
      });
    return client;
  };
}

/** The key cache's own log lines, as [level, message] (pino's levels: 20 debug, 30 info, 40 warn). */
const cacheLines = (api: TestApi) =>
  api.logs
    .filter((line) => String(line.msg).startsWith('key cache'))
    .map((line) => [line.level, line.msg] as [number, string]);

describe('key cache', () => {
  let api: TestApi;
  let db: Knex;
  let url: string;
  let now = T0;

  before(async () => {
    ({ db, url } = await testDatabase());
    await createWorkspace(db, operator, { slug: 'kc-main' });
    await createWorkspace(db, operator, { slug: 'kc-freeze' });
    api = await startApi({ now: () => now, keyCache: true });
    expect(api.keyCache!.listening).to.equal(true);
  });
  after(() => api.close());
  beforeEach(() => {
    now = T0;
  });

  const me = async (key: string) => api.get('/v1/me', key);

  it('answers a known key from memory: a revocation nobody announced goes unseen', async () => {
    // The opposite of every guarantee below, shown once so that they mean something: the cache is in use.
    const { id, key } = await createAnnouncedKey(api.keyCache!, db, { workspaceSlug: 'kc-main', role: 'memory' });
    expect((await me(key)).body).to.deep.equal({ workspace: { slug: 'kc-main', status: 'active' }, role: 'memory' });
    await revokeUnannounced(db, id);
    expect((await me(key)).status).to.equal(200);
  });

  it('refuses a key revoked by `fleet-admin key revoke` in another process within 1 s', async () => {
    const { id, key } = await createApiKey(db, operator, { workspaceId: await idOf(db, 'kc-main') });
    expect((await me(key)).status).to.equal(200);
    const run = await fleetAdminOn(url, ['key', 'revoke', '--id', id]);
    expect(run.code, run.stderr).to.equal(0);
    await within(1000, async () => (await me(key)).status === 401);
    const res = await me(key);
    expect(res.body.error).to.include({ code: 'unauthorized', reason: 'revoked' });
  });

  it('refuses a cached key at its expiry instant, not a moment later', async () => {
    const expiresAt = '2026-11-22T09:00:00.000Z';
    const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, 'kc-main'), expiresAt });
    now = new Date(Date.parse(expiresAt) - 1);
    expect((await me(key)).status).to.equal(200);
    expect((await me(key)).status).to.equal(200);
    now = new Date(expiresAt);
    const res = await me(key);
    expect(res.status).to.equal(401);
    expect(res.body.error).to.include({ code: 'unauthorized', reason: 'expired' });
  });

  it('refuses a frozen workspace within 1 s, and serves it again once active', async () => {
    const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, 'kc-freeze') });
    expect((await me(key)).status).to.equal(200);
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, 'kc-freeze'),
      changes: { status: 'frozen' },
      now: T0,
    });
    await within(1000, async () => (await me(key)).status === 403);
    expect((await me(key)).body.error.code).to.equal('workspace_frozen');
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, 'kc-freeze'),
      changes: { status: 'active' },
      now: T0,
    });
    await within(1000, async () => (await me(key)).status === 200);
  });

  it('drops the cache when the notification connection is lost, and serves again once it listens anew', async () => {
    const cache = api.keyCache!;
    const first = await createAnnouncedKey(cache, db, { workspaceSlug: 'kc-main' });
    expect((await me(first.key)).status).to.equal(200);
    const losses = cache.losses;
    const { rows } = await db.raw(
      `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = current_database() AND query = ?`,
      [`LISTEN ${AUTH_CHANGES_CHANNEL}`],
    );
    expect(rows).to.deep.equal([{ done: true }]);
    await within(5000, async () => cache.losses > losses);
    // Whatever is announced or not from now on, the key kept in memory is gone.
    await revokeUnannounced(db, first.id);
    expect((await me(first.key)).body.error).to.include({ code: 'unauthorized', reason: 'revoked' });
    // Listening again (a new connection), the cache serves again: an unannounced revocation goes unseen.
    await within(5000, async () => cache.listening);
    const second = await createAnnouncedKey(cache, db, { workspaceSlug: 'kc-main' });
    expect((await me(second.key)).status).to.equal(200);
    await revokeUnannounced(db, second.id);
    expect((await me(second.key)).status).to.equal(200);
  });

  it('does not keep a lookup that raced an announcement', async () => {
    const cache = api.keyCache!;
    const record: KeyRecord = {
      keyId: '00000000-0000-4000-8000-000000000001',
      role: null,
      revokedAt: null,
      expiresAt: null,
      lastUsedAt: null,
      workspaceId: '00000000-0000-4000-8000-000000000002',
      slug: 'kc-main',
      status: 'active',
      timezone: 'Asia/Dubai',
    };
    const generation = cache.generation;
    await db.raw(`NOTIFY ${AUTH_CHANGES_CHANNEL}`);
    await within(1000, async () => cache.generation !== generation);
    cache.set('raced', record, generation);
    expect(cache.get('raced')).to.equal(undefined);
    cache.set('raced', record, cache.generation);
    expect(cache.get('raced')).to.equal(record);
  });

  it('is not dropped by marking a key as used', async () => {
    const { id, key } = await createApiKey(db, operator, { workspaceId: await idOf(db, 'kc-main') });
    expect((await me(key)).status).to.equal(200);
    await within(1000, async () => (await db('api_keys').where({ id }).first('last_used_at')).last_used_at !== null);
    const generation = api.keyCache!.generation;
    await db('api_keys')
      .where({ id })
      .update({ last_used_at: new Date(T0.getTime() + 1000) });
    // Any announcement would have arrived by the time a later one does.
    await db.raw(`NOTIFY ${AUTH_CHANGES_CHANNEL}`);
    await within(1000, async () => api.keyCache!.generation !== generation);
    expect(api.keyCache!.generation).to.equal(generation + 1);
  });
  it('counts only the heartbeats it sent: forged NOTIFYs (a huge sequence, a non-numeric one, the next one with a token seen) do not keep it serving', async () => {
    const database = await testDatabase();
    // Heartbeats go through a pool of one connection, through a proxy the test freezes: then none comes back, while
    // the listener (a direct connection) still hears every forgery.
    const proxy = await startTcpProxy(Number(new URL(url).port));
    const via = new URL(url);
    via.hostname = '127.0.0.1';
    via.port = String(proxy.port);
    const heartbeatDb = createKnex(via.href, 1);
    const watcher = new pg.Client({ connectionString: url });
    const heartbeatIntervalMs = 200;
    const heartbeatDeadlineMs = 300;
    let cache: KeyCache | undefined;
    try {
      const {
        rows: [{ pid }],
      } = await heartbeatDb.raw('SELECT pg_backend_pid() AS pid');
      // What any role that LISTENs on the channel sees of this cache's heartbeats.
      const seen: string[] = [];
      watcher.on('notification', (message) => {
        if (message.processId === pid) seen.push(message.payload ?? '');
      });
      await watcher.connect();
      await watcher.query(`LISTEN ${AUTH_CHANGES_CHANNEL}`);
      cache = await KeyCache.start(() => database.connectAs('api'), heartbeatDb, pino({ level: 'silent' }), {
        heartbeatIntervalMs,
        heartbeatDeadlineMs,
      });
      expect(cache.serving).to.equal(true);
      await within(2000, async () => seen.length >= 2);
      const [word, nonce, seq, token] = seen.at(-1)!.split(' ');
      expect([word, nonce]).to.deep.equal(seen[0].split(' ').slice(0, 2));
      const next = Number(seq) + 1;
      // Any role may NOTIFY on the channel.
      const forgeries = [
        `heartbeat ${nonce} 999999`,
        `heartbeat ${nonce} x`,
        `heartbeat ${nonce} ${next} ${token}`,
        `heartbeat ${nonce} ${next}`,
      ];
      proxy.freeze();
      const frozenAt = performance.now();
      await within(3000, async () => {
        for (const payload of forgeries) await db.raw('SELECT pg_notify(?, ?)', [AUTH_CHANGES_CHANNEL, payload]);
        return !cache!.serving;
      });
      // The heartbeat out when the proxy froze went overdue: trusted for the interval plus the deadline at most.
      expect(performance.now() - frozenAt, 'from freeze to not serving').to.be.at.most(
        heartbeatIntervalMs + heartbeatDeadlineMs + 1500,
      );
      expect(cache.listening, 'the listener is still up').to.equal(true);
      // Heartbeats arriving again put it back in service.
      proxy.thaw();
      await within(3000, async () => cache!.serving);
    } finally {
      proxy.thaw();
      await cache?.close();
      await heartbeatDb.destroy();
      await watcher.end();
      await proxy.close();
    }
  });

  describe("with its listening connection through a proxy of the test's own", () => {
    let proxy: TcpProxy;
    let proxied: TestApi;
    // Heartbeats faster than the defaults (2000/2500 ms), so that the bounds below leave clear slack on a busy machine.
    const heartbeatIntervalMs = 500;
    const heartbeatDeadlineMs = 700;

    beforeEach(async () => {
      proxy = await startTcpProxy(Number(new URL(url).port));
      proxied = await startApi({
        now: () => now,
        keyCache: { connect: connectVia(url, db, proxy), heartbeatIntervalMs, heartbeatDeadlineMs },
      });
    });
    afterEach(async () => {
      proxy.thaw();
      proxy.restore();
      await proxied.close();
      await proxy.close();
    });

    it('stops serving within 3 s of its listener going silent although no connection closed, and serves again once it hears again', async () => {
      const cache = proxied.keyCache!;
      expect(cache.serving).to.equal(true);
      const revoked = await createApiKey(db, operator, { workspaceId: await idOf(db, 'kc-main') });
      // Making a key is announced too (the cache drops what it kept): wait until a heartbeat sent after it came back, which
      // vouches that the announcement arrived (commit order), so that it cannot drop the key kept below after the freeze.
      await new Promise((resolve) => setTimeout(resolve, 2 * heartbeatIntervalMs + 200));
      expect((await proxied.get('/v1/me', revoked.key)).status).to.equal(200);
      const losses = cache.losses;
      const frozenAt = performance.now();
      proxy.freeze();
      await revokeApiKey(db, operator, { keyId: revoked.id, workspaceId: 'every' });
      // The announcement waits in the frozen connection: for now the key is still answered from memory.
      expect((await proxied.get('/v1/me', revoked.key)).status).to.equal(200);
      await within(6000, async () => (await proxied.get('/v1/me', revoked.key)).status === 401);
      const refusedAfterMs = performance.now() - frozenAt;
      // Trusted for the interval plus the deadline at most (1.2 s), then the next request goes to the database: 3 s
      // leaves 1.8 s for requests and timers on a busy machine.
      expect(refusedAfterMs, 'from freeze to the revoked key refused').to.be.at.most(
        heartbeatIntervalMs + heartbeatDeadlineMs + 1800,
      );
      expect(cache.serving).to.equal(false);
      expect((await proxied.get('/v1/me', revoked.key)).body.error).to.include({
        code: 'unauthorized',
        reason: 'revoked',
      });
      // Nothing closed: the same connection is up, only silent.
      expect(cache.listening).to.equal(true);
      expect(cache.losses).to.equal(losses);
      // Not serving, it keeps nothing: a revocation nobody announces is seen at once.
      const unkept = await createApiKey(db, operator, { workspaceId: await idOf(db, 'kc-main') });
      expect((await proxied.get('/v1/me', unkept.key)).status).to.equal(200);
      await revokeUnannounced(db, unkept.id);
      expect((await proxied.get('/v1/me', unkept.key)).status).to.equal(401);

      proxy.thaw();
      await within(5000, async () => cache.serving);
      expect(cache.losses).to.equal(losses);
      // Serving again, on the same connection and from empty: a key is kept (an unannounced revocation goes unseen).
      const kept = await createAnnouncedKey(cache, db, { workspaceSlug: 'kc-main' });
      expect((await proxied.get('/v1/me', kept.key)).status).to.equal(200);
      await revokeUnannounced(db, kept.id);
      expect((await proxied.get('/v1/me', kept.key)).status).to.equal(200);
      expect((await proxied.get('/v1/me', revoked.key)).status).to.equal(401);
      expect(cacheLines(proxied)).to.deep.equal([
        [
          40,
          `key cache: a heartbeat did not come back within ${heartbeatDeadlineMs} ms; cache dropped, keys are looked up in the database until heartbeats come back`,
        ],
        [30, 'key cache: listening again; the cache serves again, starting empty'],
      ]);
    });

    it('warns once per outage while it cannot listen, and says once that it listens again', async () => {
      const cache = proxied.keyCache!;
      proxy.cut();
      const cannotListen = () =>
        cacheLines(proxied).filter(([, msg]) => msg.startsWith('key cache: cannot listen')).length;
      await within(5000, async () => cannotListen() >= 2);
      proxy.restore();
      await within(10_000, async () => cache.serving);
      const lines = cacheLines(proxied);
      expect(lines[0]).to.deep.equal([
        40,
        'key cache: lost the connection that listens for key changes; cache dropped',
      ]);
      expect(lines.slice(1, -1)).to.deep.equal(
        Array(lines.length - 2).fill([
          20,
          'key cache: cannot listen for key changes; keys are looked up in the database',
        ]),
      );
      expect(lines.length).to.be.at.least(4);
      expect(lines.at(-1)).to.deep.equal([30, 'key cache: listening again; the cache serves again, starting empty']);
    });
  });
});
