import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase, waitsForLock } from '../support/database.js';
import { kept, recomputed } from '../support/rollups.js';
import { fixture, type Fixture } from '../support/fixtures.js';
import { operationsToday, operationsTodayJson } from '../../src/queries/today.js';

/** Each booking's copies of its customer and car equal a fresh computation (test/support/rollups.ts). */
async function expectCopiesExact(db: Knex, ws: string): Promise<void> {
  expect((await kept(db, ws)).bookingRefs).to.deep.equal((await recomputed(db, ws)).bookingRefs);
}

// Dubai is UTC+4: now is 12:00 local on 2026-11-22, and today is [2026-11-21T20:00Z, 2026-11-22T20:00Z).
const now = new Date('2026-11-22T08:00:00.000Z');

describe("queries: today's operations", () => {
  let f: Fixture;
  const b: Record<string, string> = {};
  let alice: string;
  let car: string;

  before(async () => {
    const { db } = await testDatabase();
    f = await fixture(db, { timezone: 'Asia/Dubai' });
    alice = await f.customer({ name: 'Alice Smith' });
    car = await f.vehicle({ plate: 'DXB A 1' });
    const book = (
      status: 'pending' | 'confirmed' | 'active' | 'completed' | 'canceled',
      pickupAt: string,
      dropoffAt: string,
      amount = 10000,
    ) => f.booking({ customerId: alice, vehicleId: car, status, pickupAt, dropoffAt, amount });

    // handovers
    b.earlyLocal = await book('confirmed', '2026-11-21T21:30:00Z', '2026-11-25T10:00:00Z', 50000); // 01:30 local on the 22nd
    b.activeOut = await book('active', '2026-11-22T05:00:00Z', '2026-11-26T10:00:00Z', 20000);
    b.lateLocal = await book('completed', '2026-11-22T19:45:00Z', '2026-11-27T10:00:00Z', 30000); // 23:45 local
    b.midnight = await book('confirmed', '2026-11-21T20:00:00Z', '2026-11-28T10:00:00Z', 40000); // exactly local midnight
    await book('pending', '2026-11-22T06:00:00Z', '2026-11-25T10:00:00Z');
    await book('canceled', '2026-11-22T06:00:00Z', '2026-11-25T10:00:00Z');
    await book('confirmed', '2026-11-21T19:59:59.999Z', '2026-11-25T10:00:00Z'); // 23:59:59.999 local on the 21st
    await book('confirmed', '2026-11-22T20:00:00Z', '2026-11-25T10:00:00Z'); // local midnight of the 23rd, UTC date the 22nd
    // two handovers at the same time are ordered by booking id
    b.same1 = await book('confirmed', '2026-11-22T09:00:00Z', '2026-11-24T09:00:00Z', 1000);
    b.same2 = await book('confirmed', '2026-11-22T09:00:00Z', '2026-11-24T09:00:00Z', 2000);

    // returns
    b.dueActive = await book('active', '2026-11-18T10:00:00Z', '2026-11-22T10:00:00Z', 60000);
    b.backEarly = await book('completed', '2026-11-18T10:00:00Z', '2026-11-21T20:00:00Z', 70000); // local midnight
    await book('confirmed', '2026-11-18T10:00:00Z', '2026-11-22T11:00:00Z'); // not out, so not a return
    await book('canceled', '2026-11-18T10:00:00Z', '2026-11-22T11:00:00Z');
    await book('pending', '2026-11-18T10:00:00Z', '2026-11-22T11:00:00Z');
    await book('active', '2026-11-18T10:00:00Z', '2026-11-22T20:00:00Z'); // tomorrow locally
    await book('active', '2026-11-18T10:00:00Z', '2026-11-21T19:00:00Z'); // yesterday locally (overdue, not due today)

    // invoices of the early handover: balance 30000 + 0 (void) + 0 (overpaid, never below 0) + 4000 = 34000
    const inv1 = await f.invoice({ bookingId: b.earlyLocal, total: 50000, dueDate: '2026-11-22' });
    await f.payment({ invoiceId: inv1, bookingId: b.earlyLocal, amount: 20000, at: '2026-11-20T10:00:00Z' });
    await f.payment({
      invoiceId: inv1,
      bookingId: b.earlyLocal,
      amount: 9999,
      status: 'canceled',
      at: '2026-11-20T10:05:00Z',
    });
    await f.payment({
      invoiceId: inv1,
      bookingId: b.earlyLocal,
      kind: 'deposit',
      amount: 100000,
      at: '2026-11-20T10:05:00Z',
    });
    await f.invoice({ bookingId: b.earlyLocal, total: 10000, dueDate: '2026-11-22', status: 'void' });
    const inv3 = await f.invoice({ bookingId: b.earlyLocal, total: 5000, dueDate: '2026-11-22' });
    await f.payment({ invoiceId: inv3, amount: 8000, at: '2026-11-20T11:00:00Z' });
    const inv4 = await f.invoice({ bookingId: b.earlyLocal, total: 10000, dueDate: '2026-11-30' });
    await f.payment({ invoiceId: inv4, amount: 10000, at: '2026-11-20T12:00:00Z' });
    await f.payment({ invoiceId: inv4, kind: 'refund', amount: 4000, at: '2026-11-21T12:00:00Z' });
    // the active return owes 60000 - 15000 = 45000
    const inv5 = await f.invoice({ bookingId: b.dueActive, total: 60000, dueDate: '2026-11-18' });
    await f.payment({ invoiceId: inv5, amount: 15000, at: '2026-11-18T10:00:00Z' });

    // a second workspace with the same times must not leak in
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    await g.booking({ status: 'confirmed', pickupAt: '2026-11-22T06:00:00Z', dropoffAt: '2026-11-25T10:00:00Z' });
    await g.booking({ status: 'active', pickupAt: '2026-11-18T06:00:00Z', dropoffAt: '2026-11-22T10:00:00Z' });
  });

  it('lists handovers and returns on the local date, ordered by time then booking id', async () => {
    const { db } = await testDatabase();
    const result = await operationsToday(db, f.ws, now);
    const item = (bookingId: string, time: string, amount: number, balanceDue: number) => ({
      bookingId,
      customer: { id: alice, name: 'Alice Smith' },
      vehicle: { id: car, plate: 'DXB A 1' },
      time,
      amount,
      balanceDue,
    });
    const [first, second] = [b.same1, b.same2].sort();
    expect(result.handovers).to.deep.equal([
      item(b.midnight, '2026-11-21T20:00:00.000Z', 40000, 0),
      item(b.earlyLocal, '2026-11-21T21:30:00.000Z', 50000, 34000),
      item(b.activeOut, '2026-11-22T05:00:00.000Z', 20000, 0),
      item(first, '2026-11-22T09:00:00.000Z', first === b.same1 ? 1000 : 2000, 0),
      item(second, '2026-11-22T09:00:00.000Z', second === b.same1 ? 1000 : 2000, 0),
      item(b.lateLocal, '2026-11-22T19:45:00.000Z', 30000, 0),
    ]);
    expect(result.returns).to.deep.equal([
      item(b.backEarly, '2026-11-21T20:00:00.000Z', 70000, 0),
      item(b.dueActive, '2026-11-22T10:00:00.000Z', 60000, 45000),
    ]);
  });

  it('follows the local calendar: the same instant is another day in UTC', async () => {
    const { db } = await testDatabase();
    // in UTC today is [2026-11-22T00:00Z, 2026-11-23T00:00Z): 21:30Z and 20:00Z of the 21st are yesterday,
    // 20:00Z of the 22nd is today
    const result = await operationsToday(db, { id: f.ws.id, timezone: 'UTC' }, now);
    expect(result.handovers.map((h) => h.time)).to.deep.equal([
      '2026-11-22T05:00:00.000Z',
      '2026-11-22T09:00:00.000Z',
      '2026-11-22T09:00:00.000Z',
      '2026-11-22T19:45:00.000Z',
      '2026-11-22T20:00:00.000Z',
    ]);
    expect(result.returns.map((r) => r.time)).to.deep.equal(['2026-11-22T10:00:00.000Z', '2026-11-22T20:00:00.000Z']);
  });

  it('writes a time as toISOString does: UTC, milliseconds cut from microseconds, Z', async () => {
    const { db } = await testDatabase();
    const h = await fixture(db, { timezone: 'Asia/Dubai' });
    await h.booking({
      status: 'confirmed',
      pickupAt: '2026-11-22T06:07:08.123999+01:00',
      dropoffAt: '2026-11-25T10:00:00Z',
    });
    await h.booking({ status: 'active', pickupAt: '2026-11-18T06:00:00Z', dropoffAt: '2026-11-22T10:00:00.5Z' });
    const result = await operationsToday(db, h.ws, now);
    expect(result.handovers.map((i) => i.time)).to.deep.equal(['2026-11-22T05:07:08.123Z']);
    expect(result.returns.map((i) => i.time)).to.deep.equal(['2026-11-22T10:00:00.500Z']);
  });

  it('is empty on a quiet day', async () => {
    const { db } = await testDatabase();
    expect(await operationsToday(db, f.ws, new Date('2026-12-25T08:00:00.000Z'))).to.deep.equal({
      handovers: [],
      returns: [],
    });
    const empty = await fixture(db);
    expect(await operationsToday(db, empty.ws, now)).to.deep.equal({ handovers: [], returns: [] });
  });

  it('sends names and plates escaped, byte for byte as JSON.stringify writes the answer', async () => {
    const { db } = await testDatabase();
    const h = await fixture(db, { timezone: 'Asia/Dubai' });
    const name = 'Zoë "Z" O\'Brien \\ 車\n\t\u0001';
    const plate = 'DXB "Q" \\ 7';
    const customer = await h.customer({ name });
    const vehicle = await h.vehicle({ plate });
    const booking = await h.booking({
      customerId: customer,
      vehicleId: vehicle,
      status: 'active',
      pickupAt: '2026-11-22T06:00:00Z',
      dropoffAt: '2026-11-25T10:00:00Z',
      amount: 12345,
    });
    const text = await operationsTodayJson(db, h.ws, now);
    const item = {
      bookingId: booking,
      customer: { id: customer, name },
      vehicle: { id: vehicle, plate },
      time: '2026-11-22T06:00:00.000Z',
      amount: 12345,
      balanceDue: 0,
    };
    expect(text).to.equal(JSON.stringify({ handovers: [item], returns: [] }));
  });

  it("follows a customer's new name, a car's new plate and a booking moved to another customer and car", async () => {
    const { db } = await testDatabase();
    const h = await fixture(db, { timezone: 'Asia/Dubai' });
    const [ann, bob] = [await h.customer({ name: 'Ann' }), await h.customer({ name: 'Bob' })];
    const [car1, car2] = [await h.vehicle({ plate: 'DXB 1' }), await h.vehicle({ plate: 'DXB 2' })];
    const out = await h.booking({
      customerId: ann,
      vehicleId: car1,
      status: 'active',
      pickupAt: '2026-11-22T06:00:00Z',
      dropoffAt: '2026-11-25T10:00:00Z',
      amount: 100,
    });
    const back = await h.booking({
      customerId: ann,
      vehicleId: car1,
      status: 'completed',
      pickupAt: '2026-11-18T06:00:00Z',
      dropoffAt: '2026-11-22T09:00:00Z',
      amount: 200,
    });
    const labels = async () => {
      const r = await operationsToday(db, h.ws, now);
      return [...r.handovers, ...r.returns].map((i) => [
        i.bookingId,
        i.customer.id,
        i.customer.name,
        i.vehicle.id,
        i.vehicle.plate,
      ]);
    };
    expect(await labels()).to.deep.equal([
      [out, ann, 'Ann', car1, 'DXB 1'],
      [back, ann, 'Ann', car1, 'DXB 1'],
    ]);
    await db('customers').where({ id: ann }).update({ name: 'Ann "the" Renamed' });
    await db('vehicles').where({ id: car1 }).update({ plate: 'DXB \\ 11' });
    expect(await labels()).to.deep.equal([
      [out, ann, 'Ann "the" Renamed', car1, 'DXB \\ 11'],
      [back, ann, 'Ann "the" Renamed', car1, 'DXB \\ 11'],
    ]);
    await db('bookings').where({ id: back }).update({ customer_id: bob, vehicle_id: car2 });
    expect(await labels()).to.deep.equal([
      [out, ann, 'Ann "the" Renamed', car1, 'DXB \\ 11'],
      [back, bob, 'Bob', car2, 'DXB 2'],
    ]);
    // the time follows the booking's new pickup time (a stored generated column)
    await db('bookings').where({ id: out }).update({ pickup_at: '2026-11-22T07:30:00.25+01:00' });
    expect((await operationsToday(db, h.ws, now)).handovers.map((i) => [i.bookingId, i.time])).to.deep.equal([
      [out, '2026-11-22T06:30:00.250Z'],
    ]);
    // a name or plate unchanged by an update rewrites no booking
    const version = async () => (await db.raw(`SELECT xmin::text AS v FROM bookings WHERE id = ?`, [out])).rows[0].v;
    const before = await version();
    await db('customers').where({ id: ann }).update({ phone: '+971 50 000 0000' });
    await db('vehicles').where({ id: car1 }).update({ state: 'active', model: 'Other' });
    expect(await version()).to.equal(before);
    await expectCopiesExact(db, h.ws.id);
  });

  // The lock rule of migration 20261123002330: a booking's foreign keys do not wait for a rename, so without the
  // trigger's lock a booking written beside a rename not yet committed would keep the old name for good.
  async function whileRenaming(
    db: Knex,
    rename: (trx: Knex.Transaction) => Promise<unknown>,
    write: (trx: Knex.Transaction) => Promise<unknown>,
  ) {
    const renaming = await db.transaction();
    const writing = await db.transaction();
    try {
      await rename(renaming);
      const { pid } = (await writing.raw('SELECT pg_backend_pid() AS pid')).rows[0];
      const written = Promise.resolve(write(writing));
      written.catch(() => {}); // awaited below
      const waited = await waitsForLock(db, pid);
      await renaming.commit();
      await written;
      await writing.commit();
      expect(waited, 'the booking waited for the rename').to.equal(true);
    } finally {
      if (!renaming.isCompleted()) await renaming.rollback();
      if (!writing.isCompleted()) await writing.rollback();
    }
  }

  it('shows the new name of a rename that was not yet committed when the booking came', async () => {
    const { db } = await testDatabase();
    const h = await fixture(db, { timezone: 'Asia/Dubai' });
    const [customer, car] = [await h.customer({ name: 'Old Name' }), await h.vehicle({ plate: 'DXB 5' })];
    const id = randomUUID();
    await whileRenaming(
      db,
      (trx) => trx('customers').where({ id: customer }).update({ name: 'New Name' }),
      (trx) =>
        trx('bookings').insert({
          id,
          workspace_id: h.ws.id,
          number: 'B-RACE',
          customer_id: customer,
          vehicle_id: car,
          type: 'daily',
          status: 'confirmed',
          pickup_at: '2026-11-22T06:00:00Z',
          dropoff_at: '2026-11-25T10:00:00Z',
          amount: 100,
        }),
    );
    expect((await operationsToday(db, h.ws, now)).handovers.map((i) => [i.bookingId, i.customer.name])).to.deep.equal([
      [id, 'New Name'],
    ]);
    await expectCopiesExact(db, h.ws.id);
  });

  // (A new plate also changes the car's unique plate_key, so the booking's foreign key check waits for it as well.)
  it('shows the new plate of a car that was not yet committed when a booking moved to it', async () => {
    const { db } = await testDatabase();
    const h = await fixture(db, { timezone: 'Asia/Dubai' });
    const [car1, car2] = [await h.vehicle({ plate: 'DXB 6' }), await h.vehicle({ plate: 'DXB 7' })];
    const booking = await h.booking({
      vehicleId: car1,
      status: 'confirmed',
      pickupAt: '2026-11-22T06:00:00Z',
      dropoffAt: '2026-11-25T10:00:00Z',
    });
    await whileRenaming(
      db,
      (trx) => trx('vehicles').where({ id: car2 }).update({ plate: 'DXB 77' }),
      (trx) => trx('bookings').where({ id: booking }).update({ vehicle_id: car2 }),
    );
    expect((await operationsToday(db, h.ws, now)).handovers.map((i) => [i.vehicle.id, i.vehicle.plate])).to.deep.equal([
      [car2, 'DXB 77'],
    ]);
    await expectCopiesExact(db, h.ws.id);
  });

  it("moves a booking to another car while its customer's rename waits for the booking, with no deadlock", async () => {
    const { db } = await testDatabase();
    const h = await fixture(db, { timezone: 'Asia/Dubai' });
    const customer = await h.customer({ name: 'Xavier' });
    const [car1, car2] = [await h.vehicle({ plate: 'DXB 8' }), await h.vehicle({ plate: 'DXB 9' })];
    const booking = await h.booking({
      customerId: customer,
      vehicleId: car1,
      status: 'confirmed',
      pickupAt: '2026-11-22T06:00:00Z',
      dropoffAt: '2026-11-25T10:00:00Z',
    });
    const moving = await db.transaction();
    const renaming = await db.transaction();
    try {
      await moving('bookings').where({ id: booking }).update({ amount: 500 });
      // the rename's trigger waits for the booking, which the first transaction holds
      const { pid } = (await renaming.raw('SELECT pg_backend_pid() AS pid')).rows[0];
      const renamed = Promise.resolve(renaming('customers').where({ id: customer }).update({ name: 'Xena' }));
      renamed.catch(() => {}); // awaited below
      const waiting = await waitsForLock(db, pid);
      expect(waiting, 'the rename waits for the booking').to.equal(true);
      // moving the car locks the new car only, not the customer being renamed (that would be a deadlock)
      await moving('bookings').where({ id: booking }).update({ vehicle_id: car2 });
      await moving.commit();
      await renamed;
      await renaming.commit();
    } finally {
      if (!moving.isCompleted()) await moving.rollback();
      if (!renaming.isCompleted()) await renaming.rollback();
    }
    const [item] = (await operationsToday(db, h.ws, now)).handovers;
    expect([item.customer.name, item.vehicle.plate, item.amount]).to.deep.equal(['Xena', 'DXB 9', 500]);
    await expectCopiesExact(db, h.ws.id);
  });
});
