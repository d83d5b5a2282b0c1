import { performance } from 'node:perf_hooks';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { processConfig, wholeNumberDefault } from '../config.js';
import type { Database } from './database.js';
import { isDatabaseUnavailable } from './outage.js';
import type { Counter, Gauge } from 'prom-client';

// Which pool answers a read of the API: a streaming replica whose data is at most FRS_READ_MAX_LAG_MS old, else the
// primary. The one place that decides it (docs: architecture "Reads and writes"); the query modules take the
// connection they are given. Writes, the queue, the key look-ups that decide revocation and LISTEN/NOTIFY never come
// here: they use the primary's pools as they always did.
//
// How old a replica's data is, is measured against the primary's position: every PROBE_INTERVAL_MS this process
// samples the primary's pg_current_wal_insert_lsn() with the (monotonic) instant it asked, and, each on its own so that
// a slow one delays no other, each replica's pg_last_wal_replay_lsn(). A replica that has replayed a sample's position holds every change committed before that
// sample was asked for: its data is as of the newest such sample, and is at most `now - that instant` old. So an idle
// primary shows no lag (its position does not move, and each new sample is already replayed), and a replica whose
// replay stopped ages with the clock even when its probe still answers. A replica whose probe fails, or that is not
// in recovery (promoted, or a primary by mistake), is skipped until a probe succeeds again, and what was known of its
// freshness is forgotten (a server that comes back, or another one behind the name, may be further behind). A replica
// that is not this primary's (another cluster's system identifier, another database, an older timeline) is refused. A probe has a short
// connect and answer limit (PROBE_TIMEOUT_MS), so the reads of requests that come after a replica went silent skip it
// within a tick and that limit; a read that meets a replica going away, or that is still running on it when a probe
// finds it down, is run again on the primary.

export const READ_URLS_ENV = 'DATABASE_READ_URL';
export const READ_MAX_LAG_ENV = 'FRS_READ_MAX_LAG_MS';
/**
 * 5 s: reads at most this stale. A healthy standby on a LAN replays within milliseconds; seconds of lag mean a busy
 * or stuck replay, and the primary then answers rather than older data.
 */
export const READ_MAX_LAG_MS = wholeNumberDefault(READ_MAX_LAG_ENV);
const PROBE_INTERVAL_MS = 250;
const PROBE_TIMEOUT_MS = 1000;
/** Primary samples kept: 60 s of them, the largest bound (a replica further behind keeps the freshness it last had). */
const MAX_SAMPLES = 240;

/**
 * The service's metrics the routing keeps (src/observability/metrics.ts fills them): named here by their shape, so the
 * database code does not import the metrics module that itself reads the database.
 */
