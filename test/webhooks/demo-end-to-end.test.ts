import { expect } from 'chai';
import pino from 'pino';
import { testDatabase } from '../support/database.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { expectValidPayload } from '../support/calendar-fixtures.js';
import { seedDemo } from '../../seeds/demo.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { runCalendarSweep } from '../../src/webhooks/calendar.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { idOf, operator } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// The "done when": a receiver written from the document alone (test/support/receiver.ts checks every
// signature with its own implementation) accepts every delivery of the demo workspace.
describe('the demo workspace, end to end', () => {
  let receiver: Receiver;
  after(() => receiver?.close());

  it('delivers every event of a calendar sweep and of later changes, each signed, valid and accepted', async () => {
    const { db } = await testDatabase();
    // A fixed clock: the demo data is laid out around it, and the sweeps decide by it (signatures use the real one).
    const now = new Date('2026-11-22T08:30:00.000Z');
    await seedDemo(db, 'demo-e2e', now);
    const workspace = await db('workspaces').where({ slug: 'demo-e2e' }).first('id');
    receiver = await startReceiver();
    const url = receiver.endpointUrl();
    const endpoint = await createEndpoint(db, operator, {
      workspaceId: await idOf(db, 'demo-e2e'),
      url,
      policy: processConfig().destinationPolicy,
    });
    receiver.setSecret(url, endpoint.secret);

    // The first sweep raises the time-based events (due soon, overdue, documents, integrations) of the demo data.
    // Only this workspace: the test database holds other tests' workspaces, which this dispatcher does not send.
    const sweep = () => runCalendarSweep(db, now, { workspaceIds: [workspace.id] });
    const first = await sweep();
    expect(first.events).to.be.greaterThan(10);
    // A change after the first sweep raises a derived event: a pending booking is confirmed.
    const pending = await db('bookings').where({ workspace_id: workspace.id, status: 'pending' }).first('id');
    await db('bookings').where({ id: pending.id }).update({ status: 'confirmed', confirmed_at: now });
    const second = await sweep();
    expect(second.events).to.equal(1);

    const dispatcher = new Dispatcher({ db, logger: pino({ level: 'silent' }), workspaceIds: [workspace.id] });
    const counts = await dispatcher.runOnce(now);
    const expected = first.events + second.events;
    expect(counts).to.deep.equal({ attempted: expected, accepted: expected, retrying: 0, failed: 0 });
    expect(receiver.requests).to.have.length(expected);
    for (const request of receiver.requests) {
      expect(request.verified, request.event).to.deep.equal({ ok: true });
      expect(request.contentType).to.match(/^application\/json/);
      expect(request.deliveryId).to.equal(request.body.id);
      expect(request.event).to.equal(request.body.event);
      expectValidPayload(request.body);
      expect(request.rawBody.toString()).not.to.match(/"(phone|email|idDocument)"|@example|\+971/);
    }
    expect(new Set(receiver.requests.map((r) => r.event))).to.include('booking.confirmed');
  });
});
