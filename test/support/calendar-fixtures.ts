import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { loadOpenApiDocument, webhookPayloadSchemas } from '../../src/contract/document.js';
import { fixture, type Fixture } from './fixtures.js';
import { sealedSecretColumns } from '../../src/webhooks/sealing.js';
import { validators } from '../../src/contract/validators.js';
import { runCalendarSweep } from '../../src/webhooks/calendar.js';

// Builders for the records the calendar sweep reads that the shared fixture does not cover (documents,
// installments, fines, extensions, integrations, endpoints), and readers of what the sweep queued.

type Time = Date | string;
const at = (t: Time): Date => (t instanceof Date ? t : new Date(t));

/** A delivery as queued: its row and its body parsed. */
export interface QueuedDelivery {
  id: string;
  endpointId: string;
  event: string;
  body: { id: string; event: string; createdAt: string; dedupeKey?: string; data: Record<string, any> };
  raw: string;
}

export interface CalendarFixture extends Fixture {
  /** Sets the workspace's Reminders ahead (N). */
  remindersAhead(n: number): Promise<void>;
  /** A booking with every column the events report. */
  fullBooking(o: {
    vehicleId?: string;
    customerId?: string;
    status: 'pending' | 'confirmed' | 'active' | 'completed' | 'canceled';
    type?: 'daily' | 'monthly' | 'lease' | 'rent_to_own';
    pickupAt: Time;
    dropoffAt: Time;
    originalDropoffAt?: Time;
    amount?: number;
    monthlyAmount?: number | null;
    returnedAt?: Time;
    number?: string;
  }): Promise<string>;
  /** A customer with contact details and an identity document (which no payload may carry). */
  customerWithContacts(o: { name: string; phone: string; email: string; idDocument: string }): Promise<string>;
  document(o: {
    vehicleId: string;
    docType?: 'registration' | 'insurance' | 'permit';
    detail?: string | null;
    expiresAt: string;
  }): Promise<string>;
  installment(o: {
    bookingId: string;
    number: number;
    of: number;
    dueDate: string;
    amount: number;
    invoiceId?: string;
    paidAt?: Time;
  }): Promise<string>;
  fine(o: {
    vehicleId: string;
    bookingId?: string;
    customerId?: string;
    kind?: 'fine' | 'toll';
    type?: string;
    date: string;
    amount: number;
    authority?: string;
    violation?: string | null;
    number?: string;
    status?: string;
    recordedAt: Time;
  }): Promise<string>;
  extension(o: {
    bookingId: string;
    addedDays: number;
    amount: number;
    previousDropoffAt: Time;
    newDropoffAt: Time;
    createdAt: Time;
  }): Promise<string>;
  integration(o: {
    integration: string;
    status: 'ok' | 'failing';
    detail?: string | null;
    hint?: string | null;
    failingSince?: Time;
  }): Promise<string>;
  /** A webhook endpoint; `events` empty (the default) means every event. */
  endpoint(o?: { events?: string[]; active?: boolean }): Promise<string>;
  /** Every delivery queued for the workspace (or one endpoint), oldest first, each body checked against the document. */
  deliveries(endpointId?: string): Promise<QueuedDelivery[]>;
  /** How many events the workspace has recorded. */
  eventCount(): Promise<number>;
}

let payloadSchemas: Map<string, string> | undefined;

/** Checks a delivery body against its event's payload schema with the generated validators. */
export function expectValidPayload(body: { event: string }): void {
  payloadSchemas ??= webhookPayloadSchemas(loadOpenApiDocument());
  const schema = payloadSchemas.get(body.event);
  expect(schema, `a payload schema for ${body.event}`).to.be.a('string');
  const validate = validators[schema!];
  const ok = validate(body);
  expect(
    ok,
    `${body.event} body ${JSON.stringify(body)} against ${schema}: ${JSON.stringify(validate.errors)}`,
  ).to.equal(true);
}

