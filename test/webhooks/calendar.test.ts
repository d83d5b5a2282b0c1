import { expect } from 'chai';
import type { Knex } from 'knex';
import { runCalendarSweep } from '../../src/webhooks/calendar.js';
import { testDatabase } from '../support/database.js';
import { calendarFixture, type CalendarFixture, type QueuedDelivery } from '../support/calendar-fixtures.js';

// The calendar sweep, at fixed clocks. 2026-11-22T08:30Z is 12:30 on 2026-11-22 in Dubai (UTC+4, no DST).
const NOW = '2026-11-22T08:30:00.000Z';

const CALENDAR_EVENTS = [
  'invoice.due_soon',
  'invoice.overdue',
  'installment.due_soon',
  'installment.overdue',
  'booking.ending_soon',
  'vehicle.document_expiring',
  'integration.failed',
  'invoice.issued',
  'fine.created',
  'booking.extended',
];
const DERIVED_EVENTS = [
  'booking.confirmed',
  'booking.completed',
  'payment.captured',
  'payment.refunded',
  'payment.deposit_held',
  'payment.canceled',
  'invoice.issued',
  'fine.created',
  'booking.extended',
];

const of = (list: QueuedDelivery[], event: string) => list.filter((d) => d.event === event);
const keys = (list: QueuedDelivery[]) => list.map((d) => d.body.dedupeKey).sort();

