// Direct writers (issue 32, point 5): what the service's upkeep (rollups, ledgers, data versions, the change log the
// derived events come from) costs the rental platform when it writes the tables itself. 8 writers do one-row
// transactions straight into one workspace's tables for a fixed time, in this mix (weights in MIX): new bookings,
// bookings out and back (confirmed -> active -> completed), renames of customers, invoices, payments and due dates.
// The same writers then run on copies of the same tables without the service's triggers (CREATE TABLE ... (LIKE ...
// INCLUDING ALL) in a schema of their own: same columns, defaults, checks and indexes), in the same run, so the
// ratios compare like with like on the same machine. Reported: commits a second, p50/p99 latency of a transaction
// (BEGIN to COMMIT), deadlocks and serialization failures, and, for the triggered run with the worker running, the
// p99 from a commit to its derived event being queued (booking.confirmed, booking.completed, invoice.issued,
// payment.captured: events.created_at, the sweep's clock, against the writer's clock after COMMIT returned).
// Where the time goes: each variant's CPU per commit (the PostgreSQL cluster's and this process's, from /proc), the
// writers' backends by state (CPU, or the lock or other event waited on), and a third run of the triggered writers
// with no worker, whose changes are only queued: the writers' own path apart from the fold's work beside them; and a
// run on the copies with the tables' foreign keys added (LIKE copies none), what checking them costs anyway.
//
// Runnable alone (`npx tsx bench/ingest/direct-writers.ts`): DATABASE_URL, or the embedded cluster under
// .data/ingest-bench-pg (port FRS_BENCH_PG_PORT, default 54493), fsync off as the other benches. BENCH_SECONDS per
// variant (default 20), BENCH_WRITERS (default 8). bench/ingest.ts calls directWriters() with its own database.
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import pino from 'pino';
import type { Knex } from 'knex';
import { processConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { createWorkspace } from '../../src/core/workspaces.js';
import { startWorker } from '../../src/webhooks/worker.js';
import { foldUpkeep } from '../../src/db/upkeep.js';
import { clusterCpuMicros, postmasterPid } from '../proc-cpu.js';
import { cliActor } from '../../src/core/audit.js';

export interface DirectWritersOptions {
  seconds?: number;
  writers?: number;
  log?: (line: string) => void;
}

export interface VariantResult {
  commits: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  deadlocks: number;
  serializationFailures: number;
  otherErrors: number;
  /** CPU time a commit cost, in µs: the PostgreSQL cluster (writers' backends and the worker's), and this Node process
   * (the writers' clients and, in the triggered run, the worker); NaN where /proc cannot tell. */
  cpuPerCommitMicros: { postgres: number; node: number };
}

export interface DirectWritersResult {
  bare: VariantResult;
  triggered: VariantResult;
  commitsRatio: number;
  p99Ratio: number;
  /** Deadlocks and serialization failures of the triggered run, as a share of its transactions. */
  failedShare: number;
  /** Mean active writer backends by state (CPU or wait event, and the locks waited on), the triggered run. */
  waits: Record<string, string>;
  /** Commit to derived event queued, the triggered run, with the worker running. */
  queued: { events: number; missing: number; p50Ms: number; p99Ms: number; maxMs: number };
  /** The triggered writers with no worker: what the writers' own path costs, without the fold beside them. */
  unfolded: VariantResult;
  /** The writers on the copies with the tables' foreign keys, and the triggered run's commits/s against it. */
  keyed: VariantResult;
  keyedRatio: number;
}

/** Weights of the kinds of transaction (the issue's mix). */
const MIX = { newBooking: 3, out: 2, back: 2, rename: 1, invoice: 2, payment: 3, dueDate: 1 } as const;
type Kind = keyof typeof MIX;
const KINDS = Object.entries(MIX).flatMap(([kind, weight]) => Array<Kind>(weight).fill(kind as Kind));
const TABLES = ['owners', 'fleets', 'vehicles', 'customers', 'bookings', 'invoices', 'payments'];
const BARE = 'bench_bare';

const percentile = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
};
const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

