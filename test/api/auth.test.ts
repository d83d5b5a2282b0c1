import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { createApiKey, createWorkspace, revokeApiKey, updateWorkspace } from '../../src/core/workspaces.js';
import { workspaceLimitsFromEnv } from '../../src/config.js';
import { idOf, operator } from '../support/actors.js';

const NOW = new Date('2026-11-22T08:00:00.000Z');
const OPERATIONS = [
  '/v1/me',
  '/v1/fleets',
  '/v1/fleet/summary',
  '/v1/vehicles',
  '/v1/operations/today',
  '/v1/bookings/summary',
  '/v1/finance/overview',
  '/v1/receivables',
  '/v1/webhooks',
];

describe('authentication', () => {
  let api: TestApi;
  const keys: Record<string, string> = {};

  before(async () => {
    const { db } = await testDatabase();
    await createWorkspace(db, operator, { slug: 'auth-main' });
    await createWorkspace(db, operator, { slug: 'auth-frozen' });
    keys.good = (await createApiKey(db, operator, { workspaceId: await idOf(db, 'auth-main'), role: 'reporting' })).key;
    keys.noRole = (await createApiKey(db, operator, { workspaceId: await idOf(db, 'auth-main') })).key;
    keys.expired = (
      await createApiKey(db, operator, {
        workspaceId: await idOf(db, 'auth-main'),
        expiresAt: '2026-11-22T07:59:59.000Z',
      })
    ).key;
    keys.expiresLater = (
      await createApiKey(db, operator, {
        workspaceId: await idOf(db, 'auth-main'),
        expiresAt: '2026-11-22T08:00:01.000Z',
      })
    ).key;
    const revoked = await createApiKey(db, operator, { workspaceId: await idOf(db, 'auth-main') });
    await revokeApiKey(db, operator, { keyId: revoked.id, workspaceId: 'every' });
    keys.revoked = revoked.key;
    const revokedAndExpired = await createApiKey(db, operator, {
      workspaceId: await idOf(db, 'auth-main'),
      expiresAt: '2026-01-01T00:00:00.000Z',
    });
    await revokeApiKey(db, operator, { keyId: revokedAndExpired.id, workspaceId: 'every' });
    keys.revokedAndExpired = revokedAndExpired.key;
    keys.frozen = (await createApiKey(db, operator, { workspaceId: await idOf(db, 'auth-frozen') })).key;
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, 'auth-frozen'),
      changes: { status: 'frozen' },
      now: new Date(),
    });
    // Each case fails authentication on every operation, far past the 30 failures a minute one address may make:
    // the failure limit is off here, and test/api/rate-limits.test.ts shows it.
    api = await startApi({
      now: NOW,
      limits: { workspace: workspaceLimitsFromEnv({}), authFailures: { perMinute: 0, trustedProxies: [] } },
    });
  });
  after(() => api.close());

  it('GET /v1/me names the workspace and the role', async () => {
    const res = await api.get('/v1/me', keys.good);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ workspace: { slug: 'auth-main', status: 'active' }, role: 'reporting' });
    expect((await api.get('/v1/me', keys.noRole)).body.role).to.equal(null);
    expect((await api.get('/v1/me', keys.expiresLater)).status).to.equal(200);
  });

  const cases: Array<[string, () => Record<string, string>, string]> = [
    ['no Authorization header', () => ({}), 'missing'],
    ['a scheme other than Bearer', () => ({ authorization: `Basic ${keys.good}` }), 'missing'],
    ['an empty bearer token', () => ({ authorization: 'Bearer ' }), 'missing'],
    ['an unknown key', () => ({ authorization: 'Bearer frs_00000000000000000000000000000000' }), 'unknown'],
    ['a revoked key', () => ({ authorization: `Bearer ${keys.revoked}` }), 'revoked'],
    ['an expired key', () => ({ authorization: `Bearer ${keys.expired}` }), 'expired'],
    ['a key both revoked and expired', () => ({ authorization: `Bearer ${keys.revokedAndExpired}` }), 'revoked'],
  ];
  for (const [what, headers, reason] of cases) {
    it(`answers 401 ${reason} for ${what}, on every operation`, async () => {
      for (const path of OPERATIONS) {
        const res = await api.get(path, undefined, headers());
        expect(res.status, path).to.equal(401);
        expect(res.body.error).to.include({ code: 'unauthorized', reason });
        expect(res.headers.get('www-authenticate'), path).to.match(/^Bearer/);
      }
    });
  }

  it('accepts the scheme name in any case', async () => {
    expect((await api.get('/v1/me', undefined, { authorization: `bearer ${keys.good}` })).status).to.equal(200);
  });

  it('answers 403 workspace_frozen for a valid key of a frozen workspace', async () => {
    for (const path of OPERATIONS) {
      const res = await api.get(path, keys.frozen);
      expect(res.status, path).to.equal(403);
      expect(res.body.error.code).to.equal('workspace_frozen');
    }
  });

  it('a revoked key of a frozen workspace is still reported as revoked', async () => {
    const { db } = await testDatabase();
    await createWorkspace(db, operator, { slug: 'auth-frozen-revoked' });
    const key = await createApiKey(db, operator, { workspaceId: await idOf(db, 'auth-frozen-revoked') });
    await revokeApiKey(db, operator, { keyId: key.id, workspaceId: 'every' });
    await updateWorkspace(db, operator, {
      workspaceId: await idOf(db, 'auth-frozen-revoked'),
      changes: { status: 'frozen' },
      now: new Date(),
    });
    const res = await api.get('/v1/me', key.key);
    expect(res.status).to.equal(401);
    expect(res.body.error.reason).to.equal('revoked');
  });

  it('never writes a key or the Authorization header into a log line or an error body', async () => {
    await api.get('/v1/me', keys.good);
    await api.get('/v1/me', keys.revoked);
    const logged = JSON.stringify(api.logs);
    for (const key of Object.values(keys)) expect(logged).not.to.include(key);
    expect(logged).not.to.match(/authorization/i);
    const res = await api.get('/v1/me', keys.revoked);
    expect(res.text).not.to.include(keys.revoked);
  });
});
