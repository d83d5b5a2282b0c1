import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { fixture } from '../support/fixtures.js';
import { fleetSummary } from '../../src/queries/fleet.js';
import { listFleets } from '../../src/queries/fleets.js';

const now = new Date('2026-11-22T08:00:00.000Z');
const day = (d: number, h = 10) => new Date(Date.UTC(2026, 10, d, h));

describe('queries: fleet summary', () => {
  it('derives each vehicle status from its state and its active bookings', async () => {
    const { db } = await testDatabase();
    const f = await fixture(db);
    const rented1 = await f.vehicle();
    await f.booking({ vehicleId: rented1, status: 'active', pickupAt: day(20), dropoffAt: day(25) });
    // two active bookings on one car (bad data) still make one rented car
    const rented2 = await f.vehicle();
    await f.booking({ vehicleId: rented2, status: 'active', pickupAt: day(18), dropoffAt: day(21) });
    await f.booking({ vehicleId: rented2, status: 'active', pickupAt: day(21), dropoffAt: day(26) });
    // confirmed, pending, completed and canceled bookings do not make a car rented
    const booked = await f.vehicle();
    await f.booking({ vehicleId: booked, status: 'confirmed', pickupAt: day(21), dropoffAt: day(24) });
    await f.booking({ vehicleId: booked, status: 'pending', pickupAt: day(21), dropoffAt: day(24) });
    const returned = await f.vehicle();
    await f.booking({ vehicleId: returned, status: 'completed', pickupAt: day(10), dropoffAt: day(12) });
    await f.booking({ vehicleId: returned, status: 'canceled', pickupAt: day(21), dropoffAt: day(24) });
    // a car in the workshop is in_service even with an active booking on record
    const workshop = await f.vehicle({ state: 'in_service' });
    await f.booking({ vehicleId: workshop, status: 'active', pickupAt: day(20), dropoffAt: day(25) });
    await f.vehicle({ state: 'inactive' });
    await f.vehicle();
    await f.vehicle();

    // total 8; rented: rented1, rented2 = 2; in_service 1; inactive 1; available: booked, returned, 2 idle = 4
    // utilization = 2 / (8 - 1 - 1) = 2/6 = 0.33333 -> 0.3333
    expect(await fleetSummary(db, f.ws, now)).to.deep.equal({
      total: 8,
      byStatus: { available: 4, rented: 2, in_service: 1, inactive: 1 },
      available: 4,
      rented: 2,
      inService: 1,
      utilization: 0.3333,
    });
  });

  it('reports zeros, and utilization 0, for an empty workspace or one with no active cars', async () => {
    const { db } = await testDatabase();
    const empty = await fixture(db);
    const zeros = {
      total: 0,
      byStatus: { available: 0, rented: 0, in_service: 0, inactive: 0 },
      available: 0,
      rented: 0,
      inService: 0,
      utilization: 0,
    };
    expect(await fleetSummary(db, empty.ws, now)).to.deep.equal(zeros);

    const parked = await fixture(db);
    await parked.vehicle({ state: 'in_service' });
    await parked.vehicle({ state: 'inactive' });
    // denominator 2 - 1 - 1 = 0 -> 0
    expect(await fleetSummary(db, parked.ws, now)).to.deep.equal({
      ...zeros,
      total: 2,
      byStatus: { available: 0, rented: 0, in_service: 1, inactive: 1 },
      inService: 1,
    });
  });

  it('rounds utilization to 4 decimals and reaches 1 when every active car is out', async () => {
    const { db } = await testDatabase();
    const f = await fixture(db);
    for (let i = 0; i < 2; i++) {
      await f.booking({ vehicleId: await f.vehicle(), status: 'active', pickupAt: day(20), dropoffAt: day(25) });
    }
    await f.vehicle({ state: 'inactive' });
    // 2 / (3 - 0 - 1) = 1
    expect((await fleetSummary(db, f.ws, now)).utilization).to.equal(1);
    await f.vehicle();
    // 2 / 3 = 0.666666 -> 0.6667
    expect((await fleetSummary(db, f.ws, now)).utilization).to.equal(0.6667);
  });

  it('follows bookings going out, coming back, moving car and being deleted, and cars changing state (running totals)', async () => {
    const { db } = await testDatabase();
    const f = await fixture(db);
    const [v1, v2, v3] = [await f.vehicle(), await f.vehicle(), await f.vehicle()];
    const summary = async () => {
      const s = await fleetSummary(db, f.ws, now);
      return [s.available, s.rented, s.inService, s.utilization];
    };
    const b1 = await f.booking({ vehicleId: v1, status: 'confirmed', pickupAt: day(22), dropoffAt: day(25) });
    // 3 active cars, none out: [available, rented, inService, utilization]
    expect(await summary()).to.deep.equal([3, 0, 0, 0]);
    await db('bookings').where({ id: b1 }).update({ status: 'active' });
    expect(await summary()).to.deep.equal([2, 1, 0, 0.3333]);
    // a second active booking on v1 (bad data) leaves one car out; one on v2 makes two
    const b2 = await f.booking({ vehicleId: v1, status: 'active', pickupAt: day(20), dropoffAt: day(23) });
    const b3 = await f.booking({ vehicleId: v2, status: 'active', pickupAt: day(20), dropoffAt: day(23) });
    expect(await summary()).to.deep.equal([1, 2, 0, 0.6667]);
    // v1 back from b1, still out on b2
    await db('bookings').where({ id: b1 }).update({ status: 'completed' });
    expect(await summary()).to.deep.equal([1, 2, 0, 0.6667]);
    // b2 moved from v1 to v3 (one statement: -1 on v1, +1 on v3)
    await db('bookings').where({ id: b2 }).update({ vehicle_id: v3 });
    expect(await summary()).to.deep.equal([1, 2, 0, 0.6667]);
    expect(await db('vehicles').whereIn('id', [v1, v2, v3]).pluck('active_bookings')).to.have.members([0, 1, 1]);
    // v2 goes to the workshop while out: in_service, no longer rented; back to active: rented again
    await db('vehicles').where({ id: v2 }).update({ state: 'in_service' });
    expect(await summary()).to.deep.equal([1, 1, 1, 0.5]);
    await db('vehicles').where({ id: v2 }).update({ state: 'active' });
    expect(await summary()).to.deep.equal([1, 2, 0, 0.6667]);
    // deleted, and both returned in one statement
    await db('bookings').where({ id: b3 }).delete();
    expect(await summary()).to.deep.equal([2, 1, 0, 0.3333]);
    await f.booking({ vehicleId: v1, status: 'active', pickupAt: day(21), dropoffAt: day(23) });
    await db('bookings').where({ workspace_id: f.ws.id, status: 'active' }).update({ status: 'completed' });
    expect(await summary()).to.deep.equal([3, 0, 0, 0]);
    // the kept totals equal a fresh count
    const fresh = await db.raw(
      `SELECT count(*) FILTER (WHERE v.state = 'active' AND EXISTS (SELECT 1 FROM bookings b WHERE b.vehicle_id = v.id AND b.status = 'active')) AS rented,
              count(*) FILTER (WHERE v.active_bookings <> (SELECT count(*) FROM bookings b WHERE b.vehicle_id = v.id AND b.status = 'active')) AS wrong
       FROM vehicles v WHERE v.workspace_id = ?`,
      [f.ws.id],
    );
    expect(fresh.rows[0]).to.deep.equal({ rented: 0, wrong: 0 });
  });

  it("ignores another workspace's vehicles and bookings", async () => {
    const { db } = await testDatabase();
    const a = await fixture(db);
    const b = await fixture(db);
    await a.booking({
      vehicleId: await a.vehicle({ plate: 'DXB 1' }),
      status: 'active',
      pickupAt: day(20),
      dropoffAt: day(25),
    });
    await a.vehicle({ plate: 'DXB 2' });
    for (const plate of ['DXB 1', 'DXB 2', 'DXB 3']) {
      await b.booking({
        vehicleId: await b.vehicle({ plate }),
        status: 'active',
        pickupAt: day(20),
        dropoffAt: day(25),
      });
    }
    await b.vehicle({ state: 'in_service' });
    // a: total 2, rented 1, available 1 -> 1 / 2 = 0.5
    expect(await fleetSummary(db, a.ws, now)).to.deep.equal({
      total: 2,
      byStatus: { available: 1, rented: 1, in_service: 0, inactive: 0 },
      available: 1,
      rented: 1,
      inService: 0,
      utilization: 0.5,
    });
  });
});

describe('queries: fleets', () => {
  it("lists the workspace's fleets ordered by code, and no one else's", async () => {
    const { db } = await testDatabase();
    const a = await fixture(db);
    const b = await fixture(db);
    const west = await a.fleet({ code: 'WEST', name: 'West owner' });
    const alpha = await a.fleet({ code: 'ALPHA', name: 'Alpha cars' });
    const main = await a.fleet({ code: 'MAIN', name: 'Main' });
    await b.fleet({ code: 'AAA', name: 'Other workspace' });
    expect(await listFleets(db, a.ws, now)).to.deep.equal({
      rows: [
        { id: alpha, code: 'ALPHA', name: 'Alpha cars' },
        { id: main, code: 'MAIN', name: 'Main' },
        { id: west, code: 'WEST', name: 'West owner' },
      ],
    });
    const empty = await fixture(db);
    expect(await listFleets(db, empty.ws, now)).to.deep.equal({ rows: [] });
  });
});
