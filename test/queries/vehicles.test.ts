import { expect } from 'chai';
import { executeArguments, preparedPlanCosts, preparedPlans, scansOf, testDatabase } from '../support/database.js';
import { fixture, type Fixture } from '../support/fixtures.js';
import {
  searchVehicles,
  searchVehiclesJson,
  vehicleSearchStatement,
  type VehiclePosition,
} from '../../src/queries/vehicles.js';

const now = new Date('2026-11-22T08:00:00.000Z');
const t = (iso: string) => new Date(iso);

describe('queries: vehicle search', () => {
  let f: Fixture;
  const ids: Record<string, string> = {};
  const plates = (result: { rows: { plate: string }[] }) => result.rows.map((r) => r.plate);

  before(async () => {
    const { db } = await testDatabase();
    f = await fixture(db);
    ids.camry = await f.vehicle({
      make: 'Toyota',
      model: 'Camry',
      plate: 'DXB A 12345',
      category: 'sedan',
      dailyRate: 18000,
    });
    ids.corolla = await f.vehicle({ make: 'Toyota', model: 'Corolla', plate: 'DXB B 777' });
    ids.patrol = await f.vehicle({
      make: 'Nissan',
      model: 'Patrol',
      plate: 'AUH 5 4321',
      category: 'suv',
      state: 'in_service',
    });
    ids.rio = await f.vehicle({ make: 'Kia', model: 'Rio', plate: 'SHJ 3 100', state: 'inactive' });
    ids.sunny2 = await f.vehicle({ make: 'Nissan', model: 'Sunny', plate: 'DXB Z 2' });
    ids.sunny1 = await f.vehicle({ make: 'Nissan', model: 'Sunny', plate: 'DXB Y 1' });
    // another workspace with a look-alike car (same plate, same make) never shows up
    const other = await fixture(db);
    await other.vehicle({ make: 'Toyota', model: 'Camry', plate: 'DXB A 12345' });
  });

  it('lists every vehicle ordered by make, model, plate, with no available key without a window', async () => {
    const { db } = await testDatabase();
    const result = await searchVehicles(db, f.ws, { limit: 20 }, now);
    // Kia Rio; Nissan Patrol; Nissan Sunny DXB Y 1 < DXB Z 2; Toyota Camry; Toyota Corolla
    expect(plates(result)).to.deep.equal(['SHJ 3 100', 'AUH 5 4321', 'DXB Y 1', 'DXB Z 2', 'DXB A 12345', 'DXB B 777']);
    expect(result.rows[4]).to.deep.equal({
      id: ids.camry,
      make: 'Toyota',
      model: 'Camry',
      plate: 'DXB A 12345',
      category: 'sedan',
      dailyRate: 18000,
    });
    for (const row of result.rows) expect(row).not.to.have.property('available');
  });

  it('sends make, model, plate and category escaped, byte for byte as JSON.stringify writes the page', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db);
    const car = {
      make: 'Citroën "2CV"',
      model: 'Méhari \\ 車',
      plate: 'DXB "Q" 7',
      category: 'tab\there',
      dailyRate: 4200,
    };
    const id = await g.vehicle(car);
    const expected = { rows: [{ id, ...car }] };
    expect(await searchVehiclesJson(db, g.ws, { limit: 5 }, now)).to.deep.equal({
      json: JSON.stringify(expected),
      next: null,
    });
    const window = { from: t('2026-12-01T06:00:00Z'), to: t('2026-12-02T06:00:00Z') };
    expect(await searchVehiclesJson(db, g.ws, { q: 'HARI', limit: 5, ...window }, now)).to.deep.equal({
      json: JSON.stringify({ rows: [{ id, ...car, available: true }] }),
      next: null,
    });
  });

  it('lists without a term on one plan whatever the workspace and page size, so PostgreSQL keeps it instead of planning each request', async () => {
    const { db } = await testDatabase();
    // a workspace of 400 vehicles, and statistics that know it: a page of 5 is then a small part of what the planner
    // expects of this workspace, and a different part of what it expects of an average one
    const g = await fixture(db);
    const fleet = await g.fleet();
    await db.raw(
      `INSERT INTO vehicles (id, workspace_id, fleet_id, make, model, plate, category, daily_rate, state)
      SELECT gen_random_uuid(), ?, ?, 'Make', 'Model', 'P ' || k, 'sedan', 15000, 'active' FROM generate_series(1, 400) k`,
      [g.ws.id, fleet],
    );
    await db.raw('ANALYZE vehicles');
    const { generic, custom } = await preparedPlanCosts(
      db,
      async (trx) => {
        expect(plates(await searchVehicles(trx, g.ws, { limit: 5 }, now))).to.deep.equal([
          'P 1',
          'P 10',
          'P 100',
          'P 101',
          'P 102',
        ]);
      },
      executeArguments(db, vehicleSearchStatement(g.ws, { limit: 5 }, now)),
    );
    // a page size or workspace the planner could see would make the generic plan (a tenth of the rows estimated for
    // an average workspace) look dearer than a page of 5, and every request would be planned again. PostgreSQL keeps the
    // generic plan while it costs less than a custom plan with its planning (plancache.c adds 1000 cpu_operator_cost per
    // relation to the custom plan's cost): equal up to a rounding of the statistics other tests' rows leave behind
    // (8.5 against 8.49 once), far inside that.
    expect(generic).to.be.closeTo(custom, custom * 0.01);
  });

  it('lists a later page on one plan too, whatever the position, from the position on', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db);
    const fleet = await g.fleet();
    await db.raw(
      `INSERT INTO vehicles (id, workspace_id, fleet_id, make, model, plate, category, daily_rate, state)
      SELECT gen_random_uuid(), ?, ?, 'Make', 'Model', 'P ' || k, 'sedan', 15000, 'active' FROM generate_series(1, 400) k`,
      [g.ws.id, fleet],
    );
    await db.raw('ANALYZE vehicles');
    const params = { limit: 3, after: ['Make', 'Model', 'P 200'] as VehiclePosition };
    expect(await searchVehicles(db, g.ws, params, now)).to.deep.include({ next: ['Make', 'Model', 'P 203'] });
    // on one connection, pages after other positions: past the first five executions PostgreSQL runs its generic plan
    // (the plans made for values cost a hair less, by the casts of the position that they fold, but not enough to
    // pay for planning each request)
    const trx = await db.transaction();
    try {
      const plans = async () =>
        new Map<string, { generic: number; custom: number }>(
          (await trx.raw('SELECT name, generic_plans, custom_plans FROM pg_prepared_statements')).rows.map(
            (r: { name: string; generic_plans: string; custom_plans: string }) => [
              r.name,
              { generic: Number(r.generic_plans), custom: Number(r.custom_plans) },
            ],
          ),
        );
      const before = await plans();
      for (let k = 0; k < 10; k++)
        await searchVehicles(trx, g.ws, { limit: 3, after: ['Make', 'Model', `P ${100 + 20 * k}`] }, now);
      const ran = [...(await plans())].map(([name, n]) => ({
        generic: n.generic - (before.get(name)?.generic ?? 0),
        custom: n.custom - (before.get(name)?.custom ?? 0),
      }));
      const [executed, ...others] = ran.filter((n) => n.generic + n.custom > 0);
      expect(others).to.deep.equal([]);
      // (the connection may have run it once before: then four plans for values, not five)
      expect(executed.generic + executed.custom).to.equal(10);
      expect(executed.generic).to.be.at.least(5);
    } finally {
      await trx.rollback();
    }
    expect(plates(await searchVehicles(db, g.ws, params, now))).to.deep.equal(['P 201', 'P 202', 'P 203']);
    // the position of a vehicle that is gone: the page starts after where it was
    expect(plates(await searchVehicles(db, g.ws, { limit: 2, after: ['Make', 'Model', 'P 2000'] }, now))).to.deep.equal(
      ['P 201', 'P 202'],
    );
    // after the last one: an empty last page
    expect(await searchVehicles(db, g.ws, { limit: 2, after: ['Make', 'Model', 'P 99'] }, now)).to.deep.equal({
      rows: [],
      next: null,
    });
  });

  it('caps the rows at limit, keeping the order', async () => {
    const { db } = await testDatabase();
    expect(plates(await searchVehicles(db, f.ws, { limit: 2 }, now))).to.deep.equal(['SHJ 3 100', 'AUH 5 4321']);
    expect(plates(await searchVehicles(db, f.ws, { q: 'nissan', limit: 2 }, now))).to.deep.equal([
      'AUH 5 4321',
      'DXB Y 1',
    ]);
  });

  it('matches make and model case-insensitively as substrings', async () => {
    const { db } = await testDatabase();
    expect(plates(await searchVehicles(db, f.ws, { q: 'TOYO', limit: 20 }, now))).to.deep.equal([
      'DXB A 12345',
      'DXB B 777',
    ]);
    expect(plates(await searchVehicles(db, f.ws, { q: 'roll', limit: 20 }, now))).to.deep.equal(['DXB B 777']);
    expect(plates(await searchVehicles(db, f.ws, { q: 'sUnNy', limit: 20 }, now))).to.deep.equal([
      'DXB Y 1',
      'DXB Z 2',
    ]);
    expect(plates(await searchVehicles(db, f.ws, { q: 'nothing like it', limit: 20 }, now))).to.deep.equal([]);
  });

  it('matches plates ignoring spaces and case, with or without spaces in q', async () => {
    const { db } = await testDatabase();
    for (const q of ['a12345', 'A 12345', 'dxb a 1234', 'DXBA12345', 'xba1', '  a 1 2 3  ']) {
      expect(plates(await searchVehicles(db, f.ws, { q, limit: 20 }, now)), q).to.deep.equal(['DXB A 12345']);
    }
    // '5 4' is in 'AUH 5 4321' (key auh54321) and, spaces removed, '54' is nowhere else
    expect(plates(await searchVehicles(db, f.ws, { q: '5 4', limit: 20 }, now))).to.deep.equal(['AUH 5 4321']);
    // 'b7' only in dxbb777
    expect(plates(await searchVehicles(db, f.ws, { q: 'B7', limit: 20 }, now))).to.deep.equal(['DXB B 777']);
  });

  it('treats % _ and \\ in q literally', async () => {
    const { db } = await testDatabase();
    const g = await fixture(db);
    await g.vehicle({ make: 'Tesla', model: 'Model_S', plate: 'T 1' });
    await g.vehicle({ make: 'Tesla', model: 'ModelXS', plate: 'T 2' });
    await g.vehicle({ make: 'Tesla', model: 'Roadster', plate: 'T 3' });
    await g.vehicle({ make: 'Odd\\Make', model: '100%', plate: 'T 4' });
    expect(plates(await searchVehicles(db, g.ws, { q: 'l_s', limit: 20 }, now))).to.deep.equal(['T 1']);
    expect(plates(await searchVehicles(db, g.ws, { q: '%', limit: 20 }, now))).to.deep.equal(['T 4']);
    expect(plates(await searchVehicles(db, g.ws, { q: '0%', limit: 20 }, now))).to.deep.equal(['T 4']);
    expect(plates(await searchVehicles(db, g.ws, { q: 'd\\m', limit: 20 }, now))).to.deep.equal(['T 4']);
    expect(plates(await searchVehicles(db, g.ws, { q: 'model%s', limit: 20 }, now))).to.deep.equal([]);
  });
  it('merges make, model and plate matches in make, model, plate order, each vehicle once, cut at limit', async () => {
    const { db } = await testDatabase();
    const h = await fixture(db);
    await h.vehicle({ make: 'Alfa', model: 'Giulia', plate: 'TOYO 1' }); // the plate matches, not the make
    await h.vehicle({ make: 'Toyota', model: 'Camry', plate: 'C 2' });
    await h.vehicle({ make: 'Toyota', model: 'Camry', plate: 'C 1' });
    await h.vehicle({ make: 'Toyota', model: 'Camry', plate: 'TOYO 3' }); // make and plate both match: listed once
    const yaris = await h.vehicle({ make: 'Toyota', model: 'Yaris', plate: 'Y 1' });
    await h.vehicle({ make: 'Toyota', model: 'Avalon', plate: 'A 9' });
    await h.vehicle({ make: 'Zeta', model: 'Toyotaish', plate: 'Z 1' }); // the model matches
    await h.vehicle({ make: 'Kia', model: 'Rio', plate: 'K 1' });
    const all = ['TOYO 1', 'A 9', 'C 1', 'C 2', 'TOYO 3', 'Y 1', 'Z 1'];
    expect(plates(await searchVehicles(db, h.ws, { q: 'toyo', limit: 20 }, now))).to.deep.equal(all);
    for (const limit of [1, 3, 5, 6]) {
      expect(plates(await searchVehicles(db, h.ws, { q: 'toyo', limit }, now)), `limit ${limit}`).to.deep.equal(
        all.slice(0, limit),
      );
    }
    // a short term (no trigram) and a plate-only one
    expect(plates(await searchVehicles(db, h.ws, { q: 'c', limit: 20 }, now))).to.deep.equal(['C 1', 'C 2', 'TOYO 3']);
    expect(plates(await searchVehicles(db, h.ws, { q: 'oyo 3', limit: 20 }, now))).to.deep.equal(['TOYO 3']);
    // a car that changes model is found under its new model only (vehicle_models follows it)
    await db('vehicles').where({ id: yaris }).update({ model: 'Corolla' });
    expect(plates(await searchVehicles(db, h.ws, { q: 'coroll', limit: 20 }, now))).to.deep.equal(['Y 1']);
    expect(plates(await searchVehicles(db, h.ws, { q: 'yaris', limit: 20 }, now))).to.deep.equal([]);
  });

  it("looks a plate term up in its own workspace's index entries only, however many of another workspace's plates match", async () => {
    const { db } = await testDatabase();
    // The searching workspace: 3 cars, 2 of them with "dxb" in the plate; a larger one: 3,000 cars, 100 of them with
    // "dxb"; statistics and the trigram index's own as VACUUM leaves them (the plan a table in use gets)
    const small = await fixture(db);
    await small.vehicle({ make: 'Toyota', model: 'Camry', plate: 'DXB A 1' });
    await small.vehicle({ make: 'Nissan', model: 'Sunny', plate: 'DXB B 2' });
    await small.vehicle({ make: 'Kia', model: 'Rio', plate: 'AUH C 3' });
    const large = await fixture(db);
    await db.raw(
      `INSERT INTO vehicles (id, workspace_id, fleet_id, make, model, plate, category, daily_rate, state)
      SELECT gen_random_uuid(), ?, ?, 'Kia', 'Rio', CASE WHEN k <= 100 THEN 'DXB X ' ELSE 'SHJ Y ' END || k, 'sedan', 15000, 'active'
      FROM generate_series(1, 3000) k`,
      [large.ws.id, await large.fleet()],
    );
    await db.raw('VACUUM (ANALYZE) vehicles, vehicle_models');
    const params = { q: 'dxb', limit: 50 };
    expect(plates(await searchVehicles(db, small.ws, params, now))).to.deep.equal(['DXB B 2', 'DXB A 1']);
    // Whichever plan the API's connection runs the statement with, no scan of vehicles reads a row or an index entry
    // of the other workspace: a scan of the trigram index returns the searching workspace's 2 matches, any other scan
    // reads at most its 3 cars. On an index of plates alone, the trigram index returned the other's 100 matches.
    for (const [which, plan] of Object.entries(
      await preparedPlans(db, vehicleSearchStatement(small.ws, params, now)),
    )) {
      const scans = await scansOf(db, plan, 'vehicles');
      expect(scans, which).not.to.be.empty;
      expect(
        scans.filter((s) => s.read > (s.trigram ? 2 : 3)),
        which,
      ).to.deep.equal([]);
    }
  });

  it('treats % and _ in a plate term literally, with or without the trigram index', async () => {
    const { db } = await testDatabase();
    const h = await fixture(db);
    await h.vehicle({ make: 'Kia', model: 'Rio', plate: 'AB_CD%123' });
    await h.vehicle({ make: 'Kia', model: 'Rio', plate: 'ABXCDX123' });
    // '123' can use the trigram index, 'd%1' cannot; both only match the literal characters
    expect(plates(await searchVehicles(db, h.ws, { q: 'd%123', limit: 20 }, now))).to.deep.equal(['AB_CD%123']);
    expect(plates(await searchVehicles(db, h.ws, { q: 'b_c', limit: 20 }, now))).to.deep.equal(['AB_CD%123']);
    expect(plates(await searchVehicles(db, h.ws, { q: 'd%1', limit: 20 }, now))).to.deep.equal(['AB_CD%123']);
  });
});

