import crypto from 'node:crypto';
import os from 'node:os';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { fleetAdminOn } from '../support/cli.js';
import { startReceiver, verifyIndependently, type Receiver } from '../support/receiver.js';
import { bookingConfirmedData, dropTestWorkspaces, eventually, sleep, webhookWorkspace } from '../webhooks/support.js';
import { startAdminApi, type TestAdminApi } from './support.js';
import { ADMIN_API, documentedResults } from '../support/http.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { createApiKey, createWorkspace } from '../../src/core/workspaces.js';
import { openSigningSecret } from '../../src/webhooks/sealing.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { createClient, type Client } from '../../generated/admin/client/index.js';
import { reconfigure } from '../support/config.js';
import {
  createEndpoint,
  deleteEndpoint,
  disableEndpoint,
  enableEndpoint,
  getEndpoint,
  listAuditEntries,
  listEndpoints,
  rotateEndpointSecret,
  updateEndpoint,
} from '../../generated/admin/sdk.gen.js';
import { idOf, operator, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';

// The admin API's webhook endpoint operations (issue 24, point 3) against a real database, through the generated client,
// each answer checked against openapi/admin.yaml: registration with its secret shown once and the duplicate-URL rule,
// changes under the destination policy, deletion (pending deliveries failed, none sent after the answer, even by a
// dispatcher that had claimed them), switching, secret rotation, safe retries, a scoped token's reach, bad input, the
// audit entry of every change, and the CLI's `endpoint update` and `endpoint delete` on the same core.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const unique = (name: string) => `ep-${name}-${process.pid}-${Date.now().toString(36)}`;
const count = async (query: Knex.QueryBuilder) =>
  Number((await query.count<{ count: string }[]>('* as count'))[0].count);

describe('the admin API: webhook endpoints', () => {
  let db: Knex;
  let admin: TestAdminApi;
  let token: { id: string; token: string; name: string };
  let client: Client;
  let receiver: Receiver;
  const secrets: string[] = [];

  const documented = documentedResults(ADMIN_API);
  const base = (workspaceId: string) => `/admin/v1/workspaces/${workspaceId}/endpoints`;

  before(async () => {
    ({ db } = await testDatabase());
    token = await createAdminToken(db, operatorWith(OPERATOR), { name: 'platform backend', workspaceId: 'every' });
    secrets.push(token.token);
    admin = await startAdminApi();
    client = createClient({ baseUrl: admin.url, auth: token.token });
    receiver = await startReceiver();
  });
  after(async () => {
    await admin?.close();
    await receiver?.close();
    await dropTestWorkspaces(db);
    const logged = JSON.stringify(admin.logs);
    for (const secret of secrets) expect(logged, 'a log line holds a secret').not.to.include(secret.slice(6));
  });

  it('walks every endpoint operation, each change audited with the token as the actor and never a secret', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('walk') });
    const workspaceId = ws.id;
    const created = documented(
      'POST',
      base(workspaceId),
      await createEndpoint({
        client,
        path: { workspaceId },
        body: {
          url: 'https://hooks.example.ae/fleet',
          name: 'Accounting sync',
          events: ['booking.confirmed', 'payment.captured'],
        },
      }),
    );
    expect(created.response.status).to.equal(201);
    const id = created.data!.id;
    const secret = created.data!.secret;
    secrets.push(secret);
    expect(secret).to.match(/^whsec_[0-9A-Za-z]{40}$/);
    const record = {
      id,
      name: 'Accounting sync',
      url: 'https://hooks.example.ae/fleet',
      events: ['booking.confirmed', 'payment.captured'],
      isActive: true,
      disabledAt: null,
      disabledReason: null,
      lastSuccessAt: null,
      consecutiveFailures: 0,
      signatureScheme: 'hmac-sha256',
      publicKey: null,
      previousSchemeExpiresAt: null,
      rateLimit: null,
      throttledUntil: null,
    };
    expect(created.data).to.deep.equal({ ...record, secret });
    // stored sealed under the master key, opening to the secret shown
    const stored = await db('webhook_endpoints').where({ id }).first('secret_key_id', 'secret_sealed');
    expect(stored.secret_sealed.toString('latin1')).not.to.include(secret.slice(6));
    expect(openSigningSecret(id, { keyId: stored.secret_key_id, sealed: stored.secret_sealed })).to.equal(secret);

    expect(
      documented('GET', base(workspaceId), await listEndpoints({ client, path: { workspaceId } })).data,
    ).to.deep.equal({ rows: [record] });
    expect(
      documented(
        'GET',
        `${base(workspaceId)}/${id}`,
        await getEndpoint({ client, path: { workspaceId, endpointId: id } }),
      ).data,
    ).to.deep.equal(record);

    const updated = documented(
      'PATCH',
      `${base(workspaceId)}/${id}`,
      await updateEndpoint({
        client,
        path: { workspaceId, endpointId: id },
        body: { url: 'https://hooks.example.ae/fleet/v2', name: 'Ledger', events: ['invoice.overdue'] },
      }),
    );
    const v2 = { ...record, url: 'https://hooks.example.ae/fleet/v2', name: 'Ledger', events: ['invoice.overdue'] };
    expect(updated.data).to.deep.equal(v2);
    // absent fields stay; a field sent with its current value is no change
    const renamed = documented(
      'PATCH',
      `${base(workspaceId)}/${id}`,
      await updateEndpoint({
        client,
        path: { workspaceId, endpointId: id },
        body: { name: 'Ledger sync', events: ['invoice.overdue'] },
      }),
    );
    expect(renamed.data).to.deep.equal({ ...v2, name: 'Ledger sync' });

    const off = documented(
      'POST',
      `${base(workspaceId)}/${id}/disable`,
      await disableEndpoint({ client, path: { workspaceId, endpointId: id } }),
    );
    expect(off.data).to.deep.equal({
      ...v2,
      name: 'Ledger sync',
      isActive: false,
      disabledAt: off.data!.disabledAt,
      disabledReason: 'manual',
    });
    expect(new Date(off.data!.disabledAt!).toISOString()).to.equal(off.data!.disabledAt);
    const on = documented(
      'POST',
      `${base(workspaceId)}/${id}/enable`,
      await enableEndpoint({ client, path: { workspaceId, endpointId: id } }),
    );
    expect(on.data).to.deep.equal({ ...v2, name: 'Ledger sync' });

    const rotated = documented(
      'POST',
      `${base(workspaceId)}/${id}/rotate-secret`,
      await rotateEndpointSecret({ client, path: { workspaceId, endpointId: id }, body: { overlapHours: 0 } }),
    );
    expect(rotated.data).to.deep.equal({ id, secret: rotated.data!.secret, previousSecretExpiresAt: null });
    expect(rotated.data!.secret)
      .to.match(/^whsec_[0-9A-Za-z]{40}$/)
      .and.not.equal(secret);
    secrets.push(rotated.data!.secret);

    const deleted = documented(
      'DELETE',
      `${base(workspaceId)}/${id}`,
      await deleteEndpoint({ client, path: { workspaceId, endpointId: id } }),
    );
    expect(deleted.response.status).to.equal(204);
    expect(
      documented('GET', base(workspaceId), await listEndpoints({ client, path: { workspaceId } })).data,
    ).to.deep.equal({ rows: [] });
    for (const [method, path] of [
      ['GET', `${base(workspaceId)}/${id}`],
      ['DELETE', `${base(workspaceId)}/${id}`],
      ['POST', `${base(workspaceId)}/${id}/enable`],
    ] as const) {
      const again = await admin.request(method, path, { token: token.token });
      expect(again.status, `${method} ${path}`).to.equal(404);
      expect(again.body.error.code).to.equal('not_found');
    }
    // the row is kept (soft delete: its delivery log stays readable), marked deleted
    expect((await db('webhook_endpoints').where({ id }).first('deleted_at')).deleted_at).to.be.an.instanceOf(Date);

    const audit = documented(
      'GET',
      '/admin/v1/audit-entries',
      await listAuditEntries({ client, query: { workspace: workspaceId } }),
    );
    const actor = { type: 'admin_token', id: token.id, name: 'platform backend' };
    const target = { type: 'endpoint', id };
    expect(
      audit
        .data!.rows.filter((e) => e.actor.name !== FIXTURE_ACTOR)
        .map(({ actor: a, action, workspaceId: w, target: t, changes }) => ({
          actor: a,
          action,
          workspaceId: w,
          target: t,
          changes,
        })),
    ).to.deep.equal([
      {
        actor,
        action: 'endpoint.delete',
        workspaceId,
        target,
        changes: { name: 'Ledger sync', url: 'https://hooks.example.ae/fleet/v2' },
      },
      {
        actor,
        action: 'endpoint.rotate_secret',
        workspaceId,
        target,
        changes: { overlapHours: 0, previousSecretExpiresAt: null },
      },
      { actor, action: 'endpoint.enable', workspaceId, target, changes: { isActive: true } },
      { actor, action: 'endpoint.disable', workspaceId, target, changes: { isActive: false } },
      {
        actor,
        action: 'endpoint.update',
        workspaceId,
        target,
        changes: { name: { from: 'Ledger', to: 'Ledger sync' } },
      },
      {
        actor,
        action: 'endpoint.update',
        workspaceId,
        target,
        changes: {
          url: { from: 'https://hooks.example.ae/fleet', to: 'https://hooks.example.ae/fleet/v2' },
          name: { from: 'Accounting sync', to: 'Ledger' },
          events: { from: ['booking.confirmed', 'payment.captured'], to: ['invoice.overdue'] },
        },
      },
      {
        actor,
        action: 'endpoint.create',
        workspaceId,
        target,
        changes: {
          name: 'Accounting sync',
          url: 'https://hooks.example.ae/fleet',
          events: ['booking.confirmed', 'payment.captured'],
        },
      },
    ]);
    const trail = JSON.stringify(
      await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ workspace_id: workspaceId }).select(),
    );
    for (const s of [secret, rotated.data!.secret]) expect(trail).not.to.include(s.slice(6));
  });

  it("a URL the workspace already has is 409 naming url, unless allowDuplicateUrl; on update too; a deleted endpoint's URL is free", async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('dup') });
    const as = { token: token.token };
    const first = await admin.request('POST', base(ws.id), { ...as, body: { url: 'https://hooks.example.ae/in' } });
    expect(first.status).to.equal(201);
    // the same URL, written otherwise (host case, default port), is the same URL
    for (const url of ['https://hooks.example.ae/in', 'https://HOOKS.example.ae:443/in']) {
      const again = await admin.request('POST', base(ws.id), { ...as, body: { url } });
      expect([again.status, again.body.error.code, again.body.error.reason], url).to.deep.equal([
        409,
        'conflict',
        'url',
      ]);
      expect(again.body.error.message).to.include(first.body.id).and.include('allowDuplicateUrl');
    }
    expect(await count(db('webhook_endpoints').where({ workspace_id: ws.id }))).to.equal(1);
    const twin = await admin.request('POST', base(ws.id), {
      ...as,
      body: { url: 'https://hooks.example.ae/in', allowDuplicateUrl: true },
    });
    expect(twin.status).to.equal(201);
    // another workspace may have the URL
    const other = await createWorkspace(db, operator, { slug: unique('dup-other') });
    expect(
      (await admin.request('POST', base(other.id), { ...as, body: { url: 'https://hooks.example.ae/in' } })).status,
    ).to.equal(201);

    const second = await admin.request('POST', base(ws.id), {
      ...as,
      body: { url: 'https://hooks.example.ae/second' },
    });
    const clash = await admin.request('PATCH', `${base(ws.id)}/${second.body.id}`, {
      ...as,
      body: { url: 'https://hooks.example.ae/in' },
    });
    expect([clash.status, clash.body.error.reason]).to.deep.equal([409, 'url']);
    expect((await db('webhook_endpoints').where({ id: second.body.id }).first('url')).url).to.equal(
      'https://hooks.example.ae/second',
    );
    const allowed = await admin.request('PATCH', `${base(ws.id)}/${second.body.id}`, {
      ...as,
      body: { url: 'https://hooks.example.ae/in', allowDuplicateUrl: true },
    });
    expect([allowed.status, allowed.body.url]).to.deep.equal([200, 'https://hooks.example.ae/in']);

    for (const id of [first.body.id, twin.body.id, second.body.id])
      expect((await admin.request('DELETE', `${base(ws.id)}/${id}`, as)).status).to.equal(204);
    expect(
      (await admin.request('POST', base(ws.id), { ...as, body: { url: 'https://hooks.example.ae/in' } })).status,
    ).to.equal(201);
    secrets.push(first.body.secret, twin.body.secret, second.body.secret);
  });

  it('the destination policy refuses a private URL on create and update: 400 naming url and the class (never a setting), nothing changed', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('policy') });
    const as = { token: token.token };
    const made = await admin.request('POST', base(ws.id), {
      ...as,
      body: { url: 'https://hooks.example.ae/ok', name: 'Kept' },
    });
    secrets.push(made.body.secret);
    const restore = reconfigure({ FRS_ALLOW_PRIVATE_WEBHOOK_URLS: '0' });
    try {
      for (const [method, path] of [
        ['POST', base(ws.id)],
        ['PATCH', `${base(ws.id)}/${made.body.id}`],
      ] as const) {
        const refused = await admin.request(method, path, { ...as, body: { url: 'http://10.0.0.5/hook' } });
        expect([refused.status, refused.body.error.code, refused.body.error.reason], method).to.deep.equal([
          400,
          'invalid_request',
          'url',
        ]);
        expect(refused.body.error.message).to.equal(
          'Field "url" refused: 10.0.0.5 is a private address; webhooks are not sent to private destinations unless the service\'s operator opens the range for this workspace',
        );
      }
    } finally {
      restore();
    }
    expect(await db('webhook_endpoints').where({ workspace_id: ws.id }).select('id', 'url', 'name')).to.deep.equal([
      { id: made.body.id, url: 'https://hooks.example.ae/ok', name: 'Kept' },
    ]);
    expect(
      await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ workspace_id: ws.id }).pluck('action'),
    ).to.deep.equal(['endpoint.create']);
  });

  it('delete: pending deliveries failed as endpoint_deleted, none sent after the 204 (not even one a running dispatcher had claimed), gone from /v1/webhooks', async () => {
    const ws = await webhookWorkspace(db);
    const api: TestApi = await startApi();
    // Each attempt takes 400 ms and fails, so that when the delete comes one attempt is under way and the next is
    // claimed ahead, waiting for the endpoint's single slot.
    // (a 500: a 503 would throttle the endpoint, and the claimed-ahead delivery would be given back)
    const slow = await startReceiver(() => ({ status: 500, delayMs: 400 }));
    const dispatcher = ws.dispatcher({ perEndpointConcurrency: 1, pollIntervalMs: 50 });
    try {
      const key = await createApiKey(db, operator, { workspaceId: ws.id });
      secrets.push(key.key);
      const made = await admin.request('POST', base(ws.id), {
        token: token.token,
        body: { url: slow.endpointUrl(), events: ['booking.confirmed'] },
      });
      const keep = await admin.request('POST', base(ws.id), {
        token: token.token,
        body: { url: receiver.endpointUrl() },
      });
      secrets.push(made.body.secret, keep.body.secret);
      for (let i = 0; i < 4; i++)
        await recordEvent(db, {
          workspaceId: ws.id,
          event: 'booking.confirmed',
          data: bookingConfirmedData(),
          source: 'publish',
        });
      const ids = await db('deliveries').where({ endpoint_id: made.body.id }).orderBy('created_at').pluck('id');
      expect(ids).to.have.length(4);
      await dispatcher.start();
      await slow.waitForRequests(1);
      // one in flight, one claimed ahead
      await eventually(
        async () =>
          (await count(db('deliveries').where({ endpoint_id: made.body.id }).whereNotNull('lease_owner'))) >= 2,
        5000,
        'two leased',
      );

      const res = await admin.request('DELETE', `${base(ws.id)}/${made.body.id}`, { token: token.token });
      expect(res.status).to.equal(204);
      const sentBefore = slow.requests.length;
      await sleep(1500); // several attempt lengths and polls
      expect(slow.requests.length, 'sent after the 204').to.equal(sentBefore);
      expect(
        await db('deliveries')
          .whereIn('id', ids)
          .orderBy('created_at')
          .select('status', 'error_kind', 'next_attempt_at', 'lease_owner'),
      ).to.deep.equal(
        ids.map(() => ({ status: 'failed', error_kind: 'endpoint_deleted', next_attempt_at: null, lease_owner: null })),
      );
      // a new event is not fanned out to it; the other endpoint still gets everything
      await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
      expect(await count(db('deliveries').where({ endpoint_id: made.body.id }))).to.equal(4);
      await receiver.waitForRequests(5);

      const listed = await api.get('/v1/webhooks', key.key);
      expect(listed.body.rows.map((e: { id: string }) => e.id)).to.deep.equal([keep.body.id]);
      // its delivery log stays readable, each delivery failed with its own kind
      const log = await api.get(`/v1/webhooks/${made.body.id}/deliveries`, key.key);
      expect(log.status).to.equal(200);
      expect(
        log.body.rows.map((d: { status: string; lastErrorKind: string }) => [d.status, d.lastErrorKind]),
      ).to.deep.equal(ids.map(() => ['failed', 'endpoint_deleted']));
      expect(
        (
          await api.request('POST', `/v1/webhooks/${made.body.id}/test`, {
            key: key.key,
            headers: { 'Idempotency-Key': 'after-delete' },
          })
        ).status,
      ).to.equal(404);
    } finally {
      await dispatcher.stop();
      await slow.close();
      await api.close();
      receiver.reset();
    }
  });

  it('rotate-secret: during the overlap a delivery carries two signatures, the new secret first', async () => {
    const ws = await webhookWorkspace(db);
    const url = receiver.endpointUrl();
    const made = await admin.request('POST', base(ws.id), { token: token.token, body: { url } });
    const rotated = await admin.request('POST', `${base(ws.id)}/${made.body.id}/rotate-secret`, {
      token: token.token,
      body: { overlapHours: 2 },
    });
    secrets.push(made.body.secret, rotated.body.secret);
    expect(rotated.status).to.equal(200);
    const expires = new Date(rotated.body.previousSecretExpiresAt).getTime();
    expect(expires - Date.now()).to.be.within(2 * 3_600_000 - 60_000, 2 * 3_600_000);
    receiver.reset();
    await recordEvent(db, {
      workspaceId: ws.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
    expect(await ws.dispatcher().runOnce()).to.deep.include({ attempted: 1, accepted: 1 });
    const [request] = receiver.requests.filter((r) => r.path === new URL(url).pathname);
    const values = request.signature!.split(',').filter((part) => part.startsWith('v1='));
    expect(values).to.have.length(2);
    const t = request.signature!.split(',')[0].slice(2);
    const hmac = (secret: string) =>
      `v1=${crypto.createHmac('sha256', secret).update(`${t}.${request.rawBody}`).digest('hex')}`;
    expect(values).to.deep.equal([hmac(rotated.body.secret), hmac(made.body.secret)]);
    for (const secret of [rotated.body.secret, made.body.secret])
      expect(verifyIndependently(request.rawBody, request.signature, secret, Date.now() / 1000)).to.deep.equal({
        ok: true,
      });
  });

  it('Idempotency-Key on create and rotate: the same request answers the same secret (one record, one rotation); another body 409', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('idem') });
    const headers = { 'Idempotency-Key': `ep-${Date.now()}` };
    const as = { token: token.token, headers };
    const first = await admin.request('POST', base(ws.id), {
      ...as,
      body: { url: 'https://hooks.example.ae/idem', name: 'A' },
    });
    const again = await admin.request('POST', base(ws.id), {
      ...as,
      body: '{"name": "A", "url": "https://hooks.example.ae/idem"}',
    });
    expect([first.status, again.status]).to.deep.equal([201, 201]);
    expect(again.body).to.deep.equal(first.body);
    secrets.push(first.body.secret);
    expect(await count(db('webhook_endpoints').where({ workspace_id: ws.id }))).to.equal(1);
    const kept = await db('admin_idempotency_keys')
      .where({ token_id: token.id, key: crypto.createHash('sha256').update(headers['Idempotency-Key']).digest('hex') })
      .first('response_sealed');
    expect(kept.response_sealed.toString('latin1')).not.to.include(first.body.secret.slice(6));
    const reused = await admin.request('POST', base(ws.id), { ...as, body: { url: 'https://hooks.example.ae/other' } });
    expect([reused.status, reused.body.error.code, reused.body.error.reason]).to.deep.equal([
      409,
      'idempotency_key_reused',
      'Idempotency-Key',
    ]);

    const rotatePath = `${base(ws.id)}/${first.body.id}/rotate-secret`;
    const rotateKey = { 'Idempotency-Key': `rot-${Date.now()}` };
    const r1 = await admin.request('POST', rotatePath, {
      token: token.token,
      headers: rotateKey,
      body: { overlapHours: 1 },
    });
    const r2 = await admin.request('POST', rotatePath, {
      token: token.token,
      headers: rotateKey,
      body: { overlapHours: 1 },
    });
    secrets.push(r1.body.secret);
    expect([r1.status, r2.status]).to.deep.equal([200, 200]);
    expect(r2.body).to.deep.equal(r1.body);
    // one rotation: the secret stored is the one answered, the previous one the first
    const row = await db('webhook_endpoints')
      .where({ id: first.body.id })
      .first('secret_key_id', 'secret_sealed', 'previous_secret_key_id', 'previous_secret_sealed');
    expect(openSigningSecret(first.body.id, { keyId: row.secret_key_id, sealed: row.secret_sealed })).to.equal(
      r1.body.secret,
    );
    expect(
      openSigningSecret(first.body.id, { keyId: row.previous_secret_key_id, sealed: row.previous_secret_sealed }),
    ).to.equal(first.body.secret);
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: ws.id })
        .orderBy('at')
        .pluck('action'),
    ).to.deep.equal(['endpoint.create', 'endpoint.rotate_secret']);
    const otherBody = await admin.request('POST', rotatePath, {
      token: token.token,
      headers: rotateKey,
      body: { overlapHours: 2 },
    });
    expect([otherBody.status, otherBody.body.error.code]).to.deep.equal([409, 'idempotency_key_reused']);
  });

  it("a token confined to a workspace gets 404 for every operation on another workspace's endpoint, which stays as it was", async () => {
    const mine = await createWorkspace(db, operator, { slug: unique('mine') });
    const theirs = await createWorkspace(db, operator, { slug: unique('theirs') });
    const theirEndpoint = await admin.request('POST', base(theirs.id), {
      token: token.token,
      body: { url: 'https://hooks.example.ae/theirs' },
    });
    secrets.push(theirEndpoint.body.secret);
    const scoped = await createAdminToken(db, operatorWith(OPERATOR), {
      name: 'screen',
      workspaceId: await idOf(db, mine.slug),
    });
    secrets.push(scoped.token);
    const id = theirEndpoint.body.id;
    for (const workspaceId of [theirs.id, mine.id]) {
      for (const [method, path, body] of [
        ['GET', base(workspaceId)],
        ['POST', base(workspaceId), { url: 'https://hooks.example.ae/x' }],
        ['GET', `${base(workspaceId)}/${id}`],
        ['PATCH', `${base(workspaceId)}/${id}`, { name: 'Mine now' }],
        ['DELETE', `${base(workspaceId)}/${id}`],
        ['POST', `${base(workspaceId)}/${id}/disable`],
        ['POST', `${base(workspaceId)}/${id}/enable`],
        ['POST', `${base(workspaceId)}/${id}/rotate-secret`, { overlapHours: 0 }],
      ] as const) {
        if (workspaceId === mine.id && path === base(mine.id)) continue; // (its own list and registration are allowed)
        const res = await admin.request(method, path, { token: scoped.token, body });
        expect(res.status, `${method} ${path}`).to.equal(404);
        expect(res.body.error.code).to.equal('not_found');
      }
    }
    const mineListed = await admin.request('GET', base(mine.id), { token: scoped.token });
    expect(mineListed.body).to.deep.equal({ rows: [] });
    const row = await db('webhook_endpoints')
      .where({ id })
      .first('name', 'is_active', 'deleted_at', 'previous_secret_sealed');
    expect(row).to.deep.equal({
      name: 'hooks.example.ae',
      is_active: true,
      deleted_at: null,
      previous_secret_sealed: null,
    });
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ workspace_id: theirs.id })
        .pluck('action'),
    ).to.deep.equal(['endpoint.create']);
  });

  it('bad input gets the documented 400 naming the field and changes nothing; unknown ids 404', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('bad') });
    const as = { token: token.token };
    const made = await admin.request('POST', base(ws.id), {
      ...as,
      body: { url: 'https://hooks.example.ae/bad', name: 'Bad' },
    });
    secrets.push(made.body.secret);
    const one = `${base(ws.id)}/${made.body.id}`;
    const cases: Array<[string, string, unknown, string, RegExp?]> = [
      ['POST', base(ws.id), {}, 'url'],
      ['POST', base(ws.id), { url: 'not a url' }, 'url', /absolute http or https URL/],
      ['POST', base(ws.id), { url: 'ftp://files.example.com/' }, 'url', /http or https/],
      ['POST', base(ws.id), { url: 'https://user:pw@hooks.example.ae/' }, 'url', /user name or password/],
      [
        'POST',
        base(ws.id),
        { url: 'https://hooks.example.ae/x', events: ['booking.confirmed', 'booking.teleported', 'car.flew'] },
        'events',
        /"booking.teleported", "car.flew"/,
      ],
      [
        'POST',
        base(ws.id),
        { url: 'https://hooks.example.ae/x', events: ['webhook.test'] },
        'events',
        /cannot be subscribed to/,
      ],
      ['POST', base(ws.id), { url: 'https://hooks.example.ae/x', name: '' }, 'name'],
      ['POST', base(ws.id), { url: 'https://hooks.example.ae/x', secret: 'whsec_mine' }, 'secret'],
      ['PATCH', one, {}, 'body'],
      ['PATCH', one, { url: 'https://hooks.example.ae/y', events: ['nope.never'] }, 'events', /"nope.never"/],
      ['PATCH', one, { isActive: false }, 'isActive'],
      ['POST', `${one}/rotate-secret`, { overlapHours: 721 }, 'overlapHours'],
      ['POST', `${one}/rotate-secret`, { overlapHours: -1 }, 'overlapHours'],
      ['GET', `${base(ws.id)}/not-a-uuid`, undefined, 'endpointId'],
    ];
    for (const [method, path, body, reason, message] of cases) {
      const res = await admin.request(method, path, { ...as, body });
      expect(
        [res.status, res.body?.error?.code, res.body?.error?.reason],
        `${method} ${path} ${JSON.stringify(body)}`,
      ).to.deep.equal([400, 'invalid_request', reason]);
      if (message) expect(res.body.error.message).to.match(message);
    }
    const missing = '5d0c9a1e-1111-4222-8333-944455556666';
    for (const [method, path] of [
      ['GET', `${base(ws.id)}/${missing}`],
      ['PATCH', `${base(ws.id)}/${missing}`],
      ['DELETE', `${base(ws.id)}/${missing}`],
      ['GET', base(missing)],
    ] as const) {
      const res = await admin.request(method, path, { ...as, body: method === 'PATCH' ? { name: 'x' } : undefined });
      expect(res.status, `${method} ${path}`).to.equal(404);
    }
    expect(
      await db('webhook_endpoints')
        .where({ workspace_id: ws.id })
        .select('url', 'name', 'events', 'previous_secret_sealed'),
    ).to.deep.equal([{ url: 'https://hooks.example.ae/bad', name: 'Bad', events: [], previous_secret_sealed: null }]);
    expect(
      await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ workspace_id: ws.id }).pluck('action'),
    ).to.deep.equal(['endpoint.create']);
  });

  it('rateLimit: set at creation, changed and cleared, shown by both APIs; 400 naming it for anything but 1 to 1000', async () => {
    const ws = await createWorkspace(db, operator, { slug: unique('rate') });
    const as = { token: token.token };
    const made = await admin.request('POST', base(ws.id), {
      ...as,
      body: { url: 'https://hooks.example.ae/rate', rateLimit: 10 },
    });
    expect([made.status, made.body.rateLimit]).to.deep.equal([201, 10]);
    secrets.push(made.body.secret);
    const one = `${base(ws.id)}/${made.body.id}`;
    expect((await admin.request('GET', one, as)).body.rateLimit).to.equal(10);
    for (const rateLimit of [0, 1001, 2.5, 'x', -3, true]) {
      for (const [method, path, body] of [
        ['POST', base(ws.id), { url: 'https://hooks.example.ae/other', rateLimit }],
        ['PATCH', one, { rateLimit }],
        ['PATCH', one, { name: 'Renamed', rateLimit }],
      ] as const) {
        const res = await admin.request(method, path, { ...as, body });
        expect(
          [res.status, res.body.error?.code, res.body.error?.reason],
          `${method} ${JSON.stringify(body)}`,
        ).to.deep.equal([400, 'invalid_request', 'rateLimit']);
      }
    }
    // nothing changed: one endpoint, as made, one audit entry
    expect(await db('webhook_endpoints').where({ workspace_id: ws.id }).select('name', 'rate_limit')).to.deep.equal([
      { name: 'hooks.example.ae', rate_limit: 10 },
    ]);
    const raised = await admin.request('PATCH', one, { ...as, body: { rateLimit: 1000 } });
    expect([raised.status, raised.body.rateLimit]).to.deep.equal([200, 1000]);
    // the same value again is no change (no audit entry)
    expect((await admin.request('PATCH', one, { ...as, body: { rateLimit: 1000 } })).body.rateLimit).to.equal(1000);
    const lowest = await admin.request('PATCH', one, { ...as, body: { rateLimit: 1 } });
    expect(lowest.body.rateLimit).to.equal(1);
    // the public API shows it to the workspace's keys
    const api: TestApi = await startApi();
    try {
      const key = await createApiKey(db, operator, { workspaceId: ws.id });
      const listed = await api.get('/v1/webhooks', key.key);
      expect(listed.status).to.equal(200);
      expect(listed.body.rows.map((r: { rateLimit: number | null }) => r.rateLimit)).to.deep.equal([1]);
    } finally {
      await api.close();
    }
    const cleared = await admin.request('PATCH', one, { ...as, body: { rateLimit: null } });
    expect([cleared.status, cleared.body.rateLimit]).to.deep.equal([200, null]);
    const unthrottled = await admin.request('POST', base(ws.id), {
      ...as,
      body: { url: 'https://hooks.example.ae/free', rateLimit: null },
    });
    expect([unthrottled.status, unthrottled.body.rateLimit]).to.deep.equal([201, null]);
    secrets.push(unthrottled.body.secret);

    const entries = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ target_id: made.body.id })
      .orderBy('at')
      .select('action', 'changes');
    expect(entries).to.deep.equal([
      {
        action: 'endpoint.create',
        changes: { name: 'hooks.example.ae', url: 'https://hooks.example.ae/rate', events: [], rateLimit: 10 },
      },
      { action: 'endpoint.update', changes: { rateLimit: { from: 10, to: 1000 } } },
      { action: 'endpoint.update', changes: { rateLimit: { from: 1000, to: 1 } } },
      { action: 'endpoint.update', changes: { rateLimit: { from: 1, to: null } } },
    ]);
  });
});

