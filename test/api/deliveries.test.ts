import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { createApiKey } from '../../src/core/workspaces.js';
import {
  buildAttempt as attempt,
  buildDelivery as delivery,
  dropTestWorkspaces,
  webhookWorkspace,
  type TestEndpoint,
  type TestWorkspace,
} from '../webhooks/support.js';
import { idOf, operator } from '../support/actors.js';

// The delivery log of the read API, over hand-built deliveries and attempts with fixed times.

describe('API: the delivery log (GET /v1/webhooks/{id}/deliveries[/{deliveryId}])', () => {
  let db: Knex;
  let api: TestApi;
  let ws: TestWorkspace;
  let key: string;
  let endpoint: TestEndpoint;

  before(async () => {
    ({ db } = await testDatabase());
    api = await startApi({ now: new Date('2026-11-22T12:00:00.000Z') });
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    key = (await createApiKey(db, operator, { workspaceId: await idOf(db, ws.slug) })).key;
    endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet' });
  });
  after(async () => {
    await api.close();
    await dropTestWorkspaces(db);
  });

  const list = (query = '', endpointId = endpoint.id, apiKey = key) =>
    api.get(`/v1/webhooks/${endpointId}/deliveries${query}`, apiKey);

  it("lists the endpoint's deliveries newest first, each with its last attempt", async () => {
    const failed = await delivery(db, ws, endpoint, {
      status: 'retrying',
      createdAt: '2026-11-22T08:30:00.000Z',
      attempts: 2,
      nextAttemptAt: '2026-11-22T08:36:00.500Z',
      lastStatusCode: 503,
      lastError: 'HTTP 503',
    });
    await attempt(db, endpoint, failed.id, {
      number: 1,
      startedAt: '2026-11-22T08:30:00.100Z',
      durationMs: 120,
      statusCode: null,
      errorKind: 'connection',
      error: 'ECONNREFUSED',
      responseBody: null,
    });
    await attempt(db, endpoint, failed.id, {
      number: 2,
      startedAt: '2026-11-22T08:31:00.400Z',
      durationMs: 95,
      statusCode: 503,
      errorKind: 'status',
      error: 'HTTP 503',
      responseBody: 'busy',
    });
    const accepted = await delivery(db, ws, endpoint, {
      event: 'webhook.test',
      status: 'accepted',
      createdAt: '2026-11-22T09:00:00.000Z',
      attempts: 1,
      lastStatusCode: 204,
    });
    await attempt(db, endpoint, accepted.id, {
      number: 1,
      startedAt: '2026-11-22T09:00:00.250Z',
      durationMs: 40,
      statusCode: 204,
      errorKind: null,
      error: null,
      responseBody: '',
    });
    const queued = await delivery(db, ws, endpoint, {
      event: 'invoice.issued',
      status: 'queued',
      createdAt: '2026-11-22T10:00:00.000Z',
      nextAttemptAt: '2026-11-22T10:00:00.000Z',
    });
    // another endpoint's delivery, same workspace: not in this log
    await delivery(db, ws, await ws.endpoint({ url: 'https://other.example/hook' }), {
      status: 'queued',
      createdAt: '2026-11-22T11:00:00.000Z',
    });

    const res = await list();
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({
      rows: [
        {
          id: queued.id,
          event: 'invoice.issued',
          status: 'queued',
          attempts: 0,
          createdAt: '2026-11-22T10:00:00.000Z',
          lastAttemptAt: null,
          nextAttemptAt: '2026-11-22T10:00:00.000Z',
          lastStatusCode: null,
          lastErrorKind: null,
        },
        {
          id: accepted.id,
          event: 'webhook.test',
          status: 'accepted',
          attempts: 1,
          createdAt: '2026-11-22T09:00:00.000Z',
          lastAttemptAt: '2026-11-22T09:00:00.250Z',
          nextAttemptAt: null,
          lastStatusCode: 204,
          lastErrorKind: null,
        },
        {
          id: failed.id,
          event: 'booking.confirmed',
          status: 'retrying',
          attempts: 2,
          createdAt: '2026-11-22T08:30:00.000Z',
          lastAttemptAt: '2026-11-22T08:31:00.400Z',
          nextAttemptAt: '2026-11-22T08:36:00.500Z',
          lastStatusCode: 503,
          lastErrorKind: 'status',
        },
      ],
      nextCursor: null,
    });
    expect(res.headers.get('cache-control')).to.equal('private, no-cache'); // the caller's own cache only, revalidated before each use
  });

  it('filters by status and by event, and answers an empty page for no match', async () => {
    const a = await delivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-20T08:00:00.000Z',
      attempts: 9,
      lastStatusCode: 500,
    });
    const b = await delivery(db, ws, endpoint, {
      status: 'failed',
      event: 'invoice.issued',
      createdAt: '2026-11-20T09:00:00.000Z',
      attempts: 9,
    });
    await delivery(db, ws, endpoint, { status: 'accepted', createdAt: '2026-11-20T10:00:00.000Z', attempts: 1 });
    await delivery(db, ws, endpoint, { status: 'held', createdAt: '2026-11-20T11:00:00.000Z' });
    expect((await list('?status=failed')).body.rows.map((r: { id: string }) => r.id)).to.deep.equal([b.id, a.id]);
    expect(
      (await list('?status=failed&event=invoice.issued')).body.rows.map((r: { id: string }) => r.id),
    ).to.deep.equal([b.id]);
    expect((await list('?status=held')).body.rows).to.have.length(1);
    expect((await list('?event=webhook.test')).body).to.deep.equal({ rows: [], nextCursor: null });
  });

  it('pages with limit and cursor, stable while newer deliveries arrive, ties broken by id', async () => {
    const times = [
      '2026-11-21T08:00:00.000Z',
      '2026-11-21T09:00:00.000Z',
      '2026-11-21T10:00:00.000Z',
      '2026-11-21T11:00:00.000Z',
    ];
    const built = [];
    for (const createdAt of times)
      built.push(await delivery(db, ws, endpoint, { status: 'accepted', createdAt, attempts: 1 }));
    // two at the same microsecond: the larger id comes first
    const [lo, hi] = [randomUUID(), randomUUID()].sort();
    const tieLo = await delivery(db, ws, endpoint, {
      id: lo,
      status: 'accepted',
      createdAt: '2026-11-21T09:30:00.000Z',
      attempts: 1,
    });
    const tieHi = await delivery(db, ws, endpoint, {
      id: hi,
      status: 'accepted',
      createdAt: '2026-11-21T09:30:00.000Z',
      attempts: 1,
    });
    const expected = [built[3].id, built[2].id, tieHi.id, tieLo.id, built[1].id, built[0].id];

    const first = await list('?limit=2');
    expect(first.body.rows.map((r: { id: string }) => r.id)).to.deep.equal(expected.slice(0, 2));
    expect(first.body.nextCursor).to.be.a('string');
    // a newer delivery arrives between pages: later pages neither repeat nor lose a row
    await delivery(db, ws, endpoint, { status: 'queued', createdAt: '2026-11-22T11:59:00.000Z' });
    const second = await list(`?limit=2&cursor=${first.body.nextCursor}`);
    expect(second.body.rows.map((r: { id: string }) => r.id)).to.deep.equal(expected.slice(2, 4));
    const third = await list(`?limit=2&cursor=${second.body.nextCursor}`);
    expect(third.body.rows.map((r: { id: string }) => r.id)).to.deep.equal(expected.slice(4, 6));
    // the last page, even when it is full, says there is no next one
    expect(third.body.nextCursor).to.equal(null);
    // the default limit is 20: all seven on one page, the last one carrying no cursor
    const all = await list();
    expect(all.body.rows).to.have.length(7);
    expect(all.body.nextCursor).to.equal(null);
  });

  it('pages to the microsecond: deliveries 1 µs apart are neither skipped nor repeated', async () => {
    const a = await delivery(db, ws, endpoint, {
      status: 'accepted',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 1,
    });
    const b = await delivery(db, ws, endpoint, {
      status: 'accepted',
      createdAt: '2026-11-21T08:00:00.000Z',
      attempts: 1,
    });
    await db('deliveries')
      .where({ id: b.id })
      .update({ created_at: db.raw(`created_at + interval '1 microsecond'`) });
    const first = await list('?limit=1');
    expect(first.body.rows.map((r: { id: string }) => r.id)).to.deep.equal([b.id]);
    const second = await list(`?limit=1&cursor=${first.body.nextCursor}`);
    expect(second.body).to.deep.include({ nextCursor: null });
    expect(second.body.rows.map((r: { id: string }) => r.id)).to.deep.equal([a.id]);
  });

  it('refuses a cursor of another endpoint, other filters, another list or altered, and takes it with another limit', async () => {
    for (const createdAt of ['2026-11-21T08:00:00.000Z', '2026-11-21T09:00:00.000Z', '2026-11-21T10:00:00.000Z']) {
      await delivery(db, ws, endpoint, { status: 'accepted', createdAt, attempts: 1 });
    }
    const sibling = await ws.endpoint({ url: 'https://sibling.example/hook' });
    await delivery(db, ws, sibling, { status: 'accepted', createdAt: '2026-11-21T07:00:00.000Z', attempts: 1 });
    const cursor = (await list('?limit=1')).body.nextCursor as string;
    const altered = `${cursor.slice(0, 10)}${cursor[10] === 'A' ? 'B' : 'A'}${cursor.slice(11)}`;
    const refused = [
      await list(`?limit=1&cursor=${cursor}`, sibling.id),
      await list(`?limit=1&status=accepted&cursor=${cursor}`),
      await list(`?limit=1&event=booking.confirmed&cursor=${cursor}`),
      await list(`?limit=1&cursor=${altered}`),
      await api.get(`/v1/vehicles?cursor=${cursor}`, key),
    ];
    for (const res of refused) {
      expect(res.status).to.equal(400);
      expect(res.body.error).to.include({ code: 'invalid_request', reason: 'cursor' });
      expect(res.body.error.message).to.match(/^Query parameter "cursor" .*Start again without "cursor"\.$/);
    }
    // the same cursor, another page size: the two older deliveries
    expect(
      (await list(`?limit=2&cursor=${cursor}`)).body.rows.map((r: { createdAt: string }) => r.createdAt),
    ).to.deep.equal(['2026-11-21T09:00:00.000Z', '2026-11-21T08:00:00.000Z']);
  });

  it('shows one delivery with the exact payload and every attempt, oldest first', async () => {
    const d = await delivery(db, ws, endpoint, {
      status: 'failed',
      createdAt: '2026-11-22T08:00:00.000Z',
      attempts: 2,
      lastStatusCode: 302,
      lastError: 'HTTP 302 redirect (redirects are not followed)',
    });
    await attempt(db, endpoint, d.id, {
      number: 2,
      startedAt: '2026-11-22T08:01:00.500Z',
      durationMs: 17,
      statusCode: 302,
      errorKind: 'redirect',
      error: 'HTTP 302 redirect (redirects are not followed)',
      responseBody: 'moved',
    });
    await attempt(db, endpoint, d.id, {
      number: 1,
      startedAt: '2026-11-22T08:00:00.200Z',
      durationMs: 10000,
      statusCode: null,
      errorKind: 'timeout',
      error: 'no complete answer within 10000 ms',
      responseBody: null,
    });
    const res = await api.get(`/v1/webhooks/${endpoint.id}/deliveries/${d.id}`, key);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({
      id: d.id,
      event: 'booking.confirmed',
      status: 'failed',
      attemptCount: 2,
      createdAt: '2026-11-22T08:00:00.000Z',
      lastAttemptAt: '2026-11-22T08:01:00.500Z',
      nextAttemptAt: null,
      lastStatusCode: 302,
      lastErrorKind: 'redirect',
      payload: JSON.parse(d.body),
      attempts: [
        {
          number: 1,
          startedAt: '2026-11-22T08:00:00.200Z',
          durationMs: 10000,
          statusCode: null,
          errorKind: 'timeout',
          error: 'no complete answer within 10000 ms',
          responseBody: null,
        },
        {
          number: 2,
          startedAt: '2026-11-22T08:01:00.500Z',
          durationMs: 17,
          statusCode: 302,
          errorKind: 'redirect',
          error: 'HTTP 302 redirect (redirects are not followed)',
          responseBody: 'moved',
        },
      ],
    });
    // the payload is the body as sent, byte for byte: the answer's text holds the stored bytes
    expect(res.text).to.include(`"payload":${d.body}`);
    // also when the stored bytes are spaced as Postgres writes jsonb text (the fan-out builds bodies that way)
    const spaced = JSON.stringify(JSON.parse(d.body), null, 1);
    await db('deliveries').where({ id: d.id }).update({ body: spaced });
    const again = await api.get(`/v1/webhooks/${endpoint.id}/deliveries/${d.id}`, key);
    expect(again.text).to.include(`,"payload":${spaced},`);
    expect(again.body.payload).to.deep.equal(JSON.parse(spaced));
  });

  it("answers 404 for another workspace's endpoint or delivery exactly as for an unknown one", async () => {
    const other = await webhookWorkspace(db);
    const foreignEndpoint = await other.endpoint({ url: 'https://foreign.example/hook' });
    const foreign = await delivery(db, other, foreignEndpoint, {
      status: 'queued',
      createdAt: '2026-11-22T08:00:00.000Z',
    });
    const mine = await delivery(db, ws, endpoint, { status: 'queued', createdAt: '2026-11-22T08:00:00.000Z' });
    const sibling = await ws.endpoint({ url: 'https://sibling.example/hook' });
    const unknown = randomUUID();
    const answers = [
      await list('', foreignEndpoint.id),
      await list('', unknown),
      await api.get(`/v1/webhooks/${foreignEndpoint.id}/deliveries/${foreign.id}`, key),
      await api.get(`/v1/webhooks/${endpoint.id}/deliveries/${foreign.id}`, key),
      await api.get(`/v1/webhooks/${sibling.id}/deliveries/${mine.id}`, key),
      await api.get(`/v1/webhooks/${endpoint.id}/deliveries/${unknown}`, key),
    ];
    for (const res of answers) {
      expect(res.status).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
    // the foreign and the unknown endpoint are told apart by nothing but the request id
    const strip = (r: { body: { error: { requestId: string } } }) => ({ ...r.body.error, requestId: '' });
    expect(strip(answers[0])).to.deep.equal(strip(answers[1]));
    expect(strip(answers[2])).to.deep.equal(strip(answers[5]));
    // the owner sees it
    expect(
      (
        await list(
          '',
          foreignEndpoint.id,
          (await createApiKey(db, operator, { workspaceId: await idOf(db, other.slug) })).key,
        )
      ).body.rows,
    ).to.have.length(1);
  });

  const badParameters: Array<[string, string]> = [
    ['?status=done', 'status'],
    ['?event=booking.nope', 'event'],
    ['?limit=0', 'limit'],
    ['?limit=101', 'limit'],
    ['?limit=ten', 'limit'],
    ['?cursor=', 'cursor'],
    ['?cursor=not*base64', 'cursor'],
    ['?cursor=YWJj', 'cursor'],
    [`?cursor=${Buffer.from('123_not-a-uuid').toString('base64url')}`, 'cursor'],
    ['?page=2', 'page'],
    ['?Limit=5', 'Limit'],
  ];
  for (const [query, parameter] of badParameters) {
    it(`GET .../deliveries${query} is 400 naming "${parameter}"`, async () => {
      const res = await list(query);
      expect(res.status).to.equal(400);
      expect(res.body.error).to.include({ code: 'invalid_request', reason: parameter });
      expect(res.body.error.message).to.include(`"${parameter}"`);
    });
  }

  it('needs UUIDs in the path, and a key before anything', async () => {
    expect((await api.get('/v1/webhooks/nope/deliveries', key)).body.error).to.include({
      code: 'invalid_request',
      reason: 'id',
    });
    expect((await api.get(`/v1/webhooks/${endpoint.id}/deliveries/nope`, key)).body.error).to.include({
      code: 'invalid_request',
      reason: 'deliveryId',
    });
    expect((await api.get(`/v1/webhooks/${endpoint.id}/deliveries?limit=0`)).status).to.equal(401);
  });
});
