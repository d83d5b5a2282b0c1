import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { testDatabase } from './support/database.js';
import { expectRollupsExact } from './support/rollups.js';
import { expectRejection } from './support/assertions.js';
import { createWorkspace } from '../src/core/workspaces.js';
import { InputError } from '../src/errors.js';
import { ImportError, importDocument, readImportFile } from '../src/core/import/import-document.js';
import type { FleetImportDocument } from '../generated/import-document.js';
import { operator } from './support/actors.js';

const TABLES = [
  'owners',
  'fleets',
  'vehicles',
  'maintenance',
  'vehicle_documents',
  'customers',
  'bookings',
  'extensions',
  'invoices',
  'payments',
  'installments',
  'expenses',
  'fines',
  'integrations',
];

const uuid = () => crypto.randomUUID();

/** A small workspace with one record of every kind (two vehicles), all ids fresh. */
function sampleDocument() {
  const owner = { id: uuid(), name: 'Al Noor Rentals' };
  const fleet = { id: uuid(), code: 'NOOR', name: 'Al Noor fleet', ownerId: owner.id };
  const car = {
    id: uuid(),
    fleetId: fleet.id,
    make: 'Toyota',
    model: 'Camry',
    plate: 'Dubai A 12345',
    category: 'sedan',
    dailyRate: 15000,
    state: 'active' as const,
  };
  const van = {
    id: uuid(),
    fleetId: fleet.id,
    make: 'Nissan',
    model: 'Urvan',
    plate: 'Dubai B 777',
    category: 'van',
    dailyRate: 22000,
    state: 'in_service' as const,
  };
  const customer = { id: uuid(), name: 'Layla Haddad', phone: '+971500000000', email: 'layla@example.com' };
  const booking = {
    id: uuid(),
    number: 'BK-1001',
    customerId: customer.id,
    vehicleId: car.id,
    type: 'daily' as const,
    status: 'active' as const,
    pickupAt: '2026-11-20T08:00:00.000Z',
    dropoffAt: '2026-11-25T08:00:00.000Z',
    amount: 75000,
  };
  const invoice = {
    id: uuid(),
    number: 'INV-1001',
    customerId: customer.id,
    bookingId: booking.id,
    purpose: 'rental' as const,
    issueDate: '2026-11-20',
    dueDate: '2026-11-27',
    total: 10000,
    status: 'issued' as const,
  };
  const doc = {
    owners: [owner],
    fleets: [fleet],
    vehicles: [car, van],
    maintenance: [
      {
        id: uuid(),
        vehicleId: van.id,
        startsAt: '2026-11-21T00:00:00.000Z',
        endsAt: '2026-11-23T00:00:00.000Z',
        reason: 'brakes',
      },
    ],
    vehicleDocuments: [{ id: uuid(), vehicleId: car.id, docType: 'insurance' as const, expiresAt: '2027-01-31' }],
    customers: [customer],
    bookings: [booking],
    extensions: [
      {
        id: uuid(),
        bookingId: booking.id,
        addedDays: 2,
        amount: 30000,
        previousDropoffAt: '2026-11-23T08:00:00.000Z',
        newDropoffAt: '2026-11-25T08:00:00.000Z',
        createdAt: '2026-11-22T10:00:00.000Z',
      },
    ],
    invoices: [invoice],
    payments: [
      {
        id: uuid(),
        kind: 'charge' as const,
        amount: 6000,
        customerId: customer.id,
        bookingId: booking.id,
        invoiceId: invoice.id,
        at: '2026-11-20T09:00:00.000Z',
      },
      {
        id: uuid(),
        kind: 'refund' as const,
        amount: 1000,
        customerId: customer.id,
        bookingId: booking.id,
        invoiceId: invoice.id,
        at: '2026-11-21T09:00:00.000Z',
      },
      {
        id: uuid(),
        kind: 'charge' as const,
        status: 'canceled' as const,
        amount: 2000,
        customerId: customer.id,
        invoiceId: invoice.id,
        at: '2026-11-21T10:00:00.000Z',
      },
      {
        id: uuid(),
        kind: 'deposit' as const,
        amount: 50000,
        customerId: customer.id,
        bookingId: booking.id,
        at: '2026-11-20T09:00:00.000Z',
      },
    ],
    installments: [{ id: uuid(), bookingId: booking.id, number: 1, of: 3, dueDate: '2026-12-01', amount: 25000 }],
    expenses: [{ id: uuid(), vehicleId: car.id, category: 'fuel', amount: 4000, date: '2026-11-21' }],
    fines: [
      {
        id: uuid(),
        kind: 'fine' as const,
        type: 'speeding',
        date: '2026-11-21',
        amount: 60000,
        authority: 'Dubai Police',
        number: 'F-1',
        status: 'unpaid',
        vehicleId: car.id,
        bookingId: booking.id,
        customerId: customer.id,
        recordedAt: '2026-11-22T07:00:00.000Z',
      },
    ],
    integrations: [
      {
        id: uuid(),
        integration: 'payment-gateway',
        status: 'failing' as const,
        detail: 'timeout',
        failingSince: '2026-11-22T06:00:00.000Z',
      },
    ],
  } satisfies FleetImportDocument;
  return doc;
}

