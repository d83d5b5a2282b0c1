import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import pg from 'pg';
import pino from 'pino';
import { runCalendarSweep } from '../../src/webhooks/calendar.js';
import { ChangeListener, ENTITY_CHANGES_CHANNEL } from '../../src/webhooks/change-listener.js';
import { testDatabase } from '../support/database.js';
import { startedCalendar } from '../support/calendar-fixtures.js';

// Issue 32, point 6: derived events follow the data at once (the commit announces the workspace, the worker derives
// its events straight away), and rows written as history (frs.history = 'on' in their transaction) raise none.
const NOW = '2026-11-22T08:30:00.000Z';

describe('webhooks: derived events at once, and the history switch', () => {
  let db: Knex;
  let workerDb: Knex;
  let url: string;

  before(async () => {
    const database = await testDatabase();
    db = database.db;
    url = database.url;
    workerDb = database.forRole('worker');
  });

  const started = () => startedCalendar(db, workerDb, NOW);

  const paymentSql = `INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, invoice_id, at)
                      VALUES (?, ?, 'charge', 'captured', ?, ?, ?, '2026-11-22T08:29:00Z')`;

  it('records no change for rows written in a transaction that says it carries history, so they raise no event', async () => {
    const { f, endpoint, customerId, invoiceId } = await started();
    const old = randomUUID();
    await db.transaction(async (trx) => {
      await trx.raw(`SELECT set_config('frs.history', 'on', true)`);
      await trx.raw(paymentSql, [old, f.ws.id, 20000, customerId, invoiceId]);
      await trx.raw(`UPDATE invoices SET status = 'void' WHERE id = ?`, [invoiceId]);
    });
    expect(Number((await db('entity_changes').where({ workspace_id: f.ws.id }).count('* as c'))[0].c)).to.equal(0);
    // the switch is the transaction's own: the next one records as before
    const fresh = randomUUID();
    await db.raw(paymentSql, [fresh, f.ws.id, 3000, customerId, null]);
    await runCalendarSweep(workerDb, new Date('2026-11-22T08:31:00Z'), { workspaceIds: [f.ws.id] });
    const list = await f.deliveries(endpoint);
    expect(list.map((d) => [d.event, d.body.data.paymentId])).to.deep.equal([['payment.captured', fresh]]);
    // the history rows are there, and counted (the figures do not depend on the switch)
    expect(Number((await db('invoices').where({ id: invoiceId }).first()).paid)).to.equal(20000);
  });

  it('announces at commit the workspace whose changes were recorded, once per transaction, and nothing for a rollback', async () => {
    const { f, customerId, invoiceId } = await started();
    const listener = new pg.Client(url);
    await listener.connect();
    const payloads: string[] = [];
    listener.on('notification', (m) => {
      if (m.payload === f.ws.id) payloads.push(m.payload);
    });
    try {
      await listener.query(`LISTEN ${ENTITY_CHANGES_CHANNEL}`);
      await db.transaction(async (trx) => {
        await trx.raw(paymentSql, [randomUUID(), f.ws.id, 100, customerId, invoiceId]);
        await trx.raw(paymentSql, [randomUUID(), f.ws.id, 100, customerId, invoiceId]);
      });
      await db
        .transaction(async (trx) => {
          await trx.raw(paymentSql, [randomUUID(), f.ws.id, 100, customerId, invoiceId]);
          await trx.rollback();
        })
        .catch(() => undefined);
      // a rename records no change: nothing to announce
      await db('customers').where({ id: customerId }).update({ name: 'Omar' });
      await listener.query('SELECT 1'); // notifications sent before this answer have arrived
      expect(payloads).to.deep.equal([f.ws.id]);
    } finally {
      await listener.end();
    }
  });

  it('queues the derived event of a commit without waiting for the minute sweep', async () => {
    const { f, endpoint, customerId, invoiceId } = await started();
    const changes = new ChangeListener(workerDb, pino({ level: 'silent' }), undefined, [f.ws.id]);
    await changes.start();
    try {
      const payment = randomUUID();
      // with an announcement that is no workspace's id in the same commit (any login may NOTIFY the channel)
      await db.transaction(async (trx) => {
        await trx.raw('SELECT pg_notify(?, ?)', [ENTITY_CHANGES_CHANNEL, 'not a workspace']);
        await trx.raw(paymentSql, [payment, f.ws.id, 20000, customerId, invoiceId]);
      });
      // no sweep runs here: only the announcement can queue it (waits at most 10 s, a bound for a loaded machine)
      const deadline = Date.now() + 10_000;
      let list = await f.deliveries(endpoint);
      while (list.length === 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        list = await f.deliveries(endpoint);
      }
      expect(list.map((d) => d.event)).to.deep.equal(['payment.captured']);
      expect(list[0].body.data).to.include({ paymentId: payment, amount: 20000, kind: 'charge', status: 'captured' });
    } finally {
      await changes.stop();
    }
  });
});
