import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { fixture, type Fixture } from '../support/fixtures.js';
import { financeOverview } from '../../src/queries/finance.js';

// Dubai (UTC+4): now is 12:00 local on 2026-11-22; this month is 2026-11, the trend 2026-06 .. 2026-11.
const now = new Date('2026-11-22T08:00:00.000Z');

const month = (m: string, collected: number, expenses: number) => ({
  month: m,
  collected,
  expenses,
  net: collected - expenses,
});

describe('queries: finance overview', () => {
  let f: Fixture;
  const v: Record<string, string> = {};
  let fleetId: string;

  before(async () => {
    const { db } = await testDatabase();
    f = await fixture(db, { timezone: 'Asia/Dubai' });
    fleetId = await f.fleet({ code: 'OWN', name: 'Own cars' });
    v.x = await f.vehicle({ fleetId, plate: 'X 1' });
    v.y = await f.vehicle({ fleetId, plate: 'Y 1' });
    v.w = await f.vehicle({ fleetId, plate: 'W 1' });
    const bx = await f.booking({
      vehicleId: v.x,
      status: 'completed',
      pickupAt: '2026-11-01T10:00:00Z',
      dropoffAt: '2026-11-03T10:00:00Z',
    });
    const by = await f.booking({
      vehicleId: v.y,
      status: 'completed',
      pickupAt: '2026-10-30T10:00:00Z',
      dropoffAt: '2026-11-02T10:00:00Z',
    });
    const bw = await f.booking({
      vehicleId: v.w,
      status: 'completed',
      pickupAt: '2026-10-30T10:00:00Z',
      dropoffAt: '2026-11-02T10:00:00Z',
    });

    // money in (charges - refunds), by local month:
    await f.payment({ bookingId: bx, amount: 100000, at: '2026-11-05T10:00:00Z' }); //                 Nov
    await f.payment({ bookingId: bx, kind: 'refund', amount: 20000, at: '2026-11-10T10:00:00Z' }); //   Nov
    await f.payment({ bookingId: by, amount: 50000, at: '2026-10-31T20:30:00Z' }); // 00:30 on 1 Nov local: Nov
    await f.payment({ amount: 30000, at: '2026-10-31T19:30:00Z' }); //                23:30 on 31 Oct local: Oct
    await f.payment({ bookingId: bw, amount: 99999, status: 'canceled', at: '2026-11-06T10:00:00Z' }); // nowhere
    await f.payment({ amount: 40000, at: '2026-08-15T10:00:00Z' }); //                                  Aug
    await f.payment({ amount: 25000, at: '2026-03-01T10:00:00Z' }); //                  before the trend: all-time only
    // deposits: 60000 - 15000 = 45000 held; the canceled one counts nowhere; none of it is collected
    await f.payment({ bookingId: bx, kind: 'deposit', amount: 60000, at: '2026-11-01T10:00:00Z' });
    await f.payment({ bookingId: bx, kind: 'deposit_release', amount: 15000, at: '2026-11-03T10:00:00Z' });
    await f.payment({ kind: 'deposit', amount: 5000, status: 'canceled', at: '2026-11-03T10:00:00Z' });

    // expenses by date: Nov 8000 + 2000, Oct 5000, Jul 7000, May 1000 (before the trend), Dec 3000 (after it)
    await f.expense({ amount: 8000, date: '2026-11-01' });
    await f.expense({ amount: 2000, date: '2026-11-22' });
    await f.expense({ amount: 5000, date: '2026-10-31' });
    await f.expense({ amount: 7000, date: '2026-07-15', vehicleId: v.x });
    await f.expense({ amount: 1000, date: '2026-05-31' });
    await f.expense({ amount: 3000, date: '2026-12-01' });

    // open invoices by days past due on 2026-11-22 (local):
    await f.invoice({ total: 1000, dueDate: '2026-11-22' }); //  0 days: current
    const partly = await f.invoice({ total: 2000, dueDate: '2026-12-10' }); // not yet due: current, balance 1500
    await f.payment({ invoiceId: partly, amount: 500, at: '2026-03-02T10:00:00Z' });
    await f.invoice({ total: 4000, dueDate: '2026-11-21' }); //  1 day: 1-30
    await f.invoice({ total: 8000, dueDate: '2026-10-23' }); // 30 days (8 to 31 Oct + 22): 1-30
    await f.invoice({ total: 16000, dueDate: '2026-10-22' }); // 31 days: 31-60
    await f.invoice({ total: 32000, dueDate: '2026-09-23' }); // 60 days (30 to 23 Oct + 30): 31-60
    await f.invoice({ total: 64000, dueDate: '2026-09-22' }); // 61 days: 61+
    // nowhere: a void invoice, a paid one, an overpaid one (balance never below 0)
    await f.invoice({ total: 500000, dueDate: '2026-01-01', status: 'void' });
    const paid = await f.invoice({ total: 7000, dueDate: '2026-06-01' });
    await f.payment({ invoiceId: paid, amount: 7000, at: '2026-03-02T10:00:00Z' });
    const overpaid = await f.invoice({ total: 3000, dueDate: '2026-06-01' });
    await f.payment({ invoiceId: overpaid, amount: 5000, at: '2026-03-02T10:00:00Z' });

    // a second workspace with look-alike money must not leak in
    const g = await fixture(db, { timezone: 'Asia/Dubai' });
    const gb = await g.booking({
      vehicleId: await g.vehicle({ plate: 'X 1' }),
      status: 'completed',
      pickupAt: '2026-11-01T10:00:00Z',
      dropoffAt: '2026-11-03T10:00:00Z',
    });
    await g.payment({ bookingId: gb, amount: 900000, at: '2026-11-05T10:00:00Z' });
    await g.payment({ kind: 'deposit', amount: 900000, at: '2026-11-05T10:00:00Z' });
    await g.invoice({ total: 900000, dueDate: '2026-09-01' });
    await g.expense({ amount: 900000, date: '2026-11-01' });
  });

  it('adds up collected, deposits, expenses, AR and ageing, the trend and the top vehicles', async () => {
    const { db } = await testDatabase();
    // collected: 100000 - 20000 + 50000 + 30000 + 40000 + 25000 + (500 + 7000 + 5000 on invoices) = 237500
    // this month: 100000 - 20000 + 50000 = 130000
    // expenses: 8000 + 2000 + 5000 + 7000 + 1000 + 3000 = 26000; net 237500 - 26000 = 211500
    // ageing: current 1000 + 1500 = 2500; 1-30 4000 + 8000 = 12000; 31-60 16000 + 32000 = 48000; 61+ 64000
    // AR: 2500 + 12000 + 48000 + 64000 = 126500; overdue 126500 - 2500 = 124000
    // top vehicles: X 1 100000 - 20000 = 80000; Y 1 50000; W 1 0 (its charge was canceled): left out
    expect(await financeOverview(db, f.ws, now)).to.deep.equal({
      collectedAllTime: 237500,
      collectedThisMonth: 130000,
      arOutstanding: 126500,
      arOverdue: 124000,
      depositsHeld: 45000,
      expenses: 26000,
      netProfitAllTime: 211500,
      aging: [
        { bucket: 'current', amount: 2500 },
        { bucket: '1-30', amount: 12000 },
        { bucket: '31-60', amount: 48000 },
        { bucket: '61+', amount: 64000 },
      ],
      monthly: [
        month('2026-06', 0, 0),
        month('2026-07', 0, 7000),
        month('2026-08', 40000, 0),
        month('2026-09', 0, 0),
        month('2026-10', 30000, 5000),
        month('2026-11', 130000, 10000),
      ],
      topVehicles: [
        {
          vehicle: { id: v.x, plate: 'X 1' },
          fleet: { id: fleetId, code: 'OWN', name: 'Own cars' },
          revenue: 80000,
          bookings: 1,
        },
        {
          vehicle: { id: v.y, plate: 'Y 1' },
          fleet: { id: fleetId, code: 'OWN', name: 'Own cars' },
          revenue: 50000,
          bookings: 1,
        },
      ],
    });
  });

  it('ages by the local date, not the UTC one', async () => {
    const { db } = await testDatabase();
    // 2026-11-21T20:30Z is 00:30 on the 22nd in Dubai but still the 21st in UTC: the same ageing as above
    const dubai = await financeOverview(db, f.ws, new Date('2026-11-21T20:30:00.000Z'));
    expect(dubai.aging.map((a) => a.amount)).to.deep.equal([2500, 12000, 48000, 64000]);
    // in UTC on the 21st: current also holds the invoice due the 21st (1000 + 1500 + 4000 = 6500); 1-30 holds
    // 23 Oct (29 days) and 22 Oct (30 days): 8000 + 16000 = 24000; 31-60: 23 Sep (59) and 22 Sep (60) =
    // 32000 + 64000 = 96000; 61+: nothing
    const utc = await financeOverview(db, { id: f.ws.id, timezone: 'UTC' }, new Date('2026-11-21T20:30:00.000Z'));
    expect(utc.aging.map((a) => a.amount)).to.deep.equal([6500, 24000, 96000, 0]);
    // overdue 24000 + 96000 = 120000; outstanding unchanged: 6500 + 120000 = 126500
    expect(utc.arOverdue).to.equal(120000);
    expect(utc.arOutstanding).to.equal(126500);
  });

  it('reports zeros, six empty months and no top vehicles for an empty workspace', async () => {
    const { db } = await testDatabase();
    const empty = await fixture(db);
    expect(await financeOverview(db, empty.ws, now)).to.deep.equal({
      collectedAllTime: 0,
      collectedThisMonth: 0,
      arOutstanding: 0,
      arOverdue: 0,
      depositsHeld: 0,
      expenses: 0,
      netProfitAllTime: 0,
      aging: [
        { bucket: 'current', amount: 0 },
        { bucket: '1-30', amount: 0 },
        { bucket: '31-60', amount: 0 },
        { bucket: '61+', amount: 0 },
      ],
      monthly: ['2026-06', '2026-07', '2026-08', '2026-09', '2026-10', '2026-11'].map((m) => month(m, 0, 0)),
      topVehicles: [],
    });
  });

  it('takes "this month" from a non-default time zone (America/New_York)', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'America/New_York' });
    // now 2026-12-01T03:00Z is 22:00 on 30 Nov in New York (EST, UTC-5): this month is still November
    const nyNow = new Date('2026-12-01T03:00:00.000Z');
    await g.payment({ amount: 1000, at: '2026-12-01T02:00:00Z' }); //   21:00 on 30 Nov: Nov
    await g.payment({ amount: 2000, at: '2026-12-01T05:30:00Z' }); //   00:30 on 1 Dec: Dec, not in the trend
    await g.payment({ amount: 4000, at: '2026-11-01T03:30:00Z' }); //   23:30 on 31 Oct (EDT, UTC-4): Oct
    await g.payment({ amount: 8000, at: '2026-11-01T04:00:00Z' }); //   00:00 on 1 Nov (EDT): Nov
    await g.payment({ amount: 16000, at: '2026-06-01T03:45:00Z' }); //  23:45 on 31 May (EDT): before the trend
    await g.payment({ amount: 32000, at: '2026-06-01T04:00:00Z' }); //  00:00 on 1 Jun: first month of the trend
    await g.expense({ amount: 300, date: '2026-11-30' });
    await g.expense({ amount: 700, date: '2026-12-01' });
    await g.invoice({ total: 100, dueDate: '2026-11-30' }); // due today in New York: current
    await g.invoice({ total: 200, dueDate: '2026-11-29' }); // 1 day past due
    const o = await financeOverview(db, g.ws, nyNow);
    // all time 1000 + 2000 + 4000 + 8000 + 16000 + 32000 = 63000; November 1000 + 8000 = 9000
    expect(o.collectedAllTime).to.equal(63000);
    expect(o.collectedThisMonth).to.equal(9000);
    expect(o.expenses).to.equal(1000);
    expect(o.netProfitAllTime).to.equal(62000);
    expect(o.monthly).to.deep.equal([
      month('2026-06', 32000, 0),
      month('2026-07', 0, 0),
      month('2026-08', 0, 0),
      month('2026-09', 0, 0),
      month('2026-10', 4000, 0),
      month('2026-11', 9000, 300),
    ]);
    expect(o.aging).to.deep.equal([
      { bucket: 'current', amount: 100 },
      { bucket: '1-30', amount: 200 },
      { bucket: '31-60', amount: 0 },
      { bucket: '61+', amount: 0 },
    ]);
    expect(o.arOverdue).to.equal(200);
    // the workspace moves to Dubai: its months are rebuilt on the new calendar. The same instant there is 07:00 on
    // 1 Dec: December, holding 02:00Z (06:00 local) and 05:30Z (09:30 local): 1000 + 2000 = 3000
    await db('workspaces').where({ id: g.ws.id }).update({ timezone: 'Asia/Dubai' });
    const dubai = await financeOverview(db, { id: g.ws.id, timezone: 'Asia/Dubai' }, nyNow);
    expect(dubai.collectedThisMonth).to.equal(3000);
    // 1 Nov 03:30Z and 04:00Z are 07:30 and 08:00 on 1 Nov in Dubai: November 4000 + 8000 = 12000; June is no longer
    // in the trend
    expect(dubai.monthly).to.deep.equal([
      month('2026-07', 0, 0),
      month('2026-08', 0, 0),
      month('2026-09', 0, 0),
      month('2026-10', 0, 0),
      month('2026-11', 12000, 300),
      month('2026-12', 3000, 700),
    ]);
    // a payment recorded after the move: 30 Nov 21:00Z is 01:00 on 1 Dec in Dubai, 16:00 on 30 Nov in New York
    await g.payment({ amount: 64000, at: '2026-11-30T21:00:00Z' });
    expect((await financeOverview(db, { id: g.ws.id, timezone: 'Asia/Dubai' }, nyNow)).collectedThisMonth).to.equal(
      67000,
    );
    // and back to New York: November 1000 + 8000 + 64000 = 73000, October 4000, June 32000 again
    await db('workspaces').where({ id: g.ws.id }).update({ timezone: 'America/New_York' });
    const back = await financeOverview(db, g.ws, nyNow);
    expect(back.monthly.map((m) => m.collected)).to.deep.equal([32000, 0, 0, 0, 4000, 73000]);
    expect(back.collectedAllTime).to.equal(127000);
  });

  it('splits months at local midnight in a zone 5:45 ahead (Asia/Kathmandu)', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db, { timezone: 'Asia/Kathmandu' });
    // now 2026-11-15T06:15Z is 12:00 on 15 Nov in Kathmandu; 1 Nov 00:00 local is 2026-10-31T18:15Z, 1 Dec 00:00
    // local is 2026-11-30T18:15Z. November holds [2026-10-31T18:15Z, 2026-11-30T18:15Z): the part-day
    // 31 Oct 18:15-24:00Z, the whole UTC days 1-29 Nov, and the part-day 30 Nov 00:00-18:15Z.
    const kNow = new Date('2026-11-15T06:15:00.000Z');
    await g.payment({ amount: 1, at: '2026-10-31T18:00:00Z' }); //      23:45 on 31 Oct local: October
    await g.payment({ amount: 2, at: '2026-10-31T18:15:00Z' }); //      00:00 on 1 Nov local: November (first part-day)
    await g.payment({ amount: 4, at: '2026-10-31T23:59:59Z' }); //      November (first part-day)
    await g.payment({ amount: 8, at: '2026-11-01T00:00:00Z' }); //      November (first whole UTC day)
    await g.payment({ amount: 16, at: '2026-11-29T23:59:59Z' }); //     November (last whole UTC day)
    await g.payment({ amount: 32, at: '2026-11-30T00:00:00Z' }); //     November (last part-day)
    await g.payment({ amount: 64, at: '2026-11-30T18:14:59Z' }); //     23:59:59 on 30 Nov local: November
    await g.payment({ amount: 128, at: '2026-11-30T18:15:00Z' }); //    00:00 on 1 Dec local: December, not in the trend
    await g.payment({ amount: 256, at: '2026-05-31T18:14:00Z' }); //    23:59 on 31 May local: before the trend
    await g.payment({ amount: 512, at: '2026-05-31T18:15:00Z' }); //    00:00 on 1 Jun local: first month of the trend
    await g.expense({ amount: 1000, date: '2026-11-01' });
    await g.expense({ amount: 2000, date: '2026-11-30' });
    await g.expense({ amount: 4000, date: '2026-10-31' });
    const o = await financeOverview(db, g.ws, kNow);
    expect(o.collectedThisMonth).to.equal(2 + 4 + 8 + 16 + 32 + 64);
    expect(o.collectedAllTime).to.equal(1023);
    expect(o.monthly).to.deep.equal([
      month('2026-06', 512, 0),
      month('2026-07', 0, 0),
      month('2026-08', 0, 0),
      month('2026-09', 0, 0),
      month('2026-10', 1, 4000),
      month('2026-11', 126, 3000),
    ]);
  });

  it('ranks at most 5 top vehicles by revenue, then plate, counting bookings that are not canceled', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db);
    const fleet = await g.fleet({ code: 'INV', name: 'Investor' });
    const earn = async (plate: string, charges: number[], refund = 0, canceledBookings = 0) => {
      const vehicleId = await g.vehicle({ fleetId: fleet, plate });
      for (const amount of charges) {
        const bookingId = await g.booking({
          vehicleId,
          status: 'completed',
          pickupAt: '2026-11-01T10:00:00Z',
          dropoffAt: '2026-11-02T10:00:00Z',
        });
        await g.payment({ bookingId, amount, at: '2026-11-02T10:00:00Z' });
        if (refund) await g.payment({ bookingId, kind: 'refund', amount: refund, at: '2026-11-03T10:00:00Z' });
      }
      for (let i = 0; i < canceledBookings; i++) {
        await g.booking({
          vehicleId,
          status: 'canceled',
          pickupAt: '2026-11-01T10:00:00Z',
          dropoffAt: '2026-11-02T10:00:00Z',
        });
      }
      return vehicleId;
    };
    const a100 = await earn('A 100', [30000, 20000]); //        50000, 2 bookings
    const a200 = await earn('A 200', [80000], 0, 1); //          80000, 1 booking (+1 canceled, not counted)
    const a300 = await earn('A 300', [50000]); //                50000: ties with A 100, after it by plate
    const a400 = await earn('A 400', [10000]); //                10000
    await earn('A 500', [5000]); //                              5000: sixth, cut
    const a600 = await earn('A 600', [90000], 20000); //         70000
    await earn('A 700', [10000], 10000); //                      0: never listed
    const row = (id: string, plate: string, revenue: number, bookings: number) => ({
      vehicle: { id, plate },
      fleet: { id: fleet, code: 'INV', name: 'Investor' },
      revenue,
      bookings,
    });
    expect((await financeOverview(db, g.ws, now)).topVehicles).to.deep.equal([
      row(a200, 'A 200', 80000, 1),
      row(a600, 'A 600', 70000, 1),
      row(a100, 'A 100', 50000, 2),
      row(a300, 'A 300', 50000, 1),
      row(a400, 'A 400', 10000, 1),
    ]);
  });
});