export async function calendarFixture(
  db: Knex,
  options: { timezone?: string; remindersAhead?: number } = {},
): Promise<CalendarFixture> {
  const base = await fixture(db, { timezone: options.timezone });
  const workspace_id = base.ws.id;
  const insert = async (table: string, row: Record<string, unknown>): Promise<string> => {
    const id = randomUUID();
    await db(table).insert({ id, workspace_id, ...row });
    return id;
  };
  let seq = 0;
  let defaultVehicle: Promise<string> | undefined;
  let defaultCustomer: Promise<string> | undefined;

  const f: CalendarFixture = {
    ...base,
    remindersAhead: async (n) => {
      await db('workspaces').where({ id: workspace_id }).update({ reminders_ahead: n });
    },
    fullBooking: async (o) => {
      const customerId = o.customerId ?? (await (defaultCustomer ??= base.customer({ name: 'Omar Al Hashimi' })));
      const vehicleId = o.vehicleId ?? (await (defaultVehicle ??= base.vehicle()));
      return insert('bookings', {
        number: o.number ?? `BK-${++seq}-${randomUUID().slice(0, 6)}`,
        customer_id: customerId,
        vehicle_id: vehicleId,
        type: o.type ?? 'daily',
        status: o.status,
        pickup_at: at(o.pickupAt),
        dropoff_at: at(o.dropoffAt),
        original_dropoff_at: o.originalDropoffAt ? at(o.originalDropoffAt) : null,
        amount: o.amount ?? 100000,
        monthly_amount: o.monthlyAmount ?? null,
        confirmed_at: o.status === 'pending' ? null : at(o.pickupAt),
        returned_at: o.returnedAt ? at(o.returnedAt) : null,
      });
    },
    customerWithContacts: (o) =>
      insert('customers', { name: o.name, phone: o.phone, email: o.email, id_document: o.idDocument }),
    document: (o) =>
      insert('vehicle_documents', {
        vehicle_id: o.vehicleId,
        doc_type: o.docType ?? 'insurance',
        detail: o.detail ?? null,
        expires_at: o.expiresAt,
      }),
    installment: (o) =>
      insert('installments', {
        booking_id: o.bookingId,
        number: o.number,
        of: o.of,
        due_date: o.dueDate,
        amount: o.amount,
        invoice_id: o.invoiceId ?? null,
        paid_at: o.paidAt ? at(o.paidAt) : null,
      }),
    fine: (o) =>
      insert('fines', {
        kind: o.kind ?? 'fine',
        type: o.type ?? 'speeding',
        date: o.date,
        amount: o.amount,
        authority: o.authority ?? 'Dubai Police',
        violation: o.violation === undefined ? 'Exceeding the speed limit by not more than 20 km/h' : o.violation,
        number: o.number ?? `DP-${randomUUID().slice(0, 8)}`,
        status: o.status ?? 'unpaid',
        vehicle_id: o.vehicleId,
        booking_id: o.bookingId ?? null,
        customer_id: o.customerId ?? null,
        recorded_at: at(o.recordedAt),
      }),
    extension: (o) =>
      insert('extensions', {
        booking_id: o.bookingId,
        added_days: o.addedDays,
        amount: o.amount,
        previous_dropoff_at: at(o.previousDropoffAt),
        new_dropoff_at: at(o.newDropoffAt),
        created_at: at(o.createdAt),
      }),
    integration: (o) =>
      insert('integrations', {
        integration: o.integration,
        status: o.status,
        detail: o.detail ?? null,
        hint: o.hint ?? null,
        failing_since: o.failingSince ? at(o.failingSince) : null,
      }),
    endpoint: async (o = {}) => {
      const id = randomUUID();
      await db('webhook_endpoints').insert({
        id,
        workspace_id,
        name: `Receiver ${++seq}`,
        url: 'https://receiver.example/hooks',
        events: o.events ?? [],
        ...sealedSecretColumns(id, `whsec_${randomUUID().replace(/-/g, '')}`),
        is_active: o.active ?? true,
        disabled_reason: o.active === false ? 'manual' : null,
      });
      return id;
    },
    deliveries: async (endpointId) => {
      const query = db('deliveries')
        .where({ workspace_id })
        .orderBy([{ column: 'created_at' }, { column: 'id' }]);
      if (endpointId) query.andWhere({ endpoint_id: endpointId });
      const rows: { id: string; endpoint_id: string; event: string; body: string }[] = await query.select(
        'id',
        'endpoint_id',
        'event',
        'body',
      );
      return rows.map((row) => {
        const body = JSON.parse(row.body);
        expectValidPayload(body);
        expect(body.id).to.equal(row.id);
        expect(body.event).to.equal(row.event);
        return { id: row.id, endpointId: row.endpoint_id, event: row.event, body, raw: row.body };
      });
    },
    eventCount: async () =>
      Number((await db('events').where({ workspace_id }).count<{ count: string }[]>('* as count'))[0].count),
  };
  if (options.remindersAhead !== undefined) await f.remindersAhead(options.remindersAhead);
  return f;
}

/**
 * A workspace whose calendar has started (its first sweep ran at `now`, so what is written from then on raises derived
 * events), with an endpoint for every event, a customer and an invoice of 50,000 fils due 2026-12-30.
 */
export async function startedCalendar(db: Knex, workerDb: Knex, now: string) {
  const f = await calendarFixture(db);
  const endpoint = await f.endpoint();
  const customerId = await f.customer({ name: 'Omar Al Hashimi' });
  const invoiceId = await f.invoice({ customerId, total: 50000, issueDate: '2026-11-18', dueDate: '2026-12-30' });
  await runCalendarSweep(workerDb, new Date(now), { workspaceIds: [f.ws.id] });
  return { f, endpoint, customerId, invoiceId };
}
