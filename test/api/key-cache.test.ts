import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { fleetAdminOn } from '../support/cli.js';
import { createApiKey, createWorkspace, updateWorkspace } from '../../src/workspaces.js';
import { AUTH_CHANGES_CHANNEL, type KeyRecord } from '../../src/api/key-cache.js';

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
async function revokeUnannounced(db: Knex, keyId: string): Promise<void> {
  await db.transaction(async (trx) => {
    await trx.raw(`SET LOCAL session_replication_role = replica`);
    await trx('api_keys').where({ id: keyId }).update({ revoked_at: trx.fn.now() });
  });
}

describe('key cache', () => {
  let api: TestApi;
  let db: Knex;
  let url: string;
  let now = T0;

  before(async () => {
    ({ db, url } = await testDatabase());
    await createWorkspace(db, { slug: 'kc-main' });
    await createWorkspace(db, { slug: 'kc-freeze' });
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
    const { id, key } = await createApiKey(db, { workspaceSlug: 'kc-main', role: 'memory' });
    expect((await me(key)).body).to.deep.equal({ workspace: { slug: 'kc-main', status: 'active' }, role: 'memory' });
    await revokeUnannounced(db, id);
    expect((await me(key)).status).to.equal(200);
  });

  it('refuses a key revoked by `fleet-admin key revoke` in another process within 1 s', async () => {
    const { id, key } = await createApiKey(db, { workspaceSlug: 'kc-main' });
    expect((await me(key)).status).to.equal(200);
    const run = await fleetAdminOn(url, ['key', 'revoke', '--id', id]);
    expect(run.code, run.stderr).to.equal(0);
    await within(1000, async () => (await me(key)).status === 401);
    const res = await me(key);
    expect(res.body.error).to.include({ code: 'unauthorized', reason: 'revoked' });
  });

  it('refuses a cached key at its expiry instant, not a moment later', async () => {
    const expiresAt = '2026-11-22T09:00:00.000Z';
    const { key } = await createApiKey(db, { workspaceSlug: 'kc-main', expiresAt });
    now = new Date(Date.parse(expiresAt) - 1);
    expect((await me(key)).status).to.equal(200);
    expect((await me(key)).status).to.equal(200);
    now = new Date(expiresAt);
    const res = await me(key);
    expect(res.status).to.equal(401);
    expect(res.body.error).to.include({ code: 'unauthorized', reason: 'expired' });
  });

  it('refuses a frozen workspace within 1 s, and serves it again once active', async () => {
    const { key } = await createApiKey(db, { workspaceSlug: 'kc-freeze' });
    expect((await me(key)).status).to.equal(200);
    await updateWorkspace(db, 'kc-freeze', { status: 'frozen' }, T0);
    await within(1000, async () => (await me(key)).status === 403);
    expect((await me(key)).body.error.code).to.equal('workspace_frozen');
    await updateWorkspace(db, 'kc-freeze', { status: 'active' }, T0);
    await within(1000, async () => (await me(key)).status === 200);
  });

  it('drops the cache when the notification connection is lost, and serves again once it listens anew', async () => {
    const cache = api.keyCache!;
    const first = await createApiKey(db, { workspaceSlug: 'kc-main' });
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
    const second = await createApiKey(db, { workspaceSlug: 'kc-main' });
    expect((await me(second.key)).status).to.equal(200);
    await revokeUnannounced(db, second.id);
    expect((await me(second.key)).status).to.equal(200);
  });

  it('does not keep a lookup that raced an announcement', async () => {
    const cache = api.keyCache!;
    const record: KeyRecord = {
      keyId: '00000000-0000-4000-8000-000000000001', role: null, revokedAt: null, expiresAt: null, lastUsedAt: null,
      workspaceId: '00000000-0000-4000-8000-000000000002', slug: 'kc-main', status: 'active', timezone: 'Asia/Dubai',
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
    const { id, key } = await createApiKey(db, { workspaceSlug: 'kc-main' });
    expect((await me(key)).status).to.equal(200);
    await within(1000, async () => (await db('api_keys').where({ id }).first('last_used_at')).last_used_at !== null);
    const generation = api.keyCache!.generation;
    await db('api_keys').where({ id }).update({ last_used_at: new Date(T0.getTime() + 1000) });
    // Any announcement would have arrived by the time a later one does.
    await db.raw(`NOTIFY ${AUTH_CHANGES_CHANNEL}`);
    await within(1000, async () => api.keyCache!.generation !== generation);
    expect(api.keyCache!.generation).to.equal(generation + 1);
  });
});