interface Fixture {
  ws: string;
  vehicles: string[];
  customers: string[];
  /** Invoices open to payments and due-date moves, with their customer and booking. */
  invoices: Array<{ id: string; customer: string; booking: string }>;
}

/** A workspace with a fleet, 40 cars, 40 customers, 200 past bookings and 100 invoices, its calendar started. */
export async function makeFixture(db: Knex): Promise<Fixture> {
  const ws = (await createWorkspace(db, cliActor(), { slug: `direct-${Date.now().toString(36)}` })).id;
  const owner = randomUUID();
  const fleet = randomUUID();
  await db('owners').insert({ id: owner, workspace_id: ws, name: 'Owner' });
  await db('fleets').insert({ id: fleet, workspace_id: ws, owner_id: owner, code: 'F1', name: 'Fleet' });
  const vehicles = Array.from({ length: 40 }, () => randomUUID());
  await db('vehicles').insert(
    vehicles.map((id, k) => ({
      id,
      workspace_id: ws,
      fleet_id: fleet,
      make: k % 2 ? 'Toyota' : 'Nissan',
      model: k % 2 ? 'Corolla' : 'Sunny',
      plate: `P ${k}`,
      category: 'sedan',
      daily_rate: 15000,
      state: 'active',
    })),
  );
  const customers = Array.from({ length: 40 }, () => randomUUID());
  await db('customers').insert(customers.map((id, k) => ({ id, workspace_id: ws, name: `Customer ${k}` })));
  const bookings = Array.from({ length: 200 }, (_, k) => ({
    id: randomUUID(),
    workspace_id: ws,
    number: `H-${k}`,
    customer_id: customers[k % 40],
    vehicle_id: vehicles[k % 40],
    type: 'daily',
    status: 'completed',
    pickup_at: '2026-10-01T06:00:00Z',
    dropoff_at: '2026-10-03T06:00:00Z',
    amount: 30000,
  }));
  await db('bookings').insert(bookings);
  const invoices = bookings.slice(0, 100).map((b, k) => ({
    id: randomUUID(),
    workspace_id: ws,
    number: `HI-${k}`,
    customer_id: b.customer_id,
    booking_id: b.id,
    purpose: 'rental',
    issue_date: '2026-10-03',
    due_date: `2026-11-${String(1 + (k % 28)).padStart(2, '0')}`,
    total: 1_000_000,
    status: 'issued',
  }));
  await db('invoices').insert(invoices);
  // the calendar started (as after the worker's first sweep): from now on the triggers record what derived events need
  await db('calendar_state').insert({ workspace_id: ws, first_swept_at: new Date(), last_swept_at: new Date() });
  return {
    ws,
    vehicles,
    customers,
    invoices: invoices.map((i) => ({ id: i.id, customer: i.customer_id, booking: i.booking_id })),
  };
}

/** Copies of the tables without triggers (LIKE ... INCLUDING ALL: columns, defaults, checks, indexes), holding the workspace's rows. */
async function makeBareCopies(db: Knex, ws: string): Promise<void> {
  await db.raw(`DROP SCHEMA IF EXISTS ${BARE} CASCADE; CREATE SCHEMA ${BARE}`);
  for (const table of TABLES) {
    await db.raw(`CREATE TABLE ${BARE}.${table} (LIKE ${table} INCLUDING ALL)`);
    const { rows } = await db.raw(
      `SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) AS cols FROM pg_attribute
       WHERE attrelid = ?::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''`,
      [table],
    );
    await db.raw(
      `INSERT INTO ${BARE}.${table} (${rows[0].cols}) SELECT ${rows[0].cols} FROM ${table} WHERE workspace_id = ?`,
      [ws],
    );
  }
}