export interface RoutingMetrics {
  reads: Counter<'pool'>;
  replicaLag: Gauge<'replica'>;
  replicaUp: Gauge<'replica'>;
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

/**
 * The pool a request's reads go to. `maxStalenessMs()`: at most how many milliseconds old its data is, asked when the
 * answer is finished (0: the primary; a replica's, 1 or more, grows with the time the request took).
 */
export interface ReadPool {
  db: Knex;
  /** `primary`, or the replica's host:port. */
  name: string;
  maxStalenessMs(): number;
}

/** What says which server and which history a probe's connection reached. */
export interface ServerIdentity {
  /** pg_control_system()'s system_identifier: a standby's is its primary's (a base backup keeps it). */
  system: string;
  database: string;
  /** The primary's timeline; a standby's received_tli (null when its role may not see pg_stat_wal_receiver). */
  timeline: number | null;
}

export interface PrimarySample {
  lsn: bigint;
  identity: ServerIdentity;
}

export interface ReplicaProbe {
  recovery: boolean;
  replayed: bigint | null;
  identity: ServerIdentity;
  /** pg_postmaster_start_time(): another value is another server (restarted, rebuilt, or another one behind the name). */
  started: string;
}

/** A replica as routing sees it: its name, how to make its pool (again), how to probe it. */
export interface ReplicaSource {
  name: string;
  pool: () => Knex;
  probe: () => Promise<ReplicaProbe>;
}

interface Replica {
  source: ReplicaSource;
  name: string;
  db: Knex;
  /** Aborted when the replica is found down: the reads still running on it are run again on the primary at once. */
  lost: AbortController;
  /** Every change the primary committed before this instant (this.clock's ms) has been replayed here; -Infinity: unknown. */
  freshAsOf: number;
  /** The server the last probe reached (pg_postmaster_start_time()). */
  started: string | undefined;
  /** The last probe answered, from a server in recovery, of this primary. */
  up: boolean;
  /** Why it is refused as not this primary's (logged once per reason). */
  refused: string | undefined;
  probing: Promise<void> | undefined;
}

interface Sample {
  lsn: bigint;
  at: number;
}

/** A read abandoned on a replica that a probe found down: it runs again on the primary. */
export class ReplicaLostError extends Error {
  constructor(replica: string) {
    super(`read replica ${replica} went down under the read`);
    this.name = 'ReplicaLostError';
  }
}

/** A replica pool with no connection free in time: the replica is busy, not gone. */
function poolFull(err: unknown): boolean {
  return (err as { name?: unknown } | undefined)?.name === 'KnexTimeoutError';
}

/** Whether `err`, met on a replica, is the replica's and not the request's: run the read again on the primary. */
function replicaFault(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  // 40001 on a standby: canceled by a conflict with recovery (replay needed what the statement read); 40P01: a
  // deadlock with replay (a lock it needed); 57P04: dropped database
  return (
    err instanceof ReplicaLostError ||
    isDatabaseUnavailable(err) ||
    code === '40001' ||
    code === '40P01' ||
    code === '57P04'
  );
}

/** Why a replica's server is not one to read this primary's data from; undefined: it is. */
function notOfPrimary(primary: ServerIdentity, replica: ServerIdentity): string | undefined {
  if (replica.system !== primary.system)
    return `another cluster (system identifier ${replica.system}, the primary's ${primary.system})`;
  if (replica.database !== primary.database)
    return `another database (${replica.database}, the primary's ${primary.database})`;
  // (only older: the primary's checkpoint may still name the timeline before its promotion for a moment)
  if (replica.timeline !== null && primary.timeline !== null && replica.timeline < primary.timeline)
    return `an older timeline (${replica.timeline}, the primary's ${primary.timeline})`;
  return undefined;
}

// The insert position, not the write position: with synchronous_commit off a commit returns before its WAL is written.
// At the first byte after a page's header (24 bytes, 40 at a segment's start) no record has begun there yet, and a
// standby's replay ends before that header: the end of the last record is the page's start.
const PRIMARY_SAMPLE = `SELECT (lsn - CASE WHEN (lsn - '0/0') % pg_size_bytes(current_setting('wal_segment_size')) = 40 THEN 40
      WHEN (lsn - '0/0') % current_setting('wal_block_size')::int = 24 THEN 24 ELSE 0 END)::text AS lsn,
    (pg_control_system()).system_identifier::text AS system, current_database() AS database,
    (pg_control_checkpoint()).timeline_id AS timeline
  FROM pg_current_wal_insert_lsn() AS lsn`;
// (received_tli is null for a role without pg_read_all_stats: the timeline is then not compared)
const REPLICA_PROBE = `SELECT pg_is_in_recovery() AS recovery, pg_last_wal_replay_lsn()::text AS replayed,
  (pg_control_system()).system_identifier::text AS system, current_database() AS database,
  (SELECT received_tli FROM pg_stat_wal_receiver) AS timeline, pg_postmaster_start_time()::text AS started`;

export class ReadRouting {
  private readonly samples: Sample[] = [];
  private primaryIdentity: ServerIdentity | undefined;
  private readonly primaryPool: ReadPool;
  private readonly replicas: Replica[];
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> | undefined;
  readonly maxLagMs: number;
  private readonly logger: Logger;
  private readonly metrics?: RoutingMetrics;
  private readonly clock: () => number;
  private readonly sampleSource: () => Promise<PrimarySample>;

  /** Routing between `primary` and `replicas`, probed only when asked (samplePrimary, probe): ReadRouting.start runs them on timers. */
  constructor(options: {
    primary: Knex;
    samplePrimary: () => Promise<PrimarySample>;
    replicas: ReplicaSource[];
    maxLagMs: number;
    logger: Logger;
    metrics?: RoutingMetrics;
    clock?: () => number;
  }) {
    ({
      maxLagMs: this.maxLagMs,
      logger: this.logger,
      metrics: this.metrics,
      samplePrimary: this.sampleSource,
    } = options);
    // (a monotonic clock: a wall clock set back would make a replica's data look fresher than it is)
    this.clock = options.clock ?? (() => performance.now());
    this.primaryPool = { db: options.primary, name: 'primary', maxStalenessMs: () => 0 };
    this.replicas = options.replicas.map((source) => ({
      source,
      name: source.name,
      db: source.pool(),
      lost: new AbortController(),
      freshAsOf: -Infinity,
      started: undefined,
      up: false,
      refused: undefined,
      probing: undefined,
    }));
  }

