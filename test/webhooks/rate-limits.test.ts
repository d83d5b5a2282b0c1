import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { fanOutEvents } from '../../src/webhooks/fanout.js';
import { updateEndpoint } from '../../src/core/webhooks/endpoints.js';
import { processConfig } from '../../src/config.js';
import { bookingConfirmedData, dropTestWorkspaces, webhookWorkspace, type TestWorkspace } from './support.js';
import { operator } from '../support/actors.js';
import { claimDue, releaseClaims, type ClaimSettings } from '../../src/webhooks/claims.js';
import { InFlightShares } from '../../src/webhooks/fairness.js';
import { examplePayload, quietLogger } from './support.js';

// The throttle per endpoint (src/webhooks/rate-limits.ts): a claim takes no more of a throttled endpoint's deliveries
// than its token bucket holds, and the rest of its backlog leaves the claim to the others.

describe('webhooks: the throttle per endpoint (rateLimit)', () => {
  let db: Knex;
  let ws: TestWorkspace;
  let receiver: Receiver;

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver();
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    receiver.reset();
  });
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  /** An endpoint on the receiver subscribed to one event, with the throttle given. */
  const endpoint = async (event: string, rateLimit: number | null) => {
    const url = receiver.endpointUrl();
    const created = await ws.endpoint({ url, events: [event] });
    receiver.setSecret(url, created.secret);
    if (rateLimit !== null)
      await updateEndpoint(db, operator, {
        endpointId: created.id,
        workspaceId: ws.id,
        changes: { rateLimit },
        policy: processConfig().destinationPolicy,
      });
    return { id: created.id, path: new URL(url).pathname };
  };
  /** `count` events of `event`, fanned out in one transaction: queued at the same moment. */
  const queue = (event: string, count: number) =>
    db.transaction(async (trx) => {
      const data = event === 'booking.confirmed' ? bookingConfirmedData() : examplePayload(event).data;
      const rows = await trx('events')
        .insert(
          Array.from({ length: count }, () => ({
            workspace_id: ws.id,
            event,
            data: JSON.stringify(data),
            source: 'publish',
          })),
        )
        .returning('id');
      return fanOutEvents(
        trx,
        rows.map((r) => r.id),
      );
    });
  const sentTo = (path: string) => receiver.requests.filter((r) => r.path === path);
  const bucket = async (id: string) =>
    db('webhook_rate_buckets').where({ endpoint_id: id }).first('tokens', 'refilled_at');
  const setBucket = (id: string, tokens: number, refilledAt: Date) =>
    db('webhook_rate_buckets').where({ endpoint_id: id }).update({ tokens, refilled_at: refilledAt });

  it("claims no more of a throttled endpoint's backlog than its bucket holds, and the others' meanwhile", async () => {
    const throttled = await endpoint('booking.confirmed', 5);
    const other = await endpoint('payment.captured', null);
    expect(await queue('booking.confirmed', 20)).to.equal(20);
    expect(await queue('payment.captured', 20)).to.equal(20);
    const settings: ClaimSettings = {
      db: (await testDatabase()).forRole('worker'),
      logger: quietLogger(),
      owner: 'rate-limit-test',
      leaseMs: 60_000,
      perEndpoint: 20,
      perWorkspace: 40,
      workspaceIds: [ws.id],
    };
    const claimRound = () => claimDue(settings, { limit: 40, now: new Date(), held: new InFlightShares() });
    // The first claim that meets the throttled endpoint's due deliveries makes its bucket, full, and takes none of
    // them (it says so as contended: the dispatcher claims again at once); the other endpoint's go meanwhile.
    const first = await claimRound();
    const claimedIn = (round: typeof first, id: string) => round.claims.filter((c) => c.endpointId === id).length;
    expect([claimedIn(first, throttled.id), claimedIn(first, other.id), first.contended]).to.deep.equal([0, 20, true]);
    expect((await bucket(throttled.id)).tokens).to.equal(5);
    // One claim round: one second's worth (5). The other endpoint's deliveries are not held back by the 15 throttled
    // ones left: its own bound (20 here, the rest of its 20 once given back) is the only one on them.
    await releaseClaims(
      settings,
      first.claims.map((c) => c.deliveryId),
    );
    const round = await claimRound();
    expect([claimedIn(round, throttled.id), claimedIn(round, other.id), round.contended]).to.deep.equal([5, 20, false]);
    // The bucket is empty: its next token comes in 1 / 5 s.
    expect(round.nextTokenInMs).to.equal(200);
    await releaseClaims(
      settings,
      round.claims.map((c) => c.deliveryId),
    );
    const taken = await bucket(throttled.id);
    expect(taken.tokens).to.equal(0);
    expect(taken.refilled_at).to.be.an.instanceOf(Date);
    // The 15 left were not leased: they hold no slot.
    const leased = await db('deliveries').where({ endpoint_id: throttled.id }).whereNotNull('lease_owner');
    expect(leased).to.have.length(0);
    // The other endpoint has no bucket.
    expect(await bucket(other.id)).to.equal(undefined);

    // 3.5 tokens, refilled "in an hour" (the refill never goes back in time: none is added): 3 are taken, 0.5 stay.
    const later = new Date(Date.now() + 3_600_000);
    await setBucket(throttled.id, 3.5, later);
    const dispatcher = ws.dispatcher();
    expect(await dispatcher.runOnce()).to.deep.include({ attempted: 23, accepted: 23 });
    expect(sentTo(throttled.path)).to.have.length(3);
    expect(sentTo(other.path)).to.have.length(20);
    expect(receiver.requests.every((r) => r.verified?.ok)).to.equal(true);
    expect(await bucket(throttled.id)).to.deep.equal({ tokens: 0.5, refilled_at: later });
    // Under one token: nothing is claimed, nothing written.
    receiver.reset();
    expect(await dispatcher.runOnce()).to.deep.include({ attempted: 0 });
    expect(await bucket(throttled.id)).to.deep.equal({ tokens: 0.5, refilled_at: later });

    // Lowered to 2: the bucket holds at most 2 from then on, whatever it held.
    await setBucket(throttled.id, 5, later);
    await updateEndpoint(db, operator, {
      endpointId: throttled.id,
      workspaceId: ws.id,
      changes: { rateLimit: 2 },
      policy: processConfig().destinationPolicy,
    });
    expect(await dispatcher.runOnce()).to.deep.include({ attempted: 2 });
    // Cleared: the rest goes at the sweep's own pace.
    await updateEndpoint(db, operator, {
      endpointId: throttled.id,
      workspaceId: ws.id,
      changes: { rateLimit: null },
      policy: processConfig().destinationPolicy,
    });
    expect(await dispatcher.runOnce()).to.deep.include({ attempted: 15, accepted: 15 });
    expect(await db('deliveries').where({ endpoint_id: throttled.id, status: 'accepted' })).to.have.length(20);
  });

  it('sends a running backlog at the rate as the bucket refills, neither faster nor in one burst a second', async function () {
    this.timeout(30_000);
    const throttled = await endpoint('booking.confirmed', 5);
    await queue('booking.confirmed', 20);
    const dispatcher = ws.dispatcher();
    await dispatcher.start();
    try {
      await receiver.waitForRequests(15, 15_000);
    } finally {
      await dispatcher.stop();
    }
    const times = sentTo(throttled.path).map((r) => r.receivedAt);
    const spanS = (times.at(-1)! - times[0]) / 1000;
    // 5 at once (the full bucket), then one every 200 ms: the 15th about 2 s after the first.
    expect(spanS, 'first to last').to.be.within(1.6, 4);
    // Claimed as the tokens come, not on the next once-a-second poll: after the first 5, no two a second apart
    // with nothing between them.
    const gaps = times.slice(5).map((t, i) => t - times[i + 4]);
    expect(Math.max(...gaps), `gaps ${gaps}`).to.be.below(600);
  });
});
