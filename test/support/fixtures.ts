import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { createWorkspace } from '../../src/core/workspaces.js';
import { operator } from './actors.js';

type Time = Date | string;

const at = (t: Time): Date => (t instanceof Date ? t : new Date(t));

/**
 * A fresh workspace (unique slug) and builders that insert rows into it with sensible defaults, each returning
 * the new row's id. Parents that a row needs and that the test did not name (owner, fleet, customer, vehicle)
 * are created once, on first use.
 *
 *   const f = await fixture(db, { timezone: 'Asia/Dubai' });
 *   const car = await f.vehicle({ make: 'Toyota', plate: 'A 12345' });
 *   const b = await f.booking({ vehicleId: car, status: 'active', pickupAt: '...', dropoffAt: '...' });
 */
export interface Fixture {
  db: Knex;
  /** What the query functions take. */
  ws: { id: string; timezone: string };
  slug: string;
  owner(o?: { name?: string }): Promise<string>;
  fleet(o?: { code?: string; name?: string; ownerId?: string }): Promise<string>;
  vehicle(o?: {
    fleetId?: string;
    make?: string;
    model?: string;
    plate?: string;
    category?: string;
    dailyRate?: number;
    state?: 'active' | 'in_service' | 'inactive';
  }): Promise<string>;
  maintenance(o: { vehicleId: string; startsAt: Time; endsAt: Time; reason?: string }): Promise<string>;
  customer(o?: { name?: string }): Promise<string>;
  booking(o: {
    vehicleId?: string;
    customerId?: string;
    status?: 'pending' | 'confirmed' | 'active' | 'completed' | 'canceled';
    type?: 'daily' | 'monthly' | 'lease' | 'rent_to_own';
    pickupAt: Time;
    dropoffAt: Time;
    amount?: number;
    number?: string;
  }): Promise<string>;
  invoice(o: {
    customerId?: string;
    bookingId?: string;
    total: number;
    dueDate: string;
    issueDate?: string;
    status?: 'issued' | 'void';
    purpose?: string;
    number?: string;
  }): Promise<string>;
  payment(o: {
    kind?: 'charge' | 'refund' | 'deposit' | 'deposit_release';
    status?: 'captured' | 'canceled';
    amount: number;
    /** Defaults to the customer of the invoice or booking named, else the default customer. */
    customerId?: string;
    bookingId?: string;
    invoiceId?: string;
    at: Time;
  }): Promise<string>;
  expense(o: { amount: number; date: string; category?: string; vehicleId?: string }): Promise<string>;
}

export async function fixture(db: Knex, options: { timezone?: string; slug?: string } = {}): Promise<Fixture> {
  const slug = options.slug ?? `q-${randomUUID().slice(0, 12)}`;
  const workspace = await createWorkspace(db, operator, { slug, timezone: options.timezone ?? 'Asia/Dubai' });
  const workspace_id = workspace.id;
  let seq = 0;
  const next = () => ++seq;
  const customerOf = new Map<string, string>();
  const defaults: {
    owner?: Promise<string>;
    fleet?: Promise<string>;
    customer?: Promise<string>;
    vehicle?: Promise<string>;
  } = {};

  const insert = async (table: string, row: Record<string, unknown>): Promise<string> => {
    const id = randomUUID();
    await db(table).insert({ id, workspace_id, ...row });
    return id;
  };

  const f: Fixture = {
    db,
    ws: { id: workspace.id, timezone: workspace.timezone },
    slug,
    owner: (o = {}) => insert('owners', { name: o.name ?? `Owner ${next()}` }),
    fleet: async (o = {}) => {
      const n = next();
      const ownerId = o.ownerId ?? (await (defaults.owner ??= f.owner()));
      return insert('fleets', {
        owner_id: ownerId,
        code: o.code ?? `F${String(n).padStart(3, '0')}`,
        name: o.name ?? `Fleet ${n}`,
      });
    },
    vehicle: async (o = {}) => {
      const n = next();
      const fleetId = o.fleetId ?? (await (defaults.fleet ??= f.fleet()));
      return insert('vehicles', {
        fleet_id: fleetId,
        make: o.make ?? 'Toyota',
        model: o.model ?? 'Corolla',
        plate: o.plate ?? `DXB ${10000 + n}`,
        category: o.category ?? 'sedan',
        daily_rate: o.dailyRate ?? 15000,
        state: o.state ?? 'active',
      });
    },
    maintenance: (o) =>
      insert('maintenance', {
        vehicle_id: o.vehicleId,
        starts_at: at(o.startsAt),
        ends_at: at(o.endsAt),
        reason: o.reason ?? null,
      }),
    customer: (o = {}) => insert('customers', { name: o.name ?? `Customer ${next()}` }),
    booking: async (o) => {
      const n = next();
      const customerId = o.customerId ?? (await (defaults.customer ??= f.customer()));
      const vehicleId = o.vehicleId ?? (await (defaults.vehicle ??= f.vehicle()));
      const id = await insert('bookings', {
        number: o.number ?? `B-${n}`,
        customer_id: customerId,
        vehicle_id: vehicleId,
        type: o.type ?? 'daily',
        status: o.status ?? 'confirmed',
        pickup_at: at(o.pickupAt),
        dropoff_at: at(o.dropoffAt),
        amount: o.amount ?? 0,
      });
      customerOf.set(id, customerId);
      return id;
    },
    invoice: async (o) => {
      const n = next();
      const customerId =
        o.customerId ?? (o.bookingId && customerOf.get(o.bookingId)) ?? (await (defaults.customer ??= f.customer()));
      const id = await insert('invoices', {
        number: o.number ?? `INV-${n}`,
        customer_id: customerId,
        booking_id: o.bookingId ?? null,
        purpose: o.purpose ?? 'rental',
        issue_date: o.issueDate ?? o.dueDate,
        due_date: o.dueDate,
        total: o.total,
        status: o.status ?? 'issued',
      });
      customerOf.set(id, customerId);
      return id;
    },
    payment: async (o) => {
      const customerId =
        o.customerId ??
        (o.invoiceId && customerOf.get(o.invoiceId)) ??
        (o.bookingId && customerOf.get(o.bookingId)) ??
        (await (defaults.customer ??= f.customer()));
      return insert('payments', {
        kind: o.kind ?? 'charge',
        status: o.status ?? 'captured',
        amount: o.amount,
        customer_id: customerId,
        booking_id: o.bookingId ?? null,
        invoice_id: o.invoiceId ?? null,
        at: at(o.at),
      });
    },
    expense: (o) =>
      insert('expenses', {
        amount: o.amount,
        date: o.date,
        category: o.category ?? 'fuel',
        vehicle_id: o.vehicleId ?? null,
      }),
  };
  return f;
}
