import type { Knex } from 'knex';
import { migrationSource } from '../db/migrate.js';

// Liveness and readiness, one definition for every listener that serves them: the API (GET /healthz, /readyz,
// documented operations) and the metrics listener (the only HTTP a worker-only process has).
//
// /readyz is public, so a flood of probes must not become a flood of queries: each database handle has one probe
// whose result is reused for READINESS_MAX_AGE_MS, computed by one check at a time that every waiting probe shares,
// and each check is one statement on one pooled connection. So the database sees at most one readiness query a
// second, however many probes come, from however many listeners of the process.

/** How long the database may take to answer a readiness check. */
export const READINESS_TIMEOUT_MS = 2000;
/** How old a result may be when a probe is answered with it. */
export const READINESS_MAX_AGE_MS = 1000;
/**
 * How often the schema is read again while the database stays reachable. The schema changes only by `fleet-admin
 * migrate` (which adds to it: while a migration is lacking, every check reads it again, so the probe turns ready
 * within a second of the migration) or by another database taking this one's place (a restore, a failover): that is
 * usually seen as an outage, after which the next check reads the schema; this period catches a switch no probe saw.
 */
export const SCHEMA_RECHECK_MS = 5 * 60_000;

export type Readiness = { ready: true } | { ready: false; check: 'database' | 'schema'; message: string };

/** The migrations this code has (names as Knex records them), read from the migrations folder once per process. */
let knownMigrations: Promise<string[]> | undefined;
function migrationNames(): Promise<string[]> {
  const source = migrationSource();
  knownMigrations ??= Promise.resolve(source.getMigrations([])).then((files) =>
    files.map((file) => source.getMigrationName(file)),
  );
  return knownMigrations;
}

const databaseDown = (message = 'The database does not answer.'): Readiness => ({
  ready: false,
  check: 'database',
  message,
});

export interface ReadinessOptions {
  maxAgeMs?: number;
  timeoutMs?: number;
  schemaRecheckMs?: number;
}

/** Readiness of one database handle: cached, one check in flight, one statement per check, nothing left running. */
export class ReadinessProbe {
  private last: { result: Readiness; at: number } | undefined;
  /** The answer of the check under way, shared by every probe that arrives meanwhile. */
  private flight: Promise<Readiness> | undefined;
  /** The database work of the latest check, until it has settled (it may outlast the check's answer by a little). */
  private work: Promise<unknown> | undefined;
  /** When the schema was last found complete; undefined: read it on the next check. */
  private schemaCheckedAt: number | undefined;
  private readonly maxAgeMs: number;
  private readonly timeoutMs: number;
  private readonly schemaRecheckMs: number;

  constructor(
    private readonly db: Knex,
    options: ReadinessOptions = {},
  ) {
    this.maxAgeMs = options.maxAgeMs ?? READINESS_MAX_AGE_MS;
    this.timeoutMs = options.timeoutMs ?? READINESS_TIMEOUT_MS;
    this.schemaRecheckMs = options.schemaRecheckMs ?? SCHEMA_RECHECK_MS;
  }

  /** Ready when the database answers within the time-out and has every migration this code knows. */
  check(): Promise<Readiness> {
    if (this.last && Date.now() - this.last.at < this.maxAgeMs) return Promise.resolve(this.last.result);
    if (this.flight) return this.flight;
    // The last check answered "did not answer in time" and its connection is still being waited for (the pool's own
    // time-out ends that): that answer stands, rather than a second wait queueing behind the first.
    if (this.work && this.last) return Promise.resolve(this.last.result);
    this.flight = this.run().finally(() => {
      this.flight = undefined;
    });
    return this.flight;
  }

  private async run(): Promise<Readiness> {
    const deadline = Date.now() + this.timeoutMs;
    const work = this.query(deadline);
    const settled = work
      .catch(() => undefined)
      .finally(() => {
        if (this.work === settled) this.work = undefined;
      });
    this.work = settled;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<Readiness>((resolve) => {
      timer = setTimeout(
        () => resolve(databaseDown(`The database did not answer within ${this.timeoutMs} ms.`)),
        this.timeoutMs,
      );
    });
    try {
      const result = await Promise.race([work.catch(() => databaseDown()), timeout]);
      this.last = { result, at: Date.now() };
      return result;
    } finally {
      clearTimeout(timer);
    }
  }

  /** One statement on one connection: `SELECT 1`, or the applied migrations when the schema is due to be read. */
  private async query(deadline: number): Promise<Readiness> {
    const readSchema = this.schemaCheckedAt === undefined || Date.now() - this.schemaCheckedAt >= this.schemaRecheckMs;
    const known = readSchema ? await migrationNames() : [];
    const client = this.db.client as Knex.Client;
    let connection: unknown;
    try {
      connection = await client.acquireConnection();
    } catch {
      this.schemaCheckedAt = undefined;
      return databaseDown();
    }
    try {
      // The probe has answered already: a query started now would run for nobody.
      const remainingMs = deadline - Date.now();
      if (remainingMs <= 0) return databaseDown();
      const sql = readSchema ? 'SELECT name FROM knex_migrations' : 'SELECT 1';
      let rows: Array<{ name: string }>;
      try {
        // Cancelled in the database (pg_cancel_backend) if it outlasts the probe's time-out.
        ({ rows } = await this.db.raw(sql).connection(connection).timeout(remainingMs, { cancel: true }));
      } catch (err) {
        this.schemaCheckedAt = undefined;
        if ((err as { code?: string }).code === '42P01') return lacking(known.length);
        return databaseDown();
      }
      if (!readSchema) return { ready: true };
      const applied = new Set(rows.map((row) => row.name));
      const pending = known.filter((name) => !applied.has(name));
      if (pending.length > 0) return lacking(pending.length);
      this.schemaCheckedAt = Date.now();
      return { ready: true };
    } finally {
      await client.releaseConnection(connection);
    }
  }
}

const lacking = (count: number): Readiness => ({
  ready: false,
  check: 'schema',
  message: `The database schema lacks ${count} migration(s); run "fleet-admin migrate".`,
});

/** One probe per database handle, so every listener of a process (the API's, the metrics one) shares it. */
const probes = new WeakMap<Knex, ReadinessProbe>();

/** Readiness of `db`, through its shared probe (see ReadinessProbe). */
export function readiness(db: Knex): Promise<Readiness> {
  let probe = probes.get(db);
  if (!probe) probes.set(db, (probe = new ReadinessProbe(db)));
  return probe.check();
}
