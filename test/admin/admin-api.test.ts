import crypto from 'node:crypto';
import os from 'node:os';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { startAdminApi, type TestAdminApi } from './support.js';
import { ADMIN_API, documentedResults } from '../support/http.js';
import { createAdminToken, revokeAdminToken } from '../../src/core/admin-tokens.js';
import { createApiKey, createWorkspace } from '../../src/core/workspaces.js';
import { createClient, type Client } from '../../generated/admin/client/index.js';
import {
  createApiKey as createApiKeyOp,
  createWorkspace as createWorkspaceOp,
  getWorkspace,
  listApiKeys,
  listAuditEntries,
  listWorkspaces,
  revokeApiKey as revokeApiKeyOp,
  updateWorkspace as updateWorkspaceOp,
} from '../../generated/admin/sdk.gen.js';
import { idOf, operator, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';

// The admin API against a real database, as its own role: every operation through the generated client (generated/admin),
// each answer checked against openapi/admin.yaml; the credential's edges (401 both ways, workspace-scoped tokens); safe
// retries; and the audit entry of every change, with no secret in any log line or entry.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const unique = (name: string) => `adm-${name}-${process.pid}-${Date.now().toString(36)}`;

describe('the admin API', () => {
  let db: Knex;
  let admin: TestAdminApi;
  let token: { id: string; token: string; name: string };
  let client: Client;
  const secrets: string[] = [];

  const documented = documentedResults(ADMIN_API);

  before(async () => {
    ({ db } = await testDatabase());
    token = await createAdminToken(db, operatorWith(OPERATOR), { name: 'platform backend', workspaceId: 'every' });
    secrets.push(token.token);
    admin = await startAdminApi();
    client = createClient({ baseUrl: admin.url, auth: token.token });
  });
  after(async () => {
    await admin?.close();
    // No secret in any log line of the admin API.
    const logged = JSON.stringify(admin.logs);
    for (const secret of secrets) expect(logged, 'a log line holds a secret').not.to.include(secret.slice(4));
  });

  it('walks every operation through the generated client, each change audited with the token as the actor', async () => {
    const slug = unique('walk');
    const created = documented(
      'POST',
      '/admin/v1/workspaces',
      await createWorkspaceOp({ client, body: { slug, timezone: 'Asia/Riyadh', remindersAhead: 5 } }),
    );
    expect(created.response.status).to.equal(201);
    const ws = created.data!;
    expect(ws).to.deep.equal({
      id: ws.id,
      slug,
      status: 'active',
      timezone: 'Asia/Riyadh',
      remindersAhead: 5,
      webhookAllowedCidrs: [],
    }); // (an all-workspaces token sees the opened ranges)
    const workspaceId = ws.id;

    const listed = documented('GET', '/admin/v1/workspaces', await listWorkspaces({ client, query: { slug } }));
    expect(listed.data).to.deep.equal({ rows: [ws] });
    expect(
      documented('GET', '/admin/v1/workspaces', await listWorkspaces({ client, query: { slug: unique('none') } })).data,
    ).to.deep.equal({ rows: [] });
    expect(
      documented('GET', `/admin/v1/workspaces/${workspaceId}`, await getWorkspace({ client, path: { workspaceId } }))
        .data,
    ).to.deep.equal(ws);

    const updated = documented(
      'PATCH',
      `/admin/v1/workspaces/${workspaceId}`,
      await updateWorkspaceOp({ client, path: { workspaceId }, body: { status: 'frozen', remindersAhead: 7 } }),
    );
    expect(updated.data).to.deep.equal({ ...ws, status: 'frozen', remindersAhead: 7 });

    const key = documented(
      'POST',
      `/admin/v1/workspaces/${workspaceId}/api-keys`,
      await createApiKeyOp({ client, path: { workspaceId }, body: { role: 'bi', expiresAt: '2030-01-01T00:00:00Z' } }),
    );
    expect(key.response.status).to.equal(201);
    expect(key.data!.key).to.match(/^frs_[0-9A-Za-z]{40}$/);
    expect(key.data).to.deep.equal({
      id: key.data!.id,
      key: key.data!.key,
      role: 'bi',
      expiresAt: '2030-01-01T00:00:00.000Z',
    });
    secrets.push(key.data!.key);

    const keys = documented(
      'GET',
      `/admin/v1/workspaces/${workspaceId}/api-keys`,
      await listApiKeys({ client, path: { workspaceId } }),
    );
    expect(keys.data!.rows.map((k) => [k.id, k.role, k.expiresAt, k.revokedAt])).to.deep.equal([
      [key.data!.id, 'bi', '2030-01-01T00:00:00.000Z', null],
    ]);
    expect(JSON.stringify(keys.data)).not.to.include(key.data!.key);

    const revokePath = `/admin/v1/workspaces/${workspaceId}/api-keys/${key.data!.id}/revoke`;
    const revoked = documented(
      'POST',
      revokePath,
      await revokeApiKeyOp({ client, path: { workspaceId, keyId: key.data!.id } }),
    );
    expect(revoked.data!.id).to.equal(key.data!.id);
    // twice: the first time again, nothing recorded
    expect(
      documented('POST', revokePath, await revokeApiKeyOp({ client, path: { workspaceId, keyId: key.data!.id } })).data,
    ).to.deep.equal(revoked.data);

    const audit = documented(
      'GET',
      '/admin/v1/audit-entries',
      await listAuditEntries({ client, query: { workspace: workspaceId } }),
    );
    const actor = { type: 'admin_token', id: token.id, name: 'platform backend' };
    const target = (type: string, id: string) => ({ type, id });
    expect(audit.data!.nextCursor).to.equal(null);
    expect(
      audit.data!.rows.map(({ actor: a, action, workspaceId: w, target: t, changes }) => ({
        actor: a,
        action,
        workspaceId: w,
        target: t,
        changes,
      })),
    ).to.deep.equal([
      {
        actor,
        action: 'api_key.revoke',
        workspaceId,
        target: target('api_key', key.data!.id),
        changes: { revokedAt: revoked.data!.revokedAt },
      },
      {
        actor,
        action: 'api_key.create',
        workspaceId,
        target: target('api_key', key.data!.id),
        changes: { role: 'bi', expiresAt: '2030-01-01T00:00:00.000Z' },
      },
      {
        actor,
        action: 'workspace.update',
        workspaceId,
        target: target('workspace', workspaceId),
        changes: { status: { from: 'active', to: 'frozen' }, remindersAhead: { from: 5, to: 7 } },
      },
      {
        actor,
        action: 'workspace.create',
        workspaceId,
        target: target('workspace', workspaceId),
        changes: { slug, status: 'active', timezone: 'Asia/Riyadh', remindersAhead: 5 },
      },
    ]);
    // each entry carries the id of the request that made it
    expect(audit.data!.rows.every((e) => typeof e.requestId === 'string' && e.requestId.startsWith('req_'))).to.equal(
      true,
    );
    expect(
      JSON.stringify(
        await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ workspace_id: workspaceId }).select(),
      ),
    ).not.to.include(key.data!.key.slice(4));
  });

  it('pages the audit trail by signed cursor, newest first, and refuses a cursor used with other parameters', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('pages') });
    for (let i = 0; i < 5; i++) await createApiKey(db, operatorWith(OPERATOR), { workspaceId: ws.id, role: `r${i}` });
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = documented(
        'GET',
        '/admin/v1/audit-entries',
        await listAuditEntries({ client, query: { workspace: ws.id, limit: 2, cursor } }),
      );
      seen.push(...page.data!.rows.filter((e) => e.actor.name !== FIXTURE_ACTOR).map((e) => e.changes.role as string));
      cursor = page.data!.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).to.deep.equal(['r4', 'r3', 'r2', 'r1', 'r0']);
    const first = await listAuditEntries({ client, query: { workspace: ws.id, limit: 2 } });
    const other = await admin.request('GET', `/admin/v1/audit-entries?limit=2&cursor=${first.data!.nextCursor}`, {
      token: token.token,
    });
    expect(other.status).to.equal(400);
    expect(other.body.error.reason).to.equal('cursor');
  });

  it('a key revoked through the admin API is refused by an API process that remembers it, within a second', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('revoke') });
    const api: TestApi = await startApi({ keyCache: true });
    try {
      const made = await admin.request('POST', `/admin/v1/workspaces/${ws.id}/api-keys`, {
        token: token.token,
        body: {},
      });
      secrets.push(made.body.key);
      expect((await api.get('/v1/me', made.body.key)).status).to.equal(200); // remembered now
      await admin.request('POST', `/admin/v1/workspaces/${ws.id}/api-keys/${made.body.id}/revoke`, {
        token: token.token,
      });
      const revokedAt = Date.now();
      let status = 200;
      while (status === 200 && Date.now() - revokedAt < 1000) {
        status = (await api.get('/v1/me', made.body.key)).status;
        if (status === 200) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(status, 'refused within 1 s').to.equal(401);
    } finally {
      await api.close();
    }
  });

  it('answers 401 with WWW-Authenticate to a missing, unknown, revoked or expired token and to a public API key', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('auth') });
    const apiKey = await createApiKey(db, operator, { workspaceId: ws.id });
    const revoked = await createAdminToken(db, operatorWith(OPERATOR), { name: 'gone', workspaceId: 'every' });
    await revokeAdminToken(db, operatorWith(OPERATOR), { id: revoked.id });
    const expired = await createAdminToken(db, operatorWith(OPERATOR), {
      name: 'old',
      expiresAt: '2020-01-01T00:00:00Z',
      workspaceId: 'every',
    });
    secrets.push(apiKey.key, revoked.token, expired.token);
    for (const [credential, reason] of [
      [undefined, 'missing'],
      [apiKey.key, 'unknown'],
      [`fra_${'x'.repeat(40)}`, 'unknown'],
      [revoked.token, 'revoked'],
      [expired.token, 'expired'],
    ] as const) {
      const res = await admin.request('GET', '/admin/v1/workspaces', { token: credential });
      expect(res.status, reason).to.equal(401);
      expect(res.body.error).to.deep.include({ code: 'unauthorized', reason });
      expect(res.headers.get('www-authenticate')).to.match(/^Bearer realm="fleet-rental-admin"/);
    }
  });

  it('the public listener serves nothing of the admin API, and refuses an admin token with 401', async () => {
    const api: TestApi = await startApi();
    try {
      const res = await api.get('/v1/me', token.token);
      expect(res.status).to.equal(401);
      expect(res.body.error.reason).to.equal('unknown');
      const ws = (await listWorkspaces({ client })).data!.rows[0];
      const admin404 = await api.get(`/admin/v1/workspaces/${ws.id}`, token.token);
      expect(admin404.status).to.equal(404);
    } finally {
      await api.close();
    }
  });

  it('a token confined to a workspace reaches only it: others are 404, listWorkspaces lists only it, createWorkspace is 403', async () => {
    const mine = await createWorkspace(db, operator, { slug: unique('mine') });
    const theirs = await createWorkspace(db, operator, { slug: unique('theirs') });
    const theirKey = await createApiKey(db, operator, { workspaceId: theirs.id });
    const scoped = await createAdminToken(db, operatorWith(OPERATOR), {
      name: 'screen',
      workspaceId: await idOf(db, mine.slug),
    });
    secrets.push(scoped.token, theirKey.key);
    const as = { token: scoped.token };
    expect(
      (await admin.request('GET', '/admin/v1/workspaces', as)).body.rows.map((w: { id: string }) => w.id),
    ).to.deep.equal([mine.id]);
    expect((await admin.request('GET', `/admin/v1/workspaces?slug=${theirs.slug}`, as)).body).to.deep.equal({
      rows: [],
    });
    expect((await admin.request('GET', `/admin/v1/workspaces/${mine.id}`, as)).status).to.equal(200);
    for (const [method, path, body] of [
      ['GET', `/admin/v1/workspaces/${theirs.id}`],
      ['PATCH', `/admin/v1/workspaces/${theirs.id}`, { status: 'frozen' }],
      ['GET', `/admin/v1/workspaces/${theirs.id}/api-keys`],
      ['POST', `/admin/v1/workspaces/${theirs.id}/api-keys`, {}],
      ['POST', `/admin/v1/workspaces/${theirs.id}/api-keys/${theirKey.id}/revoke`],
      // their key through my workspace's path
      ['POST', `/admin/v1/workspaces/${mine.id}/api-keys/${theirKey.id}/revoke`],
      ['GET', `/admin/v1/audit-entries?workspace=${theirs.id}`],
    ] as const) {
      const res = await admin.request(method, path, { ...as, body });
      expect(res.status, `${method} ${path}`).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
    const refused = await admin.request('POST', '/admin/v1/workspaces', { ...as, body: { slug: unique('more') } });
    expect(refused.status).to.equal(403);
    expect(refused.body.error.code).to.equal('forbidden');
    // nothing of theirs changed
    expect((await db('workspaces').where({ id: theirs.id }).first('status')).status).to.equal('active');
    expect((await db('api_keys').where({ id: theirKey.id }).first('revoked_at')).revoked_at).to.equal(null);
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: theirs.id })
        .count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 0 }]);
  });

  it('a token confined to a workspace cannot change its status (403 reason status, nothing changed): the platform froze it', async () => {
    const mine = await createWorkspace(db, operator, { slug: unique('frozen') });
    const scoped = await createAdminToken(db, operatorWith(OPERATOR), {
      name: 'tenant backend',
      workspaceId: await idOf(db, mine.slug),
    });
    secrets.push(scoped.token);
    const path = `/admin/v1/workspaces/${mine.id}`;
    expect((await admin.request('PATCH', path, { token: token.token, body: { status: 'frozen' } })).status).to.equal(
      200,
    );
    for (const body of [{ status: 'active' }, { status: 'frozen', timezone: 'Europe/Berlin' }]) {
      const refused = await admin.request('PATCH', path, { token: scoped.token, body });
      expect(refused.status, JSON.stringify(body)).to.equal(403);
      expect(refused.body.error).to.deep.include({ code: 'forbidden', reason: 'status' });
    }
    expect(await db('workspaces').where({ id: mine.id }).first('status', 'timezone')).to.deep.equal({
      status: 'frozen',
      timezone: mine.timezone,
    });
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: mine.id, action: 'workspace.update' })
        .count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 1 }]);
    // Its other settings are its own to change; the platform's token lifts the freeze.
    const zone = await admin.request('PATCH', path, { token: scoped.token, body: { timezone: 'Europe/Berlin' } });
    expect([zone.status, zone.body.status, zone.body.timezone]).to.deep.equal([200, 'frozen', 'Europe/Berlin']);
    expect(
      (await admin.request('PATCH', path, { token: token.token, body: { status: 'active' } })).body.status,
    ).to.equal('active');
  });

  it('Idempotency-Key: the same request again answers the first answer (the same key, no second record); another request is 409', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('idem') });
    const path = `/admin/v1/workspaces/${ws.id}/api-keys`;
    const headers = { 'Idempotency-Key': `retry-${Date.now()}` };
    const first = await admin.request('POST', path, { token: token.token, headers, body: { role: 'bi' } });
    // the same body with its fields in another order, and spaced otherwise, is the same request
    const again = await admin.request('POST', path, { token: token.token, headers, body: '{ "role" : "bi" }' });
    expect(first.status).to.equal(201);
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(first.body);
    secrets.push(first.body.key);
    expect(await db('api_keys').where({ workspace_id: ws.id }).count<{ count: number }[]>('* as count')).to.deep.equal([
      { count: 1 },
    ]);
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: ws.id, action: 'api_key.create' })
        .count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 1 }]);
    // kept sealed: neither the key nor any part of the answer in plain text, and the Idempotency-Key only as its SHA-256
    expect(
      await db('admin_idempotency_keys').where({ token_id: token.id, key: headers['Idempotency-Key'] }).first(),
    ).to.equal(undefined);
    const kept = await db('admin_idempotency_keys')
      .where({ token_id: token.id, key: crypto.createHash('sha256').update(headers['Idempotency-Key']).digest('hex') })
      .first();
    expect(kept.status).to.equal(201);
    expect(kept.response_sealed.toString('latin1'))
      .not.to.include(first.body.key.slice(4))
      .and.not.to.include(first.body.id);

    const conflict = await admin.request('POST', path, { token: token.token, headers, body: { role: 'other' } });
    expect(conflict.status).to.equal(409);
    expect(conflict.body.error).to.deep.include({ code: 'idempotency_key_reused', reason: 'Idempotency-Key' });
    // the same key on another operation is another request too
    const elsewhere = await admin.request('POST', '/admin/v1/workspaces', {
      token: token.token,
      headers,
      body: { role: 'bi' },
    });
    expect(elsewhere.status).to.equal(400); // (its body is refused first: role is no field of a workspace)
    const workspaceRetry = { 'Idempotency-Key': `ws-${Date.now()}` };
    const slug = unique('idem-ws');
    const w1 = await admin.request('POST', '/admin/v1/workspaces', {
      token: token.token,
      headers: workspaceRetry,
      body: { slug },
    });
    const w2 = await admin.request('POST', '/admin/v1/workspaces', {
      token: token.token,
      headers: workspaceRetry,
      body: { slug },
    });
    expect([w1.status, w2.status]).to.deep.equal([201, 201]);
    expect(w2.body).to.deep.equal(w1.body);
    expect(
      (
        await admin.request('POST', '/admin/v1/workspaces', {
          token: token.token,
          headers: workspaceRetry,
          body: { slug: unique('x') },
        })
      ).status,
    ).to.equal(409);
    // keys are per token: another token's same key is its own
    const other = await createAdminToken(db, operatorWith(OPERATOR), { name: 'other', workspaceId: 'every' });
    secrets.push(other.token);
    const theirs = await admin.request('POST', path, { token: other.token, headers, body: { role: 'bi' } });
    expect(theirs.status).to.equal(201);
    expect(theirs.body.id).not.to.equal(first.body.id);
    secrets.push(theirs.body.key);
  });

  it('bad input gets the documented error naming the field and changes nothing; unknown ids 404; a slug taken 409', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('bad') });
    const as = { token: token.token };
    const cases: Array<[string, string, unknown, number, string]> = [
      ['POST', '/admin/v1/workspaces', { slug: 'Not A Slug' }, 400, 'slug'],
      ['POST', '/admin/v1/workspaces', { slug: ws.slug }, 409, 'slug'],
      ['POST', '/admin/v1/workspaces', { slug: unique('tz'), timezone: 'Mars/Olympus' }, 400, 'timezone'],
      ['POST', '/admin/v1/workspaces', { slug: unique('extra'), owner: 'x' }, 400, 'owner'],
      ['POST', '/admin/v1/workspaces', {}, 400, 'slug'],
      ['POST', '/admin/v1/workspaces', '{"slug": ', 400, 'body'],
      ['PATCH', `/admin/v1/workspaces/${ws.id}`, { remindersAhead: 61 }, 400, 'remindersAhead'],
      ['PATCH', `/admin/v1/workspaces/${ws.id}`, { status: 'gone' }, 400, 'status'],
      ['POST', `/admin/v1/workspaces/${ws.id}/api-keys`, { expiresAt: 'tomorrow' }, 400, 'expiresAt'],
      ['POST', `/admin/v1/workspaces/${ws.id}/api-keys`, { role: '' }, 400, 'role'],
      ['GET', '/admin/v1/workspaces/not-a-uuid', undefined, 400, 'workspaceId'],
    ];
    for (const [method, path, body, status, reason] of cases) {
      const res = await admin.request(method, path, { ...as, body });
      expect([res.status, res.body.error.reason], `${method} ${path} ${JSON.stringify(body)}`).to.deep.equal([
        status,
        reason,
      ]);
    }
    const missing = '5d0c9a1e-1111-4222-8333-944455556666';
    for (const [method, path] of [
      ['GET', `/admin/v1/workspaces/${missing}`],
      ['POST', `/admin/v1/workspaces/${ws.id}/api-keys/${missing}/revoke`],
    ] as const) {
      const res = await admin.request(method, path, as);
      expect(res.status).to.equal(404);
    }
    expect(await db('workspaces').where({ id: ws.id }).first('status', 'reminders_ahead')).to.deep.equal({
      status: 'active',
      reminders_ahead: 3,
    });
    expect(await db('api_keys').where({ workspace_id: ws.id }).count<{ count: number }[]>('* as count')).to.deep.equal([
      { count: 0 },
    ]);
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: ws.id })
        .count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 0 }]);
  });

  it('serves its document at /openapi.json and its reference at /docs', async () => {
    const doc = await fetch(`${admin.url}/openapi.json`);
    expect((await doc.json()).info.title).to.equal('Fleet Rental Service admin API');
    const page = await fetch(`${admin.url}/docs`);
    expect(await page.text()).to.include('<title>Fleet Rental Service admin API</title>');
    expect(await (await fetch(`${admin.url}/docs/configuration.js`)).text()).to.include(
      '"preferredSecurityScheme":"adminToken"',
    );
  });
});
