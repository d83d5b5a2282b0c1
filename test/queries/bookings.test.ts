import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { fixture, type Fixture } from '../support/fixtures.js';
import { bookingSummary } from '../../src/queries/bookings.js';

// Dubai (UTC+4): now is 12:00 local on 2026-11-22; today is [2026-11-21T20:00Z, 2026-11-22T20:00Z).
const now = new Date('2026-11-22T08:00:00.000Z');

describe('queries: booking summary', () => {
  let f: Fixture;
  const b: Record<string, string> = {};

  before(async () => {
    const { db } = await testDatabase();
    f = await fixture(db, { timezone: 'Asia/Dubai' });
    await f.booking({ status: 'pending', pickupAt: '2026-11-25T10:00:00Z', dropoffAt: '2026-11-27T10:00:00Z' });
    // confirmed: only the one picked up after now is upcoming
    b.c1 = await f.booking({
      status: 'confirmed',
      pickupAt: '2026-11-25T10:00:00Z',
      dropoffAt: '2026-11-27T10:00:00Z',
    });
    await f.booking({ status: 'confirmed', pickupAt: '2026-11-22T07:00:00Z', dropoffAt: '2026-11-27T10:00:00Z' }); // due out, not yet handed over
    await f.booking({ status: 'confirmed', pickupAt: now, dropoffAt: '2026-11-27T10:00:00Z' }); // exactly now: not in the future
    // active                                                          due today (local)   overdue (< now)
    b.a1 = await f.booking({ status: 'active', pickupAt: '2026-11-20T10:00:00Z', dropoffAt: '2026-11-22T06:00:00Z' }); // yes yes
    b.a2 = await f.booking({ status: 'active', pickupAt: '2026-11-20T10:00:00Z', dropoffAt: '2026-11-22T15:00:00Z' }); // yes no
    await f.booking({ status: 'active', pickupAt: '2026-11-10T10:00:00Z', dropoffAt: '2026-11-20T10:00:00Z' }); //        no  yes
    await f.booking({ status: 'active', pickupAt: '2026-11-20T10:00:00Z', dropoffAt: '2026-11-22T20:00:00Z' }); //        no  no (23rd local)
    await f.booking({ status: 'active', pickupAt: '2026-11-20T10:00:00Z', dropoffAt: '2026-11-21T19:30:00Z' }); //        no  yes (21st local)
    await f.booking({ status: 'active', pickupAt: '2026-11-20T10:00:00Z', dropoffAt: '2026-11-21T20:30:00Z' }); //        yes yes (22nd local, 21st UTC)
    // completed and canceled ones are not due or overdue, whatever their dates
    await f.booking({ status: 'completed', pickupAt: '2026-11-10T10:00:00Z', dropoffAt: '2026-11-12T10:00:00Z' });
    await f.booking({ status: 'completed', pickupAt: '2026-11-20T10:00:00Z', dropoffAt: '2026-11-22T06:00:00Z' });
    await f.booking({ status: 'canceled', pickupAt: '2026-11-20T10:00:00Z', dropoffAt: '2026-11-22T06:00:00Z' });

    // booking-linked money: 10000 - 2500 = 7500; the canceled charge, the deposit, its release and the
    // payment with no booking do not count
    await f.payment({ bookingId: b.a1, amount: 10000, at: '2026-11-20T10:00:00Z' });
    await f.payment({ bookingId: b.a1, kind: 'refund', amount: 2500, at: '2026-11-21T10:00:00Z' });
    await f.payment({ bookingId: b.a2, amount: 7000, status: 'canceled', at: '2026-11-20T10:00:00Z' });
    await f.payment({ bookingId: b.a2, kind: 'deposit', amount: 50000, at: '2026-11-20T10:00:00Z' });
    await f.payment({ bookingId: b.a2, kind: 'deposit_release', amount: 50000, at: '2026-11-21T10:00:00Z' });
    await f.payment({ amount: 3000, at: '2026-11-20T10:00:00Z' });

    // a second workspace with look-alike bookings and money
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const gb = await g.booking({
      status: 'active',
      pickupAt: '2026-11-20T10:00:00Z',
      dropoffAt: '2026-11-22T06:00:00Z',
    });
    await g.booking({ status: 'confirmed', pickupAt: '2026-11-25T10:00:00Z', dropoffAt: '2026-11-27T10:00:00Z' });
    await g.payment({ bookingId: gb, amount: 99900, at: '2026-11-20T10:00:00Z' });
  });

  it('counts by status and works out upcoming, due returns, overdue and revenue collected', async () => {
    const { db } = await testDatabase();
    // pending 1, confirmed 3, active 6, completed 2, canceled 1 -> total 13
    expect(await bookingSummary(db, f.ws, now)).to.deep.equal({
      byStatus: { pending: 1, confirmed: 3, active: 6, completed: 2, canceled: 1 },
      total: 13,
      active: 6,
      upcoming: 1,
      dueReturns: 3,
      overdue: 4,
      revenueCollected: 7500,
    });
  });

  it('follows status changes', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db);
    const id = await g.booking({
      status: 'confirmed',
      pickupAt: '2026-11-25T10:00:00Z',
      dropoffAt: '2026-11-27T10:00:00Z',
    });
    await db('bookings').where({ id }).update({ status: 'canceled' });
    const s = await bookingSummary(db, g.ws, now);
    expect(s.byStatus).to.deep.equal({ pending: 0, confirmed: 0, active: 0, completed: 0, canceled: 1 });
    expect(s.upcoming).to.equal(0);
    expect(s.total).to.equal(1);
  });

  it('counts upcoming as the confirmed bookings whose pickup is still ahead of the clock', async () => {
    const { db } = await testDatabase();
    // c1 is picked up at 2026-11-25T10:00Z: upcoming a millisecond before, not at the instant itself
    expect((await bookingSummary(db, f.ws, new Date('2026-11-25T09:59:59.999Z'))).upcoming).to.equal(1);
    expect((await bookingSummary(db, f.ws, new Date('2026-11-25T10:00:00.000Z'))).upcoming).to.equal(0);
    // at 06:59:59Z on the 22nd all three confirmed bookings are ahead (07:00Z and 08:00Z that day, and c1)
    expect((await bookingSummary(db, f.ws, new Date('2026-11-22T06:59:59.000Z'))).upcoming).to.equal(3);
    // a new confirmed booking ahead counts at once; handed over (active) it no longer does
    const g = await fixture(db);
    const id = await g.booking({
      status: 'confirmed',
      pickupAt: '2026-11-23T10:00:00Z',
      dropoffAt: '2026-11-24T10:00:00Z',
    });
    await g.booking({ status: 'confirmed', pickupAt: '2026-11-21T10:00:00Z', dropoffAt: '2026-11-24T10:00:00Z' }); // pickup passed
    expect((await bookingSummary(db, g.ws, now)).upcoming).to.equal(1);
    await db('bookings').where({ id }).update({ status: 'active' });
    expect(await bookingSummary(db, g.ws, now)).to.include({ upcoming: 0, active: 1, dueReturns: 0, overdue: 0 });
  });

  it('gives all five statuses as zeros for an empty workspace', async () => {
    const { db } = await testDatabase();
    const empty = await fixture(db);
    expect(await bookingSummary(db, empty.ws, now)).to.deep.equal({
      byStatus: { pending: 0, confirmed: 0, active: 0, completed: 0, canceled: 0 },
      total: 0,
      active: 0,
      upcoming: 0,
      dueReturns: 0,
      overdue: 0,
      revenueCollected: 0,
    });
  });

  it('takes today from the workspace time zone', async () => {
    const { db } = await testDatabase();
    // In UTC today is [2026-11-22T00:00Z, 2026-11-23T00:00Z): due today are a1 (06:00Z), a2 (15:00Z) and the
    // 20:00Z one; the 21st-20:30Z one is yesterday. Overdue does not depend on the zone.
    const s = await bookingSummary(db, { id: f.ws.id, timezone: 'UTC' }, now);
    expect(s.dueReturns).to.equal(3);
    expect(s.overdue).to.equal(4);
    // In New York (UTC-5) now is 03:00 on the 22nd; today is [2026-11-22T05:00Z, 2026-11-23T05:00Z): a1, a2
    // and the 20:00Z one
    expect((await bookingSummary(db, { id: f.ws.id, timezone: 'America/New_York' }, now)).dueReturns).to.equal(3);
    // a later clock, 2026-11-22T21:00Z = 01:00 on the 23rd in Dubai: only the 20:00Z one is due today;
    // overdue: a1, a2, 20th, 21st-19:30Z, 21st-20:30Z, and 20:00Z of the 22nd = 6
    const late = await bookingSummary(db, f.ws, new Date('2026-11-22T21:00:00.000Z'));
    expect(late.dueReturns).to.equal(1);
    expect(late.overdue).to.equal(6);
  });
});
