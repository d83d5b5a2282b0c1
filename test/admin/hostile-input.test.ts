import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { startAdminApi, type TestAdminApi } from './support.js';
import { startApi, type TestApi } from '../support/api.js';
import { testDatabase } from '../support/database.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { createApiKey, createWorkspace } from '../../src/core/workspaces.js';
import { printable } from '../../src/cli/printable.js';
import { idOf, operator, operatorWith } from '../support/actors.js';

// Input a review found a 5xx or a loose end with, each now a documented 4xx that changes nothing: a leap second where
// a time goes, a body nested without end, an endpoint name with control characters or a URL carrying a credential;
// an example event sent while its endpoint is deleted; a receiver's answer with terminal escapes shown by the CLI.
describe('admin API: hostile input', () => {
  let admin: TestAdminApi;
  let api: TestApi;
  let token: string;
  let workspaceId: string;
  let key: string;
  before(async () => {
    const { db } = await testDatabase();
    admin = await startAdminApi({ authFailures: { perMinute: 0, trustedProxies: [] } });
    api = await startApi({
      limits: { workspace: { ratePerSecond: 0, concurrency: 0 }, authFailures: { perMinute: 0, trustedProxies: [] } },
    });
    const slug = `hostile-${randomUUID().slice(0, 8)}`;
    workspaceId = (await createWorkspace(db, operator, { slug })).id;
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, slug) })).key;
    token = (
      await createAdminToken(db, operatorWith({ actor: { type: 'cli', name: 'test' } }), {
        name: 'hostile input',
        workspaceId: await idOf(db, slug),
      })
    ).token;
  });
  after(async () => {
    await admin.close();
    await api.close();
    await (await testDatabase()).db('workspaces').where({ id: workspaceId }).delete();
  });
  const ws = () => `/admin/v1/workspaces/${workspaceId}`;
  const endpoint = async (url = `https://hooks.example.ae/${randomUUID()}`) =>
    (await admin.request('POST', `${ws()}/endpoints`, { token, body: { url } })).body.id as string;

  it('refuses a leap second (:60) where a time goes with 400 naming the field, on both APIs', async () => {
    const leap = '2016-12-31T23:59:60Z';
    for (const [method, path, body, field] of [
      ['GET', `${ws()}/deliveries?since=${leap}`, undefined, 'since'],
      ['GET', `${ws()}/deliveries?until=${leap}`, undefined, 'until'],
      ['GET', `/admin/v1/audit-entries?since=${leap}`, undefined, 'since'],
      ['POST', `${ws()}/endpoints/${await endpoint()}/recover`, { since: leap }, 'since'],
    ] as const) {
      const res = await admin.request(method, path, { token, body });
      expect(res.status, path).to.equal(400);
      expect(res.body.error.reason).to.equal(field);
    }
    const window = await api.get(`/v1/vehicles?from=${leap}&to=2017-01-02T00:00:00Z`, key);
    expect(window.status).to.equal(400);
    expect(window.body.error.reason).to.equal('from');
  });

  it('refuses a body nested deeper than 64 levels with 400 naming the body, with or without an Idempotency-Key', async () => {
    // (sent as text: a value this deep is too deep for JSON.stringify too)
    const deep = `{"event":"lead.created","data":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`;
    for (const headers of [{}, { 'idempotency-key': randomUUID() }] as Array<Record<string, string>>) {
      const res = await admin.request('POST', `${ws()}/events`, {
        token,
        body: deep,
        headers: { 'content-type': 'application/json', ...headers },
      });
      expect(res.status).to.equal(400);
      expect(res.body.error.reason).to.equal('body');
    }
  });

  it('refuses an endpoint name with control characters and a URL carrying a credential, naming the field', async () => {
    const named = await admin.request('POST', `${ws()}/endpoints`, {
      token,
      body: { url: 'https://hooks.example.ae/x', name: 'ops\u001b[31m' },
    });
    expect([named.status, named.body.error.reason]).to.deep.equal([400, 'name']);
    const credential = await admin.request('POST', `${ws()}/endpoints`, {
      token,
      body: { url: `https://hooks.example.ae/in?k=frs_${'a'.repeat(32)}` },
    });
    expect([credential.status, credential.body.error.reason]).to.deep.equal([400, 'url']);
    expect(
      await (
        await testDatabase()
      )
        .db('webhook_endpoints')
        .where({ workspace_id: workspaceId })
        .whereLike('url', '%/x')
        .count({ n: '*' }),
    ).to.deep.equal([{ n: 0 }]);
  });

  it('leaves nothing pending for an endpoint deleted while an example is sent to it, and answers neither with a 5xx', async () => {
    const { db } = await testDatabase();
    for (let round = 0; round < 8; round++) {
      const id = await endpoint();
      const [sent, deleted] = await Promise.all([
        admin.request('POST', `${ws()}/example-events`, { token, body: { endpointId: id, event: 'invoice.overdue' } }),
        admin.request('DELETE', `${ws()}/endpoints/${id}`, { token }),
      ]);
      expect(deleted.status, `round ${round}`).to.equal(204);
      expect(sent.status, `round ${round}`).to.be.oneOf([202, 404]);
      const pending = await db('deliveries')
        .where({ endpoint_id: id })
        .whereIn('status', ['queued', 'retrying', 'held'])
        .count({ n: '*' });
      expect(pending, `round ${round}: pending after the delete`).to.deep.equal([{ n: 0 }]);
    }
  });

  it("shows control characters of what others wrote as escapes in the CLI's text, newlines and tabs as they are", () => {
    expect(printable('ok\u001b[2J\u0007\nnext\tline\u009b')).to.equal('ok\\u{1b}[2J\\u{7}\nnext\tline\\u{9b}');
  });
});
