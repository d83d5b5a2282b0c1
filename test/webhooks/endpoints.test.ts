import { expect } from 'chai';
import { preparedPlanCosts, testDatabase } from '../support/database.js';
import { listEndpoints } from '../../src/core/webhooks/endpoints.js';
import { dropTestWorkspaces, webhookWorkspace } from './support.js';
import { operator } from '../support/actors.js';

describe('webhooks: the endpoint list', () => {
  after(async () => dropTestWorkspaces((await testDatabase()).db));

  it("lists the workspace's endpoints oldest first, on one plan PostgreSQL keeps instead of planning each request", async () => {
    const { db } = await testDatabase();
    const ws = await webhookWorkspace(db);
    const other = await webhookWorkspace(db);
    const first = await ws.endpoint({ url: 'http://127.0.0.1:9/first' });
    const second = await ws.endpoint({
      url: 'http://127.0.0.1:9/second',
      events: ['booking.confirmed'],
      active: false,
    });
    await other.endpoint({ url: 'http://127.0.0.1:9/other' });
    const { generic, custom } = await preparedPlanCosts(
      db,
      async (trx) => {
        const listed = await listEndpoints(trx, operator, { workspaceId: ws.id });
        expect(
          listed.map((e) => [e.id, e.url, e.events, e.isActive, e.disabledAt === null, e.consecutiveFailures]),
        ).to.deep.equal([
          [first.id, 'http://127.0.0.1:9/first', [], true, true, 0],
          [second.id, 'http://127.0.0.1:9/second', ['booking.confirmed'], false, false, 0],
        ]);
      },
      `'${ws.id}'`,
    );
    expect(generic).to.equal(custom);
  });
});
