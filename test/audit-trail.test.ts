import crypto from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { recordAudit } from '../src/core/audit.js';
import { createAdminToken } from '../src/core/admin-tokens.js';
import { createWorkspace } from '../src/core/workspaces.js';
import { createEndpoint } from '../src/core/webhooks/endpoints.js';
import { redactUrlCredentials } from '../src/secrets.js';
import { startAdminApi } from './admin/support.js';
import { operatorWith } from './support/actors.js';
import { processConfig } from '../src/config.js';

// The audit trail is the server's (migrations/20261128000210_audit_trail_server_set.ts): no role of the service
// chooses an entry's id, time or request id, nor invents its actor; credentials in a URL never reach an entry. Run on
// the embedded PostgreSQL and on 14 (test/postgres-14.test.ts).

/** The error code of a statement that must fail (42501: refused by a privilege or by the trail's trigger). */
async function refused(statement: Promise<unknown>): Promise<string> {
  try {
    await statement;
  } catch (err) {
    expect((err as { code?: string }).code, (err as Error).message).to.equal('42501');
    return (err as Error).message;
  }
  throw new Error('the statement succeeded');
}

describe("the audit trail is the server's", () => {
  let db: Knex;
  let roles: Record<'api' | 'worker' | 'admin', Knex>;
  let token: { id: string; name: string; token: string };
  let workspaceId: string;
  const CHOSEN_AT = '2020-01-01T00:00:00Z';
  const entry = (extra: Record<string, unknown> = {}) => ({
    actor_type: 'admin_token',
    actor_id: token.id,
    actor_name: token.name,
    action: 'workspace.update',
    workspace_id: workspaceId,
    target_type: 'workspace',
    target_id: workspaceId,
    ...extra,
  });

  before(async () => {
    const database = await testDatabase();
    db = database.db;
    roles = { api: database.forRole('api'), worker: database.forRole('worker'), admin: database.forRole('admin') };
    const cli = { actor: { type: 'cli' as const, name: 'audit-trail-test' } };
    token = await createAdminToken(db, operatorWith(cli), { name: `audit trail ${process.pid}`, workspaceId: 'every' });
    workspaceId = (
      await createWorkspace(db, operatorWith(cli), { slug: `audit-trail-${crypto.randomBytes(5).toString('hex')}` })
    ).id;
  });

  it("no service role may name an entry's id, time or request id in an INSERT", async () => {
    for (const [name, role] of Object.entries(roles)) {
      for (const chosen of [{ at: CHOSEN_AT }, { request_id: 'req_chosen' }, { id: crypto.randomUUID() }]) {
        expect(
          await refused(role('audit_entries').insert(entry(chosen))),
          `${name} ${Object.keys(chosen)[0]}`,
        ).to.match(/permission denied/);
      }
    }
    expect(
      await db('audit_entries')
        .where({ workspace_id: workspaceId, action: 'workspace.update' })
        .count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 0 }]);
  });

  it("the admin role cannot invent an actor nor claim the CLI; a known token's name is the database's", async () => {
    const { admin } = roles;
    expect(await refused(admin('audit_entries').insert(entry({ actor_id: crypto.randomUUID() })))).to.match(
      /must name an actor the database knows/,
    );
    expect(
      await refused(
        admin('audit_entries').insert(entry({ actor_type: 'portal_session', actor_id: crypto.randomUUID() })),
      ),
    ).to.match(/must name an actor the database knows/);
    expect(
      await refused(admin('audit_entries').insert(entry({ actor_type: 'cli', actor_id: null, actor_name: 'root' }))),
    ).to.match(/must name an actor the database knows/);
    const before = new Date();
    const [row] = await admin('audit_entries')
      .insert(entry({ actor_name: 'someone else', action: 'audit.test' }))
      .returning(['at', 'actor_name', 'request_id']);
    expect(row.actor_name).to.equal(token.name);
    expect(row.request_id).to.equal(null);
    expect(row.at.getTime()).to.be.at.least(before.getTime() - 1000);
  });

  it("even the owner's chosen id, time and request id are overwritten", async () => {
    const id = crypto.randomUUID();
    const [row] = await db('audit_entries')
      .insert({ ...entry({ action: 'audit.test.owner' }), id, at: CHOSEN_AT, request_id: 'req_chosen' })
      .returning(['id', 'at', 'request_id']);
    expect(row.id).not.to.equal(id);
    expect(row.at.toISOString()).not.to.equal(new Date(CHOSEN_AT).toISOString());
    expect(row.request_id).to.equal(null);
  });

  it("recordAudit: the request id the server gives, the client's beside it as given, redacted", async () => {
    const target = crypto.randomUUID();
    await roles.admin.transaction((trx) =>
      recordAudit(
        trx,
        {
          actor: { type: 'admin_token', id: token.id, name: token.name },
          requestId: 'req_server000000000a',
          clientRequestId: 'trace https://u:p@x.example/?token=abc',
        },
        { action: 'audit.test.request', workspaceId, target: { type: 'test', id: target } },
      ),
    );
    const row = await db('audit_entries')
      .where({ target_id: target })
      .first('request_id', 'client_request_id', 'actor_name');
    expect(row).to.deep.equal({
      request_id: 'req_server000000000a',
      client_request_id: 'trace https://[redacted]:[redacted]@x.example/?token=[redacted]',
      actor_name: token.name,
    });
    // the setting was the transaction's only: an entry of a later transaction on any connection has none
    const later = crypto.randomUUID();
    await roles.admin('audit_entries').insert(entry({ action: 'audit.test.request', target_id: later }));
    expect((await db('audit_entries').where({ target_id: later }).first('request_id')).request_id).to.equal(null);
  });

  // (a user name or password in an endpoint's URL is refused before anything is written; recordAudit redacts it all
  // the same, as the request id test above shows)
  it("a request id not of the server's shape is refused, set as the server sets it or not", async () => {
    const audit = (requestId: string) => ({
      actor: { type: 'admin_token' as const, id: token.id, name: token.name },
      requestId,
    });
    const change = { action: 'audit.test.shape', workspaceId, target: { type: 'test', id: crypto.randomUUID() } };
    for (const requestId of ['trace-123', 'req_short', 'req_0123456789abcdef0']) {
      expect(
        await refused(roles.admin.transaction((trx) => recordAudit(trx, audit(requestId), change))),
        requestId,
      ).to.match(/request id is one the server made/);
    }
    expect(
      await db('audit_entries').where({ action: 'audit.test.shape' }).count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 0 }]);
  });

  it('through the admin API: the request id the server answered with, the one the client sent beside it', async function () {
    this.timeout(120_000); // (building the admin app's validators takes long on a busy machine)
    const admin = await startAdminApi();
    try {
      const slug = `audit-trail-api-${crypto.randomBytes(5).toString('hex')}`;
      const created = await admin.request('POST', '/admin/v1/workspaces', {
        token: token.token,
        body: { slug },
        headers: { 'x-request-id': 'trace-123 from the platform' },
      });
      expect(created.status).to.equal(201);
      const requestId = created.headers.get('x-request-id');
      expect(requestId).to.match(/^req_[\w-]{16}$/);
      const listed = await admin.request('GET', `/admin/v1/audit-entries?workspace=${created.body.id}`, {
        token: token.token,
      });
      expect(
        listed.body.rows.map((e: Record<string, unknown>) => ({
          action: e.action,
          actor: e.actor,
          requestId: e.requestId,
          clientRequestId: e.clientRequestId,
        })),
      ).to.deep.equal([
        {
          action: 'workspace.create',
          actor: { type: 'admin_token', id: token.id, name: token.name },
          requestId,
          clientRequestId: 'trace-123 from the platform',
        },
      ]);
      // the log line of the request names both
      expect(admin.logs.find((l) => l.requestId === requestId && l.msg === 'request')).to.include({
        clientRequestId: 'trace-123 from the platform',
      });
      // a key in the client's id, where the 200 characters kept would cut it short, is redacted before the cut
      const keyed = await admin.request('GET', '/admin/v1/workspaces', {
        token: token.token,
        headers: { 'x-request-id': `${'t'.repeat(189)} ${token.token}` },
      });
      const line = admin.logs.find((l) => l.requestId === keyed.headers.get('x-request-id') && l.msg === 'request');
      expect(line?.clientRequestId).to.equal(`${'t'.repeat(189)} [redacted]`);
    } finally {
      await admin.close();
    }
  });

  it('credentials in an endpoint URL never reach its audit entry', async () => {
    const url = 'https://receiver.example/in?api_key=k1&x=1&sig=abcdef#access_token=t0k3n&state=ok';
    const { id } = await createEndpoint(
      db,
      operatorWith({
        actor: { type: 'admin_token', id: token.id, name: token.name },
      }),
      { workspaceId, url, policy: processConfig().destinationPolicy },
    );
    const { changes } = await db('audit_entries').where({ target_id: id, action: 'endpoint.create' }).first('changes');
    expect(changes.url).to.equal(
      'https://receiver.example/in?api_key=[redacted]&x=1&sig=[redacted]#access_token=[redacted]&state=ok',
    );
    expect(JSON.stringify(changes)).not.to.match(/k1|abcdef|t0k3n/);
  });

  it('redactUrlCredentials: opaque values and secret-shaped ones, wherever in the text; plain URLs as they were', () => {
    expect(redactUrlCredentials('see https://receiver.example/in?id=42#top and more')).to.equal(
      'see https://receiver.example/in?id=42#top and more',
    );
    expect(redactUrlCredentials('x https://r.example/?q=AbCdEfGhIjKlMnOpQrStUvWx y')).to.equal(
      'x https://r.example/?q=[redacted] y',
    );
    expect(redactUrlCredentials('https://r.example/#AbCdEfGhIjKlMnOpQrStUvWx')).to.equal(
      'https://r.example/#[redacted]',
    );
    expect(redactUrlCredentials('no url here: user:pw@host')).to.equal('no url here: user:pw@host');
    expect(redactUrlCredentials('"https://a:b@r.example/p?x=1&password=hunter2&x=2" and HTTPS://R.EXAMPLE')).to.equal(
      '"https://[redacted]:[redacted]@r.example/p?x=1&password=[redacted]&x=2" and HTTPS://R.EXAMPLE',
    );
    expect(redactUrlCredentials('https://r.example/#frs_0123456789abcdefghijABCDEFGHIJ')).to.equal(
      'https://r.example/#[redacted]',
    );
  });
});
