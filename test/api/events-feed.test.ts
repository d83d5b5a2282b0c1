import { expect } from 'chai';
import type { Knex } from 'knex';
import { scansOf, testDatabase, type PlanNode } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { publishEvent } from '../../src/core/webhooks/publish.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { sendExampleEvent } from '../../src/core/webhooks/events.js';
import { eventFeed, type EventPosition } from '../../src/webhooks/event-feed.js';
import { EVENT_CHANNEL } from '../../src/api/event-arrivals.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import {
  dropTestWorkspaces,
  examplePayload,
  sleep,
  webhookWorkspace,
  type TestWorkspace,
} from '../webhooks/support.js';
import { operator } from '../support/actors.js';
import type { ApiResponse } from '../support/http.js';

// The event feed (GET /v1/events) over events published for the test's own workspaces through the core's publishEvent,
// their times then set by hand; the item compared with what a real receiver got through the real dispatcher; long polls
// against the API's own LISTEN connection (src/api/event-arrivals.ts). Every answer is checked against the document by
// the test client.

const NO_AUTH_LIMIT = { perMinute: 0, trustedProxies: [] };

describe('API: the event feed (GET /v1/events)', () => {
  let db: Knex;
  let api: TestApi;
  let ws: TestWorkspace;
  let key: string;

  before(async () => {
    ({ db } = await testDatabase());
    api = await startApi({ events: true });
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    key = (await createApiKey(db, operator, { workspaceId: ws.id })).key;
  });
  after(async () => {
    await api.close();
    await dropTestWorkspaces(db);
  });

  /** Publishes an event of the document's example data, its time set to `at` (when given); returns its id. */
  async function publish(workspace: TestWorkspace, event: string, at?: string, dedupeKey?: string): Promise<string> {
    const example = examplePayload(event);
    const { eventId } = await publishEvent(db, operator, {
      workspaceId: workspace.id,
      event,
      data: example.data,
      dedupeKey: dedupeKey ?? example.dedupeKey,
      source: 'publish',
    });
    if (at) await db('events').where({ id: eventId }).update({ created_at: at });
    return eventId;
  }

  const sample = (event: string) => ({ event, data: examplePayload(event).data });
  const feed = (query = '', apiKey = key) => api.get(`/v1/events${query}`, apiKey);
  const ids = (res: ApiResponse) => (res.body.rows as Array<{ id: string }>).map((row) => row.id);

  it("answers the workspace's events oldest first, each the payload a receiver gets, and no ETag", async () => {
    const confirmed = await publish(ws, 'booking.confirmed', '2026-11-22T08:30:00.000Z');
    const overdue = await publish(ws, 'invoice.overdue', '2026-11-22T08:31:00.250Z');
    const res = await feed();
    expect(res.status).to.equal(200);
    expect(res.headers.get('etag')).to.equal(null);
    expect(res.headers.get('cache-control')).to.equal('no-store');
    const [first, second] = res.body.rows;
    expect(res.body.rows).to.have.length(2);
    expect(first).to.deep.equal({
      id: confirmed,
      event: 'booking.confirmed',
      createdAt: '2026-11-22T08:30:00.000Z',
      data: examplePayload('booking.confirmed').data,
    });
    const overdueExample = examplePayload('invoice.overdue');
    expect(overdueExample.dedupeKey).to.be.a('string');
    expect(second).to.deep.equal({
      id: overdue,
      event: 'invoice.overdue',
      createdAt: '2026-11-22T08:31:00.250Z',
      dedupeKey: overdueExample.dedupeKey,
      data: overdueExample.data,
    });
    // the envelope's keys in the delivery body's order
    expect(Object.keys(second)).to.deep.equal(['id', 'event', 'createdAt', 'dedupeKey', 'data']);
    expect(res.body.hasMore).to.equal(false);
    expect(res.body.nextCursor).to.be.a('string');
  });

  it("never shows another workspace's events, nor webhook.test; a cursor of another workspace is a 400", async () => {
    const other = await webhookWorkspace(db);
    const otherKey = (await createApiKey(db, operator, { workspaceId: other.id })).key;
    const mine = await publish(ws, 'booking.confirmed');
    const theirs = await publish(other, 'booking.confirmed');
    // a test delivery records a webhook.test event of the workspace
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet' });
    const test = await api.request('POST', `/v1/webhooks/${endpoint.id}/test`, {
      key,
      headers: { 'idempotency-key': 'feed' },
    });
    expect(test.status).to.equal(202);
    expect(await db('events').where({ workspace_id: ws.id }).count('* as n').first()).to.deep.equal({ n: 2 });
    const res = await feed();
    expect(ids(res)).to.deep.equal([mine]);
    const theirsRes = await feed('', otherKey);
    expect(ids(theirsRes)).to.deep.equal([theirs]);
    const refused = await feed(`?after=${res.body.nextCursor}`, otherKey);
    expect(refused.status).to.equal(400);
    expect(refused.body.error).to.include({ code: 'invalid_request', reason: 'after' });
  });

  it('pages exactly by `after`: each page after the last, hasMore while full, the cursor kept at the end', async () => {
    const published: string[] = [];
    for (let i = 0; i < 5; i++)
      published.push(await publish(ws, 'booking.confirmed', `2026-11-22T08:3${i}:00.000Z`, undefined));
    const first = await feed('?limit=2');
    expect(ids(first)).to.deep.equal(published.slice(0, 2));
    expect(first.body.hasMore).to.equal(true);
    const second = await feed(`?limit=2&after=${first.body.nextCursor}`);
    expect(ids(second)).to.deep.equal(published.slice(2, 4));
    expect(second.body.hasMore).to.equal(true);
    // limit is not bound to the cursor
    const third = await feed(`?limit=3&after=${second.body.nextCursor}`);
    expect(ids(third)).to.deep.equal(published.slice(4));
    expect(third.body.hasMore).to.equal(false);
    const end = await feed(`?after=${third.body.nextCursor}`);
    expect(end.body).to.deep.equal({ rows: [], nextCursor: third.body.nextCursor, hasMore: false });
    // a later event comes after the end, whatever its time says (the order is the recording's)
    const later = await publish(ws, 'booking.confirmed', '2026-11-22T07:00:00.000Z');
    expect(ids(await feed(`?after=${third.body.nextCursor}`))).to.deep.equal([later]);
    // the whole feed in one page of 200
    expect(ids(await feed('?limit=200'))).to.deep.equal([...published, later]);
  });

  it('never passes over an event whose transaction is still open: the events after it wait for it', async () => {
    const trx = await db.transaction();
    let early: string;
    try {
      early = (await recordEvent(trx, { workspaceId: ws.id, ...sample('booking.confirmed'), source: 'publish' }))
        .eventId;
      const late = await publish(ws, 'booking.completed');
      const before = await feed();
      expect(before.body).to.deep.equal({ rows: [], nextCursor: null, hasMore: false });
      // a long poll waiting meanwhile is answered once the older transaction commits
      const waiting = feed('?wait=10');
      await sleep(300);
      await trx.commit();
      const committed = Date.now();
      expect(ids(await waiting)).to.deep.equal([early, late]);
      expect(Date.now() - committed).to.be.below(1000);
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
    }
  });

  it('leaves out example events (source test), and announces none of them', async () => {
    const endpoint = await ws.endpoint({ url: 'https://hooks.example.ae/fleet' });
    // a direct LISTEN on the announcements' channel: what a waiting request would be woken by
    const connection = await db.client.acquireConnection();
    const heard: string[] = [];
    const onNotification = (message: { channel: string; payload?: string }) => {
      if (message.channel === EVENT_CHANNEL && message.payload === ws.id) heard.push(message.payload);
    };
    connection.on('notification', onNotification);
    try {
      await connection.query(`LISTEN ${EVENT_CHANNEL}`);
      const example = await sendExampleEvent(db, operator, {
        workspaceId: ws.id,
        endpointId: endpoint.id,
        event: 'booking.confirmed',
        now: new Date('2026-11-22T08:30:00.000Z'),
      });
      const stored = await db('deliveries as d')
        .join('events as e', 'e.id', 'd.event_id')
        .where('d.id', example.deliveryId)
        .first('e.event', 'e.source');
      expect(stored).to.deep.equal({ event: 'booking.confirmed', source: 'test' });
      await sleep(200);
      expect(heard, 'no announcement of the example').to.deep.equal([]);
      const real = await publish(ws, 'booking.confirmed');
      await sleep(200);
      expect(heard, 'one of the real event').to.deep.equal([ws.id]);
      const res = await feed();
      expect(ids(res)).to.deep.equal([real]);
      expect(ids(await feed('?types=booking.confirmed'))).to.deep.equal([real]);
    } finally {
      connection.removeListener('notification', onNotification);
      await connection.query(`UNLISTEN ${EVENT_CHANNEL}`);
      await db.client.releaseConnection(connection);
    }
  });

  it('reads at most scanLimit positions a request: a rare type moves on through pages, never reading twice', async () => {
    const confirmed: string[] = [];
    for (let i = 0; i < 7; i++) confirmed.push(await publish(ws, 'booking.confirmed'));
    const overdue = await publish(ws, 'invoice.overdue');
    const read = (after?: EventPosition) =>
      eventFeed(db, ws.id, { types: ['invoice.overdue'], limit: 2, after, scanLimit: 3 });
    const first = await read();
    expect(first).to.deep.include({ items: [], hasMore: true });
    expect(first.next?.[2], 'the last position read').to.equal(confirmed[2]);
    const second = await read(first.next!);
    expect(second).to.deep.include({ items: [], hasMore: true });
    expect(second.next?.[2]).to.equal(confirmed[5]);
    const third = await read(second.next!);
    expect(third.items.map((item) => JSON.parse(item).id)).to.deep.equal([overdue]);
    expect(third).to.deep.include({ hasMore: false });
    expect(third.next?.[2]).to.equal(overdue);
    const end = await read(third.next!);
    expect(end).to.deep.equal({ items: [], next: third.next, hasMore: false });
    // a full page stops at its last item, whatever the scan could read on
    const full = await eventFeed(db, ws.id, { limit: 2, scanLimit: 3 });
    expect(full.items.map((item) => JSON.parse(item).id)).to.deep.equal(confirmed.slice(0, 2));
    expect(full).to.deep.include({ hasMore: true });
    expect(full.next?.[2]).to.equal(confirmed[1]);
    // a page short of limit within the scan moves past the events left out
    const short = await eventFeed(db, ws.id, { types: ['invoice.overdue'], limit: 2 });
    expect(short.items.map((item) => JSON.parse(item).id)).to.deep.equal([overdue]);
    expect(short).to.deep.include({ hasMore: false });
    // through the API: a page of a type with none after `after` still moves its cursor past what it read
    const page = await feed('?types=invoice.overdue&limit=1');
    expect(ids(page)).to.deep.equal([overdue]);
    const later = await publish(ws, 'booking.confirmed');
    const none = await feed(`?types=invoice.overdue&after=${page.body.nextCursor}`);
    expect(none.body.rows).to.deep.equal([]);
    expect(none.body.nextCursor).to.not.equal(page.body.nextCursor);
    const another = await publish(ws, 'invoice.overdue', undefined, 'overdue-again');
    expect(ids(await feed(`?types=invoice.overdue&after=${none.body.nextCursor}`))).to.deep.equal([another]);
    expect(ids(await feed(`?after=${(await feed('?limit=8')).body.nextCursor}`))).to.deep.equal([later, another]);
  });

  it('reads at most scanLimit rows of events by the index events_feed, whatever the types', async () => {
    const confirmed: string[] = [];
    for (let i = 0; i < 7; i++) confirmed.push(await publish(ws, 'booking.confirmed'));
    await publish(ws, 'invoice.overdue');
    // the statement as the feed sends it, planned and run for its own values
    const sent: Array<{ sql: string; bindings: unknown[] }> = [];
    const capture = (query: { sql: string; bindings: unknown[] }) => sent.push(query);
    db.on('query', capture);
    const first = await eventFeed(db, ws.id, { types: ['invoice.overdue'], limit: 2, scanLimit: 3 });
    await eventFeed(db, ws.id, { types: ['invoice.overdue'], limit: 2, after: first.next!, scanLimit: 3 });
    db.off('query', capture);
    expect(sent).to.have.length(2);
    for (const { sql, bindings } of sent) {
      const { rows } = await db.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql.replace(/\$\d+/g, '?')}`, bindings as any[]);
      const plan = rows[0]['QUERY PLAN'][0].Plan as PlanNode;
      const scans = await scansOf(db, plan, 'events');
      const feedScans = scans.filter((scan) => scan.scan.endsWith('events_feed'));
      expect(
        feedScans.map((scan) => scan.read),
        JSON.stringify(scans),
      ).to.deep.equal([3]);
      // and the page's items by id (none here: nothing kept)
      expect(scans.filter((scan) => !scan.scan.endsWith('events_feed')).every((scan) => scan.read === 0)).to.equal(
        true,
      );
    }
  });

  it('keeps only the `types` asked for, and binds the cursor to them', async () => {
    const confirmed = await publish(ws, 'booking.confirmed');
    const overdue = await publish(ws, 'invoice.overdue');
    const completed = await publish(ws, 'booking.completed');
    expect(ids(await feed('?types=invoice.overdue'))).to.deep.equal([overdue]);
    const two = await feed('?types=booking.completed,booking.confirmed');
    expect(ids(two)).to.deep.equal([confirmed, completed]);
    // the same set in another order is the same filter
    expect(ids(await feed(`?types=booking.confirmed,booking.completed&after=${two.body.nextCursor}`))).to.deep.equal(
      [],
    );
    const refused = await feed(`?types=invoice.overdue&after=${two.body.nextCursor}`);
    expect(refused.status).to.equal(400);
    expect(refused.body.error).to.include({ code: 'invalid_request', reason: 'after' });
    expect(ids(await feed())).to.deep.equal([confirmed, overdue, completed]);
  });

  it('refuses bad input with the documented 400 naming the parameter', async () => {
    await publish(ws, 'booking.confirmed');
    const cases: Array<[string, string]> = [
      ['?limit=0', 'limit'],
      ['?limit=201', 'limit'],
      ['?limit=ten', 'limit'],
      ['?wait=31', 'wait'],
      ['?wait=-1', 'wait'],
      ['?wait=1.5', 'wait'],
      ['?types=webhook.test', 'types'],
      ['?types=booking.confirmed,no.such_event', 'types'],
      ['?types=', 'types'],
      ['?after=garbage', 'after'],
      ['?after=AAAA', 'after'],
      ['?cursor=x', 'cursor'],
    ];
    for (const [query, reason] of cases) {
      const res = await feed(query);
      expect(res.status, query).to.equal(400);
      expect(res.body.error, query).to.include({ code: 'invalid_request', reason });
    }
    const unknown = await feed('?types=booking.confirmed,no.such_event');
    expect(unknown.body.error.message).to.equal(
      'Query parameter "types" must be a comma-separated list of 1 to 64 values, each one of the 38 values the document lists for it.',
    );
    const wait = await feed('?wait=31');
    expect(wait.body.error.message).to.equal('Query parameter "wait" must be an integer from 0 to 30.');
    // the list may also come as the parameter repeated
    expect((await feed('?types=invoice.overdue&types=booking.confirmed')).status).to.equal(200);
    const unauthorized = await feed('', 'frs_nope');
    expect(unauthorized.status).to.equal(401);
  });

  it('gives an item equal to the body a real receiver got for the same event, but for the id', async () => {
    const receiver: Receiver = await startReceiver();
    try {
      const url = receiver.endpointUrl();
      const endpoint = await ws.endpoint({ url });
      receiver.setSecret(url, endpoint.secret);
      const eventId = await publish(ws, 'invoice.overdue');
      expect(await ws.dispatcher().runOnce()).to.include({ attempted: 1, accepted: 1 });
      const [received] = receiver.requests;
      expect(received.verified).to.deep.equal({ ok: true });
      const delivery = await db('deliveries').where({ id: received.deliveryId }).first('event_id');
      expect(delivery.event_id).to.equal(eventId);
      const res = await feed();
      // the item's bytes, as the answer carries them, are the delivery's with the event's id for the delivery's
      const item = received.rawBody.toString('utf8').replace(received.deliveryId, eventId);
      expect(res.text).to.equal(
        `{"rows":[${item}],"nextCursor":${JSON.stringify(res.body.nextCursor)},"hasMore":false}`,
      );
      expect({ ...res.body.rows[0], id: received.deliveryId }).to.deep.equal(received.body);
    } finally {
      await receiver.close();
    }
  });

  describe('long polling (wait)', () => {
    it('answers a waiting request within a second of the event being recorded', async () => {
      const start = await feed();
      expect(start.body.nextCursor).to.equal(null);
      const asked = Date.now();
      const waiting = feed('?wait=10');
      await sleep(500);
      const eventId = await publish(ws, 'booking.confirmed');
      const recorded = Date.now();
      const res = await waiting;
      const answered = Date.now();
      expect(ids(res)).to.deep.equal([eventId]);
      expect(recorded - asked, 'the request waited').to.be.at.least(500);
      expect(answered - recorded, 'answered within a second').to.be.below(1000);
      expect(api.events!.watching).to.equal(0);
    });

    it('waits after a cursor too, and answers an empty page when the wait ends with nothing', async () => {
      await publish(ws, 'booking.confirmed');
      const first = await feed();
      const asked = Date.now();
      const res = await feed(`?wait=1&after=${first.body.nextCursor}`);
      const took = Date.now() - asked;
      expect(res.body).to.deep.equal({ rows: [], nextCursor: first.body.nextCursor, hasMore: false });
      expect(took).to.be.at.least(1000).and.below(2000);
      // another workspace's event does not end the wait
      const other = await webhookWorkspace(db);
      const waiting = feed(`?wait=1&after=${first.body.nextCursor}`);
      await sleep(200);
      await publish(other, 'booking.confirmed');
      expect((await waiting).body.rows).to.deep.equal([]);
      expect(api.events!.watching).to.equal(0);
    });

    it("answers within about a second once another workspace's open transaction ends, which held its event back", async () => {
      const other = await webhookWorkspace(db);
      const trx = await db.transaction();
      try {
        await recordEvent(trx, { workspaceId: other.id, ...sample('booking.confirmed'), source: 'publish' });
        const waiting = feed('?wait=10');
        await sleep(300);
        // announced at once, but held back by the older open transaction: read again every second meanwhile
        const mine = await publish(ws, 'booking.completed');
        await sleep(1700);
        expect(api.events!.watching, 'still waiting').to.equal(1);
        await trx.commit();
        const ended = Date.now();
        expect(ids(await waiting)).to.deep.equal([mine]);
        expect(Date.now() - ended, 'within about a second of the other transaction ending').to.be.below(1300);
      } finally {
        if (!trx.isCompleted()) await trx.rollback();
      }
    });

    it('still answers within about a second while its LISTEN connection is lost, and listens again', async () => {
      const listening = await startApi({ events: true });
      try {
        const { rowCount } = await db.raw(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN frs_events' AND pid <> pg_backend_pid()`,
        );
        expect(rowCount).to.be.at.least(1);
        await sleep(100);
        expect(listening.events!.listening).to.equal(false);
        const waiting = listening.get('/v1/events?wait=10', key);
        await sleep(300);
        const eventId = await publish(ws, 'booking.confirmed');
        const recorded = Date.now();
        expect(ids(await waiting)).to.deep.equal([eventId]);
        expect(Date.now() - recorded, 'read again every second meanwhile').to.be.below(1500);
        await sleep(1500);
        expect(listening.events!.listening, 'listening again').to.equal(true);
      } finally {
        await listening.close();
      }
    });

    it('holds a share of the concurrency limit while it waits, and gives it back when the client goes', async () => {
      const limited = await startApi({
        events: true,
        limits: { workspace: { ratePerSecond: 0, concurrency: 1 }, authFailures: NO_AUTH_LIMIT },
      });
      try {
        const gone = new AbortController();
        const waiting = fetch(`${limited.url}/v1/events?wait=20`, {
          headers: { authorization: `Bearer ${key}` },
          signal: gone.signal,
        }).catch((err: Error) => err.name);
        await sleep(300);
        expect(limited.events!.watching).to.equal(1);
        const refused = await limited.get('/v1/events', key);
        expect(refused.status).to.equal(429);
        expect(refused.body.error).to.include({ code: 'rate_limited', reason: 'concurrency' });
        gone.abort();
        expect(await waiting).to.equal('AbortError');
        await sleep(200);
        expect(limited.events!.watching, 'no watch left behind').to.equal(0);
        expect((await limited.get('/v1/events', key)).status, 'the share given back').to.equal(200);
      } finally {
        await limited.close();
      }
    });

    it('answers waiting requests at once when the server stops', async () => {
      const stopping = await startApi({ events: true });
      const asked = Date.now();
      const waiting = stopping.get('/v1/events?wait=30', key);
      await sleep(300);
      expect(stopping.events!.watching).to.equal(1);
      const closing = stopping.close();
      const res = await waiting;
      expect(Date.now() - asked).to.be.below(1500);
      await closing;
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal({ rows: [], nextCursor: null, hasMore: false });
      expect(stopping.events!.watching).to.equal(0);
    });
  });
});
