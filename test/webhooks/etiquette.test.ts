import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver, type Reply } from '../support/receiver.js';
import { queueTestDelivery } from '../../src/core/webhooks/test-delivery.js';
import { getEndpoint } from '../../src/core/webhooks/endpoints.js';
import {
  parseHttpDate,
  parseRetryAfter,
  RETRY_AFTER_CAP_MS,
  summariseAsks,
  throttleDelayMs,
} from '../../src/webhooks/etiquette.js';
import { nextAttemptAt } from '../../src/webhooks/retry-schedule.js';
import {
  buildDelivery,
  delivery,
  dropTestWorkspaces,
  endpointRow,
  eventually,
  webhookWorkspace,
  type TestEndpoint,
  type TestWorkspace,
} from './support.js';
import { idOf, operator } from '../support/actors.js';
import { startApi } from '../support/api.js';
import { createApiKey } from '../../src/core/workspaces.js';

// HTTP etiquette (issue 34, point 1): what a receiver's answer asks. 410 Gone switches the endpoint off at once;
// 429/502/503/504 throttle it (Retry-After, or a delay that grows while such answers continue); retries get jitter.
// Every instant is worked out by hand from a fixed sweep clock.

const SECOND = 1000;
const HOUR = 3600 * SECOND;
const at = (iso: string) => new Date(iso);
const plus = (base: Date, ms: number) => new Date(base.getTime() + ms);