describe('webhooks: calendar sweep', () => {
  let db: Knex;
  /** The sweep connects as the worker's database role (src/db/roles.ts), as in production. */
  let workerDb: Knex;
  /** The sweep at `t` over the given fixtures' workspaces only: the test database holds other tests' workspaces. */
  const sweep = (t: string, ...scope: CalendarFixture[]) =>
    runCalendarSweep(workerDb, new Date(t), { workspaceIds: scope.map((x) => x.ws.id) });

  before(async () => {
    db = (await testDatabase()).db;
    workerDb = (await testDatabase()).forRole('worker');
  });

  /** A workspace with a named fleet, a car, a customer and an endpoint subscribed to everything. */
  async function setup(options: { timezone?: string; remindersAhead?: number } = {}) {
    const f = await calendarFixture(db, options);
    const endpoint = await f.endpoint();
    const fleetId = await f.fleet({ code: 'DXB-01', name: 'Al Noor Fleet' });
    const vehicleId = await f.vehicle({ fleetId, plate: 'Dubai A 12345', make: 'Nissan', model: 'Patrol' });
    const customerId = await f.customer({ name: 'Omar Al Hashimi' });
    const fleet = { id: fleetId, code: 'DXB-01', name: 'Al Noor Fleet' };
    const vehicle = { id: vehicleId, plate: 'Dubai A 12345' };
    const customer = { id: customerId, name: 'Omar Al Hashimi' };
    return { f, endpoint, fleetId, vehicleId, customerId, fleet, vehicle, customer };
  }

  describe('invoice.due_soon', () => {
    it('is raised for open invoices due 0 to N local days ahead, with the documented data', async () => {
      const { f, endpoint, vehicleId, customerId, fleet, vehicle, customer } = await setup();
      const bookingId = await f.fullBooking({
        vehicleId,
        customerId,
        status: 'active',
        pickupAt: '2026-11-18T06:00:00Z',
        dropoffAt: '2026-12-10T06:00:00Z',
        number: 'BK-2026-0142',
      });
      const invoiceId = await f.invoice({
        bookingId,
        customerId,
        total: 157500,
        issueDate: '2026-11-18',
        dueDate: '2026-11-25',
        number: 'INV-2026-0318',
      });
      await f.payment({ invoiceId, bookingId, amount: 100000, at: '2026-11-19T10:00:00Z' });
      const dueToday = await f.invoice({
        customerId,
        total: 5000,
        issueDate: '2026-11-20',
        dueDate: '2026-11-22',
        purpose: 'salik',
      });
      const inFourDays = await f.invoice({ customerId, total: 7000, dueDate: '2026-11-26' });
      const paid = await f.invoice({ customerId, total: 5000, dueDate: '2026-11-24' });
      await f.payment({ invoiceId: paid, amount: 5000, at: '2026-11-20T10:00:00Z' });
      await f.invoice({ customerId, total: 5000, dueDate: '2026-11-23', status: 'void' });

      await sweep(NOW, f);
      const due = of(await f.deliveries(endpoint), 'invoice.due_soon');
      expect(keys(due)).to.deep.equal(
        [`invoice.due_soon:${dueToday}:2026-11-22`, `invoice.due_soon:${invoiceId}:2026-11-25`].sort(),
      );
      const main = due.find((d) => d.body.data.invoiceId === invoiceId)!;
      expect(main.body.createdAt).to.equal(NOW);
      expect(main.body.data).to.deep.equal({
        invoiceId,
        number: 'INV-2026-0318',
        purpose: 'rental',
        issueDate: '2026-11-18',
        dueDate: '2026-11-25',
        total: 157500,
        balance: 57500,
        customer,
        booking: { id: bookingId, number: 'BK-2026-0142' },
        vehicle,
        fleet,
        daysToDue: 3,
      });
      const today = due.find((d) => d.body.data.invoiceId === dueToday)!;
      expect(today.body.data).to.include({ daysToDue: 0, balance: 5000, total: 5000, purpose: 'salik' });
      expect(today.body.data).to.include({ booking: null, vehicle: null, fleet: null });

      // sent once: again at the same time, and the next day (when the 4-day one comes into the window)
      await sweep(NOW, f);
      expect(of(await f.deliveries(endpoint), 'invoice.due_soon')).to.have.length(2);
      await sweep('2026-11-23T08:30:00.000Z', f);
      const later = of(await f.deliveries(endpoint), 'invoice.due_soon');
      expect(later).to.have.length(3);
      expect(later.find((d) => d.body.data.invoiceId === inFourDays)!.body.data.daysToDue).to.equal(3);
    });

    it("looks N days ahead where N is the workspace's Reminders ahead setting (3 by default)", async () => {
      const byDefault = await setup();
      const five = await setup({ remindersAhead: 5 });
      for (const { f, customerId } of [byDefault, five]) {
        await f.invoice({ customerId, total: 1000, dueDate: '2026-11-27', number: 'INV-5' });
        await f.invoice({ customerId, total: 1000, dueDate: '2026-11-28', number: 'INV-6' });
      }
      await sweep(NOW, byDefault.f, five.f);
      expect(of(await byDefault.f.deliveries(byDefault.endpoint), 'invoice.due_soon')).to.have.length(0);
      const due = of(await five.f.deliveries(five.endpoint), 'invoice.due_soon');
      expect(due.map((d) => [d.body.data.number, d.body.data.daysToDue])).to.deep.equal([['INV-5', 5]]);
    });
  });

  describe('invoice.overdue', () => {
    it('is sent at 1, 7 and 30 days past due, each milestone once', async () => {
      const { f, endpoint, customerId } = await setup();
      const invoiceId = await f.invoice({ customerId, total: 80000, issueDate: '2026-11-14', dueDate: '2026-11-21' });
      await f.payment({ invoiceId, amount: 30000, at: '2026-11-15T09:00:00Z' });
      for (const day of ['22', '23', '24']) await sweep(`2026-11-${day}T08:30:00.000Z`, f);
      for (const day of ['2026-11-28', '2026-11-29', '2026-12-05', '2026-12-21', '2026-12-22', '2026-12-28'])
        await sweep(`${day}T08:30:00.000Z`, f);
      const overdue = of(await f.deliveries(endpoint), 'invoice.overdue');
      expect(overdue.map((d) => [d.body.dedupeKey, d.body.data.daysOverdue, d.body.createdAt])).to.deep.equal([
        [`invoice.overdue:${invoiceId}:1`, 1, '2026-11-22T08:30:00.000Z'],
        [`invoice.overdue:${invoiceId}:7`, 7, '2026-11-28T08:30:00.000Z'],
        [`invoice.overdue:${invoiceId}:30`, 30, '2026-12-21T08:30:00.000Z'],
      ]);
      expect(overdue[0].body.data).to.include({
        invoiceId,
        total: 80000,
        balance: 50000,
        dueDate: '2026-11-21',
        issueDate: '2026-11-14',
      });
    });

    it('after downtime sends only the latest milestone reached, with the true count, and none more than 7 days past', async () => {
      const { f, endpoint, customerId } = await setup();
      const tenDays = await f.invoice({ customerId, total: 1000, dueDate: '2026-11-12' }); // milestone 7 reached 3 days ago
      const thirtyThree = await f.invoice({ customerId, total: 1000, dueDate: '2026-10-20' }); // milestone 30 reached 3 days ago
      await f.invoice({ customerId, total: 1000, dueDate: '2026-10-10' }); // 43 days: milestone 30 was 13 days ago
      const nineteen = await f.invoice({ customerId, total: 1000, dueDate: '2026-11-03' }); // 19 days: milestone 7 was 12 days ago
      const yesterday = await f.invoice({ customerId, total: 1000, dueDate: '2026-11-21' });

      await sweep(NOW, f);
      let overdue = of(await f.deliveries(endpoint), 'invoice.overdue');
      expect(overdue.map((d) => [d.body.dedupeKey, d.body.data.daysOverdue]).sort()).to.deep.equal(
        [
          [`invoice.overdue:${tenDays}:7`, 10],
          [`invoice.overdue:${thirtyThree}:30`, 33],
          [`invoice.overdue:${yesterday}:1`, 1],
        ].sort(),
      );

      // ten days of downtime: the 1-day invoice is now 10 days late (milestone 7), the 19-day one reaches 30 days
      // on 2026-12-03
      await sweep('2026-12-01T08:30:00.000Z', f);
      overdue = of(await f.deliveries(endpoint), 'invoice.overdue');
      expect(overdue.slice(3).map((d) => [d.body.dedupeKey, d.body.data.daysOverdue])).to.deep.equal([
        [`invoice.overdue:${yesterday}:7`, 10],
      ]);
      await sweep('2026-12-05T08:30:00.000Z', f);
      overdue = of(await f.deliveries(endpoint), 'invoice.overdue');
      expect(overdue.slice(4).map((d) => [d.body.dedupeKey, d.body.data.daysOverdue])).to.deep.equal([
        [`invoice.overdue:${nineteen}:30`, 32],
      ]);
      // the 1-day invoice's 30-day milestone (2026-12-21) is more than 7 days past on 2026-12-29: not sent
      await sweep('2026-12-29T08:30:00.000Z', f);
      overdue = of(await f.deliveries(endpoint), 'invoice.overdue');
      expect(overdue.slice(5).map((d) => d.body.dedupeKey)).to.deep.equal([]);
    });
  });

  describe('installments', () => {
    it('raises installment.due_soon and installment.overdue for unpaid installments only', async () => {
      const { f, endpoint, vehicleId, customerId, fleet, vehicle, customer } = await setup();
      const bookingId = await f.fullBooking({
        vehicleId,
        customerId,
        status: 'active',
        type: 'monthly',
        pickupAt: '2026-07-25T06:00:00Z',
        dropoffAt: '2027-07-25T06:00:00Z',
        amount: 5040000,
        monthlyAmount: 420000,
        number: 'BK-2026-0099',
      });
      const invoiceId = await f.invoice({
        bookingId,
        customerId,
        total: 420000,
        issueDate: '2026-11-18',
        dueDate: '2026-11-25',
        purpose: 'installment',
        number: 'INV-2026-0321',
      });
      const dueSoon = await f.installment({
        bookingId,
        number: 5,
        of: 12,
        dueDate: '2026-11-25',
        amount: 420000,
        invoiceId,
      });
      const late = await f.installment({ bookingId, number: 4, of: 12, dueDate: '2026-11-15', amount: 420000 });
      await f.installment({
        bookingId,
        number: 3,
        of: 12,
        dueDate: '2026-10-25',
        amount: 420000,
        paidAt: '2026-10-25T09:00:00Z',
      });
      const paidInvoice = await f.invoice({
        bookingId,
        customerId,
        total: 420000,
        dueDate: '2026-11-23',
        purpose: 'installment',
      });
      await f.payment({ invoiceId: paidInvoice, bookingId, customerId, amount: 420000, at: '2026-11-21T09:00:00Z' });
      await f.installment({
        bookingId,
        number: 6,
        of: 12,
        dueDate: '2026-11-23',
        amount: 420000,
        invoiceId: paidInvoice,
      });
      const canceled = await f.fullBooking({
        vehicleId,
        customerId,
        status: 'canceled',
        type: 'lease',
        pickupAt: '2026-10-01T06:00:00Z',
        dropoffAt: '2027-10-01T06:00:00Z',
        monthlyAmount: 300000,
      });
      await f.installment({ bookingId: canceled, number: 2, of: 12, dueDate: '2026-11-23', amount: 300000 });

      await sweep(NOW, f);
      let list = await f.deliveries(endpoint);
      const soon = of(list, 'installment.due_soon');
      expect(keys(soon)).to.deep.equal([`installment.due_soon:${dueSoon}:2026-11-25`]);
      expect(soon[0].body.data).to.deep.equal({
        installmentId: dueSoon,
        bookingId,
        bookingNumber: 'BK-2026-0099',
        number: 5,
        of: 12,
        dueDate: '2026-11-25',
        amount: 420000,
        invoice: { id: invoiceId, number: 'INV-2026-0321' },
        customer,
        vehicle,
        fleet,
        daysToDue: 3,
      });
      const overdue = of(list, 'installment.overdue');
      expect(keys(overdue)).to.deep.equal([`installment.overdue:${late}:7`]);
      expect(overdue[0].body.data).to.include({
        installmentId: late,
        invoice: null,
        daysToDue: -7,
        daysOverdue: 7,
        number: 4,
        amount: 420000,
      });

      await sweep('2026-11-23T08:30:00.000Z', f);
      expect(await f.deliveries(endpoint)).to.have.length(list.length);
      await sweep('2026-11-26T08:30:00.000Z', f);
      list = await f.deliveries(endpoint);
      expect(keys(of(list, 'installment.overdue'))).to.deep.equal(
        [`installment.overdue:${dueSoon}:1`, `installment.overdue:${late}:7`].sort(),
      );
      expect(of(list, 'installment.overdue').find((d) => d.body.data.installmentId === dueSoon)!.body.data).to.include({
        daysToDue: -1,
        daysOverdue: 1,
      });
    });
  });

  describe('booking.ending_soon and booking.extended', () => {
    it('raises ending_soon for active bookings ending within N local days, and again after an extension moves the end', async () => {
      const { f, endpoint, vehicleId, customerId, fleet, vehicle, customer } = await setup();
      const bookingId = await f.fullBooking({
        vehicleId,
        customerId,
        status: 'active',
        pickupAt: '2026-11-18T06:00:00Z',
        dropoffAt: '2026-11-24T10:00:00Z',
        number: 'BK-2026-0142',
        amount: 157500,
      });
      const other = await f.vehicle({ plate: 'Dubai B 1' });
      await f.fullBooking({
        vehicleId: other,
        customerId,
        status: 'active',
        pickupAt: '2026-11-18T06:00:00Z',
        dropoffAt: '2026-11-26T10:00:00Z',
      });
      await f.fullBooking({
        vehicleId: other,
        customerId,
        status: 'confirmed',
        pickupAt: '2026-12-18T06:00:00Z',
        dropoffAt: '2026-12-19T10:00:00Z',
      });
      const third = await f.vehicle({ plate: 'Dubai C 1' });
      await f.fullBooking({
        vehicleId: third,
        customerId,
        status: 'confirmed',
        pickupAt: '2026-11-21T06:00:00Z',
        dropoffAt: '2026-11-23T10:00:00Z',
      });
      await f.fullBooking({
        vehicleId: third,
        customerId,
        status: 'active',
        pickupAt: '2026-11-10T06:00:00Z',
        dropoffAt: '2026-11-21T10:00:00Z',
      }); // late back

      await sweep(NOW, f);
      const endingOf = (list: QueuedDelivery[]) =>
        of(list, 'booking.ending_soon').filter((d) => d.body.data.bookingId === bookingId);
      let ending = of(await f.deliveries(endpoint), 'booking.ending_soon');
      expect(keys(ending)).to.deep.equal([`booking.ending_soon:${bookingId}:2026-11-24T10:00:00.000Z`]);
      expect(ending[0].body.data).to.deep.equal({
        bookingId,
        number: 'BK-2026-0142',
        type: 'daily',
        pickupAt: '2026-11-18T06:00:00.000Z',
        dropoffAt: '2026-11-24T10:00:00.000Z',
        originalDropoffAt: '2026-11-24T10:00:00.000Z',
        extensionsCount: 0,
        monthlyAmount: null,
        customer,
        vehicle,
        fleet,
        daysLeft: 2,
      });

      // extended by 3 days the next morning
      const extensionId = await f.extension({
        bookingId,
        addedDays: 3,
        amount: 67500,
        previousDropoffAt: '2026-11-24T10:00:00Z',
        newDropoffAt: '2026-11-27T10:00:00Z',
        createdAt: '2026-11-23T08:00:00Z',
      });
      await db('bookings')
        .where({ id: bookingId })
        .update({
          dropoff_at: new Date('2026-11-27T10:00:00Z'),
          original_dropoff_at: new Date('2026-11-24T10:00:00Z'),
        });
      await sweep('2026-11-23T08:30:00.000Z', f);
      const list = await f.deliveries(endpoint);
      const extended = of(list, 'booking.extended');
      expect(keys(extended)).to.deep.equal([`booking.extended:${extensionId}`]);
      expect(extended[0].body.data).to.deep.equal({
        bookingId,
        number: 'BK-2026-0142',
        type: 'daily',
        pickupAt: '2026-11-18T06:00:00.000Z',
        dropoffAt: '2026-11-27T10:00:00.000Z',
        originalDropoffAt: '2026-11-24T10:00:00.000Z',
        extensionsCount: 1,
        monthlyAmount: null,
        customer,
        vehicle,
        fleet,
        daysLeft: 4,
        addedDays: 3,
        extensionAmount: 67500,
      });
      expect(endingOf(list)).to.have.length(1); // the new end is 4 days away

      await sweep('2026-11-24T08:30:00.000Z', f);
      ending = endingOf(await f.deliveries(endpoint));
      expect(keys(ending)).to.deep.equal(
        [
          `booking.ending_soon:${bookingId}:2026-11-24T10:00:00.000Z`,
          `booking.ending_soon:${bookingId}:2026-11-27T10:00:00.000Z`,
        ].sort(),
      );
      expect(ending[1].body.data).to.include({
        dropoffAt: '2026-11-27T10:00:00.000Z',
        originalDropoffAt: '2026-11-24T10:00:00.000Z',
        extensionsCount: 1,
        daysLeft: 3,
      });
      await sweep('2026-11-25T08:30:00.000Z', f);
      expect(endingOf(await f.deliveries(endpoint))).to.have.length(2);
    });
  });

  describe('the local calendar', () => {
    it("counts days on the workspace's calendar: Dubai midnight comes four hours before UTC midnight", async () => {
      const dubai = await setup({ timezone: 'Asia/Dubai' });
      const utc = await setup({ timezone: 'UTC' });
      for (const { f, customerId } of [dubai, utc]) {
        await f.invoice({ customerId, total: 1000, dueDate: '2026-11-22', number: 'DUE-22' });
        await f.invoice({ customerId, total: 1000, dueDate: '2026-11-26', number: 'DUE-26' });
      }
      const summary = async ({ f, endpoint }: { f: CalendarFixture; endpoint: string }) =>
        (await f.deliveries(endpoint)).map((d) => [
          d.event,
          d.body.data.number,
          d.body.data.daysToDue ?? d.body.data.daysOverdue,
        ]);

      // 23:59 in Dubai on the 22nd
      await sweep('2026-11-22T19:59:00.000Z', dubai.f, utc.f);
      expect(await summary(dubai)).to.deep.equal([['invoice.due_soon', 'DUE-22', 0]]);
      expect(await summary(utc)).to.deep.equal([['invoice.due_soon', 'DUE-22', 0]]);
      // 00:30 on the 23rd in Dubai, still the 22nd in UTC
      await sweep('2026-11-22T20:30:00.000Z', dubai.f, utc.f);
      expect((await summary(dubai)).slice(1).sort()).to.deep.equal(
        [
          ['invoice.due_soon', 'DUE-26', 3],
          ['invoice.overdue', 'DUE-22', 1],
        ].sort(),
      );
      expect(await summary(utc)).to.deep.equal([['invoice.due_soon', 'DUE-22', 0]]);
      // 00:30 on the 23rd in UTC
      await sweep('2026-11-23T00:30:00.000Z', dubai.f, utc.f);
      expect((await summary(utc)).slice(1).sort()).to.deep.equal(
        [
          ['invoice.due_soon', 'DUE-26', 3],
          ['invoice.overdue', 'DUE-22', 1],
        ].sort(),
      );
      expect(await summary(dubai)).to.have.length(3);
    });
  });

  describe('vehicle.document_expiring', () => {
    it('is sent at 30, 7 and 0 days before expiry, latest milestone only, none more than 7 days past', async () => {
      const { f, endpoint, vehicleId, fleet } = await setup();
      const doc = (expiresAt: string, detail: string | null = 'Comprehensive policy 1001') =>
        f.document({ vehicleId, docType: 'insurance', detail, expiresAt });
      const thirty = await doc('2026-12-22');
      const twentyEight = await doc('2026-12-20');
      await doc('2026-12-10'); // 18 days: the 30-day milestone was 12 days ago
      const seven = await doc('2026-11-29', null);
      const today = await f.document({
        vehicleId,
        docType: 'registration',
        detail: 'Mulkiya',
        expiresAt: '2026-11-22',
      });
      const lapsed = await f.document({ vehicleId, docType: 'permit', expiresAt: '2026-11-17' });
      await doc('2026-11-10'); // lapsed 12 days ago
      const sold = await f.vehicle({ plate: 'Dubai Z 9', state: 'inactive' });
      await f.document({ vehicleId: sold, expiresAt: '2026-11-29' });

      await sweep(NOW, f);
      let list = of(await f.deliveries(endpoint), 'vehicle.document_expiring');
      expect(list.map((d) => [d.body.dedupeKey, d.body.data.daysLeft]).sort()).to.deep.equal(
        [
          [`vehicle.document_expiring:${thirty}:30`, 30],
          [`vehicle.document_expiring:${twentyEight}:30`, 28],
          [`vehicle.document_expiring:${seven}:7`, 7],
          [`vehicle.document_expiring:${today}:0`, 0],
          [`vehicle.document_expiring:${lapsed}:0`, -5],
        ].sort(),
      );
      expect(list.find((d) => d.body.data.daysLeft === 7)!.body.data).to.deep.equal({
        vehicleId,
        plate: 'Dubai A 12345',
        make: 'Nissan',
        model: 'Patrol',
        docType: 'insurance',
        detail: null,
        expiresAt: '2026-11-29',
        daysLeft: 7,
        fleet,
      });
      expect(list.find((d) => d.body.data.daysLeft === 0)!.body.data).to.include({
        docType: 'registration',
        detail: 'Mulkiya',
        expiresAt: '2026-11-22',
      });

      for (const day of ['2026-11-23', '2026-12-15', '2026-12-16', '2026-12-22', '2026-12-23'])
        await sweep(`${day}T08:30:00.000Z`, f);
      list = of(await f.deliveries(endpoint), 'vehicle.document_expiring').filter(
        (d) => d.body.data.expiresAt === '2026-12-22',
      );
      expect(list.map((d) => [d.body.dedupeKey, d.body.data.daysLeft, d.body.createdAt])).to.deep.equal([
        [`vehicle.document_expiring:${thirty}:30`, 30, NOW],
        [`vehicle.document_expiring:${thirty}:7`, 7, '2026-12-15T08:30:00.000Z'],
        [`vehicle.document_expiring:${thirty}:0`, 0, '2026-12-22T08:30:00.000Z'],
      ]);
    });
  });

  describe('integration.failed', () => {
    it('is sent once a local day while an integration is failing, with fallbacks for a missing detail or hint', async () => {
      const { f, endpoint } = await setup();
      const bare = await f.integration({
        integration: 'accounting',
        status: 'failing',
        failingSince: '2026-11-21T22:14:05Z',
      });
      const full = await f.integration({
        integration: 'payment_gateway',
        status: 'failing',
        failingSince: '2026-11-20T10:00:00Z',
        detail: '401 Unauthorized: API key has been revoked',
        hint: 'Reconnect the payment gateway in Settings > Integrations with a new API key.',
      });
      await f.integration({ integration: 'esign', status: 'ok' });

      await sweep(NOW, f);
      await sweep('2026-11-22T19:59:00.000Z', f); // 23:59 in Dubai: the same local day
      let list = of(await f.deliveries(endpoint), 'integration.failed');
      expect(keys(list)).to.deep.equal(
        [`integration.failed:${bare}:2026-11-22`, `integration.failed:${full}:2026-11-22`].sort(),
      );
      const withDetail = list.find((d) => d.body.data.integration === 'payment_gateway')!;
      expect(withDetail.body.data).to.deep.equal({
        integration: 'payment_gateway',
        detail: '401 Unauthorized: API key has been revoked',
        hint: 'Reconnect the payment gateway in Settings > Integrations with a new API key.',
        failingSince: '2026-11-20T10:00:00.000Z',
      });
      const fallback = list.find((d) => d.body.data.integration === 'accounting')!;
      expect(fallback.body.data.failingSince).to.equal('2026-11-21T22:14:05.000Z');
      expect(fallback.body.data.detail).to.be.a('string').that.is.not.empty;
      expect(fallback.body.data.hint).to.be.a('string').and.to.include('accounting');

      await sweep('2026-11-22T20:01:00.000Z', f); // 00:01 on the 23rd in Dubai
      list = of(await f.deliveries(endpoint), 'integration.failed');
      expect(keys(list.slice(2))).to.deep.equal(
        [`integration.failed:${bare}:2026-11-23`, `integration.failed:${full}:2026-11-23`].sort(),
      );

      await db('integrations').where({ id: full }).update({ status: 'ok', failing_since: null });
      await sweep('2026-11-24T08:30:00.000Z', f);
      list = of(await f.deliveries(endpoint), 'integration.failed');
      expect(keys(list.slice(4))).to.deep.equal([`integration.failed:${bare}:2026-11-24`]);
    });
  });

  describe('derived events and the history rule', () => {
    it('raises nothing for records that were there before the first sweep, and derives events for what comes after', async () => {
      const { f, endpoint, fleetId, vehicleId, customerId, fleet, vehicle, customer } = await setup();
      // history: all of this is older than the workspace's first sweep
      const bookingId = await f.fullBooking({
        vehicleId,
        customerId,
        status: 'active',
        pickupAt: '2026-11-18T06:00:00Z',
        dropoffAt: '2026-12-20T06:00:00Z',
        number: 'BK-2026-0142',
        amount: 157500,
      });
      const invoiceId = await f.invoice({
        bookingId,
        customerId,
        total: 157500,
        issueDate: '2026-11-18',
        dueDate: '2026-12-30',
        number: 'INV-2026-0318',
      });
      await f.payment({ invoiceId, bookingId, customerId, amount: 100000, at: '2026-11-18T06:10:00Z' });
      const toCancel = await f.payment({ invoiceId, bookingId, customerId, amount: 50000, at: '2026-11-21T17:20:00Z' });
      await f.payment({ kind: 'deposit', bookingId, customerId, amount: 150000, at: '2026-11-18T06:05:00Z' });
      await f.fullBooking({
        vehicleId: await f.vehicle({ fleetId, plate: 'Dubai H 1' }),
        customerId,
        status: 'confirmed',
        pickupAt: '2026-12-01T06:00:00Z',
        dropoffAt: '2026-12-03T06:00:00Z',
      });
      await f.fine({ vehicleId, bookingId, date: '2026-11-19', amount: 60000, recordedAt: '2026-11-21T10:00:00Z' });
      await f.extension({
        bookingId,
        addedDays: 1,
        amount: 20000,
        previousDropoffAt: '2026-12-19T06:00:00Z',
        newDropoffAt: '2026-12-20T06:00:00Z',
        createdAt: '2026-11-20T10:00:00Z',
      });

      await sweep(NOW, f);
      await sweep(NOW, f);
      const history = await f.deliveries(endpoint);
      expect(history.filter((d) => DERIVED_EVENTS.includes(d.event))).to.deep.equal([]);
      expect(Number((await db('entity_changes').where({ workspace_id: f.ws.id }).count('* as c'))[0].c)).to.equal(0);

      // after the first sweep
      const otherCar = await f.vehicle({ fleetId, plate: 'Dubai K 2' });
      const confirmed = await f.fullBooking({
        vehicleId: otherCar,
        customerId,
        status: 'confirmed',
        pickupAt: '2026-12-05T06:00:00Z',
        dropoffAt: '2026-12-08T06:00:00Z',
      });
      const charge = await f.payment({
        invoiceId,
        bookingId,
        customerId,
        amount: 20000,
        at: '2026-11-22T08:29:41.512Z',
      });
      const refund = await f.payment({
        kind: 'refund',
        invoiceId,
        bookingId,
        customerId,
        amount: 5000,
        at: '2026-11-22T08:31:00Z',
      });
      const deposit = await f.payment({
        kind: 'deposit',
        bookingId,
        customerId,
        amount: 150000,
        at: '2026-11-22T08:32:00Z',
      });
      const walkIn = await f.payment({ customerId, amount: 3000, at: '2026-11-22T08:33:00Z' });
      await db('payments').where({ id: toCancel }).update({ status: 'canceled' });
      await db('bookings')
        .where({ id: bookingId })
        .update({ status: 'completed', returned_at: new Date('2026-11-22T08:40:00Z') });
      const newInvoice = await f.invoice({
        bookingId,
        customerId,
        total: 30000,
        issueDate: '2026-11-22',
        dueDate: '2026-12-29',
        purpose: 'damage',
        number: 'INV-2026-0400',
      });
      const fineId = await f.fine({
        vehicleId,
        bookingId,
        date: '2026-11-02',
        amount: 60000,
        number: 'DP-2026-5583021',
        recordedAt: '2026-11-22T08:41:00Z',
      });

      await sweep('2026-11-22T08:45:00.000Z', f);
      const list = (await f.deliveries(endpoint)).slice(history.length);
      expect(list.map((d) => d.event).sort()).to.deep.equal(
        [
          'booking.completed',
          'booking.confirmed',
          'fine.created',
          'invoice.issued',
          'payment.canceled',
          'payment.captured',
          'payment.captured',
          'payment.deposit_held',
          'payment.refunded',
        ].sort(),
      );
      for (const d of list) {
        expect('dedupeKey' in d.body, d.event).to.equal(CALENDAR_EVENTS.includes(d.event));
        expect(d.body.createdAt).to.equal('2026-11-22T08:45:00.000Z');
      }
      const paymentRef = {
        booking: { id: bookingId, number: 'BK-2026-0142' },
        invoice: { id: invoiceId, number: 'INV-2026-0318' },
        customer,
        vehicle,
        fleet,
      };

      expect(of(list, 'booking.confirmed')[0].body.data).to.deep.equal({
        bookingId: confirmed,
        customerId,
        vehicleId: otherCar,
        fleet,
        vehicle: { id: otherCar, plate: 'Dubai K 2' },
      });
      // balance: 157500 - (100000 + 20000 - 5000); the canceled charge counts nowhere; plus the new 30000 invoice
      expect(of(list, 'booking.completed')[0].body.data).to.deep.equal({
        bookingId,
        number: 'BK-2026-0142',
        type: 'daily',
        pickupAt: '2026-11-18T06:00:00.000Z',
        dropoffAt: '2026-12-20T06:00:00.000Z',
        returnedAt: '2026-11-22T08:40:00.000Z',
        amount: 157500,
        balanceDue: 42500 + 30000,
        customer,
        vehicle,
        fleet,
      });
      const captured = of(list, 'payment.captured').find((d) => d.body.data.paymentId === charge)!;
      expect(captured.body.data).to.deep.equal({
        paymentId: charge,
        kind: 'charge',
        status: 'captured',
        amount: 20000,
        at: '2026-11-22T08:29:41.512Z',
        ...paymentRef,
      });
      expect(of(list, 'payment.refunded')[0].body.data).to.deep.equal({
        paymentId: refund,
        kind: 'refund',
        status: 'captured',
        amount: 5000,
        at: '2026-11-22T08:31:00.000Z',
        ...paymentRef,
      });
      expect(of(list, 'payment.deposit_held')[0].body.data).to.deep.equal({
        paymentId: deposit,
        kind: 'deposit',
        status: 'captured',
        amount: 150000,
        at: '2026-11-22T08:32:00.000Z',
        ...paymentRef,
        invoice: null,
      });
      expect(of(list, 'payment.canceled')[0].body.data).to.deep.equal({
        paymentId: toCancel,
        kind: 'charge',
        status: 'canceled',
        amount: 50000,
        at: '2026-11-21T17:20:00.000Z',
        ...paymentRef,
      });
      expect(of(list, 'payment.captured').find((d) => d.body.data.paymentId === walkIn)!.body.data).to.deep.equal({
        paymentId: walkIn,
        kind: 'charge',
        status: 'captured',
        amount: 3000,
        at: '2026-11-22T08:33:00.000Z',
        booking: null,
        invoice: null,
        customer,
        vehicle: null,
        fleet: null,
      });
      const issued = of(list, 'invoice.issued')[0];
      expect(issued.body.dedupeKey).to.equal(`invoice.issued:${newInvoice}`);
      expect(issued.body.data).to.deep.equal({
        invoiceId: newInvoice,
        number: 'INV-2026-0400',
        purpose: 'damage',
        issueDate: '2026-11-22',
        dueDate: '2026-12-29',
        total: 30000,
        balance: 30000,
        customer,
        booking: { id: bookingId, number: 'BK-2026-0142' },
        vehicle,
        fleet,
      });
      const fine = of(list, 'fine.created')[0];
      expect(fine.body.dedupeKey).to.equal(`fine.created:${fineId}`);
      expect(fine.body.data).to.deep.equal({
        fineId,
        kind: 'fine',
        type: 'speeding',
        date: '2026-11-02',
        amount: 60000,
        authority: 'Dubai Police',
        violation: 'Exceeding the speed limit by not more than 20 km/h',
        number: 'DP-2026-5583021',
        status: 'unpaid',
        customer,
        booking: { id: bookingId, number: 'BK-2026-0142' },
        vehicle,
        fleet,
      });

      // consumed: nothing is left to derive, and a later sweep raises nothing new
      expect(Number((await db('entity_changes').where({ workspace_id: f.ws.id }).count('* as c'))[0].c)).to.equal(0);
      const count = await f.eventCount();
      expect((await sweep('2026-11-22T08:45:00.000Z', f)).events).to.equal(0);
      await sweep('2026-11-22T08:46:00.000Z', f);
      expect(await f.eventCount()).to.equal(count);
    });
  });

  describe('the outbox', () => {
    it('publishes valid rows and refuses an invalid one with the reason, queuing nothing for it', async () => {
      const { f, endpoint } = await setup();
      const insert = async (row: Record<string, unknown>) =>
        (
          await db('outbox')
            .insert({ workspace_id: f.ws.id, ...row })
            .returning('id')
        )[0].id as string;
      const invalid = await insert({ event: 'booking.confirmed', data: JSON.stringify({ bookingId: 'not-a-uuid' }) });
      const unknown = await insert({ event: 'car.washed', data: JSON.stringify({}) });
      const valid = await insert({
        event: 'integration.failed',
        dedupe_key: 'integration.failed:esign:2026-11-22',
        data: JSON.stringify({
          integration: 'esign',
          detail: 'Envelope API: 403 Forbidden',
          hint: 'Reconnect e-signature.',
          failingSince: '2026-11-22T06:00:00.000Z',
        }),
      });

      await sweep(NOW, f);
      const rows = await db('outbox').whereIn('id', [invalid, unknown, valid]).orderBy('id');
      const [bad, odd, good] = rows;
      expect(bad.processed_at).to.be.instanceOf(Date);
      expect(bad.event_id).to.equal(null);
      expect(bad.error).to.match(/^invalid booking\.confirmed event at \/data/);
      expect(odd.processed_at).to.be.instanceOf(Date);
      expect(odd.error).to.include('unknown event');
      expect(good.processed_at).to.be.instanceOf(Date);
      expect(good.error).to.equal(null);
      expect(good.event_id).to.be.a('string');

      const events = await db('events').where({ workspace_id: f.ws.id });
      expect(events.map((e) => [e.id, e.event, e.source])).to.deep.equal([
        [good.event_id, 'integration.failed', 'outbox'],
      ]);
      const list = await f.deliveries(endpoint);
      expect(list.map((d) => [d.event, d.body.dedupeKey])).to.deep.equal([
        ['integration.failed', 'integration.failed:esign:2026-11-22'],
      ]);

      await sweep(NOW, f);
      expect(await f.deliveries(endpoint)).to.have.length(1);
    });
  });

  describe('deliveries', () => {
    it("follows each endpoint's event list", async () => {
      const { f, endpoint, customerId } = await setup();
      const onlyOverdue = await f.endpoint({ events: ['invoice.overdue'] });
      const off = await f.endpoint({ events: ['invoice.due_soon'], active: false });
      await f.invoice({ customerId, total: 1000, dueDate: '2026-11-21' });
      await f.invoice({ customerId, total: 1000, dueDate: '2026-11-23' });
      await f.integration({
        integration: 'whatsapp',
        status: 'failing',
        failingSince: '2026-11-22T01:00:00Z',
        detail: 'Token expired',
        hint: 'Reconnect.',
      });

      await sweep(NOW, f);
      expect((await f.deliveries(endpoint)).map((d) => d.event).sort()).to.deep.equal([
        'integration.failed',
        'invoice.due_soon',
        'invoice.overdue',
      ]);
      expect((await f.deliveries(onlyOverdue)).map((d) => d.event)).to.deep.equal(['invoice.overdue']);
      const held = await db('deliveries').where({ endpoint_id: off });
      expect(held.map((d) => [d.event, d.status])).to.deep.equal([['invoice.due_soon', 'held']]);
    });

    it('never carries a phone number, e-mail address or identity document', async () => {
      const { f, endpoint, vehicleId } = await setup();
      const phone = '+971501234567';
      const email = 'fatima@example.com';
      const idDocument = '784-1985-1234567-1';
      const customerId = await f.customerWithContacts({ name: 'Fatima Al Mansoori', phone, email, idDocument });
      const bookingId = await f.fullBooking({
        vehicleId,
        customerId,
        status: 'active',
        pickupAt: '2026-11-18T06:00:00Z',
        dropoffAt: '2026-11-23T06:00:00Z',
      });
      const invoiceId = await f.invoice({ bookingId, customerId, total: 5000, dueDate: '2026-11-21' });
      await f.invoice({ bookingId, customerId, total: 5000, dueDate: '2026-11-24' });
      await f.installment({ bookingId, number: 1, of: 2, dueDate: '2026-11-23', amount: 5000 });
      await sweep(NOW, f);
      await f.payment({ invoiceId, bookingId, customerId, amount: 2000, at: '2026-11-22T09:00:00Z' });
      await f.fine({ vehicleId, bookingId, date: '2026-11-20', amount: 40000, recordedAt: '2026-11-22T09:00:00Z' });
      await f.invoice({ bookingId, customerId, total: 9000, dueDate: '2026-12-20' });
      await db('bookings')
        .where({ id: bookingId })
        .update({ status: 'completed', returned_at: new Date('2026-11-22T09:10:00Z') });
      await sweep('2026-11-22T09:15:00.000Z', f);

      const list = await f.deliveries(endpoint);
      expect(new Set(list.map((d) => d.event))).to.have.keys([
        'invoice.overdue',
        'invoice.due_soon',
        'installment.due_soon',
        'booking.ending_soon',
        'payment.captured',
        'fine.created',
        'invoice.issued',
        'booking.completed',
      ]);
      for (const d of list) {
        for (const secret of [phone, email, idDocument, 'phone', 'email', 'idDocument', 'id_document'])
          expect(d.raw, d.event).not.to.include(secret);
        const customerObject = d.body.data.customer;
        if (customerObject) expect(Object.keys(customerObject).sort(), d.event).to.deep.equal(['id', 'name']);
      }
    });
  });

  describe('several processes at once', () => {
    it('records each occurrence once when sweeps run concurrently', async () => {
      const { f, endpoint, vehicleId, customerId } = await setup();
      for (let i = 0; i < 20; i += 1) {
        await f.invoice({ customerId, total: 1000 + i, dueDate: i % 2 ? '2026-11-21' : '2026-11-24' });
      }
      await f.fullBooking({
        vehicleId,
        customerId,
        status: 'active',
        pickupAt: '2026-11-18T06:00:00Z',
        dropoffAt: '2026-11-23T06:00:00Z',
      });
      await f.document({ vehicleId, expiresAt: '2026-11-29' });
      await sweep(NOW, f); // start the calendar, so changes are recorded from here on
      for (let i = 0; i < 30; i += 1) await f.payment({ customerId, amount: 100 + i, at: '2026-11-22T08:31:00Z' });

      await Promise.all([
        sweep('2026-11-22T08:32:00.000Z', f),
        sweep('2026-11-22T08:32:00.000Z', f),
        sweep('2026-11-22T08:32:00.000Z', f),
      ]);
      const list = await f.deliveries(endpoint);
      expect(of(list, 'payment.captured')).to.have.length(30);
      expect(of(list, 'invoice.due_soon')).to.have.length(10);
      expect(of(list, 'invoice.overdue')).to.have.length(10);
      expect(of(list, 'booking.ending_soon')).to.have.length(1);
      expect(of(list, 'vehicle.document_expiring')).to.have.length(1);
      const events = await db('events').where({ workspace_id: f.ws.id }).select('dedupe_key');
      expect(new Set(events.map((e) => e.dedupe_key)).size).to.equal(events.length);
      expect(list).to.have.length(events.length);
    });
  });
});