async function rowCounts(db: Knex, workspaceId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    const [{ count }] = await db(table).where({ workspace_id: workspaceId }).count({ count: '*' });
    counts[table] = Number(count);
  }
  return counts;
}

const noRows = Object.fromEntries(TABLES.map((t) => [t, 0]));

let slugCounter = 0;
async function freshWorkspace(db: Knex) {
  return createWorkspace(db, operator, { slug: `import-${process.pid}-${Date.now().toString(36)}-${++slugCounter}` });
}

describe('importDocument', () => {
  it('imports every kind of record, counts them, and updates them on re-import', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const doc = sampleDocument();
    const first = await importDocument(db, operator, { workspace: ws.slug, document: doc });
    expect(first).to.deep.equal({
      imported: {
        owners: 1,
        fleets: 1,
        vehicles: 2,
        maintenance: 1,
        vehicleDocuments: 1,
        customers: 1,
        bookings: 1,
        extensions: 1,
        invoices: 1,
        payments: 4,
        installments: 1,
        expenses: 1,
        fines: 1,
        integrations: 1,
      },
    });
    const counts = await rowCounts(db, ws.id);
    expect(counts).to.include({ vehicles: 2, payments: 4 });

    doc.vehicles[0].dailyRate = 17500;
    doc.customers[0].name = 'Layla H.';
    const again = await importDocument(db, operator, { workspace: ws.slug, document: doc });
    expect(again.imported.vehicles).to.equal(2);
    expect(await rowCounts(db, ws.id)).to.deep.equal(counts);
    expect(await db('vehicles').where({ id: doc.vehicles[0].id }).first('daily_rate', 'plate_key')).to.deep.equal({
      daily_rate: 17500,
      plate_key: 'dubaia12345',
    });
    expect((await db('customers').where({ id: doc.customers[0].id }).first('name')).name).to.equal('Layla H.');
  });

  it('reports only the keys present in the document, and fills defaults and absent optional fields', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const doc = sampleDocument();
    await importDocument(db, operator, { workspace: ws.slug, document: doc });
    const partial = { customers: [{ id: uuid(), name: 'Omar' }], integrations: [] };
    expect(await importDocument(db, operator, { workspace: ws.slug, document: partial })).to.deep.equal({
      imported: { customers: 1, integrations: 0 },
    });
    expect(
      await db('customers').where({ id: partial.customers[0].id }).first('phone', 'email', 'id_document'),
    ).to.deep.equal({ phone: null, email: null, id_document: null });
    const booking = await db('bookings')
      .where({ id: doc.bookings[0].id })
      .first('original_dropoff_at', 'dropoff_at', 'monthly_amount');
    expect(booking.original_dropoff_at.toISOString()).to.equal(doc.bookings[0].dropoffAt);
    expect(booking.monthly_amount).to.equal(null);
    const statuses = await db('payments')
      .whereIn(
        'id',
        doc.payments.map((p) => p.id),
      )
      .pluck('status');
    expect(statuses.sort()).to.deep.equal(['canceled', 'captured', 'captured', 'captured']);
  });

  it('keeps derived columns right: invoice balance after payments, and after a payment changes', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const doc = sampleDocument();
    await importDocument(db, operator, { workspace: ws.slug, document: doc });
    // 10000 total - (6000 charge - 1000 refund); the canceled charge and the deposit count nowhere.
    const invoice = () => db('invoices').where({ id: doc.invoices[0].id }).first('paid', 'balance');
    expect(await invoice()).to.deep.equal({ paid: 5000, balance: 5000 });
    expect((await db('bookings').where({ id: doc.bookings[0].id }).first('collected')).collected).to.equal(5000);

    doc.payments[1].status = 'canceled';
    await importDocument(db, operator, { workspace: ws.slug, document: doc });
    expect(await invoice()).to.deep.equal({ paid: 6000, balance: 4000 });
  });

  it('a first import (totals computed once at the end) and a re-import (totals kept by the triggers) both leave every total exact', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const doc = sampleDocument();
    const stages = (lines: string[]) => new Set(lines.map((line) => line.split(' | ')[1]));
    const lines: string[] = [];
    const stream = {
      isTTY: false,
      write: (text: string) => lines.push(...text.split('\n').filter(Boolean)),
    } as unknown as NodeJS.WriteStream;
    await importDocument(db, operator, {
      workspace: ws.slug,
      document: doc,
      progress: true,
      progressStream: stream,
      progressIntervalMs: 0,
    });
    // into the empty workspace: the bulk path, whose last stage is computing the totals
    expect(stages(lines).has('running totals')).to.equal(true);
    const first = await expectRollupsExact(db, ws.id);
    // 6000 charge - 1000 refund (the canceled charge counts nowhere) against the 10000 invoice; a 50000 deposit
    expect(first.totals).to.deep.include({
      collected: 5000,
      deposits: 50000,
      billed: 10000,
      outstanding: 5000,
      expenses: 4000,
      open_invoices: 1,
    });
    expect(first.bookings).to.deep.equal([{ id: doc.bookings[0].id, collected: 5000, balance_due: 5000 }]);

    doc.payments[0].amount = 10000;
    doc.invoices[0].dueDate = '2026-12-04';
    doc.vehicles[1].state = 'active';
    lines.length = 0;
    await importDocument(db, operator, {
      workspace: ws.slug,
      document: doc,
      progress: true,
      progressStream: stream,
      progressIntervalMs: 0,
    });
    // the workspace holds records now: the triggers keep the totals
    expect(stages(lines).has('running totals')).to.equal(false);
    const again = await expectRollupsExact(db, ws.id);
    // 10000 charge - 1000 refund: the invoice is paid 9000 of 10000
    expect(again.totals).to.deep.include({ collected: 9000, outstanding: 1000, open_invoices: 1 });
    // two active cars, one of them out on the active booking
    expect(again.vehicleStates).to.deep.equal([{ state: 'active', count: 2, rented: 1 }]);
  });

  it('shows progress as lines, not a redrawn bar, where stderr is not a terminal', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const lines: string[] = [];
    const stream = {
      isTTY: false,
      write: (text: string) => lines.push(...text.split('\n').filter(Boolean)),
    } as unknown as NodeJS.WriteStream;
    await importDocument(db, operator, {
      workspace: ws.slug,
      document: sampleDocument(),
      progress: true,
      progressStream: stream,
      progressIntervalMs: 0,
    });
    expect(lines.length).to.be.above(1);
    for (const line of lines)
      expect(line).to.match(/^import: \d{1,3}% \| [a-zA-Z ]+ \| [\d,]+\/[\d,]+ records \| \d+m \d\ds$/);
    // 1 + 1 + 2 + 1 + 1 + 1 + 1 + 1 + 1 + 4 + 1 + 1 + 1 + 1 records
    expect(lines[0]).to.match(/^import: 0% \| starting \| 0\/18 records/);
    expect(lines.at(-1)).to.match(/^import: 100% \| running totals \| 18\/18 records/);
    expect(lines.join('\n')).not.to.include('\r');
  });

  describe('refuses an invalid document, naming the first bad path, and writes nothing', () => {
    const cases: [string, (doc: Record<string, any>) => void, string][] = [
      [
        'a bad enum',
        (d) => {
          d.vehicles[1].state = 'broken';
        },
        'at /vehicles/1/state: must be one of active, in_service, inactive',
      ],
      [
        'a missing required field',
        (d) => {
          delete d.customers[0].name;
        },
        'at /customers/0/name: is required',
      ],
      [
        'a negative amount',
        (d) => {
          d.payments[2].amount = -5;
        },
        'at /payments/2/amount: must be >= 0',
      ],
      [
        'a decimal amount',
        (d) => {
          d.vehicles[0].dailyRate = 150.5;
        },
        'at /vehicles/0/dailyRate: must be integer',
      ],
      [
        'a non-UUID id',
        (d) => {
          d.owners[0].id = 'owner-1';
        },
        'at /owners/0/id: must match format "uuid"',
      ],
      [
        'an unknown field',
        (d) => {
          d.fleets[0].colour = 'red';
        },
        'at /fleets/0/colour: is not a known field',
      ],
      [
        'an unknown key',
        (d) => {
          d.drivers = [];
        },
        'at /drivers: is not a known field',
      ],
      [
        'a bad date',
        (d) => {
          d.expenses[0].date = '2026-02-30';
        },
        'at /expenses/0/date: must match format "date"',
      ],
      [
        'a duplicate id',
        (d) => {
          d.vehicles[1].id = d.vehicles[0].id;
        },
        'at /vehicles/1/id: duplicate id (also at /vehicles/0/id)',
      ],
      // The API returns the make as the document bounds it (64 characters): the import may not store a longer one.
      [
        'a make longer than the API returns',
        (d) => {
          d.vehicles[0].make = 'M'.repeat(65);
        },
        'at /vehicles/0/make: must NOT have more than 64 characters',
      ],
    ];
    for (const [what, spoil, message] of cases) {
      it(what, async () => {
        const { db } = await testDatabase();
        const ws = await freshWorkspace(db);
        const doc: Record<string, any> = sampleDocument();
        spoil(doc);
        const err = await expectRejection(
          importDocument(db, operator, { workspace: ws.slug, document: doc }),
          ImportError,
        );
        expect(err.message).to.equal(`invalid import document ${message}`);
        expect(await rowCounts(db, ws.id)).to.deep.equal(noRows);
      });
    }

    it('a document that is not an object', async () => {
      const { db } = await testDatabase();
      const ws = await freshWorkspace(db);
      const err = await expectRejection(
        importDocument(db, operator, { workspace: ws.slug, document: [1, 2] }),
        ImportError,
      );
      expect(err.message).to.equal('invalid import document at /: must be object');
    });
  });

  it('refuses a reference to a missing record and rolls back the whole file', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const doc = sampleDocument();
    const missing = uuid();
    doc.payments[3].invoiceId = missing;
    const err = await expectRejection(importDocument(db, operator, { workspace: ws.slug, document: doc }), ImportError);
    expect(err.message).to.equal(
      `import failed at /payments/3/invoiceId: no invoice ${missing} in workspace "${ws.slug}" (neither in the file nor imported before)`,
    );
    expect(await rowCounts(db, ws.id)).to.deep.equal(noRows);
  });

  it('refuses a reference into another workspace', async () => {
    const { db } = await testDatabase();
    const [a, b] = [await freshWorkspace(db), await freshWorkspace(db)];
    const doc = sampleDocument();
    await importDocument(db, operator, { workspace: a.slug, document: { owners: doc.owners } });
    const err = await expectRejection(
      importDocument(db, operator, { workspace: b.slug, document: { fleets: doc.fleets } }),
      ImportError,
    );
    expect(err.message).to.equal(
      `import failed at /fleets/0/ownerId: no owner ${doc.owners[0].id} in workspace "${b.slug}" (neither in the file nor imported before)`,
    );
  });

  it('refuses an id that belongs to another workspace and leaves that record alone', async () => {
    const { db } = await testDatabase();
    const [a, b] = [await freshWorkspace(db), await freshWorkspace(db)];
    const doc = sampleDocument();
    await importDocument(db, operator, { workspace: a.slug, document: doc });
    const theirs = doc.customers[0];
    const err = await expectRejection(
      importDocument(db, operator, {
        workspace: b.slug,
        document: {
          customers: [
            { id: uuid(), name: 'Mine' },
            { ...theirs, name: 'Stolen' },
          ],
        },
      }),
      ImportError,
    );
    expect(err.message).to.equal('import failed at /customers/1/id: id belongs to another workspace');
    expect(await db('customers').where({ id: theirs.id }).first('workspace_id', 'name')).to.deep.equal({
      workspace_id: a.id,
      name: theirs.name,
    });
    expect(await rowCounts(db, b.id)).to.deep.equal(noRows);
  });

  it('names the record that breaks a unique plate, booking number or cross-field rule', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const plates = sampleDocument();
    plates.vehicles[1].plate = 'dubai a12345';
    expect(
      (await expectRejection(importDocument(db, operator, { workspace: ws.slug, document: plates }), ImportError))
        .message,
    ).to.equal(
      `import failed at /vehicles/1/plate: plate "dubai a12345" is already used by another vehicle in workspace "${ws.slug}"`,
    );

    const good = sampleDocument();
    await importDocument(db, operator, { workspace: ws.slug, document: good });
    const clash = {
      ...sampleDocument().bookings[0],
      id: uuid(),
      customerId: good.customers[0].id,
      vehicleId: good.vehicles[1].id,
    };
    expect(
      (
        await expectRejection(
          importDocument(db, operator, { workspace: ws.slug, document: { bookings: [clash] } }),
          ImportError,
        )
      ).message,
    ).to.equal(
      `import failed at /bookings/0/number: number "BK-1001" is already used by another booking in workspace "${ws.slug}"`,
    );

    const backwards = { ...clash, number: 'BK-2', dropoffAt: '2026-11-19T08:00:00.000Z' };
    expect(
      (
        await expectRejection(
          importDocument(db, operator, { workspace: ws.slug, document: { bookings: [backwards] } }),
          ImportError,
        )
      ).message,
    ).to.equal('import failed at /bookings/0/dropoffAt: dropoffAt must be later than pickupAt');

    const unstarted = { id: uuid(), integration: 'esign', status: 'failing' as const };
    expect(
      (
        await expectRejection(
          importDocument(db, operator, { workspace: ws.slug, document: { integrations: [unstarted] } }),
          ImportError,
        )
      ).message,
    ).to.equal('import failed at /integrations/0/failingSince: a failing integration needs failingSince');
  });

  it('imports more records than fit in one statement', async () => {
    const { db } = await testDatabase();
    const ws = await freshWorkspace(db);
    const expenses = Array.from({ length: 2500 }, (_, i) => ({
      id: uuid(),
      category: 'fuel',
      amount: i,
      date: '2026-11-01',
    }));
    expect(await importDocument(db, operator, { workspace: ws.slug, document: { expenses } })).to.deep.equal({
      imported: { expenses: 2500 },
    });
    const [{ sum }] = await db('expenses').where({ workspace_id: ws.id }).sum({ sum: 'amount' });
    expect(Number(sum)).to.equal((2499 * 2500) / 2);
  });

  it('refuses an unknown workspace', async () => {
    const { db } = await testDatabase();
    const err = await expectRejection(
      importDocument(db, operator, { workspace: 'no-such-workspace', document: {} }),
      InputError,
    );
    expect(err.message).to.equal('no workspace with slug "no-such-workspace"');
  });

  it("answers another workspace's slug to a confined actor as unknown, writing nothing and naming no id", async () => {
    const { db } = await testDatabase();
    const [mine, theirs] = [await freshWorkspace(db), await freshWorkspace(db)];
    const confined = { kind: 'workspace' as const, workspaceId: mine.id, audit: operator.audit };
    const err = await expectRejection(
      importDocument(db, confined, {
        workspace: theirs.slug,
        document: { owners: [{ id: crypto.randomUUID(), name: 'X' }] },
      }),
      InputError,
    );
    expect(err.message).to.equal(`no workspace with slug "${theirs.slug}"`);
    expect(err.message).not.to.include(theirs.id);
    expect(await db('owners').where({ workspace_id: theirs.id })).to.deep.equal([]);
  });
});

describe('readImportFile', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-import-'));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('parses a JSON file', () => {
    const file = path.join(dir, 'ok.json');
    fs.writeFileSync(file, '{"owners": []}');
    expect(readImportFile(file)).to.deep.equal({ owners: [] });
  });

  it('names a missing file and a file that is not JSON', () => {
    const missing = path.join(dir, 'missing.json');
    expect(() => readImportFile(missing)).to.throw(ImportError, `cannot read ${missing}: ENOENT`);
    const broken = path.join(dir, 'broken.json');
    fs.writeFileSync(broken, '{"owners": [');
    expect(() => readImportFile(broken)).to.throw(ImportError, `${broken} is not valid JSON: `);
  });
});
