import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver, type Reply, type ReceivedRequest } from '../support/receiver.js';
import { startAdminApi, type TestAdminApi } from '../admin/support.js';
import { ADMIN_API, documentedClient, type DocumentedClient } from '../support/http.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { adminValidators } from '../../src/contract/validators.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { claimDue, releaseClaims } from '../../src/webhooks/claims.js';
import { InFlightShares } from '../../src/webhooks/fairness.js';
import { eventFeed } from '../../src/webhooks/event-feed.js';
import { RETRY_DELAYS_MS } from '../../src/webhooks/retry-schedule.js';
import { OPERATIONAL_EVENTS, PLATFORM_TENANT } from '../../src/webhooks/platform-events.js';
import {
  bookingConfirmedData,
  dropTestWorkspaces,
  quietLogger,
  webhookWorkspace,
  type TestWorkspace,
} from './support.js';
import { operator, operatorWith } from '../support/actors.js';
import { NotFoundError } from '../../src/errors.js';
import { recoverEndpoint, resendDelivery, retryDelivery } from '../../src/core/webhooks/recovery.js';
import { rotateSigningKey, rotateSigningSecret } from '../../src/core/webhooks/signing-secrets.js';
import { listDeliveries, showDelivery } from '../../src/core/webhooks/deliveries.js';

// Operational events (issue 34, point 4): the platform's own receivers, registered through the admin API, are told of a
// workspace's endpoint switched off (with its reason and time) or on, and of a delivery failed for good; signed and sent
// by the same dispatcher, each payload valid against admin.yaml's webhooks, never sent to a workspace's endpoint, and
// never raised by an operational endpoint's own failures.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const SCHEMAS: Record<string, string> = {
  'endpoint.disabled': 'EndpointDisabledEvent',
  'endpoint.enabled': 'EndpointEnabledEvent',
  'delivery.exhausted': 'DeliveryExhaustedEvent',
};
const DAY = 24 * 60 * 60 * 1000;