describe('webhooks: HTTP etiquette, the rules', () => {
  const ref = at('2000-01-01T00:00:00.000Z');

  it('Retry-After as delay-seconds: digits only, capped at 24 hours; anything else is absent', () => {
    expect(parseRetryAfter('120', ref)).to.equal(120_000);
    expect(parseRetryAfter(' 7 ', ref)).to.equal(7000);
    expect(parseRetryAfter('0', ref)).to.equal(0);
    expect(parseRetryAfter('86400', ref)).to.equal(86_400_000);
    expect(parseRetryAfter('86401', ref)).to.equal(RETRY_AFTER_CAP_MS);
    expect(parseRetryAfter('99999999999999999999999', ref)).to.equal(24 * HOUR);
    for (const bad of [undefined, '', '-5', '1.5', '+3', '12s', 'soon', '0x10', '1e3'])
      expect(parseRetryAfter(bad, ref), String(bad)).to.equal(null);
  });

  it('Retry-After as an HTTP-date, in its three forms, measured from the answer time; a past date is absent', () => {
    expect(parseRetryAfter('Sat, 01 Jan 2000 00:02:00 GMT', ref)).to.equal(120_000);
    expect(parseRetryAfter('Saturday, 01-Jan-00 00:05:00 GMT', ref)).to.equal(300_000);
    expect(parseRetryAfter('Sat Jan  1 00:00:30 2000', ref)).to.equal(30_000);
    expect(parseRetryAfter('Sat, 01 Jan 2000 00:00:00 GMT', ref)).to.equal(0);
    expect(parseRetryAfter('Fri, 31 Dec 1999 23:59:59 GMT', ref)).to.equal(null);
    // 24 hours and one second ahead: cut to 24 hours
    expect(parseRetryAfter('Sun, 02 Jan 2000 00:00:01 GMT', ref)).to.equal(RETRY_AFTER_CAP_MS);
    for (const bad of [
      'Tue, 31 Feb 2000 00:00:00 GMT',
      'Sat, 01 Jan 2000 24:00:00 GMT',
      'Sat, 01 Jan 2000 00:61:00 GMT',
      'Sat, 01 Jan 2000 00:02:00 UTC',
      'Sat, 1 Jan 2000 00:02:00 GMT',
      '2000-01-01T00:02:00Z',
    ])
      expect(parseRetryAfter(bad, ref), bad).to.equal(null);
  });

  it('a two-digit year (RFC 850 form) is the most recent one not more than 50 years ahead', () => {
    const in2026 = at('2026-06-01T00:00:00.000Z');
    expect(parseHttpDate('Monday, 01-Jan-76 00:00:00 GMT', in2026)?.toISOString()).to.equal('2076-01-01T00:00:00.000Z');
    expect(parseHttpDate('Saturday, 01-Jan-77 00:00:00 GMT', in2026)?.toISOString()).to.equal(
      '1977-01-01T00:00:00.000Z',
    );
  });

  it('the throttle without Retry-After: 1 s doubling per answer in a row, at most 300 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 40].map((n) => throttleDelayMs(n) / SECOND)).to.deep.equal([
      1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300,
    ]);
  });

  it("a batch's asks per endpoint: gone, the run in a row around other outcomes, the throttle ends it knows", () => {
    const t = at('2026-11-21T09:00:00.000Z');
    const throttle = (retryAfterMs: number | null) => ({ throttle: { retryAfterMs } });
    const [a, b] = summariseAsks([
      { claim: { endpointId: 'b' }, outcome: throttle(null), sweepAt: t },
      { claim: { endpointId: 'a' }, outcome: throttle(null), sweepAt: t },
      { claim: { endpointId: 'a' }, outcome: throttle(120_000), sweepAt: plus(t, SECOND) },
      { claim: { endpointId: 'a' }, outcome: throttle(null), sweepAt: plus(t, 2 * SECOND) },
      { claim: { endpointId: 'a' }, outcome: {}, sweepAt: plus(t, 3 * SECOND) },
      { claim: { endpointId: 'a' }, outcome: throttle(null), sweepAt: plus(t, 4 * SECOND) },
      { claim: { endpointId: 'a' }, outcome: throttle(null), sweepAt: plus(t, 5 * SECOND) },
      { claim: { endpointId: 'b' }, outcome: { gone: true }, sweepAt: t },
    ]);
    // a: 3 throttling answers continue the recorded run (the last without Retry-After is the 3rd), then a success,
    // then 2 more (1 s and 2 s after theirs); the 120 s Retry-After ends latest.
    expect(a).to.deep.equal({
      endpointId: 'a',
      gone: false,
      reset: true,
      leading: 3,
      trailing: 2,
      knownUntil: plus(t, 121 * SECOND),
      leadingAt: plus(t, 2 * SECOND),
      leadingPlace: 3,
    });
    expect(b).to.deep.equal({
      endpointId: 'b',
      gone: true,
      reset: true,
      leading: 1,
      trailing: 0,
      knownUntil: null,
      leadingAt: t,
      leadingPlace: 1,
    });
  });

  it('jitter: each retry waits its delay plus 0 to 10% of it, by the random source', () => {
    const failedAt = at('2026-11-21T09:00:00.000Z');
    const next = (attempt: number, r: number) => nextAttemptAt(attempt, failedAt, () => r)!.toISOString();
    expect(next(1, 0)).to.equal('2026-11-21T09:01:00.000Z');
    expect(next(1, 1)).to.equal('2026-11-21T09:01:06.000Z');
    expect(next(1, 0.5)).to.equal('2026-11-21T09:01:03.000Z');
    expect(next(8, 0)).to.equal('2026-11-22T09:00:00.000Z');
    expect(next(8, 1)).to.equal('2026-11-22T11:24:00.000Z');
    expect(nextAttemptAt(9, failedAt, () => 1)).to.equal(null);
    for (let i = 0; i < 100; i++) {
      const ms = nextAttemptAt(2, failedAt)!.getTime() - failedAt.getTime();
      expect(ms).to.be.within(300_000, 330_000);
    }
  });
});

