import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { recordAttempts } from '../../src/webhooks/attempt-records.js';
import { claimDue, releaseClaims, type ClaimSettings } from '../../src/webhooks/claims.js';
import { send, type SendSettings } from '../../src/webhooks/dispatch.js';
import { InFlightShares } from '../../src/webhooks/fairness.js';
import {
  buildDelivery,
  delivery,
  dropTestWorkspaces,
  quietLogger,
  webhookWorkspace,
  type TestEndpoint,
  type TestWorkspace,
} from './support.js';

// The dispatcher's stages, one at a time and without the Dispatcher: the claim gives PendingDispatches, sending one
// gives a CompletedDispatch, recording a batch of them writes the attempt and the delivery.

describe('webhooks: the dispatcher stages, one at a time', () => {
  let db: Knex;
  let ws: TestWorkspace;
  let receiver: Receiver;
  let endpoint: TestEndpoint;
  let claiming: ClaimSettings;
  const sending: SendSettings = {
    timeoutMs: 5000,
    destinationPolicy: { allowPrivate: true, allowedCidrs: [] },
  };

  before(async () => {
    ({ db } = await testDatabase());
    receiver = await startReceiver(() => ({ status: 204 }));
  });
  beforeEach(async () => {
    ws = await webhookWorkspace(db);
    const url = receiver.endpointUrl();
    endpoint = await ws.endpoint({ url });
    receiver.setSecret(url, endpoint.secret);
    claiming = {
      db: (await testDatabase()).forRole('worker'),
      logger: quietLogger(),
      owner: `stages-test:${ws.id}`,
      leaseMs: 60_000,
      perEndpoint: 16,
      perWorkspace: 16,
      workspaceIds: [ws.id],
    };
  });
  after(async () => {
    await receiver.close();
    await dropTestWorkspaces(db);
  });

  const due = async () => {
    const createdAt = new Date(Date.now() - 60_000).toISOString();
    return (await buildDelivery(db, ws, endpoint, { status: 'queued', createdAt })).id;
  };

  it('claims due deliveries with their secrets opened, leases them, and gives the leases back', async () => {
    const ids = [await due(), await due()];
    const { claims, contended } = await claimDue(claiming, { limit: 10, now: new Date(), held: new InFlightShares() });
    expect(contended).to.equal(false);
    expect(claims.map((c) => c.deliveryId).sort()).to.deep.equal([...ids].sort());
    for (const claim of claims) {
      expect(claim).to.include({ endpointId: endpoint.id, workspaceId: ws.id, attempt: 1, url: endpoint.url });
      expect(claim.secrets).to.deep.equal([endpoint.secret]);
      expect((await delivery(db, claim.deliveryId)).lease_owner).to.equal(claiming.owner);
    }
    const again = await claimDue(claiming, { limit: 10, now: new Date(), held: new InFlightShares() });
    expect(again.claims, 'leased: not claimed twice').to.deep.equal([]);

    await releaseClaims(claiming, ids);
    for (const id of ids) expect((await delivery(db, id)).lease_owner).to.equal(null);
  });

  it('sends a claim and records the completed attempt', async () => {
    const id = await due();
    const [claim] = (await claimDue(claiming, { limit: 1, now: new Date(), held: new InFlightShares() })).claims;
    const sweepAt = new Date('2026-01-01T00:00:00Z');
    const completed = await send(claim, sending, () => sweepAt);
    expect(completed.claim).to.equal(claim);
    expect(completed.sweepAt).to.equal(sweepAt);
    expect(completed.outcome).to.include({ ok: true, statusCode: 204, errorKind: null });
    const request = receiver.requests.find((r) => r.deliveryId === id);
    expect(request?.verified, 'signed with the secret the claim opened').to.deep.equal({ ok: true });

    const recorded = await recordAttempts(
      { db: claiming.db, logger: quietLogger(), metrics: undefined, owner: claiming.owner },
      [completed],
    );
    expect(recorded.statuses).to.deep.equal(['accepted']);
    expect([...recorded.switchedOff]).to.deep.equal([]);
    const row = await delivery(db, id);
    expect(row).to.include({ status: 'accepted', attempts: 1, last_status_code: 204, lease_owner: null });
    const attempts = await db('delivery_attempts').where({ delivery_id: id });
    expect(attempts.map((a) => [a.number, a.status_code])).to.deep.equal([[1, 204]]);
  });
});
