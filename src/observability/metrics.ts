import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { readiness } from './health.js';

// Prometheus metrics of one process, in one registry. The API registers its requests, the dispatcher its attempts,
// the worker its calendar sweeps; gauges read the database when scraped. Served on a listener of its own
// (FRS_METRICS_PORT, 127.0.0.1 by default), never on the API's port. Names: `frs_` prefix, base units, `_total`
// for counters; the default process metrics keep their standard names, so stock dashboards work.

const DELIVERY_STATUSES_PENDING = ['queued', 'retrying', 'held'] as const;

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly httpRequestDuration = new Histogram({
    name: 'frs_http_request_duration_seconds',
    help: 'API request duration, by operationId (or "none" for requests no operation took) and status',
    labelNames: ['operation', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly deliveryAttempts = new Counter({
    name: 'frs_webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts, by outcome (accepted or failed) and error kind ("none" when accepted)',
    labelNames: ['outcome', 'error_kind'],
    registers: [this.registry],
  });
  readonly deliveryLag = new Histogram({
    name: 'frs_webhook_delivery_lag_seconds',
    help: 'Time from a delivery being queued to the endpoint accepting it (retries included)',
    buckets: [0.1, 0.5, 1, 2, 5, 15, 60, 300, 900, 3600, 21600, 86400, 259200],
    registers: [this.registry],
  });
  readonly endpointSwitchOffs = new Counter({
    name: 'frs_webhook_endpoint_switch_offs_total',
    help: 'Webhook endpoints this process switched off after failed attempts in a row',
    registers: [this.registry],
  });
  readonly calendarSweepDuration = new Histogram({
    name: 'frs_calendar_sweep_duration_seconds',
    help: 'Duration of calendar sweeps',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly calendarEvents = new Counter({
    name: 'frs_calendar_events_total',
    help: 'Events raised by calendar sweeps',
    registers: [this.registry],
  });

  // The fold of the append-only running totals (migration 20261128000610): the figures are exact with or without it;
  // the rows awaiting it are what a summary sums beyond one row per key.
  readonly rollupPendingRows = new Gauge({
    name: 'frs_rollup_pending_rows',
    help: "Rows of the append-only running totals awaiting the worker's fold, after its last fold (figures are exact either way)",
    registers: [this.registry],
  });
  readonly rollupFoldDuration = new Histogram({
    name: 'frs_rollup_fold_duration_seconds',
    help: "Duration of the worker's folds of the append-only running totals",
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  // The queued changes of direct writers (src/db/upkeep.ts): how far the figures are behind the tables.
  readonly upkeepDelay = new Gauge({
    name: 'frs_upkeep_delay_seconds',
    help: "Age of the oldest direct write not yet applied to the running totals, after the worker's last fold (0: current)",
    registers: [this.registry],
  });
  readonly upkeepApplied = new Counter({
    name: 'frs_upkeep_applied_rows_total',
    help: 'Queued row changes of direct writers the worker applied to the running totals',
    registers: [this.registry],
  });

  // Records the platform sends (batch writes and import jobs, src/core/import/).
  readonly records = {
    written: new Counter({
      name: 'frs_records_written_total',
      help: 'Records written by batch writes and import jobs, by document key and operation (upsert or delete)',
      labelNames: ['key', 'operation'],
      registers: [this.registry],
    }),
    stale: new Counter({
      name: 'frs_records_stale_total',
      help: 'Records skipped because their version was older than the stored one, by document key',
      labelNames: ['key'],
      registers: [this.registry],
    }),
    refused: new Counter({
      name: 'frs_records_refused_total',
      help: 'Records of refused batches and failed import jobs, by reason (invalid, missing_reference, dependent_records, too_large, import_failed)',
      labelNames: ['reason'],
      registers: [this.registry],
    }),
  };

  // Read replicas (src/db/read-routing.ts): a replica is named by host:port, never with its user or password.
  readonly reads = new Counter({
    name: 'frs_db_reads_total',
    help: 'API requests whose reads a pool answered, by pool ("primary", or a read replica\'s host:port)',
    labelNames: ['pool'],
    registers: [this.registry],
  });
  readonly replicaLag = new Gauge({
    name: 'frs_db_replica_lag_seconds',
    help: 'Replay lag of each read replica behind the primary, as this process last measured it (0: caught up; absent while it is down or refused)',
    labelNames: ['replica'],
    registers: [this.registry],
  });
  readonly replicaUp = new Gauge({
    name: 'frs_db_replica_up',
    help: 'Whether each read replica answers reads now: 1 reachable and within FRS_READ_MAX_LAG_MS, 0 skipped',
    labelNames: ['replica'],
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });
  }

  /** Gauges read from the database at scrape time: pending deliveries, switched-off endpoints, the pool. */
  watchDatabase(db: Knex): void {
    const registers = [this.registry];
    new Gauge({
      name: 'frs_webhook_deliveries_pending',
      help: 'Deliveries not yet finished, by status (held: waiting for a switched-off endpoint)',
      labelNames: ['status'],
      registers,
      async collect() {
        const { rows } = await db.raw(
          `SELECT s.status, (SELECT count(*) FROM deliveries d WHERE d.status = s.status)::int AS n
           FROM unnest(?::text[]) AS s(status)`,
          [DELIVERY_STATUSES_PENDING as unknown as string[]],
        );
        for (const r of rows as Array<{ status: string; n: number }>) this.set({ status: r.status }, r.n);
      },
    });
    new Gauge({
      name: 'frs_webhook_endpoints_switched_off',
      help: 'Webhook endpoints currently switched off',
      registers,
      async collect() {
        const { rows } = await db.raw(
          `SELECT count(*)::int AS n FROM webhook_endpoints WHERE NOT is_active AND deleted_at IS NULL`,
        );
        this.set(rows[0].n);
      },
    });
    const pool = (db.client as { pool?: { numUsed(): number; numPendingAcquires(): number } }).pool;
    new Gauge({
      name: 'frs_db_pool_connections',
      help: 'Database pool connections in use, and requests waiting for one',
      labelNames: ['state'],
      registers,
      collect() {
        const current = (db.client as { pool?: typeof pool }).pool ?? pool;
        this.set({ state: 'in_use' }, current?.numUsed() ?? 0);
        this.set({ state: 'waiting' }, current?.numPendingAcquires() ?? 0);
      },
    });
  }
}

export interface MetricsListenerOptions {
  metrics: ServiceMetrics;
  db: Knex;
  logger: Logger;
  port: number;
  host: string;
  /** The metrics of this service's other processes to add in (FRS_ROLE=all's worker process): one getMetricsAsJSON() each. */
  others?: () => Promise<object[][]>;
}

/**
 * This process's metrics, with the service's own (`frs_`) of `others` added in, summed by name and labels; the process
 * figures (memory, CPU, start time) stay this process's own.
 */
async function scrape(metrics: ServiceMetrics, others?: () => Promise<object[][]>): Promise<string> {
  const own = await metrics.registry.metrics();
  if (!others) return own;
  const service = (await metrics.registry.getMetricsAsJSON()).filter((m) => m.name.startsWith('frs_'));
  const summed = AggregatorRegistry.aggregate([service, ...(await others())] as Parameters<
    typeof AggregatorRegistry.aggregate
  >[0]);
  const processOnly = own
    .split('\n')
    .filter((line) => !/^(# (HELP|TYPE) )?frs_/.test(line))
    .join('\n');
  return `${processOnly.trimEnd()}\n\n${await summed.metrics()}`;
}

/**
 * The metrics listener: GET /metrics (Prometheus text format), and /healthz and /readyz with the API's meaning,
 * so a worker-only process can be probed too. Anything else is 404.
 */
export async function startMetricsListener({
  metrics,
  db,
  logger,
  port,
  host,
  others,
}: MetricsListenerOptions): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, 'text/plain; charset=utf-8', 'GET only\n');
    if (path === '/metrics') {
      scrape(metrics, others).then(
        (text) => send(200, metrics.registry.contentType, text),
        (err) => {
          logger.warn({ err: { message: (err as Error).message } }, 'metrics scrape failed');
          send(503, 'text/plain; charset=utf-8', 'metrics unavailable\n');
        },
      );
      return;
    }
    if (path === '/healthz') return send(200, 'application/json', '{"status":"ok"}');
    if (path === '/readyz') {
      void readiness(db).then((result) =>
        result.ready
          ? send(200, 'application/json', '{"status":"ready"}')
          : send(503, 'application/json', JSON.stringify({ status: 'not_ready', check: result.check })),
      );
      return;
    }
    send(404, 'text/plain; charset=utf-8', 'not found: /metrics, /healthz, /readyz\n');
  });
  await new Promise<void>((resolve, reject) => server.listen(port, host, () => resolve()).once('error', reject));
  const address = server.address() as AddressInfo;
  logger.info({ host: address.address, port: address.port }, 'metrics listener');
  return server;
}
