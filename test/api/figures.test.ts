import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { startApi, type TestApi } from '../support/api.js';
import { fixture } from '../support/fixtures.js';
import { createApiKey } from '../../src/core/workspaces.js';
import { idOf, operator } from '../support/actors.js';

// Every GET operation through HTTP on one small workspace, with the figures worked out by hand below. A second
// workspace holds look-alike data (same names and plates, every amount doubled): each key sees only its own.
// The clock: 2026-11-22T08:00:00Z, which is 12:00 on Sunday 22 November 2026 in Asia/Dubai (UTC+4).
const NOW = new Date('2026-11-22T08:00:00.000Z');
const PII = { phone: '+971 50 123 4567', email: 'alice.mansoori@example.ae', idDocument: '784-1985-1234567-1' };

interface Loaded {
  key: string;
  ids: Record<string, string>;
}

async function loadWorkspace(m: number): Promise<Loaded> {
  const { db } = await testDatabase();
  const f = await fixture(db, { timezone: 'Asia/Dubai' });
  const fleet = await f.fleet({ code: 'DXB', name: 'Dubai Fleet' });
  const v = {
    camry: await f.vehicle({
      fleetId: fleet,
      make: 'Toyota',
      model: 'Camry',
      plate: 'Dubai A 111',
      dailyRate: 15000 * m,
    }),
    patrol: await f.vehicle({
      fleetId: fleet,
      make: 'Nissan',
      model: 'Patrol',
      plate: 'Dubai B 222',
      dailyRate: 60000 * m,
    }),
    picanto: await f.vehicle({
      fleetId: fleet,
      make: 'Kia',
      model: 'Picanto',
      plate: 'Dubai C 333',
      state: 'in_service',
    }),
    focus: await f.vehicle({ fleetId: fleet, make: 'Ford', model: 'Focus', plate: 'Dubai D 444', state: 'inactive' }),
    civic: await f.vehicle({ fleetId: fleet, make: 'Honda', model: 'Civic', plate: 'Dubai E 555' }),
  };
  const alice = await f.customer({ name: 'Alice Mansoori' });
  const bob = await f.customer({ name: 'Bob Fernandes' });
  await db('customers')
    .where({ id: alice })
    .update({ phone: PII.phone, email: PII.email, id_document: PII.idDocument });

  // B1 active, due back today 18:00 Dubai; B2 active and late (due back yesterday); B3 confirmed, picked up
  // today 14:00 Dubai; B4 completed; B5 canceled; B6 pending.
  const b1 = await f.booking({
    vehicleId: v.camry,
    customerId: alice,
    status: 'active',
    pickupAt: '2026-11-20T06:00:00Z',
    dropoffAt: '2026-11-22T14:00:00Z',
    amount: 45000 * m,
  });
  const b2 = await f.booking({
    vehicleId: v.patrol,
    customerId: bob,
    status: 'active',
    pickupAt: '2026-11-15T06:00:00Z',
    dropoffAt: '2026-11-21T06:00:00Z',
    amount: 360000 * m,
  });
  const b3 = await f.booking({
    vehicleId: v.civic,
    customerId: alice,
    status: 'confirmed',
    pickupAt: '2026-11-22T10:00:00Z',
    dropoffAt: '2026-11-25T10:00:00Z',
    amount: 60000 * m,
  });
  const b4 = await f.booking({
    vehicleId: v.camry,
    customerId: bob,
    status: 'completed',
    pickupAt: '2026-11-10T06:00:00Z',
    dropoffAt: '2026-11-12T06:00:00Z',
    amount: 30000 * m,
  });
  await f.booking({
    vehicleId: v.civic,
    customerId: bob,
    status: 'canceled',
    pickupAt: '2026-11-30T06:00:00Z',
    dropoffAt: '2026-12-01T06:00:00Z',
    amount: 10000 * m,
  });
  await f.booking({
    vehicleId: v.patrol,
    customerId: alice,
    status: 'pending',
    pickupAt: '2026-12-01T06:00:00Z',
    dropoffAt: '2026-12-03T06:00:00Z',
    amount: 120000 * m,
  });

  // I1 due today (current), I2 21 days past due (1-30), I3 82 days (61+), I4 void, I5 38 days (31-60).
  const i1 = await f.invoice({ customerId: alice, bookingId: b1, total: 45000 * m, dueDate: '2026-11-22' });
  const i2 = await f.invoice({ customerId: bob, bookingId: b2, total: 360000 * m, dueDate: '2026-11-01' });
  await f.invoice({ customerId: bob, bookingId: b4, total: 30000 * m, dueDate: '2026-09-01' });
  await f.invoice({ customerId: alice, total: 99999 * m, dueDate: '2026-10-01', status: 'void' });
  const i5 = await f.invoice({ customerId: alice, total: 5000 * m, dueDate: '2026-10-15', purpose: 'damage' });

  await f.payment({ kind: 'charge', amount: 20000 * m, bookingId: b1, invoiceId: i1, at: '2026-11-20T06:00:00Z' });
  await f.payment({ kind: 'charge', amount: 100000 * m, bookingId: b2, invoiceId: i2, at: '2026-10-28T10:00:00Z' });
  await f.payment({ kind: 'refund', amount: 10000 * m, bookingId: b2, invoiceId: i2, at: '2026-11-02T10:00:00Z' });
  await f.payment({ kind: 'charge', status: 'canceled', amount: 5000 * m, invoiceId: i5, at: '2026-11-03T10:00:00Z' });
  await f.payment({
    kind: 'deposit',
    amount: 100000 * m,
    customerId: alice,
    bookingId: b1,
    at: '2026-11-20T06:00:00Z',
  });
  await f.payment({ kind: 'deposit', amount: 50000 * m, customerId: bob, bookingId: b4, at: '2026-11-10T06:00:00Z' });
  await f.payment({
    kind: 'deposit_release',
    amount: 50000 * m,
    customerId: bob,
    bookingId: b4,
    at: '2026-11-12T06:00:00Z',
  });
  await f.expense({ amount: 8000 * m, date: '2026-11-05', vehicleId: v.camry });
  await f.expense({ amount: 12000 * m, date: '2026-08-15', category: 'maintenance', vehicleId: v.patrol });

  const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, f.slug) });
  return { key, ids: { ...v, alice, bob, b1, b2, b3, fleet } };
}