  /**
   * Routing between `primary` (the API's pool on the primary) and a pool per URL, as `role`; samples the primary and
   * probes every replica at once, and then every PROBE_INTERVAL_MS. Undefined without replicas: the primary's pool is
   * then used as it is.
   */
  static async start(options: {
    database: Database;
    primary: Knex;
    urls: string[];
    maxLagMs?: number;
    logger: Logger;
    metrics?: RoutingMetrics;
  }): Promise<ReadRouting | undefined> {
    const { database, primary, urls, maxLagMs = processConfig().readMaxLagMs, logger, metrics } = options;
    if (urls.length === 0) return undefined;
    const probeTimeouts = { acquireMs: PROBE_TIMEOUT_MS, queryMs: PROBE_TIMEOUT_MS, connectMs: PROBE_TIMEOUT_MS };
    const names = new Map<string, number>();
    const replicas = urls.map((url): ReplicaSource => {
      let name = replicaName(url);
      const seen = names.get(name) ?? 0;
      names.set(name, seen + 1);
      if (seen > 0) name = `${name}#${seen + 1}`;
      const probe = database.forReplica(url, 'api', { timeouts: probeTimeouts, poolMax: 1 });
      return {
        name,
        pool: () => database.forReplica(url, 'api'),
        probe: async () => {
          const {
            rows: [row],
          } = await probe.raw(REPLICA_PROBE);
          return {
            recovery: row.recovery,
            replayed: row.replayed === null ? null : parseLsn(row.replayed),
            identity: { system: row.system, database: row.database, timeline: row.timeline },
            started: row.started,
          };
        },
      };
    });
    const primaryProbe = database.forReplica(database.url, 'api', { timeouts: probeTimeouts, poolMax: 1 });
    const samplePrimary = async (): Promise<PrimarySample> => {
      const {
        rows: [row],
      } = await primaryProbe.raw(PRIMARY_SAMPLE);
      return {
        lsn: parseLsn(row.lsn),
        identity: { system: row.system, database: row.database, timeline: row.timeline },
      };
    };
    const routing = new ReadRouting({ primary, samplePrimary, replicas, maxLagMs, logger, metrics });
    // (a first sample of the primary before the first probes, so that a replica caught up is usable at once)
    await routing.samplePrimary();
    await routing.probe();
    // The primary's sample and each replica's probe on their own: one slow answer delays no other measurement (one
    // still in flight is not asked again).
    routing.timer = setInterval(() => {
      void routing.samplePrimary();
      void routing.probe();
    }, PROBE_INTERVAL_MS);
    routing.timer.unref();
    return routing;
  }

  /** The replicas' names. */
  get replicaNames(): string[] {
    return this.replicas.map((r) => r.name);
  }

  /** At most how many milliseconds old a replica's data is now (Infinity: down or unknown). */
  private stalenessMs(replica: Replica, now = this.clock()): number {
    return replica.up ? now - replica.freshAsOf : Infinity;
  }

  /** The pool for one request's reads: the next replica (round robin) within the bound, else the primary. */
  choose(): ReadPool {
    const now = this.clock();
    const count = this.replicas.length;
    for (let i = 0; i < count; i++) {
      const replica = this.replicas[(this.next + i) % count];
      if (this.stalenessMs(replica, now) <= this.maxLagMs) {
        this.next = (this.next + i + 1) % count;
        // (the freshness known when it was chosen: the data read is at least that fresh, however long the answer takes)
        const { freshAsOf } = replica;
        return {
          db: replica.db,
          name: replica.name,
          maxStalenessMs: () => Math.max(1, Math.ceil(this.clock() - freshAsOf)),
        };
      }
    }
    return this.primaryPool;
  }

  /**
   * Runs one request's reads on the pool chosen once for all of them (a data version and the answer it tags must come
   * from one server); a replica that fails under them (going away, a statement canceled by replay, or found down by a
   * probe meanwhile) is skipped until its next good probe, and the reads run again on the primary. `work` must only read.
   */
  async read<T>(work: (pool: ReadPool) => Promise<T>): Promise<T> {
    const pool = this.choose();
    let answered = pool;
    let result: T;
    const replica = pool === this.primaryPool ? undefined : this.replicas.find((r) => r.db === pool.db);
    try {
      result = replica ? await this.unlessLost(replica.lost.signal, replica.name, work(pool)) : await work(pool);
    } catch (err) {
      if (replica === undefined || !replicaFault(err)) throw err;
      // (a full pool is a busy replica, not a gone one: that read alone goes to the primary)
      if (isDatabaseUnavailable(err) && !poolFull(err)) this.markDown(replica, err);
      answered = this.primaryPool;
      result = await work(answered);
    }
    this.metrics?.reads.inc({ pool: answered.name });
    return result;
  }

  /** `running`, or a ReplicaLostError as soon as `lost` is aborted (what `running` does after that is dropped). */
  private unlessLost<T>(lost: AbortSignal, name: string, running: Promise<T>): Promise<T> {
    if (lost.aborted) return Promise.reject(new ReplicaLostError(name));
    running.catch(() => undefined);
    let onLost!: () => void;
    const gone = new Promise<never>((_, reject) => {
      onLost = () => reject(new ReplicaLostError(name));
      lost.addEventListener('abort', onLost, { once: true });
    });
    return Promise.race([running, gone]).finally(() => lost.removeEventListener('abort', onLost));
  }