/** The real tables' foreign keys on the copies, pointing at the copies (and at the real workspaces). */
async function addForeignKeys(db: Knex): Promise<void> {
  const { rows } = await db.raw(
    `SELECT c.conrelid::regclass::text AS "table", pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
     WHERE c.contype = 'f' AND c.conrelid::regclass::text = ANY (?) ORDER BY 1`,
    [TABLES],
  );
  for (const { table, def } of rows as Array<{ table: string; def: string }>) {
    const pointed = def.replace(/REFERENCES (\w+)\(/, (whole, target: string) =>
      TABLES.includes(target) ? `REFERENCES ${BARE}.${target}(` : whole,
    );
    await db.raw(`ALTER TABLE ${BARE}.${table} ADD ${pointed}`);
  }
}

/** One writer's transactions until `until`; commits of derived-event sources are noted with their clock. */
async function writer(
  url: string,
  schema: string,
  f: Fixture,
  seed: number,
  until: number,
  result: {
    latencies: number[];
    codes: Map<string, number>;
    committed: Map<string, number>;
    byKind: Map<string, number[]>;
  },
): Promise<void> {
  const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
  await client.connect();
  let state = seed;
  const rand = (n: number) => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return state % n;
  };
  const confirmed: string[] = [];
  const active: string[] = [];
  let n = 0;
  try {
    while (performance.now() < until) {
      let kind = KINDS[rand(KINDS.length)];
      if (kind === 'out' && confirmed.length === 0) kind = 'newBooking';
      if (kind === 'back' && active.length === 0) kind = confirmed.length ? 'out' : 'newBooking';
      const id = randomUUID();
      let text: string;
      let values: unknown[];
      let event: string | undefined;
      let after: (() => void) | undefined;
      n++;
      if (kind === 'newBooking') {
        const k = rand(40);
        text = `INSERT INTO bookings (id, workspace_id, number, customer_id, vehicle_id, type, status, pickup_at, dropoff_at, amount)
                VALUES ($1, $2, $3, $4, $5, 'daily', 'confirmed', '2026-12-01T06:00:00Z', '2026-12-03T06:00:00Z', 30000)`;
        values = [id, f.ws, `W${seed}-${n}`, f.customers[k], f.vehicles[(k + rand(40)) % 40]];
        event = `booking.confirmed:${id}`;
        after = () => confirmed.push(id);
      } else if (kind === 'out') {
        const booking = confirmed.shift()!;
        text = `UPDATE bookings SET status = 'active' WHERE id = $1`;
        values = [booking];
        after = () => active.push(booking);
      } else if (kind === 'back') {
        const booking = active.shift()!;
        text = `UPDATE bookings SET status = 'completed', returned_at = now() WHERE id = $1`;
        values = [booking];
        event = `booking.completed:${booking}`;
      } else if (kind === 'rename') {
        text = 'UPDATE customers SET name = $2 WHERE id = $1';
        values = [f.customers[rand(40)], `Customer ${seed}-${n}`];
      } else if (kind === 'invoice') {
        const k = rand(f.invoices.length);
        text = `INSERT INTO invoices (id, workspace_id, number, customer_id, booking_id, purpose, issue_date, due_date, total, status)
                VALUES ($1, $2, $3, $4, $5, 'extension', '2026-11-20', '2026-12-20', 20000, 'issued')`;
        values = [id, f.ws, `WI${seed}-${n}`, f.invoices[k].customer, f.invoices[k].booking];
        event = `invoice.issued:${id}`;
      } else if (kind === 'payment') {
        const invoice = f.invoices[rand(f.invoices.length)];
        text = `INSERT INTO payments (id, workspace_id, kind, status, amount, customer_id, booking_id, invoice_id, at)
                VALUES ($1, $2, 'charge', 'captured', 100, $3, $4, $5, now())`;
        values = [id, f.ws, invoice.customer, invoice.booking, invoice.id];
        event = `payment.captured:${id}`;
      } else {
        text = `UPDATE invoices SET due_date = due_date + (CASE WHEN due_date > '2026-12-31' THEN -30 ELSE 1 END) WHERE id = $1`;
        values = [f.invoices[rand(f.invoices.length)].id];
      }
      const started = performance.now();
      try {
        await client.query('BEGIN');
        await client.query(text, values);
        await client.query('COMMIT');
        const ms = performance.now() - started;
        result.latencies.push(ms);
        if (!result.byKind.has(kind)) result.byKind.set(kind, []);
        result.byKind.get(kind)!.push(ms);
        if (event) result.committed.set(event, Date.now());
        after?.();
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        const code = (err as { code?: string }).code ?? 'other';
        result.codes.set(code, (result.codes.get(code) ?? 0) + 1);
        if (kind === 'out') confirmed.unshift(values[0] as string);
        if (kind === 'back') active.unshift(values[0] as string);
      }
    }
  } finally {
    await client.end();
  }
}