describe('the figures of every GET operation, through HTTP', () => {
  let api: TestApi;
  let one: Loaded;
  let two: Loaded;

  before(async () => {
    one = await loadWorkspace(1);
    two = await loadWorkspace(2);
    api = await startApi({ now: NOW });
  });
  after(() => api.close());

  for (const m of [1, 2]) {
    const ws = () => (m === 1 ? one : two);
    describe(`workspace ${m} (amounts x${m})`, () => {
      it('fleet summary', async () => {
        // 5 cars: Picanto in service, Focus inactive, Camry (B1) and Patrol (B2, late) rented, Civic available.
        // utilization = 2 / (5 - 1 - 1) = 0.6667
        const res = await api.get('/v1/fleet/summary', ws().key);
        expect(res.body).to.deep.equal({
          total: 5,
          byStatus: { available: 1, rented: 2, in_service: 1, inactive: 1 },
          available: 1,
          rented: 2,
          inService: 1,
          utilization: 0.6667,
        });
      });

      it('fleets', async () => {
        const res = await api.get('/v1/fleets', ws().key);
        expect(res.body).to.deep.equal({ rows: [{ id: ws().ids.fleet, code: 'DXB', name: 'Dubai Fleet' }] });
      });

      it('booking summary', async () => {
        // upcoming: B3 (pickup 10:00Z > now); dueReturns: B1 (18:00 Dubai today); overdue: B2.
        // revenueCollected: 20000 (B1) + 100000 - 10000 (B2) = 110000; the canceled charge has no booking
        // and deposits never count.
        const res = await api.get('/v1/bookings/summary', ws().key);
        expect(res.body).to.deep.equal({
          byStatus: { pending: 1, confirmed: 1, active: 2, completed: 1, canceled: 1 },
          total: 6,
          active: 2,
          upcoming: 1,
          dueReturns: 1,
          overdue: 1,
          revenueCollected: 110000 * m,
        });
      });

      it('finance overview', async () => {
        // collected: 20000 + 100000 - 10000 = 110000 (the canceled 5000 counts nowhere); this month (November,
        // Dubai): 20000 - 10000 = 10000. Open balances: I1 45000-20000 = 25000 (due today: current), I2
        // 360000-90000 = 270000 (21 days: 1-30), I3 30000 (82 days: 61+), I5 5000 (38 days: 31-60); the void
        // I4 counts nowhere. arOutstanding 330000, arOverdue 305000. Deposits held: 100000 + 50000 - 50000.
        // Expenses 8000 + 12000 = 20000; net profit 110000 - 20000 = 90000.
        // Top vehicles: Patrol 90000 (B2; B2 and B6 not canceled), Camry 20000 (B1, B4); Civic has none.
        const res = await api.get('/v1/finance/overview', ws().key);
        expect(res.body).to.deep.equal({
          collectedAllTime: 110000 * m,
          collectedThisMonth: 10000 * m,
          arOutstanding: 330000 * m,
          arOverdue: 305000 * m,
          depositsHeld: 100000 * m,
          expenses: 20000 * m,
          netProfitAllTime: 90000 * m,
          aging: [
            { bucket: 'current', amount: 25000 * m },
            { bucket: '1-30', amount: 270000 * m },
            { bucket: '31-60', amount: 5000 * m },
            { bucket: '61+', amount: 30000 * m },
          ],
          monthly: [
            { month: '2026-06', collected: 0, expenses: 0, net: 0 },
            { month: '2026-07', collected: 0, expenses: 0, net: 0 },
            { month: '2026-08', collected: 0, expenses: 12000 * m, net: -12000 * m },
            { month: '2026-09', collected: 0, expenses: 0, net: 0 },
            { month: '2026-10', collected: 100000 * m, expenses: 0, net: 100000 * m },
            { month: '2026-11', collected: 10000 * m, expenses: 8000 * m, net: 2000 * m },
          ],
          topVehicles: [
            {
              vehicle: { id: ws().ids.patrol, plate: 'Dubai B 222' },
              fleet: { id: ws().ids.fleet, code: 'DXB', name: 'Dubai Fleet' },
              revenue: 90000 * m,
              bookings: 2,
            },
            {
              vehicle: { id: ws().ids.camry, plate: 'Dubai A 111' },
              fleet: { id: ws().ids.fleet, code: 'DXB', name: 'Dubai Fleet' },
              revenue: 20000 * m,
              bookings: 2,
            },
          ],
        });
      });

      it('receivables, with search and limit leaving the totals alone', async () => {
        // Bob: billed 360000 + 30000, collected 90000, outstanding 270000 (1-30) + 30000 (61+).
        // Alice: billed 45000 + 5000 (void excluded), collected 20000, outstanding 25000 (current) + 5000 (31-60).
        const bob = {
          customerId: ws().ids.bob,
          name: 'Bob Fernandes',
          billed: 390000 * m,
          collected: 90000 * m,
          outstanding: 300000 * m,
          current: 0,
          d1_30: 270000 * m,
          d31_60: 0,
          d60p: 30000 * m,
          openInvoices: 2,
        };
        const alice = {
          customerId: ws().ids.alice,
          name: 'Alice Mansoori',
          billed: 50000 * m,
          collected: 20000 * m,
          outstanding: 30000 * m,
          current: 25000 * m,
          d1_30: 0,
          d31_60: 5000 * m,
          d60p: 0,
          openInvoices: 2,
        };
        const totals = {
          billed: 440000 * m,
          collected: 110000 * m,
          outstanding: 330000 * m,
          current: 25000 * m,
          d1_30: 270000 * m,
          d31_60: 5000 * m,
          d60p: 30000 * m,
          openInvoices: 4,
          customers: 2,
        };
        expect((await api.get('/v1/receivables', ws().key)).body).to.deep.equal({
          rows: [bob, alice],
          totals,
          nextCursor: null,
        });
        expect((await api.get('/v1/receivables?search=ALI', ws().key)).body).to.deep.equal({
          rows: [alice],
          totals,
          nextCursor: null,
        });
        // a page of one, then the next: the same totals on each, and no cursor after the last
        const first = (await api.get('/v1/receivables?limit=1', ws().key)).body;
        expect({ ...first, nextCursor: typeof first.nextCursor }).to.deep.equal({
          rows: [bob],
          totals,
          nextCursor: 'string',
        });
        expect((await api.get(`/v1/receivables?limit=1&cursor=${first.nextCursor}`, ws().key)).body).to.deep.equal({
          rows: [alice],
          totals,
          nextCursor: null,
        });
      });

      it("today's operations", async () => {
        // Handover: B3 at 14:00 Dubai (no invoice: nothing due). Return: B1 at 18:00 Dubai, I1 has 25000 open.
        const res = await api.get('/v1/operations/today', ws().key);
        expect(res.body).to.deep.equal({
          handovers: [
            {
              bookingId: ws().ids.b3,
              customer: { id: ws().ids.alice, name: 'Alice Mansoori' },
              vehicle: { id: ws().ids.civic, plate: 'Dubai E 555' },
              time: '2026-11-22T10:00:00.000Z',
              amount: 60000 * m,
              balanceDue: 0,
            },
          ],
          returns: [
            {
              bookingId: ws().ids.b1,
              customer: { id: ws().ids.alice, name: 'Alice Mansoori' },
              vehicle: { id: ws().ids.camry, plate: 'Dubai A 111' },
              time: '2026-11-22T14:00:00.000Z',
              amount: 45000 * m,
              balanceDue: 25000 * m,
            },
          ],
        });
      });

      it('vehicle search with and without a window', async () => {
        const all = await api.get('/v1/vehicles', ws().key);
        expect(all.body.rows.map((r: { plate: string }) => r.plate)).to.deep.equal([
          'Dubai D 444',
          'Dubai E 555',
          'Dubai C 333',
          'Dubai B 222',
          'Dubai A 111',
        ]);
        expect(all.body.rows[4]).to.deep.equal({
          id: ws().ids.camry,
          make: 'Toyota',
          model: 'Camry',
          plate: 'Dubai A 111',
          category: 'sedan',
          dailyRate: 15000 * m,
        });
        expect(
          (await api.get('/v1/vehicles?q=dubaia1', ws().key)).body.rows.map((r: { id: string }) => r.id),
        ).to.deep.equal([ws().ids.camry]);
        expect(all.body.nextCursor).to.equal(null);
        const two = await api.get('/v1/vehicles?limit=2', ws().key);
        expect(two.body.rows.map((r: { plate: string }) => r.plate)).to.deep.equal(['Dubai D 444', 'Dubai E 555']);
        const rest = await api.get(`/v1/vehicles?limit=3&cursor=${two.body.nextCursor}`, ws().key);
        expect(rest.body.rows.map((r: { plate: string }) => r.plate)).to.deep.equal([
          'Dubai C 333',
          'Dubai B 222',
          'Dubai A 111',
        ]);
        expect(rest.body.nextCursor).to.equal(null);
        // 07:00Z to 09:00Z: Camry out on B1, Patrol late on B2 (out until now at least), Picanto in service,
        // Focus inactive; Civic free (B3 starts at 10:00Z).
        const window = await api.get('/v1/vehicles?from=2026-11-22T07:00:00Z&to=2026-11-22T09:00:00Z', ws().key);
        expect(
          Object.fromEntries(
            window.body.rows.map((r: { plate: string; available: boolean }) => [r.plate, r.available]),
          ),
        ).to.deep.equal({
          'Dubai D 444': false,
          'Dubai E 555': true,
          'Dubai C 333': false,
          'Dubai B 222': false,
          'Dubai A 111': false,
        });
        // 14:00Z to 18:00Z: B1 ends at 14:00Z (half-open: no clash), so the Camry is free; the Civic is on B3.
        const later = await api.get('/v1/vehicles?from=2026-11-22T14:00:00Z&to=2026-11-22T18:00:00Z&q=o', ws().key);
        expect(
          Object.fromEntries(later.body.rows.map((r: { plate: string; available: boolean }) => [r.plate, r.available])),
        ).to.deep.equal({
          'Dubai D 444': false,
          'Dubai E 555': false,
          'Dubai C 333': false,
          'Dubai A 111': true,
          'Dubai B 222': true,
        });
      });
    });
  }

  it('never returns a phone number, e-mail address or identity document', async () => {
    for (const path of [
      '/v1/fleet/summary',
      '/v1/vehicles',
      '/v1/operations/today',
      '/v1/bookings/summary',
      '/v1/finance/overview',
      '/v1/receivables',
      '/v1/fleets',
      '/v1/webhooks',
      '/v1/me',
    ]) {
      const res = await api.get(path, one.key);
      expect(res.status).to.equal(200);
      for (const value of Object.values(PII)) expect(res.text, path).not.to.include(value);
      expect(res.text, path).not.to.match(/"(phone|email|idDocument|id_document)"/);
    }
  });
});
