// npm run bench:versions: what the per-workspace data version (migration 20261125000500) costs the database's
// writers, measured against the same writes with its triggers switched off, in the same run:
//   1. one-row writes, one connection: per table, a one-row INSERT and a one-row UPDATE, each its own transaction,
//      mean microseconds per write with the version triggers off and on, and the ratio;
//   2. concurrent writers in one workspace: 8 connections each writing one row per transaction into the same workspace
//      (maintenance inserts, vehicle updates of rows of their own, and inserts whose transaction stays open 2 ms after
//      the write), writes a second with the triggers off, on (the
//      8 counters of the migration) and on with the counters folded into one row (the simple design it replaced),
//      to show what the slots are for.
// The cluster commits without fsync (as the API bench does): a disk flush per commit would hide the triggers' own
// cost behind the disk's. Rounds alternate the variants (so a noisy moment hits each alike); medians are reported.
// Data: DATABASE_URL, or the embedded cluster under .data/versions-pg (port FRS_BENCH_PG_PORT, default 54491), a
// workspace of its own per run, deleted at the end. Options: BENCH_WRITES per measurement (default 2000, at most 3 s),
// BENCH_SECONDS per concurrent measurement (default 4), BENCH_ROUNDS (default 3).
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { processConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { createWorkspace } from '../src/core/workspaces.js';
import { cliActor } from '../src/core/audit.js';

const WRITES = Number(process.env.BENCH_WRITES ?? 2000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const WRITERS = 8;
/** A one-row measurement stops after this long, whatever its count (a payment costs milliseconds). */
const MAX_MS = 3000;

const database = await openDatabase(
  process.env.DATABASE_URL
    ? { schema: 'migrate' }
    : {
        embeddedDir: path.join(processConfig().dataDir, 'versions-pg'),
        embeddedPort: Number(process.env.FRS_BENCH_PG_PORT ?? 54491),
        embeddedDurable: false,
        schema: 'migrate',
      },
);
const { db, url } = database;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const ws = (await createWorkspace(db, cliActor(), { slug: `versions-${Date.now().toString(36)}` })).id;
const owner = randomUUID();
const fleet = randomUUID();
const customer = randomUUID();
await db('owners').insert({ id: owner, workspace_id: ws, name: 'Owner' });
await db('fleets').insert({ id: fleet, workspace_id: ws, owner_id: owner, code: 'F1', name: 'Fleet' });
await db('customers').insert({ id: customer, workspace_id: ws, name: 'Customer' });
const vehicles = Array.from({ length: 64 }, () => randomUUID());
let plate = 0;
const vehicleRow = (id: string) => ({
  id,
  workspace_id: ws,
  fleet_id: fleet,
  make: 'Toyota',
  model: 'Corolla',
  plate: `P ${++plate}`,
  category: 'sedan',
  daily_rate: 15000,
  state: 'active',
});
await db('vehicles').insert(vehicles.map(vehicleRow));
const booking = randomUUID();
await db('bookings').insert({
  id: booking,
  workspace_id: ws,
  number: 'B-1',
  customer_id: customer,
  vehicle_id: vehicles[0],
  type: 'daily',
  status: 'confirmed',
  pickup_at: '2026-12-01T06:00:00Z',
  dropoff_at: '2026-12-02T06:00:00Z',
  amount: 10000,
});
const invoice = randomUUID();
await db('invoices').insert({
  id: invoice,
  workspace_id: ws,
  number: 'I-1',
  customer_id: customer,
  booking_id: booking,
  purpose: 'rental',
  issue_date: '2026-11-01',
  due_date: '2026-11-20',
  total: 10000,
  status: 'issued',
});

let n = 0;
/** One-row writes per table: an INSERT (a new row each time) and an UPDATE of one row. */
const WRITES_BY_TABLE: Array<{ table: string; insert: () => [string, unknown[]]; update: [string, unknown[]] }> = [
  {
    table: 'vehicles',
    insert: () => [
      "INSERT INTO vehicles (id, workspace_id, fleet_id, make, model, plate, category, daily_rate, state) VALUES ($1, $2, $3, 'Kia', 'Rio', $4, 'compact', 9000, 'active')",
      [randomUUID(), ws, fleet, `R ${++n}`],
    ],
    update: ['UPDATE vehicles SET daily_rate = daily_rate + 1 WHERE id = $1', [vehicles[1]]],
  },
  {
    table: 'customers',
    insert: () => [
      'INSERT INTO customers (id, workspace_id, name) VALUES ($1, $2, $3)',
      [randomUUID(), ws, `Customer ${++n}`],
    ],
    update: ["UPDATE customers SET name = 'Customer' WHERE id = $1", [customer]],
  },
  {
    table: 'bookings',
    insert: () => [
      "INSERT INTO bookings (id, workspace_id, number, customer_id, vehicle_id, type, status, pickup_at, dropoff_at, amount) VALUES ($1, $2, $3, $4, $5, 'daily', 'pending', '2027-01-01T06:00:00Z', '2027-01-02T06:00:00Z', 5000)",
      [randomUUID(), ws, `B-${++n}`, customer, vehicles[2]],
    ],
    update: ['UPDATE bookings SET amount = amount + 1 WHERE id = $1', [booking]],
  },
  {
    table: 'invoices',
    insert: () => [
      "INSERT INTO invoices (id, workspace_id, number, customer_id, purpose, issue_date, due_date, total, status) VALUES ($1, $2, $3, $4, 'other', '2026-11-01', '2026-12-01', 1000, 'issued')",
      [randomUUID(), ws, `I-${++n}`, customer],
    ],
    update: ['UPDATE invoices SET total = total + 1 WHERE id = $1', [invoice]],
  },
  {
    table: 'payments',
    insert: () => [
      "INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, invoice_id, at) VALUES ($1, $2, 'charge', 'captured', 1, $3, $4, '2026-11-10T10:00:00Z')",
      [randomUUID(), ws, customer, invoice],
    ],
    update: [
      'UPDATE payments SET amount = amount + 1 WHERE id = (SELECT id FROM payments WHERE workspace_id = $1 LIMIT 1)',
      [ws],
    ],
  },
  {
    table: 'maintenance',
    insert: () => [
      "INSERT INTO maintenance (id, workspace_id, vehicle_id, starts_at, ends_at) VALUES ($1, $2, $3, '2027-02-01T06:00:00Z', '2027-02-02T06:00:00Z')",
      [randomUUID(), ws, vehicles[3]],
    ],
    update: [
      "UPDATE maintenance SET reason = 'service' WHERE id = (SELECT id FROM maintenance WHERE workspace_id = $1 LIMIT 1)",
      [ws],
    ],
  },
  {
    table: 'expenses',
    insert: () => [
      "INSERT INTO expenses (id, workspace_id, category, amount, date) VALUES ($1, $2, 'fuel', 100, '2026-11-10')",
      [randomUUID(), ws],
    ],
    update: [
      'UPDATE expenses SET amount = amount + 1 WHERE id = (SELECT id FROM expenses WHERE workspace_id = $1 LIMIT 1)',
      [ws],
    ],
  },
];

const TRIGGERS = (
  await db.raw(
    `SELECT tgrelid::regclass::text AS tbl, tgname FROM pg_trigger WHERE tgname LIKE '%\\_data\\_version\\_%' AND NOT tgisinternal`,
  )
).rows as Array<{ tbl: string; tgname: string }>;
/** Switches the version triggers off or on for everyone (ALTER TABLE ... DISABLE TRIGGER: the schema owner's right). */
async function versionTriggers(on: boolean): Promise<void> {
  await db.raw(
    TRIGGERS.map((t) => `ALTER TABLE ${t.tbl} ${on ? 'ENABLE ALWAYS' : 'DISABLE'} TRIGGER ${t.tgname};`).join('\n'),
  );
}
/** The function as migrated (8 counters, a free one taken), or one counting every change in one row per workspace. */
const MIGRATED = (await db.raw(`SELECT pg_get_functiondef('workspace_data_version_bump()'::regprocedure) AS def`))
  .rows[0].def as string;
const ONE_ROW = `CREATE OR REPLACE FUNCTION workspace_data_version_bump() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $fn$
  BEGIN
    IF pg_trigger_depth() > 1 THEN RETURN NULL; END IF;
    INSERT INTO workspace_data_versions AS v (workspace_id, area, slot, changes)
    SELECT DISTINCT c.workspace_id, TG_ARGV[0], 0, 1 FROM new_rows c
    ON CONFLICT (workspace_id, area, slot) DO UPDATE SET changes = v.changes + 1;
    RETURN NULL;
  END $fn$`;
async function slots(design: 'migrated' | 'one row'): Promise<void> {
  await db.raw(design === 'migrated' ? MIGRATED : ONE_ROW);
}

async function client(): Promise<pg.Client> {
  const c = new pg.Client(url);
  await c.connect();
  return c;
}

/**
 * Mean microseconds of up to `WRITES` one-row writes (at most MAX_MS of them) on one connection, each its own
 * transaction; the rows an insert made are deleted after (not timed), so that every measurement starts from the same
 * data (the running totals' cost grows with the rows a customer or invoice has).
 */
async function oneRowWrites(c: pg.Client, table: string, write: () => [string, unknown[]]): Promise<number> {
  const made: unknown[] = [];
  const run = async () => {
    const [text, values] = write();
    await c.query(text, values);
    if (text.startsWith('INSERT')) made.push(values[0]);
  };
  for (let i = 0; i < 20; i++) await run(); // warm-up: plans, caches
  const started = process.hrtime.bigint();
  const until = performance.now() + MAX_MS;
  let n = 0;
  while (n < WRITES && performance.now() < until) {
    await run();
    n++;
  }
  const us = Number(process.hrtime.bigint() - started) / 1000 / n;
  if (made.length > 0) await c.query(`DELETE FROM ${table} WHERE id = ANY ($1)`, [made]);
  return us;
}

/** Writes a second from WRITERS connections, each writing one row per transaction into the workspace. */
async function concurrentWrites(clients: pg.Client[], write: (writer: number) => [string, unknown[]]): Promise<number> {
  let done = 0;
  const until = performance.now() + SECONDS * 1000;
  await Promise.all(
    clients.map(async (c, writer) => {
      while (performance.now() < until) {
        const [text, values] = write(writer);
        await (values.length > 0 ? c.query(text, values) : c.query(text));
        done++;
      }
    }),
  );
  return done / SECONDS;
}

const single = await client();
const writers = await Promise.all(Array.from({ length: WRITERS }, client));
type Variant = 'off' | 'on';
const oneRow: Record<string, Record<Variant, number[]>> = {};
const concurrent: Record<string, Record<'off' | 'on' | 'one row', number[]>> = {};
const concurrentWrite: Record<string, (writer: number) => [string, unknown[]]> = {
  'maintenance inserts': (writer) => [
    "INSERT INTO maintenance (id, workspace_id, vehicle_id, starts_at, ends_at) VALUES ($1, $2, $3, '2027-03-01T06:00:00Z', '2027-03-02T06:00:00Z')",
    [randomUUID(), ws, vehicles[10 + writer]],
  ],
  'vehicle updates': (writer) => [
    'UPDATE vehicles SET daily_rate = daily_rate + 1 WHERE id = $1',
    [vehicles[20 + writer]],
  ],
  // a writer whose transaction stays open 2 ms after its write (work of its own before COMMIT): the version's lock is
  // held as long, so writers sharing a counter wait for each other
  // (one simple query of four statements: the ids are this bench's own)
  'inserts, 2 ms transactions': (writer) => [
    `BEGIN; INSERT INTO maintenance (id, workspace_id, vehicle_id, starts_at, ends_at) VALUES (gen_random_uuid(), '${ws}', '${vehicles[30 + writer]}', '2027-04-01T06:00:00Z', '2027-04-02T06:00:00Z'); SELECT pg_sleep(0.002); COMMIT`,
    [],
  ],
};
try {
  for (let round = 0; round < ROUNDS; round++) {
    // per table, off and on back to back (their order alternating by round), so a noisy moment hits both alike
    for (const w of WRITES_BY_TABLE) {
      for (const variant of (round % 2 === 0 ? ['off', 'on'] : ['on', 'off']) as Variant[]) {
        await versionTriggers(variant === 'on');
        (oneRow[w.table] ??= { off: [], on: [] })[variant].push(await oneRowWrites(single, w.table, w.insert));
        (oneRow[`${w.table} (update)`] ??= { off: [], on: [] })[variant].push(
          await oneRowWrites(single, w.table, () => w.update),
        );
      }
    }
    for (const variant of (round % 2 === 0 ? ['off', 'on', 'one row'] : ['one row', 'on', 'off']) as Array<
      'off' | 'on' | 'one row'
    >) {
      await versionTriggers(variant !== 'off');
      await slots(variant === 'one row' ? 'one row' : 'migrated');
      for (const [name, write] of Object.entries(concurrentWrite))
        (concurrent[name] ??= { off: [], on: [], 'one row': [] })[variant].push(await concurrentWrites(writers, write));
    }
    await slots('migrated');
  }
} finally {
  await versionTriggers(true);
  await slots('migrated');
  await Promise.all([single, ...writers].map((c) => c.end()));
  await db('workspaces').where({ id: ws }).delete();
  await database.close();
}

console.log(
  `data version: writer cost (${os.cpus().length} cores, Node ${process.version}, ${ROUNDS} rounds, medians; fsync off)`,
);
console.log('\n1. one-row writes, one connection, each its own transaction (µs per write)');
console.log(
  `${'write'.padEnd(24)}${'triggers off'.padStart(14)}${'on'.padStart(10)}${'on ÷ off'.padStart(10)}${'+µs'.padStart(8)}`,
);
for (const [name, { off, on }] of Object.entries(oneRow)) {
  const [a, b] = [median(off), median(on)];
  console.log(
    `${(name.includes('(update)') ? name : `${name} (insert)`).padEnd(24)}${a.toFixed(0).padStart(14)}${b.toFixed(0).padStart(10)}${(b / a).toFixed(2).padStart(10)}${(b - a).toFixed(0).padStart(8)}`,
  );
}
console.log(`\n2. ${WRITERS} concurrent writers in one workspace, one row per transaction (writes/s)`);
console.log(
  `${'write'.padEnd(24)}${'triggers off'.padStart(14)}${'on (8 slots)'.padStart(14)}${'on ÷ off'.padStart(10)}${'one row'.padStart(10)}${'÷ off'.padStart(8)}`,
);
for (const [name, r] of Object.entries(concurrent)) {
  const [off, on, one] = [median(r.off), median(r.on), median(r['one row'])];
  console.log(
    `${name.padEnd(24)}${off.toFixed(0).padStart(14)}${on.toFixed(0).padStart(14)}${(on / off).toFixed(2).padStart(10)}${one.toFixed(0).padStart(10)}${(one / off).toFixed(2).padStart(8)}`,
  );
}