/**
 * Where the writers' time goes: every 50 ms, what each active writer's backend is doing (CPU, or the wait event), and
 * the locks waited on (a tuple lock names its table; a transactionid lock is a wait for another writer's row).
 */
async function sampleWaits(url: string, until: number): Promise<Record<string, string>> {
  const client = new pg.Client(url);
  await client.connect();
  const counts = new Map<string, number>();
  let samples = 0;
  const delays: number[] = [];
  try {
    while (performance.now() < until) {
      const { rows } = await client.query(`
        SELECT coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU') AS what,
               (SELECT string_agg(DISTINCT l.locktype || coalesce(' ' || l.relation::regclass::text, ''), ',')
                FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted) AS lock
        FROM pg_stat_activity a
        WHERE a.state = 'active' AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid() AND a.query NOT LIKE '%rollups_%'`);
      samples++;
      // how far the figures are behind (the worker's fold), when the upkeep queue exists (the triggered run)
      const delay = await client.query(`SELECT upkeep_delay() AS d`).then(
        (r) => Number(r.rows[0].d),
        () => undefined,
      );
      if (delay !== undefined) delays.push(delay);
      for (const r of rows) {
        const key = r.lock ? `${r.what} (${r.lock})` : r.what;
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    await client.end();
  }
  // mean active backends in each state, and the upkeep delay seen (p50, max)
  const waits = Object.fromEntries(
    [...counts]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 8)
      .map(([k, n]) => [k, (n / Math.max(1, samples)).toFixed(2)]),
  );
  if (delays.length > 0)
    waits['upkeep delay p50/max s'] = `${percentile(delays, 50).toFixed(2)}/${Math.max(...delays).toFixed(2)}`;
  return waits;
}

async function runVariant(
  url: string,
  schema: string,
  f: Fixture,
  seconds: number,
  writers: number,
  postmaster: number,
  seedBase = 1000,
) {
  const result = {
    latencies: [] as number[],
    codes: new Map<string, number>(),
    committed: new Map<string, number>(),
    byKind: new Map<string, number[]>(),
  };
  const until = performance.now() + seconds * 1000;
  const cpuBefore = { postgres: clusterCpuMicros(postmaster), node: process.cpuUsage() };
  const [waits] = await Promise.all([
    sampleWaits(url, until),
    ...Array.from({ length: writers }, (_, k) => writer(url, schema, f, seedBase + k, until, result)),
  ]);
  const nodeCpu = process.cpuUsage(cpuBefore.node);
  const commits = Math.max(1, result.latencies.length);
  const cpuPerCommitMicros = {
    postgres: Math.round((clusterCpuMicros(postmaster) - cpuBefore.postgres) / commits),
    node: Math.round((nodeCpu.user + nodeCpu.system) / commits),
  };
  const deadlocks = result.codes.get('40P01') ?? 0;
  const serializationFailures = result.codes.get('40001') ?? 0;
  const otherErrors = [...result.codes.values()].reduce((a, b) => a + b, 0) - deadlocks - serializationFailures;
  const variant: VariantResult = {
    commits: result.latencies.length,
    perSecond: round(result.latencies.length / seconds),
    p50Ms: round(percentile(result.latencies, 50), 2),
    p99Ms: round(percentile(result.latencies, 99), 2),
    deadlocks,
    serializationFailures,
    otherErrors,
    cpuPerCommitMicros,
  };
  const byKind = Object.fromEntries(
    [...result.byKind].map(([kind, xs]) => [
      kind,
      `mean ${round(xs.reduce((a, b) => a + b, 0) / xs.length, 1)} ms, p99 ${round(percentile(xs, 99), 1)} ms`,
    ]),
  );
  return { variant, committed: result.committed, codes: result.codes, waits, byKind };
}

async function topStatements(db: Knex): Promise<string> {
  const { rows } = await db.raw(`
    SELECT round(total_exec_time::numeric, 0) AS ms, calls, round((total_exec_time / calls)::numeric, 3) AS mean_ms, query
    FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 12`);
  // a rollup trigger's statement is named by what follows its transition-table CTE
  const name = (query: string) =>
    query
      .replace(/^\s*WITH c AS \([\s\S]*?::uuid\)\s*(?=INSERT|UPDATE|SELECT)/, '(trigger) ')
      .replace(/\s+/g, ' ')
      .slice(0, 100);
  return rows
    .map(
      (r: { ms: string; calls: string; mean_ms: string; query: string }) =>
        `      ${r.ms} ms, ${r.calls} calls, ${r.mean_ms} ms each: ${name(r.query)}`,
    )
    .join('\n');
}

/** Waits (up to `waitMs`) for the derived events of the commits and returns commit-to-queued figures. */
async function queuedLatency(db: Knex, ws: string, committed: Map<string, number>, waitMs: number) {
  const deadline = Date.now() + waitMs;
  let found = new Map<string, number>();
  for (;;) {
    const { rows } = await db.raw(
      `SELECT dedupe_key, created_at FROM events WHERE workspace_id = ? AND source IN ('derived', 'calendar')`,
      [ws],
    );
    found = new Map(rows.map((r: { dedupe_key: string; created_at: Date }) => [r.dedupe_key, r.created_at.getTime()]));
    const missing = [...committed.keys()].filter((key) => !found.has(key)).length;
    if (missing === 0 || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const delays = [...committed].filter(([key]) => found.has(key)).map(([key, at]) => Math.max(0, found.get(key)! - at));
  return {
    events: delays.length,
    missing: committed.size - delays.length,
    p50Ms: Math.round(percentile(delays, 50)),
    p99Ms: Math.round(percentile(delays, 99)),
    maxMs: Math.round(Math.max(0, ...delays)),
  };
}

/** The bench on `db` (its owner's connection) and `url` (the same database, for the writers' own connections). */
export async function directWriters(
  db: Knex,
  url: string,
  options: DirectWritersOptions = {},
): Promise<DirectWritersResult> {
  const seconds = options.seconds ?? Number(process.env.BENCH_SECONDS ?? 20);
  const writers = options.writers ?? Number(process.env.BENCH_WRITERS ?? 8);
  const log = options.log ?? ((line: string) => console.log(line));
  const f = await makeFixture(db);
  const postmaster = await postmasterPid(db);
  // the fixture's own rows applied, as a worker would have
  await foldUpkeep(db, [f.ws]);
  await makeBareCopies(db, f.ws);
  log(`direct writers: ${writers} writers, one-row transactions, ${seconds} s per variant, workspace ${f.ws}`);
  const bare = await runVariant(url, BARE, f, seconds, writers, postmaster);
  log(`  without triggers: ${JSON.stringify(bare.variant)}`);
  log(`    writers' backends by state (mean active): ${JSON.stringify(bare.waits)}`);
  // Where the time goes: the copies with the tables' foreign keys (LIKE copies none), which any schema of these
  // records would check, the service's or the platform's own
  await addForeignKeys(db);
  const keyed = await runVariant(url, BARE, f, seconds, writers, postmaster, 3000);
  log(`  without triggers, with the foreign keys: ${JSON.stringify(keyed.variant)}`);
  const {
    rows: [{ schema }],
  } = await db.raw('SELECT current_schema() AS schema');
  // Where the database's time goes, when the cluster loads pg_stat_statements (shared_preload_libraries, track = all)
  const statements = await db
    .raw('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
    .then(() => db.raw('SELECT pg_stat_statements_reset()'))
    .then(
      () => true,
      () => false,
    );
  const worker = await startWorker(db, pino({ level: 'silent' }));
  // a running worker, as in production: its sessions made (a fold's first use builds its temporary tables)
  await new Promise((resolve) => setTimeout(resolve, 1000));
  let triggered;
  let queued;
  try {
    triggered = await runVariant(url, schema, f, seconds, writers, postmaster);
    log(`  with triggers:    ${JSON.stringify(triggered.variant)}`);
    log(`    writers' backends by state (mean active): ${JSON.stringify(triggered.waits)}`);
    log(`    by kind: ${JSON.stringify(triggered.byKind)}`);
    if (statements)
      log(
        `    PostgreSQL time by statement (pg_stat_statements, nested statements included, top 12):\n${await topStatements(db)}`,
      );
    // the minute sweep may be up to a minute away before the change
    queued = await queuedLatency(db, f.ws, triggered.committed, 70_000);
  } finally {
    await worker.stop();
  }
  // Where the time goes: the same writers with no worker folding (their changes only queued), so the writers' own cost
  // shows apart from the fold's, which shares the machine's cores with them
  const unfolded = await runVariant(url, schema, f, seconds, writers, postmaster, 2000);
  log(`  with triggers, nothing folded (no worker): ${JSON.stringify(unfolded.variant)}`);
  log(`    writers' backends by state (mean active): ${JSON.stringify(unfolded.waits)}`);
  const result: DirectWritersResult = {
    bare: bare.variant,
    triggered: triggered.variant,
    commitsRatio: round(triggered.variant.perSecond / bare.variant.perSecond, 3),
    p99Ratio: round(triggered.variant.p99Ms / Math.max(bare.variant.p99Ms, 0.001), 2),
    failedShare: round(
      (100 * (triggered.variant.deadlocks + triggered.variant.serializationFailures)) /
        Math.max(1, triggered.variant.commits + triggered.variant.deadlocks + triggered.variant.serializationFailures),
      3,
    ),
    waits: triggered.waits,
    queued,
    unfolded: unfolded.variant,
    keyed: keyed.variant,
    keyedRatio: round(triggered.variant.perSecond / keyed.variant.perSecond, 3),
  };
  log(
    `  commits/s ratio ${result.commitsRatio}x (target >= 0.5x), p99 ratio ${result.p99Ratio}x (target <= 5x), ` +
      `deadlocks + serialization failures ${result.failedShare}% (target < 0.1%)`,
  );
  log(`  commit to derived event queued: ${JSON.stringify(queued)}`);
  log(`  against the copies with the foreign keys: commits/s ratio ${result.keyedRatio}x`);
  await db.raw(`DROP SCHEMA ${BARE} CASCADE`);
  await db('workspaces').where({ id: f.ws }).delete();
  // (the last run's queue, dropped with its workspace: a later run's delay figures start from an empty queue)
  await foldUpkeep(db, [f.ws]);
  return result;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const database = await openDatabase(
    process.env.DATABASE_URL
      ? { schema: 'migrate' }
      : {
          embeddedDir: path.join(processConfig().dataDir, 'ingest-bench-pg'),
          embeddedPort: Number(process.env.FRS_BENCH_PG_PORT ?? 54493),
          embeddedDurable: false,
          schema: 'migrate',
        },
  );
  try {
    await directWriters(database.db, database.url);
  } finally {
    await database.close();
  }
  process.exit(0);
}
