import os from 'node:os';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { startAdminApi, type TestAdminApi } from './support.js';
import { ADMIN_API, documentedResults } from '../support/http.js';
import {
  buildAttempt,
  buildDelivery,
  delivery,
  dropTestWorkspaces,
  eventually,
  examplePayload,
  webhookWorkspace,
  type TestWorkspace,
} from '../webhooks/support.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import { MAX_ATTEMPTS } from '../../src/webhooks/retry-schedule.js';
import { createClient, type Client } from '../../generated/admin/client/index.js';
import {
  getDelivery,
  listAuditEntries,
  listDeliveries,
  listEventTypes,
  publishEvent,
  recoverEndpoint,
  retryDelivery,
  sendExampleEvent,
} from '../../generated/admin/sdk.gen.js';
import { idOf, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';

// The admin API's deliveries and events (issue 24, point 3) against a real database, through the generated client,
// every answer checked against openapi/admin.yaml: listing a workspace's deliveries by filter and cursor, one with its
// payload and attempts, retrying (now, again, or refused while held), recovering a window, the event types, publishing
// and example events under the test-delivery limits; each change audited with the token as the actor.

const OPERATOR = { actor: { type: 'cli' as const, name: os.userInfo().username } };
const MISSING = '5d0c9a1e-1111-4222-8333-944455556666';

describe('the admin API: deliveries and events', () => {
  let db: Knex;
  let admin: TestAdminApi;
  let token: { id: string; token: string; name: string };
  let client: Client;
  let ws: TestWorkspace;
  let receiver: Receiver;

  const documented = documentedResults(ADMIN_API);

  const base = () => `/admin/v1/workspaces/${ws.id}`;
  const actions = async (targetId: string) =>
    await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ target_id: targetId })
      .orderBy('at')
      .select('actor_type', 'actor_id', 'action', 'workspace_id', 'changes');

  before(async () => {
    ({ db } = await testDatabase());
    token = await createAdminToken(db, operatorWith(OPERATOR), { name: 'deliveries test', workspaceId: 'every' });
    admin = await startAdminApi();
    client = createClient({ baseUrl: admin.url, auth: token.token });
    receiver = await startReceiver(() => ({ status: 204 }));
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    receiver.reset();
  });
  after(async () => {
    await admin?.close();
    await receiver?.close();
    await dropTestWorkspaces(db);
    expect(JSON.stringify(admin.logs)).not.to.include(token.token.slice(4));
  });

  it("lists the workspace's deliveries newest first, by filter, a page at a time by signed cursor; bad filters are 400 naming them", async () => {
    const a = await ws.endpoint({ url: 'https://hooks.example.ae/a' });
    const b = await ws.endpoint({ url: 'https://hooks.example.ae/b' });
    const d1 = await buildDelivery(db, ws, a, {
      status: 'accepted',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 1,
    });
    const d2 = await buildDelivery(db, ws, b, {
      status: 'failed',
      createdAt: '2026-11-21T09:00:00.000Z',
      attempts: 9,
      lastStatusCode: 500,
      lastError: 'HTTP 500',
    });
    const d3 = await buildDelivery(db, ws, a, {
      status: 'retrying',
      event: 'payment.captured',
      createdAt: '2026-11-21T10:00:00.000Z',
      attempts: 2,
      nextAttemptAt: '2026-11-21T10:20:00.000Z',
    });
    const d4 = await buildDelivery(db, ws, a, { status: 'failed', createdAt: '2026-11-21T11:00:00.000Z', attempts: 9 });
    const d5 = await buildDelivery(db, ws, b, { status: 'queued', createdAt: '2026-11-21T12:00:00.000Z' });
    const path = `${base()}/deliveries`;

    const all = documented('GET', path, await listDeliveries({ client, path: { workspaceId: ws.id } }));
    expect(all.data!.rows.map((r) => r.id)).to.deep.equal([d5.id, d4.id, d3.id, d2.id, d1.id]);
    expect(all.data!.nextCursor).to.equal(null);
    expect(all.data!.rows[3]).to.deep.equal({
      id: d2.id,
      endpointId: b.id,
      event: 'booking.confirmed',
      status: 'failed',
      attempts: 9,
      createdAt: '2026-11-21T09:00:00.000Z',
      lastAttemptAt: null,
      nextAttemptAt: null,
      lastStatusCode: 500,
      lastErrorKind: null,
      lastError: 'HTTP 500',
    });
    const ids = async (query: Record<string, string>) =>
      documented(
        'GET',
        path,
        await listDeliveries({ client, path: { workspaceId: ws.id }, query: query as never }),
      ).data!.rows.map((r) => r.id);
    expect(await ids({ endpointId: a.id })).to.deep.equal([d4.id, d3.id, d1.id]);
    expect(await ids({ status: 'failed' })).to.deep.equal([d4.id, d2.id]);
    expect(await ids({ event: 'payment.captured' })).to.deep.equal([d3.id]);
    // since inclusive, until exclusive
    expect(await ids({ since: '2026-11-21T09:00:00Z', until: '2026-11-21T11:00:00Z' })).to.deep.equal([d3.id, d2.id]);
    expect(await ids({ endpointId: a.id, status: 'failed', since: '2026-11-21T10:00:00Z' })).to.deep.equal([d4.id]);

    // pages of 2 through the 5, and a cursor used with another filter refused
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = documented(
        'GET',
        path,
        await listDeliveries({ client, path: { workspaceId: ws.id }, query: { limit: 2, cursor } }),
      );
      seen.push(...page.data!.rows.map((r) => r.id));
      cursor = page.data!.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect([pages, seen]).to.deep.equal([3, [d5.id, d4.id, d3.id, d2.id, d1.id]]);
    const first = await listDeliveries({ client, path: { workspaceId: ws.id }, query: { limit: 2 } });
    const other = await admin.request('GET', `${path}?limit=2&status=failed&cursor=${first.data!.nextCursor}`, {
      token: token.token,
    });
    expect([other.status, other.body.error.reason]).to.deep.equal([400, 'cursor']);

    for (const [query, reason] of [
      ['status=gone', 'status'],
      ['since=yesterday', 'since'],
      ['endpointId=nope', 'endpointId'],
      ['limit=0', 'limit'],
      ['since=2026-11-21T10:00:00Z&until=2026-11-21T10:00:00Z', 'until'],
      ['event=Not%20An%20Event', 'event'],
      ['colour=red', 'colour'],
    ] as const) {
      const res = await admin.request('GET', `${path}?${query}`, { token: token.token });
      expect([res.status, res.body.error.reason], query).to.deep.equal([400, reason]);
    }
  });

  it('shows one delivery with its payload as sent and every attempt with its answer; unknown ids and other workspaces are 404', async () => {
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/show' });
    const built = await buildDelivery(db, ws, endpoint, {
      status: 'retrying',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 1,
      nextAttemptAt: '2026-11-21T08:01:00.000Z',
      lastStatusCode: 503,
    });
    await buildAttempt(db, endpoint, built.id, {
      number: 1,
      startedAt: '2026-11-21T08:00:00.100Z',
      durationMs: 12,
      statusCode: 503,
      errorKind: 'status',
      error: 'HTTP 503',
      responseBody: 'down for maintenance',
    });
    const path = `${base()}/deliveries/${built.id}`;
    const shown = documented(
      'GET',
      path,
      await getDelivery({ client, path: { workspaceId: ws.id, deliveryId: built.id } }),
    );
    expect(shown.data).to.deep.equal({
      id: built.id,
      endpointId: endpoint.id,
      event: 'booking.confirmed',
      status: 'retrying',
      attemptCount: 1,
      createdAt: '2026-11-21T08:00:00.000Z',
      lastAttemptAt: '2026-11-21T08:00:00.100Z',
      nextAttemptAt: '2026-11-21T08:01:00.000Z',
      lastStatusCode: 503,
      lastErrorKind: 'status',
      payload: JSON.parse(built.body),
      attempts: [
        {
          number: 1,
          startedAt: '2026-11-21T08:00:00.100Z',
          durationMs: 12,
          statusCode: 503,
          errorKind: 'status',
          error: 'HTTP 503',
          responseBody: 'down for maintenance',
        },
      ],
    });
    // the payload's keys in the order they are sent
    expect(JSON.stringify(shown.data!.payload)).to.equal(built.body);

    const elsewhere = await webhookWorkspace(db);
    const scoped = await createAdminToken(db, operatorWith(OPERATOR), {
      name: 'screen',
      workspaceId: await idOf(db, elsewhere.slug),
    });
    for (const [method, target, as] of [
      ['GET', `${base()}/deliveries/${MISSING}`, token.token],
      ['POST', `${base()}/deliveries/${MISSING}/retry`, token.token],
      // a delivery of this workspace through another workspace's path
      ['GET', `/admin/v1/workspaces/${elsewhere.id}/deliveries/${built.id}`, token.token],
      ['POST', `/admin/v1/workspaces/${elsewhere.id}/deliveries/${built.id}/retry`, token.token],
      // a token of another workspace
      ['GET', path, scoped.token],
      ['GET', `${base()}/deliveries`, scoped.token],
      ['POST', `${path}/retry`, scoped.token],
      ['GET', `${base()}/event-types`, scoped.token],
    ] as const) {
      const res = await admin.request(method, target, { token: as });
      expect(res.status, `${method} ${target}`).to.equal(404);
    }
    const recoverElsewhere = await admin.request(
      'POST',
      `/admin/v1/workspaces/${elsewhere.id}/endpoints/${endpoint.id}/recover`,
      { token: token.token, body: { since: '2026-11-01T00:00:00Z' } },
    );
    expect(recoverElsewhere.status).to.equal(404);
    expect(await delivery(db, built.id)).to.include({ status: 'retrying', attempts: 1 });
    expect(
      await db('audit_entries').whereNot({ actor_name: FIXTURE_ACTOR }).where({ target_id: built.id }),
    ).to.have.length(0);
  });

  it('retries: a retrying delivery is attempted at once by a running dispatcher, and a test delivery sent stops counting towards the limit', async () => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url });
    receiver.setSecret(url, endpoint.secret);
    // five examples pending, one of them retrying until tomorrow: the sixth is refused by the limit
    const sent: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = documented(
        'POST',
        `${base()}/example-events`,
        await sendExampleEvent({
          client,
          path: { workspaceId: ws.id },
          body: { endpointId: endpoint.id, event: 'invoice.overdue' },
        }),
      );
      expect(res.response.status).to.equal(202);
      sent.push(res.data!.deliveryId);
    }
    const waiting = sent[0];
    const tomorrow = new Date(Date.now() + 24 * 3600_000);
    await db('deliveries').whereIn('id', sent).update({ status: 'retrying', attempts: 1, next_attempt_at: tomorrow });
    const refused = documented(
      'POST',
      `${base()}/example-events`,
      await sendExampleEvent({
        client,
        path: { workspaceId: ws.id },
        body: { endpointId: endpoint.id, event: 'invoice.overdue' },
      }),
    );
    expect(refused.response.status).to.equal(429);
    expect((refused.error as { error: { code: string } }).error.code).to.equal('rate_limited');
    // Retry-After: until the soonest pending one is due (tomorrow, within a second or two of rounding)
    expect(Number(refused.response.headers.get('retry-after'))).to.be.within(24 * 3600 - 5, 24 * 3600);

    const dispatcher = ws.dispatcher();
    await dispatcher.start();
    try {
      const retried = documented(
        'POST',
        `${base()}/deliveries/${waiting}/retry`,
        await retryDelivery({ client, path: { workspaceId: ws.id, deliveryId: waiting } }),
      );
      expect(retried.data).to.deep.include({
        id: waiting,
        endpointId: endpoint.id,
        previousStatus: 'retrying',
        status: 'retrying',
        attempts: 1,
      });
      await eventually(
        async () => (await delivery(db, waiting)).status === 'accepted',
        10_000,
        'the retried delivery to be accepted',
      );
    } finally {
      await dispatcher.stop();
    }
    const request = receiver.requests.find((r) => r.deliveryId === waiting)!;
    expect(request.verified).to.deep.equal({ ok: true });
    expect(request.event).to.equal('invoice.overdue');
    expect(request.body.data).to.deep.equal(examplePayload('invoice.overdue').data);
    expect(await delivery(db, waiting)).to.include({ attempts: 2 });
    // sent: four pending now, so a sixth example is taken
    const taken = await sendExampleEvent({
      client,
      path: { workspaceId: ws.id },
      body: { endpointId: endpoint.id, event: 'invoice.overdue' },
    });
    expect(documented('POST', `${base()}/example-events`, taken).response.status).to.equal(202);

    expect(
      (await actions(waiting)).map((e) => [e.actor_type, e.actor_id, e.action, e.workspace_id, e.changes.status]),
    ).to.deep.equal([
      ['admin_token', token.id, 'event.send_example', ws.id, undefined],
      ['admin_token', token.id, 'delivery.retry', ws.id, { from: 'retrying', to: 'retrying' }],
    ]);
  });

  it('retries: an accepted delivery is sent again with the same id and bytes, its count continuing; a held one is 409 naming enableEndpoint', async () => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url });
    receiver.setSecret(url, endpoint.secret);
    const accepted = await buildDelivery(db, ws, endpoint, {
      status: 'accepted',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: MAX_ATTEMPTS,
    });
    const res = documented(
      'POST',
      `${base()}/deliveries/${accepted.id}/retry`,
      await retryDelivery({ client, path: { workspaceId: ws.id, deliveryId: accepted.id } }),
    );
    expect(res.data).to.deep.include({
      id: accepted.id,
      previousStatus: 'accepted',
      status: 'queued',
      attempts: MAX_ATTEMPTS,
    });
    expect(await ws.dispatcher().runOnce()).to.include({ attempted: 1, accepted: 1 });
    expect(receiver.requests.map((r) => [r.deliveryId, r.rawBody.toString('utf8'), r.verified])).to.deep.equal([
      [accepted.id, accepted.body, { ok: true }],
    ]);
    expect(await delivery(db, accepted.id)).to.include({
      status: 'accepted',
      attempts: MAX_ATTEMPTS + 1,
      body: accepted.body,
    });

    const off = await ws.endpoint({ url: 'https://hooks.example.ae/off', active: false });
    const held = await buildDelivery(db, ws, off, {
      status: 'held',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 3,
    });
    const refused = await admin.request('POST', `${base()}/deliveries/${held.id}/retry`, { token: token.token });
    expect([refused.status, refused.body.error.code, refused.body.error.reason]).to.deep.equal([
      409,
      'conflict',
      'status',
    ]);
    expect(refused.body.error.message)
      .to.include('enableEndpoint')
      .and.include(`fleet-admin endpoint enable --id ${off.id}`);
    const failedOff = await buildDelivery(db, ws, off, {
      status: 'failed',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 9,
    });
    const refusedToo = await admin.request('POST', `${base()}/deliveries/${failedOff.id}/retry`, {
      token: token.token,
    });
    expect([refusedToo.status, refusedToo.body.error.reason]).to.deep.equal([409, 'endpointId']);
    expect(await delivery(db, held.id)).to.include({ status: 'held', attempts: 3 });
    expect(await delivery(db, failedOff.id)).to.include({ status: 'failed' });
    expect(await actions(held.id)).to.have.length(0);
  });

  it('recovers the failed deliveries of a window and says how many; a switched-off endpoint is 409', async () => {
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/recover' });
    const build = (status: 'failed' | 'accepted', createdAt: string) =>
      buildDelivery(db, ws, endpoint, { status, createdAt, attempts: 9 });
    await build('failed', '2026-11-21T05:59:59.999Z');
    const atSince = await build('failed', '2026-11-21T06:00:00.000Z');
    const inside = await build('failed', '2026-11-21T09:00:00.000Z');
    await build('accepted', '2026-11-21T09:30:00.000Z');
    await build('failed', '2026-11-21T12:00:00.000Z');
    const path = `${base()}/endpoints/${endpoint.id}/recover`;
    const res = documented(
      'POST',
      path,
      await recoverEndpoint({
        client,
        path: { workspaceId: ws.id, endpointId: endpoint.id },
        body: { since: '2026-11-21T06:00:00Z', until: '2026-11-21T12:00:00Z' },
      }),
    );
    expect(res.data).to.deep.equal({
      endpointId: endpoint.id,
      since: '2026-11-21T06:00:00.000Z',
      until: '2026-11-21T12:00:00.000Z',
      queued: 2,
    });
    expect(
      (await db('deliveries').where({ endpoint_id: endpoint.id, status: 'queued' }).pluck('id')).sort(),
    ).to.deep.equal([atSince.id, inside.id].sort());
    expect((await actions(endpoint.id)).map((e) => [e.action, e.changes])).to.deep.equal([
      ['endpoint.recover', { since: '2026-11-21T06:00:00.000Z', until: '2026-11-21T12:00:00.000Z', queued: 2 }],
    ]);

    for (const [body, reason] of [
      [{}, 'since'],
      [{ since: 'monday' }, 'since'],
      [{ since: '2026-11-21T06:00:00Z', until: '2026-11-21T06:00:00Z' }, 'until'],
    ] as const) {
      const bad = await admin.request('POST', path, { token: token.token, body });
      expect([bad.status, bad.body.error.reason], JSON.stringify(body)).to.deep.equal([400, reason]);
    }
    const missing = await admin.request('POST', `${base()}/endpoints/${MISSING}/recover`, {
      token: token.token,
      body: { since: '2026-11-21T06:00:00Z' },
    });
    expect(missing.status).to.equal(404);
    const off = await ws.endpoint({ url: 'https://hooks.example.ae/off', active: false });
    const refused = await admin.request('POST', `${base()}/endpoints/${off.id}/recover`, {
      token: token.token,
      body: { since: '2026-11-21T06:00:00Z' },
    });
    expect([refused.status, refused.body.error.reason]).to.deep.equal([409, 'endpointId']);
    expect(refused.body.error.message).to.include('enableEndpoint');
  });

  it("lists every event of the public document's webhooks with its group, summary, description and example data", async () => {
    const res = documented(
      'GET',
      `${base()}/event-types`,
      await listEventTypes({ client, path: { workspaceId: ws.id } }),
    );
    const webhooks = loadOpenApiDocument().webhooks as unknown as Record<
      string,
      {
        post: {
          tags: string[];
          summary: string;
          description: string;
          requestBody: { content: Record<string, { example: { data: unknown } }> };
        };
      }
    >;
    expect(res.data!.rows.map((r) => r.event)).to.deep.equal(Object.keys(webhooks));
    for (const row of res.data!.rows) {
      const { post } = webhooks[row.event];
      expect(row, row.event).to.deep.equal({
        event: row.event,
        group: post.tags[0],
        summary: post.summary,
        description: post.description,
        exampleData: post.requestBody.content['application/json'].example.data,
      });
    }
    expect(res.data!.rows.find((r) => r.event === 'invoice.overdue')!.group).to.equal('Money events');
  });

  it('publishes an event with the same validation as fleet-admin publish (400 naming the field), safely retried, audited', async () => {
    const subscribed = await ws.endpoint({ url: 'https://hooks.example.ae/pay', events: ['payment.captured'] });
    await ws.endpoint({ url: 'https://hooks.example.ae/other', events: ['invoice.issued'] });
    const data = examplePayload('payment.captured').data as Record<string, unknown>;
    const path = `${base()}/events`;
    const headers = { 'Idempotency-Key': `publish-${Date.now()}` };
    const first = await admin.request('POST', path, {
      token: token.token,
      headers,
      body: { event: 'payment.captured', data },
    });
    expect(first.status).to.equal(201);
    expect(first.body).to.deep.equal({ eventId: first.body.eventId, deliveries: 1, duplicate: false });
    const again = await admin.request('POST', path, {
      token: token.token,
      headers,
      body: { event: 'payment.captured', data },
    });
    expect(again.body).to.deep.equal(first.body);
    expect(await db('deliveries').where({ workspace_id: ws.id }).pluck('endpoint_id')).to.deep.equal([subscribed.id]);
    expect((await actions(first.body.eventId)).map((e) => [e.actor_id, e.action, e.changes])).to.deep.equal([
      [token.id, 'event.publish', { event: 'payment.captured', dedupeKey: null, deliveries: 1 }],
    ]);
    const viaClient = documented(
      'POST',
      path,
      await publishEvent({ client, path: { workspaceId: ws.id }, body: { event: 'payment.captured', data } }),
    );
    expect(viaClient.data!.eventId).not.to.equal(first.body.eventId);

    const overdue = examplePayload('invoice.overdue');
    for (const [body, reason, message] of [
      [{ event: 'no.such_event', data: {} }, 'event', 'unknown event "no.such_event"'],
      [
        { event: 'webhook.test', data: {} },
        'event',
        'webhook.test is sent only by the test operation and cannot be published',
      ],
      [
        { event: 'payment.captured', data: { ...data, paymentId: 'nope' } },
        'data',
        'invalid payment.captured event at /data/paymentId: must match format "uuid"',
      ],
      [
        { event: 'invoice.overdue', data: overdue.data },
        'dedupeKey',
        "invalid invoice.overdue event at /: must have required property 'dedupeKey'",
      ],
      [{ event: 'payment.captured' }, 'data', undefined],
    ] as const) {
      const res = await admin.request('POST', path, { token: token.token, body });
      expect([res.status, res.body.error.reason], JSON.stringify(body)).to.deep.equal([400, reason]);
      if (message) expect(res.body.error.message).to.equal(message);
    }
    expect(await db('events').where({ workspace_id: ws.id }).count<{ count: number }[]>('* as count')).to.deep.equal([
      { count: 2 },
    ]);
  });

  it('sends an example to that endpoint only, signed; refuses an unknown event (400), endpoint (404) or a switched-off one (409)', async () => {
    const url = receiver.endpointUrl();
    const endpoint = await ws.endpoint({ url, events: ['payment.captured'] });
    receiver.setSecret(url, endpoint.secret);
    await ws.endpoint({ url: receiver.endpointUrl() });
    const path = `${base()}/example-events`;
    const sent = documented(
      'POST',
      path,
      await sendExampleEvent({
        client,
        path: { workspaceId: ws.id },
        body: { endpointId: endpoint.id, event: 'booking.ending_soon' },
      }),
    );
    expect(sent.data).to.deep.equal({
      deliveryId: sent.data!.deliveryId,
      endpointId: endpoint.id,
      event: 'booking.ending_soon',
    });
    expect(await ws.dispatcher().runOnce()).to.include({ attempted: 1, accepted: 1 });
    expect(receiver.requests).to.have.length(1);
    const [request] = receiver.requests;
    expect([request.path, request.deliveryId, request.event, request.verified]).to.deep.equal([
      new URL(url).pathname,
      sent.data!.deliveryId,
      'booking.ending_soon',
      { ok: true },
    ]);
    expect(request.body.data).to.deep.equal(examplePayload('booking.ending_soon').data);
    expect(request.body.dedupeKey).to.match(/^example:[0-9a-f-]{36}$/);
    expect((await actions(sent.data!.deliveryId)).map((e) => [e.actor_id, e.action, e.changes])).to.deep.equal([
      [token.id, 'event.send_example', { event: 'booking.ending_soon', endpointId: endpoint.id }],
    ]);

    const off = await ws.endpoint({ url: 'https://hooks.example.ae/off', active: false });
    for (const [body, status, reason] of [
      [{ endpointId: endpoint.id, event: 'no.such_event' }, 400, 'event'],
      [{ endpointId: 'nope', event: 'payment.captured' }, 400, 'endpointId'],
      [{ endpointId: MISSING, event: 'payment.captured' }, 404, undefined],
      [{ endpointId: off.id, event: 'payment.captured' }, 409, 'endpointId'],
    ] as const) {
      const res = await admin.request('POST', path, { token: token.token, body });
      expect([res.status, res.body.error.reason], JSON.stringify(body)).to.deep.equal([status, reason]);
    }
    expect(
      await db('deliveries').where({ workspace_id: ws.id }).count<{ count: number }[]>('* as count'),
    ).to.deep.equal([{ count: 1 }]);
  });

  it('example events count under the 60 test calls a minute per workspace: the 61st is 429 with Retry-After until the oldest leaves the minute', async () => {
    const started = Date.parse('2026-11-22T12:00:00.000Z');
    let now = new Date(started);
    const clocked = await startAdminApi({ clock: () => now });
    try {
      const targets = [];
      for (let i = 0; i < 13; i++) targets.push(await ws.endpoint({ url: `https://hooks${i}.example.ae/examples` }));
      const send = (endpointId: string) =>
        clocked.request('POST', `${base()}/example-events`, {
          token: token.token,
          body: { endpointId, event: 'payment.captured' },
        });
      for (let i = 0; i < 60; i++) {
        now = new Date(started + i * 500); // 60 calls from 0 s to 29.5 s, 5 per endpoint
        expect((await send(targets[Math.floor(i / 5)].id)).status, `call ${i}`).to.equal(202);
      }
      // At 29.5 s: the oldest call (0 s) leaves the minute at 60 s, 30.5 s from now.
      const refused = await send(targets[12].id);
      expect([
        refused.status,
        refused.headers.get('retry-after'),
        refused.body.error.code,
        refused.body.error.message,
      ]).to.deep.equal([
        429,
        '31',
        'rate_limited',
        'At most 60 test deliveries a minute per workspace; try again later.',
      ]);
      now = new Date(started + 60_000);
      expect((await send(targets[12].id)).status).to.equal(202);
      expect(
        await db('deliveries').where({ workspace_id: ws.id }).count<{ count: number }[]>('* as count'),
      ).to.deep.equal([{ count: 61 }]);
    } finally {
      await clocked.close();
    }
  });

  it("the audit trail lists the deliveries' changes through listAuditEntries", async () => {
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/audit' });
    const failed = await buildDelivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 9,
    });
    await retryDelivery({ client, path: { workspaceId: ws.id, deliveryId: failed.id } });
    const audit = documented(
      'GET',
      '/admin/v1/audit-entries',
      await listAuditEntries({ client, query: { workspace: ws.id } }),
    );
    const rows = audit.data!.rows.filter((e) => e.actor.name !== FIXTURE_ACTOR);
    expect(rows.map((e) => [e.action, e.target, e.changes.status])).to.deep.equal([
      ['delivery.retry', { type: 'delivery', id: failed.id }, { from: 'failed', to: 'queued' }],
    ]);
  });
});
