import { expect } from 'chai';
import { startAdminApi, type TestAdminApi } from './support.js';
import { testDatabase } from '../support/database.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { operatorWith } from '../support/actors.js';

// A request body is read only for an operation that takes one, once the caller's token holds, and only as JSON:
// a body sent to no route is a 404, one without a good token a 401 (its address's failures counted), whatever it
// held; a body of another type, or compressed, a 415; one over 64 KiB a 413. Nothing is created by any of them.
describe('admin API: request bodies', () => {
  let admin: TestAdminApi;
  let token: string;
  before(async () => {
    admin = await startAdminApi({ authFailures: { perMinute: 0, trustedProxies: [] } });
    token = (
      await createAdminToken((await testDatabase()).db, operatorWith({ actor: { type: 'cli', name: 'test' } }), {
        name: 'bodies test',
        workspaceId: 'every',
      })
    ).token;
  });
  after(() => admin.close());

  const slug = () => `bodies-${Math.random().toString(36).slice(2, 10)}`;
  const workspaceCount = async (s: string) =>
    Number((await (await testDatabase()).db('workspaces').where({ slug: s }).count({ n: '*' }))[0].n);

  it('answers a body to no route 404 and a body without a good token 401, without reading it', async () => {
    expect((await admin.request('POST', '/admin/v1/nothing', { token, body: '{bad' })).status).to.equal(404);
    const s = slug();
    const unauthenticated = await admin.request('POST', '/admin/v1/workspaces', { body: '{bad' });
    expect(unauthenticated.status).to.equal(401);
    const wrongToken = await admin.request('POST', '/admin/v1/workspaces', {
      token: `fra_${'x'.repeat(40)}`,
      body: { slug: s },
    });
    expect(wrongToken.status).to.equal(401);
    expect(await workspaceCount(s)).to.equal(0);
  });

  it('refuses a body that is not JSON by its type, or is compressed, with 415; one over 64 KiB with 413', async () => {
    const s = slug();
    const asText = await admin.request('POST', '/admin/v1/workspaces', {
      token,
      body: JSON.stringify({ slug: s }),
      headers: { 'content-type': 'text/plain' },
    });
    expect(asText.status).to.equal(415);
    expect(asText.body.error.code).to.equal('unsupported_media_type');
    const compressed = await admin.request('POST', '/admin/v1/workspaces', {
      token,
      body: { slug: s },
      headers: { 'content-encoding': 'gzip' },
    });
    expect(compressed.status).to.equal(415);
    const huge = await admin.request('POST', '/admin/v1/workspaces', {
      token,
      body: { slug: s, padding: 'x'.repeat(70_000) },
    });
    expect(huge.status).to.equal(413);
    expect(await workspaceCount(s)).to.equal(0);
    // the same body as JSON is taken
    const taken = await admin.request('POST', '/admin/v1/workspaces', {
      token,
      body: { slug: s },
      headers: { 'content-type': 'application/json; charset=utf-8' },
    });
    expect(taken.status).to.equal(201);
    await (await testDatabase()).db('workspaces').where({ slug: s }).delete();
  });
});
