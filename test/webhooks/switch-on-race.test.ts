import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { fanOutEvents } from '../../src/webhooks/fanout.js';
import { setEndpointActive } from '../../src/core/webhooks/endpoints.js';
import { bookingConfirmedData, dropTestWorkspaces, sleep, webhookWorkspace } from './support.js';
import { operator } from '../support/actors.js';

// An event fanned out to a switched-off endpoint while an operator switches it back on: the delivery must not
// be left held (the release ran before the held row was committed) — it ends up queued.
describe('switching an endpoint on while an event is fanned out to it', () => {
  after(async () => dropTestWorkspaces((await testDatabase()).db));

  it('leaves no delivery held for an endpoint that is on', async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const endpoint = await ws.endpoint({ url: 'http://127.0.0.1:9/hook', active: false });
    let enabling: Promise<unknown> | undefined;
    await db.transaction(async (trx) => {
      const [event] = await trx('events')
        .insert({ workspace_id: ws.id, event: 'booking.confirmed', data: bookingConfirmedData(), source: 'publish' })
        .returning('id');
      expect(await fanOutEvents(trx, [event.id])).to.equal(1);
      // The operator switches the endpoint on while this transaction (with its held delivery) is still open.
      enabling = setEndpointActive(db, operator, {
        endpointId: endpoint.id,
        workspaceId: 'every',
        active: true,
        now: new Date(),
      });
      await sleep(200);
    });
    await enabling;
    const rows = await db('deliveries').where({ endpoint_id: endpoint.id }).select('status');
    expect(rows).to.deep.equal([{ status: 'queued' }]);
  });
});