describe('webhooks: HTTP etiquette against a real receiver', () => {
  let db: Knex;
  let ws: TestWorkspace;
  let receiver: Receiver;
  /** What the receiver answers, per endpoint path and per request (1-based, per path); tests set it. */
  let answer: (path: string, nth: number) => Reply;
  const seen = new Map<string, number>();
  /** The sweep clock of these tests: every delivery below is due by it. */
  const t0 = at('2026-11-21T09:00:00.000Z');

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver((request) => {
      const nth = (seen.get(request.path) ?? 0) + 1;
      seen.set(request.path, nth);
      return answer(request.path, nth);
    });
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    answer = () => ({ status: 204 });
    seen.clear();
    receiver.reset();
  });
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  const endpoint = async () => {
    const url = receiver.endpointUrl();
    const made = await ws.endpoint({ url });
    receiver.setSecret(url, made.secret);
    return { ...made, path: new URL(url).pathname };
  };
  /** A delivery due since `minute` minutes past 08:00 (so that an endpoint's are taken oldest first). */
  const due = async (e: TestEndpoint, minute: number) =>
    (
      await buildDelivery(db, ws, e, {
        status: 'queued',
        createdAt: `2026-11-21T08:${String(minute).padStart(2, '0')}:00.000Z`,
      })
    ).id;
  const sentTo = (path: string) => receiver.requests.filter((r) => r.path === path).map((r) => r.deliveryId);

  it('410 Gone switches the endpoint off at once (reason gone): that delivery failed, the others held', async () => {
    const gone = await endpoint();
    const [first, second, third] = [await due(gone, 1), await due(gone, 2), await due(gone, 3)];
    answer = () => ({ status: 410, body: 'unsubscribed' });
    // one at a time: the 410 is recorded before anything else could be sent
    expect(await ws.dispatcher({ concurrency: 1 }).runOnce(t0)).to.deep.equal({
      attempted: 1,
      accepted: 0,
      retrying: 0,
      failed: 1,
    });
    expect(sentTo(gone.path)).to.deep.equal([first]);
    const row = await endpointRow(db, gone.id);
    expect(row).to.include({ is_active: false, disabled_reason: 'gone', consecutive_failures: 1 });
    expect(row.disabled_at).to.be.an.instanceOf(Date);
    expect(await delivery(db, first)).to.include({
      status: 'failed',
      attempts: 1,
      next_attempt_at: null,
      last_status_code: 410,
      last_error: 'HTTP 410 (gone: the receiver wants no more deliveries)',
      lease_owner: null,
    });
    for (const id of [second, third])
      expect(await delivery(db, id)).to.include({
        status: 'held',
        attempts: 0,
        next_attempt_at: null,
        lease_owner: null,
      });
    // what every client shows
    expect(await getEndpoint(db, operator, { workspaceId: ws.id, endpointId: gone.id })).to.include({
      isActive: false,
      disabledReason: 'gone',
      disabledAt: row.disabled_at.toISOString(),
    });
    // nothing more, however late
    expect((await ws.dispatcher().runOnce(plus(t0, 48 * HOUR))).attempted).to.equal(0);
  });

  it('a test delivery answered 410 switches the endpoint off too (the receiver said so)', async () => {
    const gone = await endpoint();
    const queued = await due(gone, 1);
    const { deliveryId } = (await queueTestDelivery(db, {
      workspaceId: ws.id,
      endpointId: gone.id,
      idempotencyKey: 'etiquette-410',
      now: new Date(),
    })) as { deliveryId: string };
    // the test delivery is due by the real clock; only it answers 410
    answer = () => ({ status: 410 });
    await db('deliveries').where({ id: deliveryId }).update({ next_attempt_at: '2026-11-21T07:00:00.000Z' });
    expect(await ws.dispatcher({ concurrency: 1 }).runOnce(t0)).to.include({ attempted: 1, failed: 1 });
    expect(sentTo(gone.path)).to.deep.equal([deliveryId]);
    expect(await endpointRow(db, gone.id)).to.include({ is_active: false, disabled_reason: 'gone' });
    expect(await delivery(db, deliveryId)).to.include({ status: 'failed', last_status_code: 410 });
    expect(await delivery(db, queued)).to.include({ status: 'held' });
  });

  it("429 with Retry-After: 120 holds this delivery and the endpoint's others 120 s; another endpoint is sent at once", async () => {
    const slow = await endpoint();
    const other = await endpoint();
    const [a1, a2] = [await due(slow, 1), await due(slow, 2)];
    const b1 = await due(other, 3);
    answer = (path, nth) =>
      path === slow.path && nth === 1 ? { status: 429, headers: { 'retry-after': '120' } } : { status: 204 };
    const dispatcher = ws.dispatcher({ perEndpointConcurrency: 1 });
    expect(await dispatcher.runOnce(t0)).to.deep.equal({ attempted: 2, accepted: 1, retrying: 1, failed: 0 });
    expect(sentTo(slow.path)).to.deep.equal([a1]);
    expect(sentTo(other.path)).to.deep.equal([b1]);
    // the retry (1 min) waits for the throttle's end instead; the other delivery was not sent, its lease given back
    expect(await delivery(db, a1)).to.include({
      status: 'retrying',
      attempts: 1,
      last_status_code: 429,
      last_error: 'HTTP 429 (throttled: Retry-After 120 s)',
    });
    expect((await delivery(db, a1)).next_attempt_at.toISOString()).to.equal('2026-11-21T09:02:00.000Z');
    expect(await delivery(db, a2)).to.include({ status: 'queued', attempts: 0, lease_owner: null });
    const row = await endpointRow(db, slow.id);
    expect(row).to.include({ throttle_streak: 1, consecutive_failures: 1, is_active: true });
    expect(row.throttled_until.toISOString()).to.equal('2026-11-21T09:02:00.000Z');

    expect((await dispatcher.runOnce(plus(t0, 119_999))).attempted, 'throttled until 09:02:00').to.equal(0);
    expect(await dispatcher.runOnce(plus(t0, 120_000))).to.deep.include({ attempted: 2, accepted: 2 });
    const sent = sentTo(slow.path);
    expect(sent[0]).to.equal(a1);
    expect(sent.slice(1).sort()).to.deep.equal([a1, a2].sort());
    // a success ends the run in a row; the throttle's end stays as it was (past)
    expect(await endpointRow(db, slow.id)).to.include({ throttle_streak: 0, consecutive_failures: 0 });
  });

  it('the throttle is shown: throttledUntil in GET /v1/webhooks (the API role reads it), null if never throttled', async () => {
    const slow = await endpoint();
    const other = await endpoint();
    await due(slow, 1);
    answer = (path) => (path === slow.path ? { status: 429, headers: { 'retry-after': '90' } } : { status: 204 });
    await ws.dispatcher().runOnce(t0);
    const api = await startApi();
    try {
      const key = (await createApiKey(db, operator, { workspaceId: await idOf(db, ws.slug) })).key;
      const res = await api.get('/v1/webhooks', key);
      expect(res.status).to.equal(200);
      const shown = Object.fromEntries(res.body.rows.map((e: any) => [e.id, e.throttledUntil]));
      expect(shown).to.deep.equal({ [slow.id]: '2026-11-21T09:01:30.000Z', [other.id]: null });
    } finally {
      await api.close();
    }
    expect(await getEndpoint(db, operator, { workspaceId: ws.id, endpointId: slow.id })).to.include({
      throttledUntil: '2026-11-21T09:01:30.000Z',
    });
  });

  it("Retry-After as an HTTP-date is measured from the answer's Date header (the receiver's clock)", async () => {
    const slow = await endpoint();
    const a1 = await due(slow, 1);
    answer = () => ({
      status: 503,
      headers: { date: 'Sat, 01 Jan 2000 00:00:00 GMT', 'retry-after': 'Sat, 01 Jan 2000 00:05:00 GMT' },
    });
    expect(await ws.dispatcher().runOnce(t0)).to.include({ attempted: 1, retrying: 1 });
    expect((await endpointRow(db, slow.id)).throttled_until.toISOString()).to.equal('2026-11-21T09:05:00.000Z');
    expect((await delivery(db, a1)).next_attempt_at.toISOString()).to.equal('2026-11-21T09:05:00.000Z');
    expect((await delivery(db, a1)).last_error).to.equal('HTTP 503 (throttled: Retry-After 300 s)');
  });

  it('a Retry-After beyond 24 hours is cut to 24 hours', async () => {
    const slow = await endpoint();
    const a1 = await due(slow, 1);
    answer = () => ({ status: 504, headers: { 'retry-after': '172800' } });
    expect(await ws.dispatcher().runOnce(t0)).to.include({ attempted: 1, retrying: 1 });
    expect((await endpointRow(db, slow.id)).throttled_until.toISOString()).to.equal('2026-11-22T09:00:00.000Z');
    expect((await delivery(db, a1)).next_attempt_at.toISOString()).to.equal('2026-11-22T09:00:00.000Z');
    expect((await ws.dispatcher().runOnce(plus(t0, 24 * HOUR - 1))).attempted).to.equal(0);
    expect((await ws.dispatcher().runOnce(plus(t0, 24 * HOUR))).attempted).to.equal(1);
  });

  it('without Retry-After the throttle grows while the answers continue (1, 2, 4 s) and starts again after a success', async () => {
    const slow = await endpoint();
    const ids = [];
    for (let i = 1; i <= 5; i++) ids.push(await due(slow, i));
    const answers = [502, 503, 429, 204, 503];
    answer = (_path, nth) => ({ status: answers[nth - 1] ?? 204 });
    const dispatcher = ws.dispatcher({ concurrency: 1 });
    const throttle = async () => {
      const row = await endpointRow(db, slow.id);
      return [row.throttle_streak, row.throttled_until.toISOString()];
    };
    expect((await dispatcher.runOnce(t0)).attempted).to.equal(1);
    expect(await throttle()).to.deep.equal([1, '2026-11-21T09:00:01.000Z']);
    expect((await dispatcher.runOnce(at('2026-11-21T09:00:00.999Z'))).attempted).to.equal(0);
    expect((await dispatcher.runOnce(at('2026-11-21T09:00:01.000Z'))).attempted).to.equal(1);
    expect(await throttle()).to.deep.equal([2, '2026-11-21T09:00:03.000Z']);
    expect((await dispatcher.runOnce(at('2026-11-21T09:00:03.000Z'))).attempted).to.equal(1);
    expect(await throttle()).to.deep.equal([3, '2026-11-21T09:00:07.000Z']);
    // the 4th is accepted and the 5th sent after it (no throttle): 503 again, 1 s as at first
    expect(await dispatcher.runOnce(at('2026-11-21T09:00:07.000Z'))).to.deep.equal({
      attempted: 2,
      accepted: 1,
      retrying: 1,
      failed: 0,
    });
    expect(await throttle()).to.deep.equal([1, '2026-11-21T09:00:08.000Z']);
    expect(sentTo(slow.path)).to.deep.equal(ids);
    // each failed delivery's own retry: its schedule (1 min after its answer), later than the throttle
    expect((await delivery(db, ids[1])).next_attempt_at.toISOString()).to.equal('2026-11-21T09:01:01.000Z');
    expect((await delivery(db, ids[4])).next_attempt_at.toISOString()).to.equal('2026-11-21T09:01:07.000Z');
    expect(await endpointRow(db, slow.id)).to.include({ consecutive_failures: 1 });
  });

  it('jitter in the dispatcher: the injected random 0 and 1 give the retry exactly at +60 s and +66 s', async () => {
    const e = await endpoint();
    const [a1, a2] = [await due(e, 1), await due(e, 2)];
    answer = () => ({ status: 500 });
    await ws.dispatcher({ random: () => 1 }).runOnce(t0);
    expect((await delivery(db, a1)).next_attempt_at.toISOString()).to.equal('2026-11-21T09:01:06.000Z');
    expect((await delivery(db, a2)).next_attempt_at.toISOString()).to.equal('2026-11-21T09:01:06.000Z');
    await ws.dispatcher({ random: () => 0 }).runOnce(at('2026-11-21T09:01:06.000Z'));
    expect((await delivery(db, a1)).next_attempt_at.toISOString()).to.equal('2026-11-21T09:06:06.000Z');
  });

  it('a running dispatcher sends the throttled backlog soon after the throttle ends, not before', async () => {
    const slow = await endpoint();
    // due by the real clock: a running dispatcher sweeps by it
    const past = new Date(Date.now() - 60_000).toISOString();
    const a1 = (await buildDelivery(db, ws, slow, { status: 'queued', createdAt: past })).id;
    const a2 = (
      await buildDelivery(db, ws, slow, { status: 'queued', createdAt: new Date(Date.now() - 30_000).toISOString() })
    ).id;
    answer = (_path, nth) => (nth === 1 ? { status: 429, headers: { 'retry-after': '2' } } : { status: 204 });
    const dispatcher = ws.dispatcher({ perEndpointConcurrency: 1 });
    await dispatcher.start();
    try {
      await receiver.waitForRequests(2, 10_000);
      const [first, second] = receiver.requests;
      expect([first.deliveryId, second.deliveryId]).to.deep.equal([a1, a2]);
      const waited = second.receivedAt - first.receivedAt;
      // 2 s of throttle, then within the poll interval (1 s) and a claim
      expect(waited).to.be.within(2000, 4500);
      await eventually(async () => (await delivery(db, a2)).status === 'accepted', 5000, 'a2 accepted');
    } finally {
      await dispatcher.stop();
    }
    expect(await delivery(db, a1)).to.include({ status: 'retrying', last_status_code: 429 });
  });
});