describe('fleet-admin endpoint update and endpoint delete', () => {
  async function json(...args: string[]): Promise<any> {
    const run = await fleetAdminOn((await testDatabase()).url, [...args, '--json']);
    expect(run.stderr, 'stderr').to.equal('');
    expect(run.code, 'exit code').to.equal(0);
    return JSON.parse(run.stdout);
  }

  it('change and delete an endpoint on the core the admin API calls, audited as cli; refusals on one line', async () => {
    const { db, url } = await testDatabase();
    const slug = unique('cli');
    const ws = await json('workspace', 'create', '--slug', slug);
    const created = await json(
      'endpoint',
      'create',
      '--workspace',
      slug,
      '--url',
      'https://hooks.example.ae/cli',
      '--events',
      'booking.confirmed',
    );
    expect(created).to.have.all.keys(
      'id',
      'name',
      'url',
      'events',
      'isActive',
      'disabledAt',
      'disabledReason',
      'lastSuccessAt',
      'consecutiveFailures',
      'rateLimit',
      'throttledUntil',
      'secret',
      'signatureScheme',
      'publicKey',
      'previousSchemeExpiresAt',
    );
    const updated = await json(
      'endpoint',
      'update',
      '--id',
      created.id,
      '--url',
      'https://hooks.example.ae/cli/v2',
      '--name',
      'Ops',
      '--events',
      'invoice.overdue,payment.captured',
    );
    expect(updated).to.deep.equal({
      id: created.id,
      name: 'Ops',
      url: 'https://hooks.example.ae/cli/v2',
      events: ['invoice.overdue', 'payment.captured'],
      isActive: true,
      disabledAt: null,
      disabledReason: null,
      lastSuccessAt: null,
      consecutiveFailures: 0,
      signatureScheme: 'hmac-sha256',
      publicKey: null,
      previousSchemeExpiresAt: null,
      rateLimit: null,
      throttledUntil: null,
    });
    // the duplicate-URL rule, on one line
    const twin = await json('endpoint', 'create', '--workspace', slug, '--url', 'https://hooks.example.ae/twin');
    const clash = await fleetAdminOn(url, [
      'endpoint',
      'update',
      '--id',
      twin.id,
      '--url',
      'https://hooks.example.ae/cli/v2',
    ]);
    expect([clash.code, clash.stdout]).to.deep.equal([1, '']);
    expect(clash.stderr).to.equal(
      `fleet-admin: the workspace already has an endpoint with this URL (${created.id}); send --allow-duplicate-url to register it again\n`,
    );
    expect(
      (
        await json(
          'endpoint',
          'update',
          '--id',
          twin.id,
          '--url',
          'https://hooks.example.ae/cli/v2',
          '--allow-duplicate-url',
        )
      ).url,
    ).to.equal('https://hooks.example.ae/cli/v2');

    expect(await json('endpoint', 'delete', '--id', created.id)).to.deep.equal({ id: created.id });
    const text = await fleetAdminOn(url, ['endpoint', 'delete', '--id', twin.id]);
    expect(text.stdout).to.equal(
      `endpoint ${twin.id} deleted; its pending deliveries are marked failed (endpoint_deleted)\n`,
    );
    const again = await fleetAdminOn(url, ['endpoint', 'delete', '--id', created.id]);
    expect([again.code, again.stdout, again.stderr]).to.deep.equal([
      1,
      '',
      `fleet-admin: no webhook endpoint with id ${created.id}\n`,
    ]);
    expect((await json('endpoint', 'list', '--workspace', slug)).rows).to.deep.equal([]);

    const entries = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ target_id: created.id })
      .orderBy('at')
      .select('actor_type', 'actor_name', 'action', 'workspace_id', 'changes');
    const cli = { actor_type: 'cli', actor_name: os.userInfo().username, workspace_id: ws.id };
    expect(entries).to.deep.equal([
      {
        ...cli,
        action: 'endpoint.create',
        changes: { name: 'hooks.example.ae', url: 'https://hooks.example.ae/cli', events: ['booking.confirmed'] },
      },
      {
        ...cli,
        action: 'endpoint.update',
        changes: {
          url: { from: 'https://hooks.example.ae/cli', to: 'https://hooks.example.ae/cli/v2' },
          name: { from: 'hooks.example.ae', to: 'Ops' },
          events: { from: ['booking.confirmed'], to: ['invoice.overdue', 'payment.captured'] },
        },
      },
      { ...cli, action: 'endpoint.delete', changes: { name: 'Ops', url: 'https://hooks.example.ae/cli/v2' } },
    ]);
  });

  it('endpoint create and update --rate-limit set it, "none" clears it; anything but 1 to 1000 is refused on one line', async () => {
    const { db, url } = await testDatabase();
    const slug = unique('cli-rate');
    await json('workspace', 'create', '--slug', slug);
    const created = await json(
      'endpoint',
      'create',
      '--workspace',
      slug,
      '--url',
      'https://hooks.example.ae/cli-rate',
      '--rate-limit',
      '10',
    );
    expect(created.rateLimit).to.equal(10);
    const text = await fleetAdminOn(url, ['endpoint', 'list', '--workspace', slug]);
    expect(text.stdout).to.include('; events: all; at most 10 a second; failures in a row: 0;');
    expect((await json('endpoint', 'update', '--id', created.id, '--rate-limit', '250')).rateLimit).to.equal(250);
    for (const [value, why] of [
      ['0', 'fleet-admin: --rate-limit must be a whole number of deliveries a second from 1 to 1000'],
      ['1001', 'fleet-admin: --rate-limit must be a whole number of deliveries a second from 1 to 1000'],
      ['2.5', "fleet-admin: option '--rate-limit <n>' argument '2.5' is invalid. It must be a whole number."],
      ['x', "fleet-admin: option '--rate-limit <n>' argument 'x' is invalid. It must be a whole number."],
    ]) {
      const refused = await fleetAdminOn(url, ['endpoint', 'update', '--id', created.id, '--rate-limit', value]);
      expect([refused.code, refused.stdout, refused.stderr.trim()], value).to.deep.equal([1, '', why]);
    }
    expect((await db('webhook_endpoints').where({ id: created.id }).first('rate_limit')).rate_limit).to.equal(250);
    expect((await json('endpoint', 'update', '--id', created.id, '--rate-limit', 'none')).rateLimit).to.equal(null);
    expect(
      await db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ target_id: created.id, action: 'endpoint.update' })
        .orderBy('at')
        .pluck('changes'),
    ).to.deep.equal([{ rateLimit: { from: 10, to: 250 } }, { rateLimit: { from: 250, to: null } }]);
  });
});
