import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { ReceivablesRowSchema, ReceivablesTotalsSchema } from '../../generated/openapi/schemas.gen.js';
import { preparedPlans, scansOf, testDatabase, waitsForLock } from '../support/database.js';
import { fixture, type Fixture } from '../support/fixtures.js';
import { expectRollupsExact } from '../support/rollups.js';
import {
  RARE_TERM_MATCHES,
  receivables,
  receivablesJson,
  receivablesPosition,
  receivablesStatement,
} from '../../src/queries/receivables.js';

// Dubai (UTC+4): today is 2026-11-22.
const now = new Date('2026-11-22T08:00:00.000Z');

describe('queries: receivables', () => {
  let f: Fixture;
  const c: Record<string, string> = {};
  let dana: [string, string];
  const row = (customerId: string, name: string, figures: Partial<Record<string, number>>) => ({
    customerId,
    name,
    billed: 0,
    collected: 0,
    outstanding: 0,
    current: 0,
    d1_30: 0,
    d31_60: 0,
    d60p: 0,
    openInvoices: 0,
    ...figures,
  });
  let rows: Record<string, ReturnType<typeof row>>;

  // billed 30000+45000+26000+25000+25000+3000+5000 = 159000; collected 5000+26500+2000+5000 = 38500;
  // outstanding 25000+45000+25000+25000+1000 = 121000 = current 11000 + 1-30 65000 + 31-60 5000 + 61+ 40000;
  // open invoices 2+2+1+1+1 = 7; customers with an issued invoice: 7
  const totals = {
    billed: 159000,
    collected: 38500,
    outstanding: 121000,
    current: 11000,
    d1_30: 65000,
    d31_60: 5000,
    d60p: 40000,
    openInvoices: 7,
    customers: 7,
  };

  before(async () => {
    const { db } = await testDatabase();
    f = await fixture(db, { timezone: 'Asia/Dubai' });
    // Ahmed Khan: 10000 due 30 Nov (current) + 20000 due 12 Nov (10 days) paid 5000 -> 15000 in 1-30; a void
    // invoice counts nowhere
    c.ak = await f.customer({ name: 'Ahmed Khan' });
    await f.invoice({ customerId: c.ak, total: 10000, dueDate: '2026-11-30' });
    const ak2 = await f.invoice({ customerId: c.ak, total: 20000, dueDate: '2026-11-12' });
    await f.payment({ invoiceId: ak2, amount: 5000, at: '2026-11-12T10:00:00Z' });
    await f.invoice({ customerId: c.ak, total: 90000, dueDate: '2026-08-01', status: 'void' });
    // Bilal Ahmed: 40000 due 1 Sep (30 + 31 + 21 = 82 days: 61+), 5000 due 15 Oct (17 + 21 = 38 days: 31-60);
    // a canceled charge and a deposit change nothing
    c.ba = await f.customer({ name: 'Bilal Ahmed' });
    const ba1 = await f.invoice({ customerId: c.ba, total: 40000, dueDate: '2026-09-01' });
    await f.invoice({ customerId: c.ba, total: 5000, dueDate: '2026-10-15' });
    await f.payment({ invoiceId: ba1, amount: 40000, status: 'canceled', at: '2026-09-01T10:00:00Z' });
    await f.payment({ customerId: c.ba, kind: 'deposit', amount: 10000, at: '2026-09-01T10:00:00Z' });
    // Carla Diaz: 25000 paid in full, 1000 overpaid with 1500: billed 26000, collected 26500, nothing open
    c.cd = await f.customer({ name: 'Carla Diaz' });
    const cd1 = await f.invoice({ customerId: c.cd, total: 25000, dueDate: '2026-11-01' });
    await f.payment({ invoiceId: cd1, amount: 25000, at: '2026-11-01T10:00:00Z' });
    const cd2 = await f.invoice({ customerId: c.cd, total: 1000, dueDate: '2026-11-10' });
    await f.payment({ invoiceId: cd2, amount: 1500, at: '2026-11-10T10:00:00Z' });
    // two customers named Dana Lee, 25000 each due 20 Nov (2 days): tied with Ahmed Khan on outstanding
    dana = [await f.customer({ name: 'Dana Lee' }), await f.customer({ name: 'Dana Lee' })];
    for (const id of dana) await f.invoice({ customerId: id, total: 25000, dueDate: '2026-11-20' });
    // Eve 100%_off: 3000 due today, 3000 charged, 1000 refunded -> collected 2000, 1000 open and current
    c.ev = await f.customer({ name: 'Eve 100%_off' });
    const ev = await f.invoice({ customerId: c.ev, total: 3000, dueDate: '2026-11-22' });
    await f.payment({ invoiceId: ev, amount: 3000, at: '2026-11-20T10:00:00Z' });
    await f.payment({ invoiceId: ev, kind: 'refund', amount: 1000, at: '2026-11-21T10:00:00Z' });
    // Aaron Zero: paid in full
    c.az = await f.customer({ name: 'Aaron Zero' });
    const az = await f.invoice({ customerId: c.az, total: 5000, dueDate: '2026-10-01' });
    await f.payment({ invoiceId: az, amount: 5000, at: '2026-10-01T10:00:00Z' });
    // no row: only a void invoice, or no invoice at all
    c.zv = await f.customer({ name: 'Zed Void' });
    await f.invoice({ customerId: c.zv, total: 7000, dueDate: '2026-10-01', status: 'void' });
    await f.customer({ name: 'Nobody Invoiced' });

    rows = {
      ba: row(c.ba, 'Bilal Ahmed', { billed: 45000, outstanding: 45000, d31_60: 5000, d60p: 40000, openInvoices: 2 }),
      ak: row(c.ak, 'Ahmed Khan', {
        billed: 30000,
        collected: 5000,
        outstanding: 25000,
        current: 10000,
        d1_30: 15000,
        openInvoices: 2,
      }),
      dl1: row([...dana].sort()[0], 'Dana Lee', { billed: 25000, outstanding: 25000, d1_30: 25000, openInvoices: 1 }),
      dl2: row([...dana].sort()[1], 'Dana Lee', { billed: 25000, outstanding: 25000, d1_30: 25000, openInvoices: 1 }),
      ev: row(c.ev, 'Eve 100%_off', {
        billed: 3000,
        collected: 2000,
        outstanding: 1000,
        current: 1000,
        openInvoices: 1,
      }),
      az: row(c.az, 'Aaron Zero', { billed: 5000, collected: 5000 }),
      cd: row(c.cd, 'Carla Diaz', { billed: 26000, collected: 26500 }),
    };

    // a second workspace with a look-alike, much bigger debtor
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const gk = await g.customer({ name: 'Ahmed Khan' });
    await g.invoice({ customerId: gk, total: 999000, dueDate: '2026-09-01' });
  });

  it('orders customers by outstanding, then name, then id, and sums the whole book', async () => {
    const { db } = await testDatabase();
    expect(await receivables(db, f.ws, { limit: 50 }, now)).to.deep.equal({
      rows: [rows.ba, rows.ak, rows.dl1, rows.dl2, rows.ev, rows.az, rows.cd],
      totals,
      next: null,
    });
  });

  it('caps the rows at limit without changing the totals', async () => {
    const { db } = await testDatabase();
    // a next page after the last row's keys (outstanding as text, name, id)
    expect(await receivables(db, f.ws, { limit: 3 }, now)).to.deep.equal({
      rows: [rows.ba, rows.ak, rows.dl1],
      totals,
      next: receivablesPosition(rows.dl1),
    });
    // the limit reaching into the customers who owe nothing
    expect(await receivables(db, f.ws, { limit: 6 }, now)).to.deep.equal({
      rows: [rows.ba, rows.ak, rows.dl1, rows.dl2, rows.ev, rows.az],
      totals,
      next: [String(rows.az.outstanding), rows.az.name, rows.az.customerId],
    });
    expect((await receivables(db, f.ws, { limit: 1 }, now)).rows).to.deep.equal([rows.ba]);
  });

  it('filters by a case-insensitive substring of the name, wildcards taken literally, totals unchanged', async () => {
    const { db } = await testDatabase();
    const search = async (s: string, limit = 50) => receivables(db, f.ws, { search: s, limit }, now);
    expect(await search('AHMED')).to.deep.equal({ rows: [rows.ba, rows.ak], totals, next: null });
    expect((await search('dana', 1)).rows).to.deep.equal([rows.dl1]);
    expect((await search('diaz')).rows).to.deep.equal([rows.cd]);
    expect((await search('a')).rows).to.deep.equal([rows.ba, rows.ak, rows.dl1, rows.dl2, rows.az, rows.cd]);
    expect((await search('%')).rows).to.deep.equal([rows.ev]);
    expect((await search('_')).rows).to.deep.equal([rows.ev]);
    expect((await search('0%_O')).rows).to.deep.equal([rows.ev]);
    // the same, in a term long enough for the trigram index
    expect((await search('100%_OFF')).rows).to.deep.equal([rows.ev]);
    expect((await search('100_')).rows).to.deep.equal([]);
    expect((await search('100%o')).rows).to.deep.equal([]);
    expect((await search('void')).rows).to.deep.equal([]);
    expect((await search('nobody')).totals).to.deep.equal(totals);
  });

  it('ages each customer on the local calendar, at the bucket boundaries', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const who = await g.customer({ name: 'Boundary' });
    // days past due on 2026-11-22: 0 -> current; 1, 30 -> 1-30; 31, 60 -> 31-60; 61 -> 61+
    for (const [dueDate, total] of [
      ['2026-11-22', 1],
      ['2026-11-21', 10],
      ['2026-10-23', 100],
      ['2026-10-22', 1000],
      ['2026-09-23', 10000],
      ['2026-09-22', 100000],
    ] as const) {
      await g.invoice({ customerId: who, total, dueDate });
    }
    const expected = {
      billed: 111111,
      collected: 0,
      outstanding: 111111,
      current: 1,
      d1_30: 110,
      d31_60: 11000,
      d60p: 100000,
      openInvoices: 6,
    };
    const result = await receivables(db, g.ws, { limit: 50 }, now);
    expect(result).to.deep.equal({
      rows: [{ customerId: who, name: 'Boundary', ...expected }],
      totals: { ...expected, customers: 1 },
      next: null,
    });
    // at 2026-11-22T21:00Z it is already the 23rd in Dubai: everything is one day older, 1, 2 -> 1-30 (1 + 10);
    // 31, 32 -> 31-60 (100 + 1000); 61, 62 -> 61+ (10000 + 100000)
    const later = await receivables(db, g.ws, { limit: 50 }, new Date('2026-11-22T21:00:00.000Z'));
    expect(later.rows[0]).to.include({ current: 0, d1_30: 11, d31_60: 1100, d60p: 110000 });
  });

  it("keeps each row's ageing exact as its invoices are paid, voided, moved, deleted and added, on any day", async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const mover = await g.customer({ name: 'Mover' });
    const taker = await g.customer({ name: 'Taker' });
    const owed: Record<string, string> = {};
    // days past due on 2026-11-22: a, b 0 (current, one due date for two invoices); c 30 (1-30); d 31 (31-60); e 61 (61+)
    for (const [key, total, dueDate] of [
      ['a', 1000, '2026-11-22'],
      ['b', 2000, '2026-11-22'],
      ['c', 4000, '2026-10-23'],
      ['d', 8000, '2026-10-22'],
      ['e', 16000, '2026-09-22'],
    ] as const) {
      owed[key] = await g.invoice({ customerId: mover, total, dueDate });
    }
    const page = async (at = now) => (await receivables(db, g.ws, { limit: 50 }, at)).rows;
    expect(await page()).to.deep.equal([
      row(mover, 'Mover', {
        billed: 31000,
        outstanding: 31000,
        current: 3000,
        d1_30: 4000,
        d31_60: 8000,
        d60p: 16000,
        openInvoices: 5,
      }),
    ]);

    await g.payment({ invoiceId: owed.b, amount: 500, at: '2026-11-20T10:00:00Z' }); // b: 1500 open
    await db('invoices').where({ id: owed.c }).update({ due_date: '2026-09-23' }); // c: 60 days, 31-60
    await db('invoices').where({ id: owed.d }).update({ status: 'void' }); // d: nothing open, not billed
    await db('invoices').where({ id: owed.e }).update({ customer_id: taker }); // e: Taker's
    await db('invoices').where({ id: owed.a }).delete();
    owed.f = await g.invoice({ customerId: mover, total: 32000, dueDate: '2026-11-21' }); // f: 1 day, 1-30
    // Mover: billed b + c + f = 2000 + 4000 + 32000 = 38000, collected 500, open 1500 + 4000 + 32000 = 37500
    const moverRow = { billed: 38000, collected: 500, outstanding: 37500, openInvoices: 3 };
    expect(await page()).to.deep.equal([
      row(mover, 'Mover', { ...moverRow, current: 1500, d1_30: 32000, d31_60: 4000 }),
      row(taker, 'Taker', { billed: 16000, outstanding: 16000, d60p: 16000, openInvoices: 1 }),
    ]);
    // 31 days later (2026-12-23 in Dubai): b 31 and f 32 days past due (31-60), c 91 (61+)
    expect((await page(new Date('2026-12-23T08:00:00.000Z')))[0]).to.deep.equal(
      row(mover, 'Mover', { ...moverRow, d31_60: 33500, d60p: 4000 }),
    );
    // a day before the first page's clock (2026-11-21): b current, f due today (current), c 59 days (31-60)
    expect((await page(new Date('2026-11-21T08:00:00.000Z')))[0]).to.deep.equal(
      row(mover, 'Mover', { ...moverRow, current: 33500, d31_60: 4000 }),
    );
    await expectRollupsExact(db, g.ws.id);
  });

  it('ages a customer exactly when two transactions change its invoices at once', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const id = await g.customer({ name: 'Busy' });
    await g.invoice({ customerId: id, total: 100, dueDate: '2026-09-01' });
    const invoice = (total: number, due_date: string) => ({
      id: randomUUID(),
      workspace_id: g.ws.id,
      number: `INV-${total}`,
      customer_id: id,
      purpose: 'rental',
      issue_date: '2026-11-20',
      due_date,
      total,
      status: 'issued',
    });
    const first = await db.transaction();
    const second = await db.transaction();
    try {
      await first('invoices').insert(invoice(1000, '2026-11-30'));
      const { pid } = (await second.raw('SELECT pg_backend_pid() AS pid')).rows[0];
      // (a promise, so the insert runs once)
      const inserted = Promise.resolve(second('invoices').insert(invoice(20000, '2026-11-10')));
      inserted.catch(() => {}); // awaited below
      // The second waits for the first's ledger row; its recomputation must then see the first's invoice.
      const waited = await waitsForLock(db, pid);
      await first.commit();
      await inserted;
      await second.commit();
      expect(waited, 'the second transaction waited for the first').to.equal(true);
    } finally {
      if (!first.isCompleted()) await first.rollback();
      if (!second.isCompleted()) await second.rollback();
    }
    expect((await receivables(db, g.ws, { limit: 50 }, now)).rows).to.deep.equal([
      row(id, 'Busy', { billed: 21100, outstanding: 21100, current: 1000, d1_30: 20000, d60p: 100, openInvoices: 3 }),
    ]);
    await expectRollupsExact(db, g.ws.id);
  });

  it("walks the ledger for a search term index-only, reading the picked rows' open balances by primary key", async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    // 30 customers the term skips, owing 1000 + k each, and 2 it picks: Ozzy A owes 500 (current), Ozzy B 400 (d60p)
    for (let k = 1; k <= 30; k++) {
      await g.invoice({ customerId: await g.customer({ name: `Cust ${k}` }), total: 1000 + k, dueDate: '2026-11-30' });
    }
    const ozzyA = await g.customer({ name: 'Ozzy A' });
    const ozzyB = await g.customer({ name: 'Ozzy B' });
    await g.invoice({ customerId: ozzyA, total: 500, dueDate: '2026-11-22' });
    await g.invoice({ customerId: ozzyB, total: 400, dueDate: '2026-09-22' });
    const params = { search: 'zz', limit: 50 };
    expect((await receivables(db, g.ws, params, now)).rows).to.deep.equal([
      row(ozzyA, 'Ozzy A', { billed: 500, outstanding: 500, current: 500, openInvoices: 1 }),
      row(ozzyB, 'Ozzy B', { billed: 400, outstanding: 400, d60p: 400, openInvoices: 1 }),
    ]);

    // The plan the large book gets: current statistics, and a visibility map set by (auto)vacuum, without which an
    // index-only walk costs a heap visit per row and a fresh test database's small, churned table is cheaper to scan.
    // Waiting for autovacuum would make the plan depend on timing; the test's own VACUUM does not.
    await db.raw('VACUUM (ANALYZE) customer_ledger');
    const { sql, bindings } = receivablesStatement(g.ws, params, now);
    const [
      {
        'QUERY PLAN': [{ Plan: plan }],
      },
    ] = (await db.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, bindings)).rows;
    type Node = {
      'Node Type': string;
      'Relation Name'?: string;
      'Index Name'?: string;
      'Actual Rows': number;
      'Actual Loops': number;
      'Rows Removed by Filter'?: number;
      Plans?: Node[];
    };
    const ledgerScans: Node[] = [];
    const visit = (node: Node) => {
      if (node['Relation Name'] === 'customer_ledger') ledgerScans.push(node);
      node.Plans?.forEach(visit);
    };
    visit(plan);
    // the walk reads all 32 rows from the index alone; then one look-up per picked row (by primary key, or with the
    // test database's statistics of a small table maybe a scan of it)
    const [walked, lookedUp, ...more] = ledgerScans;
    expect([
      walked['Node Type'],
      walked['Index Name'],
      walked['Actual Rows'],
      walked['Rows Removed by Filter'],
    ]).to.deep.equal(['Index Only Scan', 'customer_ledger_order', 2, 30]);
    expect([lookedUp['Actual Loops'], lookedUp['Actual Rows'] * lookedUp['Actual Loops'], more.length]).to.deep.equal([
      2, 2, 0,
    ]);
  });

  it("writes the workspace's totals once for an invoice's total changed, and not at all for a due date moved", async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const id = await g.customer({ name: 'Renter' });
    const invoice = await g.invoice({ customerId: id, total: 1000, dueDate: '2026-11-30' });
    await g.invoice({ customerId: id, total: 2000, dueDate: '2026-10-30' });
    // row versions written by this transaction alone (it touches only this workspace's rows)
    const trx = await db.transaction();
    // (workspace_totals is append-only since 20261128000610: a change of its figures is a row inserted)
    const updates = async () =>
      Object.fromEntries(
        (
          await trx.raw(`SELECT relname, n_tup_upd + n_tup_ins AS n FROM pg_stat_xact_user_tables
      WHERE relname IN ('customer_ledger', 'workspace_totals')`)
        ).rows.map((r: { relname: string; n: string }) => [r.relname, Number(r.n)]),
      );
    try {
      const before = await updates();
      await trx('invoices').where({ id: invoice }).update({ total: 1300 });
      const changed = await updates();
      await trx('invoices').where({ id: invoice }).update({ due_date: '2026-11-10' });
      const moved = await updates();
      await trx.commit();
      // a change of its figures (the total): the rollup's upsert and the arrays' refresh write the ledger row, and the
      // workspace's totals get a row; a due date moved: only the arrays' refresh (the rollup skips all-zero deltas)
      expect([
        changed.customer_ledger - before.customer_ledger,
        changed.workspace_totals - before.workspace_totals,
      ]).to.deep.equal([2, 1]);
      expect([
        moved.customer_ledger - changed.customer_ledger,
        moved.workspace_totals - changed.workspace_totals,
      ]).to.deep.equal([1, 0]);
    } finally {
      if (!trx.isCompleted()) await trx.rollback();
    }
    // 1300 due 10 Nov (12 days past due, 1-30) and 2000 due 30 Oct (23 days, 1-30)
    expect(await receivables(db, g.ws, { limit: 50 }, now)).to.deep.equal({
      rows: [row(id, 'Renter', { billed: 3300, outstanding: 3300, d1_30: 3300, openInvoices: 2 })],
      totals: {
        billed: 3300,
        collected: 0,
        outstanding: 3300,
        current: 0,
        d1_30: 3300,
        d31_60: 0,
        d60p: 0,
        openInvoices: 2,
        customers: 1,
      },
      next: null,
    });
    await expectRollupsExact(db, g.ws.id);
  });

  it('follows a renamed customer: its new name orders it among ties and is what a search finds', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const bo = await g.customer({ name: 'Bo Smith' });
    const cy = await g.customer({ name: 'Cy Smith' });
    for (const id of [bo, cy]) await g.invoice({ customerId: id, total: 1000, dueDate: '2026-11-30' });
    const names = async (search?: string) =>
      (await receivables(db, g.ws, { search, limit: 50 }, now)).rows.map((r) => r.name);
    expect(await names()).to.deep.equal(['Bo Smith', 'Cy Smith']);
    await db('customers').where({ id: bo }).update({ name: 'Dee Smith' });
    expect(await names()).to.deep.equal(['Cy Smith', 'Dee Smith']);
    // a term the trigram index serves, and a shorter one
    expect(await names('DEE')).to.deep.equal(['Dee Smith']);
    expect(await names('ee')).to.deep.equal(['Dee Smith']);
    expect(await names('bo')).to.deep.equal([]);
  });

  it("shows the new name of a rename that was not yet committed when the customer's first invoice came", async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const id = await g.customer({ name: 'Old Name' });
    const renaming = await db.transaction();
    const invoicing = await db.transaction();
    try {
      await renaming('customers').where({ id }).update({ name: 'New Name' });
      const { pid } = (await invoicing.raw('SELECT pg_backend_pid() AS pid')).rows[0];
      // (a promise, so the insert runs once)
      const invoiced = Promise.resolve(
        invoicing('invoices').insert({
          id: randomUUID(),
          workspace_id: g.ws.id,
          number: 'INV-RACE',
          customer_id: id,
          purpose: 'rental',
          issue_date: '2026-11-20',
          due_date: '2026-11-30',
          total: 1000,
          status: 'issued',
        }),
      );
      invoiced.catch(() => {}); // awaited below
      // The first invoice waits for the rename (without the lock it would not, and would keep the old name).
      const waited = await waitsForLock(db, pid);
      await renaming.commit();
      await invoiced;
      await invoicing.commit();
      expect(waited, 'the invoice waited for the rename').to.equal(true);
    } finally {
      if (!renaming.isCompleted()) await renaming.rollback();
      if (!invoicing.isCompleted()) await invoicing.rollback();
    }
    expect((await db('customer_ledger').where({ customer_id: id }).first('name')).name).to.equal('New Name');
    expect((await receivables(db, g.ws, { limit: 50 }, now)).rows.map((r) => r.name)).to.deep.equal(['New Name']);
  });

  it('answers a term matching more customers than a rare one by walking the ledger, with the same rows', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    // RARE_TERM_MATCHES customers "Common 000" to "Common 499" (if it is 500), customer i owing 1000 + i due
    // 2026-11-30 (current), and one more customer whose name also holds "comm", with no invoice: "common" matches
    // exactly RARE_TERM_MATCHES customers (looked up), "comm" one more (the ledger walked in order)
    const ids = Array.from({ length: RARE_TERM_MATCHES }, () => randomUUID());
    const name = (i: number) => `Common ${String(i).padStart(3, '0')}`;
    await db('customers').insert(ids.map((id, i) => ({ id, workspace_id: g.ws.id, name: name(i) })));
    await db('customers').insert({ id: randomUUID(), workspace_id: g.ws.id, name: 'Commun Nobody' });
    await db('invoices').insert(
      ids.map((id, i) => ({
        id: randomUUID(),
        workspace_id: g.ws.id,
        number: `INV-${i}`,
        customer_id: id,
        purpose: 'rental',
        issue_date: '2026-11-20',
        due_date: '2026-11-30',
        total: 1000 + i,
        status: 'issued',
      })),
    );
    const debtor = (i: number) => ({
      customerId: ids[i],
      name: name(i),
      billed: 1000 + i,
      collected: 0,
      outstanding: 1000 + i,
      current: 1000 + i,
      d1_30: 0,
      d31_60: 0,
      d60p: 0,
      openInvoices: 1,
    });
    const last = RARE_TERM_MATCHES - 1;
    // totals: the sum of 1000 + i over i < n is 1000n + n(n-1)/2
    const owed = 1000 * RARE_TERM_MATCHES + (RARE_TERM_MATCHES * last) / 2;
    const totals = {
      billed: owed,
      collected: 0,
      outstanding: owed,
      current: owed,
      d1_30: 0,
      d31_60: 0,
      d60p: 0,
      openInvoices: RARE_TERM_MATCHES,
      customers: RARE_TERM_MATCHES,
    };
    const top3 = [debtor(last), debtor(last - 1), debtor(last - 2)];
    expect(await receivables(db, g.ws, { search: 'common', limit: 3 }, now)).to.deep.equal({
      rows: top3,
      totals,
      next: receivablesPosition(top3[2]),
    });
    expect(await receivables(db, g.ws, { search: 'COMM', limit: 3 }, now)).to.deep.equal({
      rows: top3,
      totals,
      next: receivablesPosition(top3[2]),
    });
    // the whole page of the walk, in order, down to the smallest debtor
    const all = await receivables(db, g.ws, { search: 'comm', limit: 200 }, now);
    expect(all.rows.map((r) => r.outstanding)).to.deep.equal(Array.from({ length: 200 }, (_, k) => 1000 + last - k));
    // a term matching a few of them ("Common 490" to "Common 499" when there are 500): one too short for the trigram
    // index, and one it serves (a rare term)
    expect((await receivables(db, g.ws, { search: 'on 49', limit: 50 }, now)).rows.map((r) => r.name)).to.deep.equal(
      Array.from({ length: 10 }, (_, k) => name(last - k)),
    );
    expect((await receivables(db, g.ws, { search: 'mon 49', limit: 50 }, now)).rows.map((r) => r.name)).to.deep.equal(
      Array.from({ length: 10 }, (_, k) => name(last - k)),
    );
  });

  it("looks a term up in its own workspace's index entries only, however many of another workspace's customers match", async () => {
    const { db } = await testDatabase();
    // the small workspace: 3 customers, 2 of them matching "moh"; Mohammed Ali owes 3000 due 30 Nov (current), Noor
    // Mohsin 2000 due 10 Nov (12 days: 1-30), Ahmed Khan 1000 (no match)
    const small = await fixture(db, { timezone: 'Asia/Dubai' });
    const ali = await small.customer({ name: 'Mohammed Ali' });
    const noor = await small.customer({ name: 'Noor Mohsin' });
    await small.invoice({ customerId: ali, total: 3000, dueDate: '2026-11-30' });
    await small.invoice({ customerId: noor, total: 2000, dueDate: '2026-11-10' });
    await small.invoice({
      customerId: await small.customer({ name: 'Ahmed Khan' }),
      total: 1000,
      dueDate: '2026-11-30',
    });
    // a larger one beside it: 5,000 customers, every one matching, each with an invoice
    const large = await fixture(db, { timezone: 'Asia/Dubai' });
    await db.raw(
      `INSERT INTO customers (id, workspace_id, name) SELECT gen_random_uuid(), ?, 'Mohammed ' || k FROM generate_series(1, 5000) k`,
      [large.ws.id],
    );
    await db.raw(
      `INSERT INTO invoices (id, workspace_id, number, customer_id, purpose, issue_date, due_date, total, status)
      SELECT gen_random_uuid(), c.workspace_id, 'INV-' || c.name, c.id, 'rental', '2026-11-01', '2026-11-30', 5000, 'issued' FROM customers c WHERE c.workspace_id = ?`,
      [large.ws.id],
    );
    // statistics and the trigram index's own as VACUUM leaves them (the plan a table in use gets)
    await db.raw('VACUUM (ANALYZE) customers, customer_ledger');
    const params = { search: 'moh', limit: 50 };
    expect((await receivables(db, small.ws, params, now)).rows).to.deep.equal([
      row(ali, 'Mohammed Ali', { billed: 3000, outstanding: 3000, current: 3000, openInvoices: 1 }),
      row(noor, 'Noor Mohsin', { billed: 2000, outstanding: 2000, d1_30: 2000, openInvoices: 1 }),
    ]);
    // Whichever plan the API's connection runs the statement with, no scan of customers reads a row or an index
    // entry of the other workspace: a scan of the trigram index returns the small workspace's 2 matches, any other
    // scan reads at most its 3 customers. On an index of names alone, the other workspace's 5,000 matches were read
    // and removed by a filter.
    for (const [which, plan] of Object.entries(await preparedPlans(db, receivablesStatement(small.ws, params, now)))) {
      const scans = await scansOf(db, plan, 'customers');
      expect(scans, which).not.to.be.empty;
      expect(
        scans.filter((s) => s.read > (s.trigram ? 2 : 3)),
        which,
      ).to.deep.equal([]);
    }
  });

  it("sends compact JSON in the document's key order, names escaped", async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const odd = 'Zoë "Q" O\'Brien \\ tab\there\nline\u0001 🚗';
    const id = await g.customer({ name: odd });
    await g.invoice({ customerId: id, total: 1234, dueDate: '2026-11-01' });
    const { json: text, next } = await receivablesJson(db, g.ws, { search: 'brien', limit: 10 }, now);
    expect(next).to.equal(null);
    const figures = {
      billed: 1234,
      collected: 0,
      outstanding: 1234,
      current: 0,
      d1_30: 1234,
      d31_60: 0,
      d60p: 0,
      openInvoices: 1,
    };
    expect(JSON.parse(text)).to.deep.equal({
      rows: [{ customerId: id, name: odd, ...figures }],
      totals: { ...figures, customers: 1 },
    });
    expect(text).to.equal(JSON.stringify(JSON.parse(text)));
    const answer = JSON.parse(text) as { rows: object[]; totals: object };
    expect(Object.keys(answer.rows[0])).to.deep.equal(ReceivablesRowSchema.required);
    expect(Object.keys(answer.totals)).to.deep.equal(ReceivablesTotalsSchema.required);
  });

  it('is empty for a workspace without invoices', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db);
    await g.customer({ name: 'Someone' });
    expect(await receivables(db, g.ws, { limit: 50 }, now)).to.deep.equal({
      rows: [],
      totals: {
        billed: 0,
        collected: 0,
        outstanding: 0,
        current: 0,
        d1_30: 0,
        d31_60: 0,
        d60p: 0,
        openInvoices: 0,
        customers: 0,
      },
      next: null,
    });
  });
});
