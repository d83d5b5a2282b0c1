import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { ConfigError, isPostgresUrl, wholeNumberSetting } from '../config.js';
import type { Database } from './database.js';
import { isDatabaseUnavailable } from './outage.js';
import type { ServiceMetrics } from '../observability/metrics.js';

// Which pool answers a read of the API: a streaming replica whose data is at most FRS_READ_MAX_LAG_MS old, else the
// primary. The one place that decides it (docs: architecture "Reads and writes"); the query modules take the
// connection they are given. Writes, the queue, the key look-ups that decide revocation and LISTEN/NOTIFY never come
// here: they use the primary's pools as they always did.
//
// How old a replica's data is, is measured against the primary's position: every tick (PROBE_INTERVAL_MS) this
// process samples the primary's pg_current_wal_lsn() with the instant it asked, and each replica's
// pg_last_wal_replay_lsn(). A replica that has replayed a sample's position holds every change committed before that
// sample was asked for: its data is as of the newest such sample, and is at most `now - that instant` old. So an idle
// primary shows no lag (its position does not move, and each new sample is already replayed), and a replica whose
// replay stopped ages with the clock even when its probe still answers. A replica whose probe fails, or that is not
// in recovery (promoted, or a primary by mistake), is skipped until a probe succeeds again. A probe has a short
// connect and answer limit (PROBE_TIMEOUT_MS), so the reads of requests that come after a replica went silent skip it
// within a tick and that limit; a read that meets a replica going away (or, when it went silent, the API's own answer
// limit) is run again on the primary.

export const READ_URLS_ENV = 'DATABASE_READ_URL';
export const READ_MAX_LAG_ENV = 'FRS_READ_MAX_LAG_MS';
/**
 * 5 s: reads at most this stale. A healthy standby on a LAN replays within milliseconds; seconds of lag mean a busy
 * or stuck replay, and the primary then answers rather than older data.
 */
export const READ_MAX_LAG_MS = 5000;
const PROBE_INTERVAL_MS = 250;
const PROBE_TIMEOUT_MS = 1000;
/** Primary samples kept: 60 s of them, the largest bound (a replica further behind keeps the freshness it last had). */
const MAX_SAMPLES = 240;

/** DATABASE_READ_URL's replicas (one postgres:// URL or several, comma-separated); none when unset. */
export function readUrlsFromEnv(env: NodeJS.ProcessEnv = process.env): string[] {
  const value = env[READ_URLS_ENV]?.trim();
  if (!value) return [];
  const urls = value.split(',').map((url) => url.trim());
  urls.forEach((url, i) => {
    // (the URL is never echoed: it may hold a password)
    if (!isPostgresUrl(url)) {
      throw new ConfigError(`${READ_URLS_ENV} must be postgres:// URLs separated by commas (postgres://USER:PASSWORD@HOST:PORT/DATABASE); its entry ${i + 1} is not one`);
    }
  });
  return urls;
}

export function readMaxLagMsFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  return wholeNumberSetting(READ_MAX_LAG_ENV, READ_MAX_LAG_MS, { min: 100, max: MAX_SAMPLES * PROBE_INTERVAL_MS, unit: 'milliseconds' }, env);
}

/** A replica's name in metrics and logs: host:port, never its user or password. */
export function replicaName(url: string): string {
  const { hostname, port } = new URL(url);
  return `${hostname}:${port || 5432}`;
}

/** A WAL position (`16/B374D848`) as a number. */
export function parseLsn(lsn: string): bigint {
  const [high, low] = lsn.split('/');
  return (BigInt(`0x${high}`) << 32n) + BigInt(`0x${low}`);
}

/** The pool a request's reads go to, and at most how many milliseconds old its data is (0: the primary; a replica's, 1 or more). */
export interface ReadPool {
  db: Knex;
  /** `primary`, or the replica's host:port. */
  name: string;
  maxStalenessMs: number;
}