describe('webhooks: operational events for the platform', () => {
  let db: Knex;
  let workerDb: Knex;
  let admin: TestAdminApi;
  let http: DocumentedClient;
  let operatorToken: string;
  let confinedToken: string;
  let receiver: Receiver;
  let ws: TestWorkspace;
  /** What each path answers (204 unless set). */
  const answers = new Map<string, Reply>();
  /** The operational endpoint every test reads, and its path on the receiver. */
  let operational: { id: string; secret: string; path: string };
  /** A workspace endpoint subscribed to every event: it must never receive an operational one. */
  let catchAll: { id: string; path: string };

  const call = (token: string, method: string, path: string, body?: unknown) =>
    http.request(method, path, { headers: { authorization: `Bearer ${token}` }, body });
  // (retries without jitter: a test walks the retry schedule's exact instants)
  const dispatcher = () =>
    new Dispatcher({ db: workerDb, logger: quietLogger(), workspaceIds: [ws.id, PLATFORM_TENANT], random: () => 0 });
  const pathOf = (url: string) => new URL(url).pathname;
  const received = (path: string, predicate: (r: ReceivedRequest) => boolean = () => true) =>
    receiver.requests.filter((r) => r.path === path && predicate(r));
  /** The operational deliveries about `about` (an endpoint or delivery id) the operational receiver got, after a sweep. */
  const operationalAbout = async (about: string, count = 1, now?: Date) => {
    const about_ = (r: ReceivedRequest) => r.body?.data?.endpointId === about || r.body?.data?.deliveryId === about;
    await dispatcher().runOnce(now);
    const got = received(operational.path, about_);
    expect(got, `operational deliveries about ${about}`).to.have.length(count);
    for (const request of got) {
      expect(request.verified, 'signed with the operational endpoint secret').to.deep.equal({ ok: true });
      const validate = adminValidators[SCHEMAS[request.event]];
      expect(validate(request.body), JSON.stringify(validate.errors)).to.equal(true);
    }
    return got;
  };
  const workspaceEndpoint = async (reply?: Reply) => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url });
    receiver.setSecret(url, endpoint.secret);
    if (reply) answers.set(pathOf(url), reply);
    return { ...endpoint, path: pathOf(url) };
  };
  const publish = async () =>
    (
      await recordEvent(db, {
        workspaceId: ws.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      })
    ).eventId;

  before(async () => {
    ({ db } = await testDatabase());
    workerDb = (await testDatabase()).forRole('worker');
    receiver = await startReceiver((request) => answers.get(request.path) ?? { status: 204 });
    ws = await webhookWorkspace(db);
    operatorToken = (await createAdminToken(db, operatorWith(OPERATOR), { name: 'ops', workspaceId: 'every' })).token;
    confinedToken = (await createAdminToken(db, operatorWith(OPERATOR), { name: 'one', workspaceId: ws.id })).token;
    admin = await startAdminApi();
    http = documentedClient({ ...ADMIN_API, baseUrl: admin.url });
    const url = receiver.endpointUrl();
    const created = await call(operatorToken, 'POST', '/admin/v1/operational-endpoints', {
      url,
      name: 'Platform alerts',
    });
    expect(created.status).to.equal(201);
    expect(created.body.secret).to.match(/^whsec_[0-9A-Za-z]{32,}$/);
    receiver.setSecret(url, created.body.secret);
    operational = { id: created.body.id, secret: created.body.secret, path: pathOf(url) };
    catchAll = await workspaceEndpoint();
  });
  after(async () => {
    if (operational) await call(operatorToken, 'DELETE', `/admin/v1/operational-endpoints/${operational.id}`);
    await admin?.close();
    await receiver?.close();
    await dropTestWorkspaces(db);
  });

  it('tells of an endpoint switched off after 20 failures: reason failures, the time its disabledAt', async () => {
    const failing = await workspaceEndpoint({ status: 503 });
    // 19 failed attempts recorded before; the 20th, made here, switches it off
    await db('webhook_endpoints').where({ id: failing.id }).update({ consecutive_failures: 19 });
    const eventId = await publish();
    await dispatcher().runOnce();
    const row = await db('webhook_endpoints').where({ id: failing.id }).first();
    expect(row).to.include({ is_active: false, disabled_reason: 'failures' });
    const [request] = await operationalAbout(failing.id);
    expect(request.event).to.equal('endpoint.disabled');
    expect(request.body.data).to.deep.equal({
      endpointId: failing.id,
      workspaceId: ws.id,
      workspaceSlug: ws.slug,
      reason: 'failures',
      disabledAt: row.disabled_at.toISOString(),
    });
    // the event of the workspace itself reached its catch-all endpoint, as always
    expect(received(catchAll.path, (r) => r.body.data?.bookingId !== undefined)).to.have.length.at.least(1);
    expect(await db('deliveries').where({ event_id: eventId, endpoint_id: failing.id }).first()).to.include({
      status: 'held',
    });
  });

  it('tells of a manual switch-off and of a switch-on through the admin API', async () => {
    const endpoint = await workspaceEndpoint();
    const base = `/admin/v1/workspaces/${ws.id}/endpoints/${endpoint.id}`;
    expect((await call(operatorToken, 'POST', `${base}/disable`)).status).to.equal(200);
    const row = await db('webhook_endpoints').where({ id: endpoint.id }).first();
    const [disabled] = await operationalAbout(endpoint.id);
    expect(disabled.body.data).to.deep.equal({
      endpointId: endpoint.id,
      workspaceId: ws.id,
      workspaceSlug: ws.slug,
      reason: 'manual',
      disabledAt: row.disabled_at.toISOString(),
    });
    // switching off what is off changes nothing, and tells nothing
    expect((await call(operatorToken, 'POST', `${base}/disable`)).status).to.equal(200);
    await operationalAbout(endpoint.id, 1);

    expect((await call(confinedToken, 'POST', `${base}/enable`)).status).to.equal(200);
    const [, enabled] = await operationalAbout(endpoint.id, 2);
    expect(enabled.event).to.equal('endpoint.enabled');
    // (the switch-on's transaction time, which is when the event was recorded)
    expect(enabled.body.data).to.deep.equal({
      endpointId: endpoint.id,
      workspaceId: ws.id,
      workspaceSlug: ws.slug,
      enabledAt: enabled.body.createdAt,
    });
  });

  it('tells of a delivery that spent its retries, with its attempts and last answer', async () => {
    const endpoint = await workspaceEndpoint({ status: 500, body: 'down' });
    const eventId = await publish();
    const { id } = await db('deliveries').where({ event_id: eventId, endpoint_id: endpoint.id }).first('id');
    let now = new Date();
    await dispatcher().runOnce(now);
    for (const delay of RETRY_DELAYS_MS) {
      now = new Date(now.getTime() + delay);
      await dispatcher().runOnce(now);
    }
    const failed = await db('deliveries').where({ id }).first();
    expect(failed).to.include({ status: 'failed', attempts: 9 });
    const [request] = await operationalAbout(id, 1, new Date(now.getTime() + DAY));
    expect(request.event).to.equal('delivery.exhausted');
    expect(request.body.data).to.deep.equal({
      deliveryId: id,
      event: 'booking.confirmed',
      endpointId: endpoint.id,
      workspaceId: ws.id,
      workspaceSlug: ws.slug,
      attempts: 9,
      lastStatusCode: 500,
      lastErrorKind: 'status',
      failedAt: failed.finished_at.toISOString(),
    });
  });

  it('tells of a delivery answered 410 Gone at its first attempt: no retry left', async () => {
    const endpoint = await workspaceEndpoint({ status: 410 });
    const eventId = await publish();
    const { id } = await db('deliveries').where({ event_id: eventId, endpoint_id: endpoint.id }).first('id');
    await dispatcher().runOnce();
    const failed = await db('deliveries').where({ id }).first();
    expect(failed).to.include({ status: 'failed', attempts: 1, last_status_code: 410 });
    const [request] = await operationalAbout(id);
    expect(request.event).to.equal('delivery.exhausted');
    expect(request.body.data).to.deep.equal({
      deliveryId: id,
      event: 'booking.confirmed',
      endpointId: endpoint.id,
      workspaceId: ws.id,
      workspaceSlug: ws.slug,
      attempts: 1,
      lastStatusCode: 410,
      lastErrorKind: 'status',
      failedAt: failed.finished_at.toISOString(),
    });
    // the 410 also switched the endpoint off, reason gone, and the platform is told of that in the same sweep
    const off = await db('webhook_endpoints').where({ id: endpoint.id }).first();
    expect(off).to.include({ is_active: false, disabled_reason: 'gone' });
    const told = received(
      operational.path,
      (r) => r.event === 'endpoint.disabled' && r.body?.data?.endpointId === endpoint.id,
    );
    expect(told).to.have.length(1);
    expect(told[0].verified).to.deep.equal({ ok: true });
    expect(adminValidators[SCHEMAS['endpoint.disabled']](told[0].body)).to.equal(true);
    expect(told[0].body.data).to.deep.equal({
      endpointId: endpoint.id,
      workspaceId: ws.id,
      workspaceSlug: ws.slug,
      reason: 'gone',
      disabledAt: off.disabled_at.toISOString(),
    });
  });

  it('raises nothing for a delivery failed, unattempted, for waiting more than 7 days while its endpoint was off', async () => {
    const endpoint = await workspaceEndpoint();
    const base = `/admin/v1/workspaces/${ws.id}/endpoints/${endpoint.id}`;
    await call(operatorToken, 'POST', `${base}/disable`);
    const eventId = await publish();
    const held = await db('deliveries').where({ event_id: eventId, endpoint_id: endpoint.id }).first('id', 'status');
    expect(held.status).to.equal('held');
    await db('deliveries')
      .where({ id: held.id })
      .update({ created_at: db.raw("now() - interval '8 days'") });
    expect((await call(operatorToken, 'POST', `${base}/enable`)).status).to.equal(200);
    expect(await db('deliveries').where({ id: held.id }).first()).to.include({ status: 'failed', attempts: 0 });
    // the 7-day rule fails what waited, in bulk, without an attempt: no receiver's failure, no delivery.exhausted
    await operationalAbout(held.id, 0);
    expect(await db('events').whereRaw(`data->>'deliveryId' = ?`, [held.id])).to.have.length(0);
    // the switch-off and switch-on themselves are told
    const aboutEndpoint = (await operationalAbout(endpoint.id, 2)).map((r) => r.event);
    expect(aboutEndpoint.sort()).to.deep.equal(['endpoint.disabled', 'endpoint.enabled']);
  });

  it('raises nothing for a sample delivery (source test) that spends its retries', async () => {
    const endpoint = await workspaceEndpoint({ status: 500 });
    const now = new Date();
    // an example event (sendExampleEvent's: source test) at its last attempt, due now
    const [{ id: eventId }] = await db('events')
      .insert({ workspace_id: ws.id, event: 'booking.confirmed', data: bookingConfirmedData(), source: 'test' })
      .returning('id');
    const [{ id }] = await db('deliveries')
      .insert({
        id: randomUUID(),
        workspace_id: ws.id,
        event_id: eventId,
        endpoint_id: endpoint.id,
        event: 'booking.confirmed',
        body: JSON.stringify({ event: 'booking.confirmed' }),
        status: 'retrying',
        attempts: RETRY_DELAYS_MS.length,
        next_attempt_at: now,
      })
      .returning('id');
    await dispatcher().runOnce(now);
    expect(await db('deliveries').where({ id }).first()).to.include({
      status: 'failed',
      attempts: RETRY_DELAYS_MS.length + 1,
    });
    expect(await db('events').whereRaw(`data->>'deliveryId' = ?`, [id])).to.have.length(0);
  });

  it('holds what it tells a switched-off operational endpoint, and sends it once switched on', async () => {
    const url = receiver.endpointUrl();
    const created = await call(operatorToken, 'POST', '/admin/v1/operational-endpoints', {
      url,
      events: ['endpoint.disabled'],
    });
    const ops = { id: created.body.id as string, path: pathOf(url) };
    receiver.setSecret(url, created.body.secret);
    const base = `/admin/v1/operational-endpoints/${ops.id}`;
    try {
      expect((await call(operatorToken, 'POST', `${base}/disable`)).status).to.equal(200);
      const [recent, old] = [await workspaceEndpoint(), await workspaceEndpoint()];
      for (const endpoint of [recent, old])
        await call(operatorToken, 'POST', `/admin/v1/workspaces/${ws.id}/endpoints/${endpoint.id}/disable`);
      const toOps = async (about: string) =>
        db('deliveries')
          .where({ endpoint_id: ops.id })
          .whereRaw(`body::jsonb->'data'->>'endpointId' = ?`, [about])
          .first('id', 'status', 'next_attempt_at', 'workspace_id');
      // held, not queued: the claim never walks it while the endpoint is off
      const [heldRecent, heldOld] = [await toOps(recent.id), await toOps(old.id)];
      for (const held of [heldRecent, heldOld])
        expect(held).to.deep.include({ status: 'held', next_attempt_at: null, workspace_id: null });
      await db('deliveries')
        .where({ id: heldOld.id })
        .update({ created_at: db.raw("now() - interval '8 days'") });

      // the generic workspace actions do not reach the platform's rows (operational-endpoints.ts has their own)
      const every = { workspaceId: 'every' as const, now: new Date() };
      const refusals: Array<() => Promise<unknown>> = [
        () => retryDelivery(db, operator, { ...every, deliveryId: heldRecent.id }),
        () => resendDelivery(db, operator, { ...every, deliveryId: heldRecent.id }),
        () => recoverEndpoint(db, operator, { ...every, endpointId: ops.id, since: new Date(0) }),
        () => rotateSigningSecret(db, operator, { ...every, endpointId: ops.id }),
        () => rotateSigningKey(db, operator, { ...every, endpointId: ops.id }),
        () => showDelivery(db, operator, { ...every, deliveryId: heldRecent.id }),
        () => listDeliveries(db, operator, { ...every, endpointId: ops.id }),
      ];
      for (const refusal of refusals) {
        const error = await refusal().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, refusal.toString()).to.be.instanceOf(NotFoundError);
      }
      expect(await db('audit_entries').where({ target_id: ops.id }).pluck('action')).to.deep.equal([
        'operational_endpoint.create',
        'operational_endpoint.disable',
      ]);

      // switched on through the admin API: released by the 7-day rule, the recent one sent, the old one failed
      expect((await call(operatorToken, 'POST', `${base}/enable`)).status).to.equal(200);
      expect(await db('deliveries').where({ id: heldOld.id }).first()).to.include({ status: 'failed', attempts: 0 });
      await dispatcher().runOnce();
      const sent = received(ops.path);
      expect(sent.map((r) => r.body.data.endpointId)).to.deep.equal([recent.id]);
      expect(sent[0].verified).to.deep.equal({ ok: true });
      expect(await db('deliveries').where({ id: heldRecent.id }).first()).to.include({ status: 'accepted' });
    } finally {
      await call(operatorToken, 'DELETE', base);
    }
  });

  it('runs its trigger functions on pg_catalog and pg_temp alone, naming the service schema in full', async () => {
    const { rows } = await db.raw(
      `SELECT proname, proconfig FROM pg_proc WHERE pronamespace = current_schema()::regnamespace AND proname = ANY(?)
       ORDER BY proname`,
      [['delivery_failed_platform_event', 'endpoint_switch_platform_event', 'platform_event_record']],
    );
    const path = ['search_path=pg_catalog, pg_temp'];
    expect(rows).to.deep.equal([
      { proname: 'delivery_failed_platform_event', proconfig: path },
      { proname: 'endpoint_switch_platform_event', proconfig: path },
      { proname: 'platform_event_record', proconfig: path },
    ]);
  });

  it("never raises an event of an operational endpoint's own failures", async () => {
    const url = receiver.endpointUrl();
    const created = await call(operatorToken, 'POST', '/admin/v1/operational-endpoints', {
      url,
      events: ['endpoint.disabled'],
    });
    const failingOps = { id: created.body.id as string, path: pathOf(url) };
    answers.set(failingOps.path, { status: 500 });
    try {
      await db('webhook_endpoints').where({ id: failingOps.id }).update({ consecutive_failures: 19 });
      const endpoint = await workspaceEndpoint();
      await call(operatorToken, 'POST', `/admin/v1/workspaces/${ws.id}/endpoints/${endpoint.id}/disable`);
      await dispatcher().runOnce();
      expect(received(failingOps.path)).to.have.length(1);
      const opsRow = await db('webhook_endpoints').where({ id: failingOps.id }).first();
      expect(opsRow).to.include({ is_active: false, disabled_reason: 'failures' });
      // its delivery fails for good too
      const opsDelivery = await db('deliveries').where({ endpoint_id: failingOps.id }).first();
      await db('deliveries')
        .where({ id: opsDelivery.id })
        .update({ status: 'failed', next_attempt_at: null, finished_at: db.fn.now() });
      const about = await db('events')
        .whereRaw(`data->>'endpointId' = ? OR data->>'deliveryId' = ?`, [failingOps.id, opsDelivery.id])
        .count<{ count: string }[]>('* as count');
      expect(Number(about[0].count)).to.equal(0);
    } finally {
      await call(operatorToken, 'DELETE', `/admin/v1/operational-endpoints/${failingOps.id}`);
    }
  });

  it("counts the platform as a tenant of its own in the fair claim: a workspace's full share never holds it back", async () => {
    const endpoint = await workspaceEndpoint();
    await call(operatorToken, 'POST', `/admin/v1/workspaces/${ws.id}/endpoints/${endpoint.id}/disable`);
    await publish();
    const settings = {
      db: workerDb,
      logger: quietLogger(),
      owner: `fairness-${process.pid}`,
      leaseMs: 60_000,
      perEndpoint: 4,
      perWorkspace: 2,
      workspaceIds: [ws.id, PLATFORM_TENANT],
    };
    const full = (tenant: string) => {
      const held = new InFlightShares();
      for (let i = 0; i < 2; i++)
        held.add({ endpointId: `00000000-0000-4000-8000-00000000000${i}`, workspaceId: tenant });
      return held;
    };
    // the workspace holds its whole share: the platform's delivery is claimed all the same
    const platform = await claimDue(settings, { limit: 10, now: new Date(), held: full(ws.id) });
    expect(platform.claims.length).to.be.greaterThan(0);
    expect(platform.claims.every((c) => c.workspaceId === PLATFORM_TENANT && c.endpointId === operational.id)).to.equal(
      true,
    );
    expect(JSON.parse(platform.claims[0].body).data.endpointId).to.equal(endpoint.id);
    // and the reverse
    const workspace = await claimDue(settings, { limit: 10, now: new Date(), held: full(PLATFORM_TENANT) });
    expect(workspace.claims.length).to.be.greaterThan(0);
    expect(workspace.claims.every((c) => c.workspaceId === ws.id)).to.equal(true);
    await releaseClaims(
      settings,
      [...platform.claims, ...workspace.claims].map((c) => c.deliveryId),
    );
    await operationalAbout(endpoint.id);
  });

  it("never sends one to a workspace's endpoint, nor shows one in a workspace's records", async () => {
    expect(received(catchAll.path, (r) => (OPERATIONAL_EVENTS as readonly string[]).includes(r.event))).to.have.length(
      0,
    );
    expect(received(catchAll.path).length).to.be.greaterThan(0);
    for (const table of ['events', 'deliveries'])
      expect(await db(table).where({ workspace_id: ws.id }).whereIn('event', OPERATIONAL_EVENTS)).to.have.length(0);
    // the workspace's event feed (GET /v1/events) holds its own events only
    const feed = await eventFeed(db, ws.id, { limit: 200 });
    expect(feed.items.length).to.be.greaterThan(0);
    expect(feed.items.map((item) => JSON.parse(item).event)).to.satisfy((names: string[]) =>
      names.every((name) => name === 'booking.confirmed'),
    );
    const list = await call(operatorToken, 'GET', `/admin/v1/workspaces/${ws.id}/deliveries`);
    expect(list.status).to.equal(200);
    expect(list.body.rows.map((d: { event: string }) => d.event)).not.to.include.members([...OPERATIONAL_EVENTS]);
    // a workspace's endpoint cannot subscribe to one: they are not in the public document
    const subscribing = await call(operatorToken, 'POST', `/admin/v1/workspaces/${ws.id}/endpoints`, {
      url: receiver.endpointUrl(),
      events: ['endpoint.disabled'],
    });
    expect(subscribing.status).to.equal(400);
    expect(subscribing.body.error.reason).to.equal('events');
    // nor does a workspace's endpoint operation reach an operational endpoint
    expect(
      (await call(operatorToken, 'GET', `/admin/v1/workspaces/${ws.id}/endpoints/${operational.id}`)).status,
    ).to.equal(404);
  });

  it('is managed by the operator alone: every operation, audited, the secret shown once', async () => {
    const base = `/admin/v1/operational-endpoints/${operational.id}`;
    for (const [method, path, body] of [
      ['GET', '/admin/v1/operational-endpoints'],
      ['POST', '/admin/v1/operational-endpoints', { url: receiver.endpointUrl() }],
      ['GET', base],
      ['PATCH', base, { name: 'mine now' }],
      ['POST', `${base}/disable`],
      ['POST', `${base}/enable`],
      ['POST', `${base}/rotate-secret`, {}],
      ['GET', `${base}/deliveries`],
      ['DELETE', base],
    ] as Array<[string, string, unknown?]>) {
      const refused = await call(confinedToken, method, path, body);
      expect(refused.status, `${method} ${path}`).to.equal(403);
    }
    // its delivery log: what the earlier tests sent it, newest first, each one readable with its attempts
    const log = await call(operatorToken, 'GET', `${base}/deliveries?limit=200`);
    expect(log.status).to.equal(200);
    const events = log.body.rows.map((r: { event: string }) => r.event);
    expect(events).to.include.members(['endpoint.disabled', 'endpoint.enabled', 'delivery.exhausted']);
    const sent = log.body.rows.find((r: { status: string }) => r.status === 'accepted');
    const shown = await call(operatorToken, 'GET', `${base}/deliveries/${sent.id}`);
    expect(shown.body).to.include({ id: sent.id, endpointId: operational.id, attemptCount: 1 });
    expect(shown.body.attempts[0]).to.include({ number: 1, statusCode: 204 });
    expect((await call(confinedToken, 'GET', `${base}/deliveries/${sent.id}`)).status).to.equal(403);
    // a workspace's delivery is not one of its
    const theirs = await db('deliveries').where({ workspace_id: ws.id }).first('id');
    expect((await call(operatorToken, 'GET', `${base}/deliveries/${theirs.id}`)).status).to.equal(404);
    expect(
      (await call(operatorToken, 'GET', `/admin/v1/operational-endpoints/${catchAll.id}/deliveries`)).status,
    ).to.equal(404);
    const listed = await call(operatorToken, 'GET', '/admin/v1/operational-endpoints');
    const mine = listed.body.rows.find((r: { id: string }) => r.id === operational.id);
    expect(mine).to.include({ name: 'Platform alerts', isActive: true }).and.not.have.property('secret');
    const patched = await call(operatorToken, 'PATCH', base, { events: ['delivery.exhausted', 'endpoint.disabled'] });
    expect(patched.body.events).to.deep.equal(['delivery.exhausted', 'endpoint.disabled']);
    const refusedEvent = await call(operatorToken, 'PATCH', base, { events: ['booking.confirmed'] });
    expect(refusedEvent.status).to.equal(400);
    expect((await call(operatorToken, 'POST', `${base}/disable`)).body).to.include({ disabledReason: 'manual' });
    expect((await call(operatorToken, 'POST', `${base}/enable`)).body).to.include({ isActive: true });
    const rotated = await call(operatorToken, 'POST', `${base}/rotate-secret`, { overlapHours: 0 });
    expect(rotated.body.secret)
      .to.match(/^whsec_/)
      .and.not.equal(operational.secret);
    const audit = await db('audit_entries').where({ target_id: operational.id }).orderBy('at').pluck('action');
    expect(audit).to.deep.equal([
      'operational_endpoint.create',
      'operational_endpoint.update',
      'operational_endpoint.disable',
      'operational_endpoint.enable',
      'operational_endpoint.rotate_secret',
    ]);
    const trail = JSON.stringify(await db('audit_entries').where({ target_id: operational.id }));
    expect(trail).not.to.include(operational.secret.slice(6)).and.not.to.include(rotated.body.secret.slice(6));
    await db('webhook_endpoints').where({ id: operational.id }).update({ events: [] });
    receiver.setSecret(`${receiver.url}${operational.path}`, rotated.body.secret);
  });
});
