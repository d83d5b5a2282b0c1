import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { cliAudit } from '../../src/core/audit.js';
import { writeRecords } from '../../src/core/import/records.js';
import { startImport } from '../../src/core/import/jobs.js';
import { runCalendarSweep } from '../../src/webhooks/calendar.js';
import { testDatabase } from '../support/database.js';
import { startedCalendar } from '../support/calendar-fixtures.js';
import { operatorWith } from '../support/actors.js';

// Issue 32, point 6, through the two ways in: a batch that says it carries history and an import job are backfills,
// and raise no derived event (a customer is not told today of a payment taken two days ago); an ordinary batch does.
const NOW = '2026-11-22T08:30:00.000Z';

describe('webhooks: backfills through batch writes and import jobs raise no derived events', () => {
  let db: Knex;
  let workerDb: Knex;

  before(async () => {
    const database = await testDatabase();
    db = database.db;
    workerDb = database.forRole('worker');
  });

  const started = () => startedCalendar(db, workerDb, NOW);

  const payment = (customerId: string, invoiceId: string, amount: number, at: string) => ({
    id: randomUUID(),
    kind: 'charge',
    status: 'captured',
    amount,
    customerId,
    invoiceId,
    at,
  });

  it('a batch with history: true raises none; the same batch without it raises payment.captured', async () => {
    const { f, endpoint, customerId, invoiceId } = await started();
    const old = payment(customerId, invoiceId, 20000, '2026-11-20T08:00:00.000Z');
    const fresh = payment(customerId, invoiceId, 3000, '2026-11-22T08:29:00.000Z');
    await writeRecords(db, operatorWith(cliAudit()), {
      workspaceId: f.ws.id,
      body: { history: true, upsert: { payments: [old] } },
    });
    await writeRecords(db, operatorWith(cliAudit()), { workspaceId: f.ws.id, body: { upsert: { payments: [fresh] } } });
    await runCalendarSweep(workerDb, new Date('2026-11-22T08:31:00.000Z'), { workspaceIds: [f.ws.id] });
    const list = await f.deliveries(endpoint);
    expect(list.map((d) => [d.event, d.body.data.paymentId])).to.deep.equal([['payment.captured', fresh.id]]);
    // both are written and counted: 50,000 billed, 23,000 paid
    expect(Number((await db('invoices').where({ id: invoiceId }).first()).paid)).to.equal(23000);
  });

  it('an import job raises none for what it loads', async () => {
    const { f, endpoint, customerId, invoiceId } = await started();
    const old = payment(customerId, invoiceId, 20000, '2026-11-20T08:00:00.000Z');
    const body = Readable.from([Buffer.from(JSON.stringify({ payments: [old] }))]);
    const { done } = await startImport(db, operatorWith(cliAudit()), { workspaceId: f.ws.id, body, format: 'json' });
    const job = await done;
    expect(job.phase).to.equal('succeeded');
    await runCalendarSweep(workerDb, new Date('2026-11-22T08:31:00.000Z'), { workspaceIds: [f.ws.id] });
    expect(await f.deliveries(endpoint)).to.deep.equal([]);
    expect(Number((await db('invoices').where({ id: invoiceId }).first()).paid)).to.equal(20000);
  });
});