interface Replica {
  name: string;
  db: Knex;
  probe: Knex;
  /** Every change the primary committed before this instant (epoch ms) has been replayed here; -Infinity: unknown. */
  freshAsOf: number;
  /** The last probe answered, from a server in recovery. */
  up: boolean;
  probing: boolean;
}

interface Sample {
  lsn: bigint;
  at: number;
}

/** Whether `err`, met on a replica, is the replica's and not the request's: run the read again on the primary. */
function replicaFault(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  // 40001 on a standby: canceled by a conflict with recovery (replay needed what the statement read); 57P04: dropped database
  return isDatabaseUnavailable(err) || code === '40001' || code === '57P04';
}

export class ReadRouting {
  private readonly samples: Sample[] = [];
  private readonly primaryPool: ReadPool;
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;

  private constructor(
    primary: Knex,
    private readonly primaryProbe: Knex,
    private readonly replicas: Replica[],
    readonly maxLagMs: number,
    private readonly logger: Logger,
    private readonly metrics?: ServiceMetrics,
    private readonly clock: () => number = Date.now,
  ) {
    this.primaryPool = { db: primary, name: 'primary', maxStalenessMs: 0 };
  }

  /**
   * Routing between `primary` (the API's pool on the primary) and a pool per URL, as `role`; probes every replica at
   * once and then every PROBE_INTERVAL_MS. Undefined without replicas: the primary's pool is then used as it is.
   */
  static async start(options: { database: Database; primary: Knex; urls: string[]; maxLagMs?: number; logger: Logger; metrics?: ServiceMetrics }): Promise<ReadRouting | undefined> {
    const { database, primary, urls, maxLagMs = readMaxLagMsFromEnv(), logger, metrics } = options;
    if (urls.length === 0) return undefined;
    const probeTimeouts = { acquireMs: PROBE_TIMEOUT_MS, queryMs: PROBE_TIMEOUT_MS, connectMs: PROBE_TIMEOUT_MS };
    const names = new Map<string, number>();
    const replicas = urls.map((url): Replica => {
      let name = replicaName(url);
      const seen = names.get(name) ?? 0;
      names.set(name, seen + 1);
      if (seen > 0) name = `${name}#${seen + 1}`;
      return { name, db: database.forReplica(url, 'api'), probe: database.forReplica(url, 'api', { timeouts: probeTimeouts, poolMax: 1 }), freshAsOf: -Infinity, up: false, probing: false };
    });
    const routing = new ReadRouting(primary, database.forReplica(database.url, 'api', { timeouts: probeTimeouts, poolMax: 1 }), replicas, maxLagMs, logger, metrics);
    // (a first sample of the primary before the first probes, so that a replica caught up is usable at once)
    await routing.samplePrimary();
    await routing.tick();
    routing.timer = setInterval(() => void routing.tick(), PROBE_INTERVAL_MS);
    routing.timer.unref();
    return routing;
  }

  /** The replicas' names. */
  get replicaNames(): string[] {
    return this.replicas.map((r) => r.name);
  }

  /** At most how many milliseconds old a replica's data is now (Infinity: down or unknown). */
  stalenessMs(replica: Replica, now = this.clock()): number {
    return replica.up ? now - replica.freshAsOf : Infinity;
  }

  /** The pool for one request's reads: the next replica (round robin) within the bound, else the primary. */
  choose(): ReadPool {
    const now = this.clock();
    const count = this.replicas.length;
    for (let i = 0; i < count; i++) {
      const replica = this.replicas[(this.next + i) % count];
      const staleness = this.stalenessMs(replica, now);
      if (staleness <= this.maxLagMs) {
        this.next = (this.next + i + 1) % count;
        return { db: replica.db, name: replica.name, maxStalenessMs: Math.max(1, Math.ceil(staleness)) };
      }
    }
    return this.primaryPool;
  }