  /**
   * Skips `replica` until a probe finds it good again, forgets its freshness (what comes back may be behind), and makes
   * the reads running or waiting on it fail now (they run again on the primary) with a new pool for later ones.
   */
  private markDown(replica: Replica, err: unknown): void {
    if (replica.up)
      this.logger.warn(
        { replica: replica.name, err: { code: (err as { code?: string }).code, message: (err as Error).message } },
        'read replica skipped: unreachable',
      );
    this.forget(replica);
  }

  private forget(replica: Replica): void {
    const wasUp = replica.up;
    replica.up = false;
    replica.freshAsOf = -Infinity;
    replica.started = undefined;
    this.metrics?.replicaUp.set({ replica: replica.name }, 0);
    // (a lag while it is down would be a figure nobody measured)
    this.metrics?.replicaLag.remove({ replica: replica.name });
    if (!wasUp) return;
    replica.lost.abort();
    replica.lost = new AbortController();
    const old = replica.db;
    replica.db = replica.source.pool();
    void old.destroy().catch(() => undefined);
  }

  /** Samples the primary's position and identity (one sample in flight at a time). */
  samplePrimary(): Promise<void> {
    this.sampling ??= (async () => {
      const at = this.clock();
      try {
        const { lsn, identity } = await this.sampleSource();
        this.primaryIdentity = identity;
        this.samples.push({ lsn, at });
        if (this.samples.length > MAX_SAMPLES) this.samples.shift();
      } catch {
        // (the primary's outage is the API's to report; without samples the replicas' data only ages)
      } finally {
        this.sampling = undefined;
      }
    })();
    return this.sampling;
  }

  /** Probes every replica, each on its own (one whose probe is still in flight is not asked again). */
  async probe(): Promise<void> {
    await Promise.all(
      this.replicas.map(
        (replica) =>
          (replica.probing ??= this.probeReplica(replica).finally(() => {
            replica.probing = undefined;
          })),
      ),
    );
  }

  private async probeReplica(replica: Replica): Promise<void> {
    try {
      const probe = await replica.source.probe();
      const primary = this.primaryIdentity;
      const refused = primary && notOfPrimary(primary, probe.identity);
      if (refused !== undefined) {
        if (refused !== replica.refused)
          this.logger.error(
            { replica: replica.name },
            `read replica refused: it is not a standby of this primary's database but of ${refused}; each URL of ${READ_URLS_ENV} must name one standby server of it`,
          );
        replica.refused = refused;
        this.forget(replica);
      } else if (!probe.recovery || probe.replayed === null) {
        if (replica.up)
          this.logger.warn({ replica: replica.name }, 'read replica skipped: not in recovery (promoted?)');
        this.forget(replica);
      } else if (primary === undefined) {
        // (no sample of the primary yet: nothing to compare it with, and no freshness to give it)
        this.forget(replica);
      } else {
        replica.refused = undefined;
        const replayed = probe.replayed;
        // the newest sample replayed (samples are in the order they were asked, and positions only grow)
        let freshAsOf = -Infinity;
        for (let i = this.samples.length - 1; i >= 0; i--) {
          if (this.samples[i].lsn <= replayed) {
            freshAsOf = this.samples[i].at;
            break;
          }
        }
        // The same server as before never goes back (a replica further behind than the samples kept keeps what it
        // had); another one (restarted, rebuilt, or another behind the name) is as fresh as measured now.
        replica.freshAsOf = probe.started === replica.started ? Math.max(replica.freshAsOf, freshAsOf) : freshAsOf;
        replica.started = probe.started;
        if (!replica.up) this.logger.info({ replica: replica.name }, 'read replica answering');
        replica.up = true;
        const newest = this.samples.at(-1);
        // Lag as a metric: 0 when it has replayed the primary's latest position, else how long ago the primary passed it
        const lag = newest === undefined || replayed >= newest.lsn ? 0 : this.clock() - replica.freshAsOf;
        this.metrics?.replicaLag.set(
          { replica: replica.name },
          Number.isFinite(lag) ? lag / 1000 : (MAX_SAMPLES * PROBE_INTERVAL_MS) / 1000,
        );
      }
    } catch (err) {
      this.markDown(replica, err);
    } finally {
      this.metrics?.replicaUp.set({ replica: replica.name }, this.stalenessMs(replica) <= this.maxLagMs ? 1 : 0);
    }
  }

  /** Stops probing (the pools close with the database). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([this.sampling, ...this.replicas.map((r) => r.probing)]);
  }
}
