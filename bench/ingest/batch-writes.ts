// Batch writes (issue 32's bench, its batch parts): run alone with `npx tsx bench/ingest/batch-writes.ts`, or call
// runBatchWrites() (bench/ingest.ts does). Measured in one run:
//   1. a batch of 1,000 new records in the `large` data set's mix (per 1,000: 3 vehicles, 14 customers, 282 bookings,
//      282 invoices, 419 payments) through writeRecords (the core the admin API calls, as the admin API's database
//      role), against the same rows written by a bare multi-row INSERT ... ON CONFLICT (id) DO UPDATE, one statement a
//      table in one transaction, into copies of the tables without the service's triggers and foreign keys
//      (CREATE TABLE ... (LIKE ... INCLUDING ALL)); records a second, median of the rounds, and the ratio (target >= 0.3);
//   2. 4 batch writers into 4 workspaces at once for BENCH_SECONDS, against one writer alone: records a second,
//      deadlocks and other errors (target: 0 and 0, together >= 1.5x one).
// The cluster commits without fsync (as the other benches): a disk flush per commit would hide the writes' own cost.
// Data: DATABASE_URL, or the embedded cluster under .data/ingest-pg (port FRS_BENCH_PG_PORT, default 54497); workspaces
// of its own, deleted at the end. Options: BENCH_ROUNDS (default 5), BENCH_SECONDS (default 8).
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import type { Knex } from 'knex';
import { processConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { createWorkspace } from '../../src/core/workspaces.js';
import { writeRecords } from '../../src/core/import/records.js';
import { clusterCpuMicros, postmasterPid } from '../proc-cpu.js';
import { cliActor } from '../../src/core/audit.js';

const TABLES = ['vehicles', 'customers', 'bookings', 'invoices', 'payments'] as const;
const MIX = { vehicles: 3, customers: 14, bookings: 282, invoices: 282, payments: 419 };

export interface BatchWriteFigures {
  batchRecords: number;
  writeRecordsPerSecond: number;
  bareInsertPerSecond: number;
  /** The bare statements into the service's own tables (its triggers and keys): where the time goes. */
  triggeredInsertPerSecond: number;
  /** CPU time a record cost, in µs, in PostgreSQL and in this Node process: writeRecords, and the bare insert. */
  cpuPerRecordMicros: { writeRecords: { postgres: number; node: number }; bare: { postgres: number; node: number } };
  ratio: number;
  oneWriterPerSecond: number;
  fourWritersPerSecond: number;
  fourWritersRatio: number;
  deadlocks: number;
  errors: number;
}

interface Workspace {
  id: string;
  fleet: string;
  vehicles: string[];
  customers: string[];
}

async function workspaceWithParents(db: Knex, name: string): Promise<Workspace> {
  const { id } = await createWorkspace(db, cliActor(), {
    slug: `${name}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e6)}`,
  });
  const owner = randomUUID();
  const fleet = randomUUID();
  await writeRecords(db, cliActor(), {
    workspaceId: id,
    body: {
      upsert: {
        owners: [{ id: owner, name: 'Owner' }],
        fleets: [{ id: fleet, code: 'F1', name: 'Fleet', ownerId: owner }],
      },
    },
  });
  return { id, fleet, vehicles: [], customers: [] };
}

let serial = 0;
/** A batch of new records in the large data set's mix, pointing at parents in the batch or already written. */
function batchFor(ws: Workspace): Record<string, Array<Record<string, unknown> & { id: string }>> {
  const vehicles = Array.from({ length: MIX.vehicles }, () => ({
    id: randomUUID(),
    fleetId: ws.fleet,
    make: 'Toyota',
    model: 'Corolla',
    plate: `B ${++serial}`,
    category: 'sedan',
    dailyRate: 15000,
    state: 'active',
  }));
  const customers = Array.from({ length: MIX.customers }, () => ({ id: randomUUID(), name: `Customer ${++serial}` }));
  const vehicleIds = [...ws.vehicles.slice(-50), ...vehicles.map((v) => v.id)];
  const customerIds = [...ws.customers.slice(-200), ...customers.map((c) => c.id)];
  const pick = <T>(xs: T[], i: number) => xs[i % xs.length];
  const bookings = Array.from({ length: MIX.bookings }, (_, i) => {
    const start = Date.UTC(2025, 0, 1) + (serial + i) * 3_600_000;
    return {
      id: randomUUID(),
      number: `BK-${++serial}`,
      customerId: pick(customerIds, i),
      vehicleId: pick(vehicleIds, i),
      type: 'daily',
      status: 'completed',
      pickupAt: new Date(start).toISOString(),
      dropoffAt: new Date(start + 2 * 86_400_000).toISOString(),
      amount: 30000,
    };
  });
  const invoices = bookings.map((b) => ({
    id: randomUUID(),
    number: `INV-${++serial}`,
    customerId: b.customerId,
    bookingId: b.id,
    purpose: 'rental',
    issueDate: b.pickupAt.slice(0, 10),
    dueDate: b.dropoffAt.slice(0, 10),
    total: 30000,
    status: 'issued',
  }));
  const payments = Array.from({ length: MIX.payments }, (_, i) => {
    const invoice = pick(invoices, i);
    return {
      id: randomUUID(),
      kind: i % 10 === 9 ? 'refund' : 'charge',
      amount: i % 10 === 9 ? 1000 : 15000,
      customerId: invoice.customerId,
      bookingId: invoice.bookingId,
      invoiceId: invoice.id,
      at: `${invoice.issueDate}T10:00:00.000Z`,
    };
  });
  ws.vehicles.push(...vehicles.map((v) => v.id));
  ws.customers.push(...customers.map((c) => c.id));
  return { vehicles, customers, bookings, invoices, payments };
}

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The same rows by a bare multi-row upsert per table, one transaction, into the trigger-less copies. */
async function bareInsert(
  db: Knex,
  workspaceId: string,
  batch: ReturnType<typeof batchFor>,
  prefix = 'bench_',
  upkeep?: 'inline',
): Promise<void> {
  await db.transaction(async (trx) => {
    // (into the service's tables: their totals kept in the transaction, as a batch keeps them, or queued)
    if (upkeep === 'inline') await trx.raw(`SELECT set_config('frs.upkeep', 'inline', true)`);
    for (const table of TABLES) {
      const rows = batch[table].map((record) =>
        Object.fromEntries([['workspace_id', workspaceId], ...Object.entries(record).map(([k, v]) => [snake(k), v])]),
      );
      const columns = Object.keys(rows[0]).filter((c) => c !== 'id');
      await trx(`${prefix}${table}`).insert(rows).onConflict('id').merge(columns);
    }
  });
}

const count = (batch: ReturnType<typeof batchFor>) => Object.values(batch).reduce((n, rows) => n + rows.length, 0);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function runBatchWrites(
  options: { rounds?: number; seconds?: number; log?: (line: string) => void } = {},
): Promise<BatchWriteFigures> {
  const rounds = options.rounds ?? Number(process.env.BENCH_ROUNDS ?? 5);
  const seconds = options.seconds ?? Number(process.env.BENCH_SECONDS ?? 8);
  const log = options.log ?? ((line: string) => console.log(line));
  const database = await openDatabase(
    process.env.DATABASE_URL
      ? { schema: 'migrate' }
      : {
          embeddedDir: path.join(processConfig().dataDir, 'ingest-pg'),
          embeddedPort: Number(process.env.FRS_BENCH_PG_PORT ?? 54497),
          embeddedDurable: false,
          schema: 'migrate',
        },
  );
  const owner = database.db;
  const admin = database.forRole('ingest');
  const made: string[] = [];
  try {
    for (const table of TABLES) {
      await owner.raw(`DROP TABLE IF EXISTS bench_${table}`);
      await owner.raw(`CREATE TABLE bench_${table} (LIKE ${table} INCLUDING ALL)`);
    }
    // 1. One batch at a time, the two ways alternating.
    const ws = await workspaceWithParents(owner, 'bench-batch');
    made.push(ws.id);
    await writeRecords(admin, cliActor(), { workspaceId: ws.id, body: { upsert: batchFor(ws) } }); // warm-up (compiles the validators, plans)
    // (the copies' rows point at their own parents: those of the bare batches)
    const bareWs: Workspace = { id: ws.id, fleet: ws.fleet, vehicles: [], customers: [] };
    const through: number[] = [];
    const bare: number[] = [];
    const triggered: number[] = [];
    const queued: number[] = [];
    let records = 0;
    const postmaster = await postmasterPid(owner);
    const cpu = { writeRecords: { postgres: 0, node: 0 }, bare: { postgres: 0, node: 0 } };
    /** Runs `step`, adding the CPU it took (the cluster's, this process's) to `into`. */
    const counted = async (into: { postgres: number; node: number }, step: () => Promise<unknown>) => {
      const [postgres, node] = [clusterCpuMicros(postmaster), process.cpuUsage()];
      await step();
      const used = process.cpuUsage(node);
      into.postgres += clusterCpuMicros(postmaster) - postgres;
      into.node += used.user + used.system;
    };
    for (let round = 0; round < rounds; round++) {
      const batch = batchFor(ws);
      records = count(batch);
      let started = performance.now();
      await counted(cpu.writeRecords, () =>
        writeRecords(admin, cliActor(), { workspaceId: ws.id, body: { upsert: batch } }),
      );
      through.push(records / ((performance.now() - started) / 1000));
      const bareBatch = batchFor(bareWs);
      started = performance.now();
      await counted(cpu.bare, () => bareInsert(owner, ws.id, bareBatch));
      bare.push(records / ((performance.now() - started) / 1000));
      // Where the time goes: the same bare statements into the real tables (their triggers and foreign keys), with
      // the totals kept in the transaction (what a batch pays), and queued for the worker (what a direct writer pays).
      started = performance.now();
      await bareInsert(admin, ws.id, batchFor(ws), '', 'inline');
      triggered.push(records / ((performance.now() - started) / 1000));
      started = performance.now();
      await bareInsert(admin, ws.id, batchFor(ws), '');
      queued.push(records / ((performance.now() - started) / 1000));
    }
    const figures = {
      batchRecords: records,
      writeRecordsPerSecond: Math.round(median(through)),
      bareInsertPerSecond: Math.round(median(bare)),
    };
    const triggeredPerSecond = Math.round(median(triggered));
    log(
      `batch of ${records} mixed records: writeRecords ${figures.writeRecordsPerSecond} records/s, bare INSERT ... ON CONFLICT ${figures.bareInsertPerSecond} records/s, ratio ${(figures.writeRecordsPerSecond / figures.bareInsertPerSecond).toFixed(2)}x (target >= 0.3x)`,
    );
    const queuedPerSecond = Math.round(median(queued));
    const perRecord = (c: { postgres: number; node: number }) => ({
      postgres: Math.round(c.postgres / (rounds * records)),
      node: Math.round(c.node / (rounds * records)),
    });
    const cpuPerRecordMicros = { writeRecords: perRecord(cpu.writeRecords), bare: perRecord(cpu.bare) };
    log(
      `  CPU a record cost, µs (PostgreSQL cluster, Node): writeRecords ${JSON.stringify(cpuPerRecordMicros.writeRecords)}, bare ${JSON.stringify(cpuPerRecordMicros.bare)}`,
    );
    log(
      `  where the time goes: the same bare statements into the service's tables (triggers, foreign keys), totals kept in the transaction as a batch keeps them, ${triggeredPerSecond} records/s (${(triggeredPerSecond / figures.bareInsertPerSecond).toFixed(2)}x of bare); writeRecords is ${(figures.writeRecordsPerSecond / triggeredPerSecond).toFixed(2)}x of that; the same statements with the totals queued for the worker (a direct writer's way) ${queuedPerSecond} records/s (${(queuedPerSecond / figures.bareInsertPerSecond).toFixed(2)}x)`,
    );

    // 2. One writer, then 4 into 4 workspaces at once, each sending batches for `seconds`.
    let deadlocks = 0;
    let errors = 0;
    const writer = async (w: Workspace, until: number) => {
      let written = 0;
      while (performance.now() < until) {
        const batch = batchFor(w);
        try {
          await writeRecords(admin, cliActor(), { workspaceId: w.id, body: { upsert: batch } });
          written += count(batch);
        } catch (err) {
          if ((err as { code?: string }).code === '40P01') deadlocks++;
          else errors++;
          if (errors + deadlocks < 4) log(`writer error: ${(err as Error).message.split('\n')[0]}`);
        }
      }
      return written;
    };
    const workspaces = await Promise.all([0, 1, 2, 3].map(() => workspaceWithParents(owner, 'bench-writers')));
    made.push(...workspaces.map((w) => w.id));
    let started = performance.now();
    const one = (await writer(workspaces[0], started + seconds * 1000)) / ((performance.now() - started) / 1000);
    started = performance.now();
    const all =
      (await Promise.all(workspaces.map((w) => writer(w, started + seconds * 1000)))).reduce((a, b) => a + b, 0) /
      ((performance.now() - started) / 1000);
    log(
      `batch writers: 1 writer ${Math.round(one)} records/s; 4 writers into 4 workspaces ${Math.round(all)} records/s together (${(all / one).toFixed(2)}x, target >= 1.5x); deadlocks ${deadlocks}, errors ${errors}`,
    );
    return {
      ...figures,
      triggeredInsertPerSecond: triggeredPerSecond,
      cpuPerRecordMicros,
      ratio: Number((figures.writeRecordsPerSecond / figures.bareInsertPerSecond).toFixed(3)),
      oneWriterPerSecond: Math.round(one),
      fourWritersPerSecond: Math.round(all),
      fourWritersRatio: Number((all / one).toFixed(3)),
      deadlocks,
      errors,
    };
  } finally {
    for (const table of TABLES) await owner.raw(`DROP TABLE IF EXISTS bench_${table}`);
    if (made.length > 0) await owner('workspaces').whereIn('id', made).delete();
    await database.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await runBatchWrites();
}