describe('queries: vehicle availability for a window', () => {
  // The window [2026-11-23T11:00Z, 2026-11-24T11:00Z); now is 2026-11-22T08:00Z
  const from = t('2026-11-23T11:00:00.000Z');
  const to = t('2026-11-24T11:00:00.000Z');
  let f: Fixture;

  async function availability(
    window: { from: Date; to: Date },
    q?: string,
  ): Promise<Record<string, boolean | undefined>> {
    const { db } = await testDatabase();
    const result = await searchVehicles(db, f.ws, { q, limit: 50, ...window }, now);
    return Object.fromEntries(result.rows.map((r) => [r.plate, r.available]));
  }

  before(async () => {
    const { db } = await testDatabase();
    f = await fixture(db);
    const car = (plate: string, state: 'active' | 'in_service' | 'inactive' = 'active') =>
      f.vehicle({ make: 'Car', model: plate, plate, state });
    await car('FREE');
    // a return at 11:00 does not clash with a pickup at 11:00, in either direction
    await f.booking({
      vehicleId: await car('ENDS AT FROM'),
      status: 'confirmed',
      pickupAt: '2026-11-22T11:00:00Z',
      dropoffAt: '2026-11-23T11:00:00Z',
    });
    await f.booking({
      vehicleId: await car('STARTS AT TO'),
      status: 'confirmed',
      pickupAt: '2026-11-24T11:00:00Z',
      dropoffAt: '2026-11-26T11:00:00Z',
    });
    await f.booking({
      vehicleId: await car('CONFIRMED OVERLAP'),
      status: 'confirmed',
      pickupAt: '2026-11-23T10:00:00Z',
      dropoffAt: '2026-11-23T11:00:00.001Z',
    });
    await f.booking({
      vehicleId: await car('ACTIVE OVERLAP'),
      status: 'active',
      pickupAt: '2026-11-20T10:00:00Z',
      dropoffAt: '2026-11-23T12:00:00Z',
    });
    await f.booking({
      vehicleId: await car('INSIDE'),
      status: 'confirmed',
      pickupAt: '2026-11-23T15:00:00Z',
      dropoffAt: '2026-11-23T16:00:00Z',
    });
    await f.booking({
      vehicleId: await car('AROUND'),
      status: 'confirmed',
      pickupAt: '2026-11-01T15:00:00Z',
      dropoffAt: '2026-12-01T16:00:00Z',
    });
    // pending, completed and canceled bookings never block
    const other = await car('OTHER STATUSES');
    for (const status of ['pending', 'completed', 'canceled'] as const) {
      await f.booking({
        vehicleId: other,
        status,
        pickupAt: '2026-11-23T09:00:00Z',
        dropoffAt: '2026-11-24T09:00:00Z',
      });
    }
    // a car in the workshop or retired is never available, even with nothing booked
    await car('IN SERVICE', 'in_service');
    await car('INACTIVE', 'inactive');
    // maintenance blocks are half-open too
    await f.maintenance({
      vehicleId: await car('MAINTENANCE OVERLAP'),
      startsAt: '2026-11-24T10:59:00Z',
      endsAt: '2026-11-25T10:00:00Z',
    });
    await f.maintenance({
      vehicleId: await car('MAINTENANCE BEFORE'),
      startsAt: '2026-11-22T10:00:00Z',
      endsAt: '2026-11-23T11:00:00Z',
    });
    await f.maintenance({
      vehicleId: await car('MAINTENANCE AFTER'),
      startsAt: '2026-11-24T11:00:00Z',
      endsAt: '2026-11-25T11:00:00Z',
    });
    // late: active, due back 2026-11-21T10:00Z, before now; it counts as out until now (2026-11-22T08:00Z)
    await f.booking({
      vehicleId: await car('LATE'),
      status: 'active',
      pickupAt: '2026-11-19T10:00:00Z',
      dropoffAt: '2026-11-21T10:00:00Z',
    });
    // returned on time (completed) long before: free
    await f.booking({
      vehicleId: await car('RETURNED'),
      status: 'completed',
      pickupAt: '2026-11-19T10:00:00Z',
      dropoffAt: '2026-11-21T10:00:00Z',
    });
    // the other workspace's booking on a look-alike plate blocks nothing here
    const g = await fixture(db);
    await g.booking({
      vehicleId: await g.vehicle({ make: 'Car', model: 'FREE', plate: 'FREE' }),
      status: 'active',
      pickupAt: from,
      dropoffAt: to,
    });
  });

  it('is true only for active cars with no confirmed/active booking and no maintenance in [from, to)', async () => {
    expect(await availability({ from, to })).to.deep.equal({
      'ACTIVE OVERLAP': false,
      AROUND: false,
      'CONFIRMED OVERLAP': false,
      'ENDS AT FROM': true,
      FREE: true,
      'IN SERVICE': false,
      INACTIVE: false,
      INSIDE: false,
      LATE: true, // the window starts after now: the late car's range [pickup, now) ends before it
      'MAINTENANCE AFTER': true,
      'MAINTENANCE BEFORE': true,
      'MAINTENANCE OVERLAP': false,
      'OTHER STATUSES': true,
      RETURNED: true,
      'STARTS AT TO': true,
    });
  });

  it('keeps a car that is late back unavailable after its dropoff, up to now', async () => {
    // [2026-11-21T12:00Z, 2026-11-21T18:00Z): after the late car's dropoff (10:00) but before now -> still out
    let result = await availability({ from: t('2026-11-21T12:00:00Z'), to: t('2026-11-21T18:00:00Z') }, 'LATE');
    expect(result).to.deep.equal({ LATE: false });
    // a window holding now
    result = await availability({ from: t('2026-11-22T07:00:00Z'), to: t('2026-11-22T09:00:00Z') }, 'LATE');
    expect(result).to.deep.equal({ LATE: false });
    // a window that ends at its pickup: free (half-open)
    result = await availability({ from: t('2026-11-18T10:00:00Z'), to: t('2026-11-19T10:00:00Z') }, 'LATE');
    expect(result).to.deep.equal({ LATE: true });
    // the same window for the car that was returned: free
    result = await availability({ from: t('2026-11-21T12:00:00Z'), to: t('2026-11-21T18:00:00Z') }, 'RETURNED');
    expect(result).to.deep.equal({ RETURNED: true });
  });

  it('applies the half-open rule to a window that ends where a booking starts', async () => {
    // ends exactly at INSIDE's pickup (15:00): free; one millisecond later: taken
    expect(
      await availability({ from: t('2026-11-23T12:00:00Z'), to: t('2026-11-23T15:00:00Z') }, 'INSIDE'),
    ).to.deep.equal({ INSIDE: true });
    expect(
      await availability({ from: t('2026-11-23T12:00:00Z'), to: t('2026-11-23T15:00:00.001Z') }, 'INSIDE'),
    ).to.deep.equal({ INSIDE: false });
    // starts exactly at its dropoff (16:00): free
    expect(
      await availability({ from: t('2026-11-23T16:00:00Z'), to: t('2026-11-23T17:00:00Z') }, 'INSIDE'),
    ).to.deep.equal({ INSIDE: true });
  });

  it('works out availability for the rows the limit returns', async () => {
    const { db } = await testDatabase();
    const result = await searchVehicles(db, f.ws, { limit: 3, from, to }, now);
    // ordered by make (all Car), model = plate: ACTIVE OVERLAP, AROUND, CONFIRMED OVERLAP
    expect(result.rows.map((r) => [r.plate, r.available])).to.deep.equal([
      ['ACTIVE OVERLAP', false],
      ['AROUND', false],
      ['CONFIRMED OVERLAP', false],
    ]);
  });
});