  /**
   * Runs one request's reads on the pool chosen once for all of them (a data version and the answer it tags must come
   * from one server); a replica that fails under them (going away, or a statement canceled by replay) is skipped until
   * its next good probe, and the reads run again on the primary. `work` must only read.
   */
  async read<T>(work: (pool: ReadPool) => Promise<T>): Promise<T> {
    const pool = this.choose();
    let answered = pool;
    let result: T;
    try {
      result = await work(pool);
    } catch (err) {
      if (pool === this.primaryPool || !replicaFault(err)) throw err;
      const replica = this.replicas.find((r) => r.db === pool.db);
      if (replica && isDatabaseUnavailable(err)) this.markDown(replica, err);
      answered = this.primaryPool;
      result = await work(answered);
    }
    this.metrics?.reads.inc({ pool: answered.name });
    return result;
  }

  private markDown(replica: Replica, err: unknown): void {
    if (replica.up) this.logger.warn({ replica: replica.name, err: { code: (err as { code?: string }).code, message: (err as Error).message } }, 'read replica skipped: unreachable');
    replica.up = false;
    this.metrics?.replicaUp.set({ replica: replica.name }, 0);
  }

  /** One probe of the primary's position and of every replica's replay (one still in flight is not asked again). */
  private tick(): Promise<void> {
    this.ticking ??= (async () => {
      try {
        await Promise.all([this.samplePrimary(), ...this.replicas.map((replica) => this.probeReplica(replica))]);
      } finally {
        this.ticking = undefined;
      }
    })();
    return this.ticking;
  }

  private async samplePrimary(): Promise<void> {
    const at = this.clock();
    try {
      const { rows: [row] } = await this.primaryProbe.raw('SELECT pg_current_wal_lsn()::text AS lsn');
      this.samples.push({ lsn: parseLsn(row.lsn), at });
      if (this.samples.length > MAX_SAMPLES) this.samples.shift();
    } catch {
      // (the primary's outage is the API's to report; without samples the replicas' data only ages)
    }
  }

  private async probeReplica(replica: Replica): Promise<void> {
    if (replica.probing) return;
    replica.probing = true;
    try {
      const { rows: [row] } = await replica.probe.raw('SELECT pg_is_in_recovery() AS recovery, pg_last_wal_replay_lsn()::text AS replayed');
      if (!row.recovery || row.replayed === null) {
        if (replica.up) this.logger.warn({ replica: replica.name }, 'read replica skipped: not in recovery (promoted?)');
        replica.up = false;
      } else {
        const replayed = parseLsn(row.replayed);
        // the newest sample replayed (samples are in the order they were asked, and positions only grow)
        let freshAsOf = -Infinity;
        for (let i = this.samples.length - 1; i >= 0; i--) {
          if (this.samples[i].lsn <= replayed) {
            freshAsOf = this.samples[i].at;
            break;
          }
        }
        // (a replica on a freshly sampled primary is as fresh as a sample can say; never older than known before)
        replica.freshAsOf = Math.max(replica.freshAsOf, freshAsOf);
        if (!replica.up) this.logger.info({ replica: replica.name }, 'read replica answering');
        replica.up = true;
        const newest = this.samples.at(-1);
        // Lag as a metric: 0 when it has replayed the primary's latest position, else how long ago the primary passed it
        const lag = newest === undefined || replayed >= newest.lsn ? 0 : this.clock() - replica.freshAsOf;
        this.metrics?.replicaLag.set({ replica: replica.name }, Number.isFinite(lag) ? lag / 1000 : MAX_SAMPLES * PROBE_INTERVAL_MS / 1000);
      }
    } catch (err) {
      this.markDown(replica, err);
    } finally {
      replica.probing = false;
      this.metrics?.replicaUp.set({ replica: replica.name }, this.stalenessMs(replica) <= this.maxLagMs ? 1 : 0);
    }
  }

  /** Stops probing (the pools close with the database). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.ticking;
  }
}
