// `npm start`: the service on DATABASE_URL, or on the embedded PostgreSQL under .data/ when it is unset.
// Migrates the embedded database (a DATABASE_URL one is migrated by `fleet-admin migrate`), loads the demo
// workspace on the embedded default's first start or with FRS_SEED_DEMO=1 (printing its API key that once), then
// serves the API and runs the webhook worker (delivery sweep and calendar sweep), each as its own database role.
// FRS_ROLE=api runs the API alone, FRS_ROLE=worker the worker alone; several of either can run against one database.
// Only the worker holds the master key, which opens the signing secrets: a process serving the API never reads it.
// So FRS_ROLE=all runs the worker as a process of its own (this entry again, with FRS_ROLE=worker), the only one
// given the master key; this process serves the API, having taken the key's variables out of its environment.
//
// Each start-up step prints a line on stderr as it begins and as it ends, so a person can see it is not hung. SIGTERM
// or SIGINT (Ctrl-C, or either sent to `npm start`) stops it: requests and attempts in flight finish, then the embedded
// database (if this process started it) is stopped, and the process exits 0.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import net from 'node:net';
import path from 'node:path';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { ConfigError, loadConfig, type Config, type ServiceConfig } from './config.js';
import { createLogger } from './logger.js';
import { openDatabase, type Database } from './db/database.js';
import { publicApi, publicListener } from './api/app.js';
import { createAdminApp } from './admin/app.js';
import { KeyCache } from './api/key-cache.js';
import { EventArrivals } from './api/event-arrivals.js';
import { logDroppedConnections } from './http/http-limits.js';
import { listen } from './http/edge.js';
import { ServiceMetrics, startMetricsListener } from './observability/metrics.js';
import { startWorker, type Worker } from './webhooks/worker.js';
import { checkApiSecret, checkMasterKey, recordPublicKey } from './webhooks/sealing.js';
import { settleProcessKeys } from './secrets.js';
import { createPortal } from './portal/app.js';
import { recordLinkBase, serverLinkBase } from './portal/link-base.js';
import { ReadRouting } from './db/read-routing.js';

const DEMO_SLUG = 'demo';

/** Runs one start-up step between a "…" line and a "done" line on stderr. */
async function step<T>(label: string, run: () => Promise<T>, done: (result: T) => string = () => 'done'): Promise<T> {
  const at = Date.now();
  process.stderr.write(`fleet-rental: ${label}…\n`);
  const result = await run();
  process.stderr.write(`fleet-rental: ${label}: ${done(result)} (${((Date.now() - at) / 1000).toFixed(1)} s)\n`);
  return result;
}

/**
 * Whether to load the demo workspace now: on the embedded default's first start (the start that created its
 * schema), or whenever FRS_SEED_DEMO=1 finds no workspace "demo"; FRS_SEED_DEMO=0 never. A deleted demo workspace
 * therefore stays deleted.
 */
async function demoWanted(database: Database, embedded: boolean, setting: Config['seedDemo']): Promise<boolean> {
  if (setting === true) return !(await database.db('workspaces').where({ slug: DEMO_SLUG }).first('id'));
  return setting === undefined && embedded && database.createdSchema;
}

let database: Database | undefined;
let stopping = false;
/** FRS_ROLE=all: the worker's process, which alone holds the master key. */
let workerProcess: ChildProcess | undefined;
/**
 * This process is the worker an `all` process started (config.workerOfParent, with the IPC channel it was given): it
 * reports ready, and stops when that process goes.
 */
let isWorkerProcess = false;

/**
 * FRS_ROLE=all: starts the worker as a process of its own, with the master key's variables (taken out of this
 * process's environment) and no listener of its own; `running` resolves once it reports its worker running. The key
 * file, if that is where the key is, is read by it alone.
 */
function startWorkerProcess(
  env: Config['env'],
  masterKey: Record<string, string>,
): { child: ChildProcess; running: Promise<void> } {
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]], {
    env: { ...env, ...masterKey, FRS_ROLE: 'worker', FRS_METRICS_PORT: '0', FRS_WORKER_OF_PARENT: '1' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const running = new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) =>
      reject(
        new ConfigError(
          `the webhook worker's process exited (status ${code}) before it was running; its reason is on the line above`,
        ),
      ),
    );
  });
  return { child, running };
}

/**
 * The worker process's metrics, for the parent's /metrics (it has no listener of its own): asked over the IPC channel,
 * none if it does not answer within 2 s (a scrape then shows this process's alone).
 */
function workerProcessMetrics(child: ChildProcess): () => Promise<object[][]> {
  let asked = 0;
  return () =>
    new Promise((resolve) => {
      const id = ++asked;
      const done = (data: object[][]) => {
        clearTimeout(timer);
        child.off('message', answer);
        resolve(data);
      };
      const answer = (message: unknown) => {
        const m = message as { type?: string; id?: number; data?: object[] };
        if (m?.type === 'metrics' && m.id === id && Array.isArray(m.data)) done([m.data]);
      };
      const timer = setTimeout(() => done([]), 2000);
      child.on('message', answer);
      if (!child.connected || !child.send({ type: 'metrics', id })) done([]);
    });
}

/** The one line a listener's port in use is refused with, naming the setting to change. */
function portInUse(setting: string, port: number, host: string): ConfigError {
  return new ConfigError(`port ${port} on ${host} is in use by another program: set ${setting} to a free port`);
}

/**
 * Refuses, before anything starts, a listener's port that another program holds: a port in use is found in an
 * instant, not after the database and the API have been loaded (and then stopped again). Port 0 (any, or off) passes.
 */
async function checkPortsFree(listeners: Array<{ setting: string; port: number; host: string }>): Promise<void> {
  for (const { setting, port, host } of listeners) {
    if (port === 0) continue;
    await new Promise<void>((resolve, reject) => {
      const probe = net.createServer();
      probe.once('error', (err: NodeJS.ErrnoException) =>
        reject(err.code === 'EADDRINUSE' ? portInUse(setting, port, host) : err),
      );
      probe.listen(port, host, () => probe.close(() => resolve()));
    });
  }
}

/** FRS_ROLE=all: stops the worker's process (SIGTERM), if it still runs, and waits for it to exit. */
async function stopWorkerProcess(): Promise<void> {
  if (!workerProcess || workerProcess.exitCode !== null || workerProcess.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => workerProcess!.once('exit', () => resolve()));
  workerProcess.kill('SIGTERM');
  await exited;
}

/** The database being opened, for a signal that comes before it is open: stop() waits for it, then closes it. */
let opening: Promise<Database> | undefined;

/** What this process started, for stop() to stop. */
const running: {
  worker?: Worker;
  server?: Server;
  adminServer?: Server;
  metricsServer?: Server;
  keyCache?: KeyCache;
  events?: EventArrivals;
  reads?: ReadRouting;
} = {};

/**
 * Stops what was started: no new connections, requests and delivery attempts in flight finish, then the worker's
 * process, the caches, the replicas' pools and the database; then exits.
 */
async function stop(logger: Logger, signal: string): Promise<void> {
  if (stopping) return; // Ctrl-C reaches both npm and us, and npm passes it on: one shutdown is enough
  stopping = true;
  logger.info({ signal }, 'shutting down');
  // The event feed's long polls are answered now with what they have, instead of holding the shutdown for their wait.
  const feedClosed = running.events?.close();
  // Stop accepting connections and let requests and delivery attempts in flight finish.
  await Promise.all(
    [running.server, running.adminServer].map(async (listening) => {
      if (!listening) return;
      const closing = new Promise<void>((resolve) => listening.close(() => resolve()));
      listening.closeIdleConnections();
      await closing;
    }),
  );
  running.metricsServer?.close();
  await running.worker?.stop();
  await stopWorkerProcess();
  await running.keyCache?.close();
  await feedClosed;
  await running.reads?.close();
  // (a signal while the database was being opened: it is closed, and its embedded cluster stopped, once open)
  database ??= await opening?.catch(() => undefined);
  await database?.close();
  logger.info('stopped');
  process.exit(process.exitCode ?? 0);
}

/** The listeners this process will open, for checkPortsFree. */
function listenersOf(config: ServiceConfig): Array<{ setting: string; port: number; host: string }> {
  return [
    ...(config.role === 'worker'
      ? []
      : [
          { setting: 'PORT (and HOST)', port: config.port, host: config.host },
          { setting: 'FRS_ADMIN_PORT (or 0 to switch it off)', port: config.adminPort, host: config.adminHost },
        ]),
    { setting: 'FRS_METRICS_PORT (or 0 to switch it off)', port: config.metricsPort, host: config.metricsHost },
  ];
}

/**
 * Opens the database: only the embedded default, which the service owns, is migrated at start; any other database by
 * `fleet-admin migrate` (a start on a database whose schema is behind is refused).
 */
async function openTheDatabase(settings: Config): Promise<Database> {
  const { service: config, dataDir, embeddedPort } = settings;
  const embeddedDir = path.relative(process.cwd(), path.join(dataDir, 'postgres'));
  const where = config.databaseUrl
    ? 'the database in DATABASE_URL'
    : `the embedded PostgreSQL under ${embeddedDir.startsWith('..') ? path.join(dataDir, 'postgres') : embeddedDir} (port ${embeddedPort})`;
  const embedded = !config.databaseUrl;
  opening = openDatabase({ url: config.databaseUrl, schema: embedded ? 'migrate' : 'check' });
  return step(`opening ${where} and ${embedded ? 'applying migrations' : 'checking its schema'}`, () => opening!);
}

/**
 * The worker opens signing secrets: it needs the master key the database records, and records that key's public key
 * for the API process to seal to (on the embedded default it makes the key on its first start). The API process
 * holds no master key (forgone at the start).
 */
async function checkKeys(db: Knex, role: ServiceConfig['role']): Promise<void> {
  if (role === 'worker') {
    await checkMasterKey(db, 'needed');
    await recordPublicKey(db, { createOnEmbedded: true });
  } else {
    // Every API process holds the same API secret (cursors, CSRF tokens, stored answers): a stale one is refused.
    await checkApiSecret(db);
  }
}

/** FRS_ROLE=all: the worker's process starts now, and gets ready while this one loads the API (awaited before Ready). */
function startTheWorkerProcess(settings: Config, masterKey: Record<string, string>, logger: Logger): Promise<void> {
  process.stderr.write(
    'fleet-rental: starting the webhook worker in a process of its own (the only one holding the master key)…\n',
  );
  const started = startWorkerProcess(settings.env, masterKey);
  workerProcess = started.child;
  started.running.catch(() => undefined);
  workerProcess.once('exit', (code) => {
    if (stopping) return;
    process.stderr.write(`fleet-rental: the webhook worker's process exited (status ${code}): stopping\n`);
    process.exitCode = 1;
    void stop(logger, 'worker exited');
  });
  return started.running;
}

/**
 * FRS_ROLE=all's worker: reports running, and sends its metrics through the parent's listener (FRS_METRICS_PORT is the
 * parent's).
 */
function reportToParent(metrics: ServiceMetrics): void {
  if (process.connected) process.send!('running');
  process.on('message', (message: unknown) => {
    const m = message as { type?: string; id?: number };
    if (m?.type === 'metrics') {
      void metrics.registry
        .getMetricsAsJSON()
        .then((data) =>
          process.send?.({ type: 'metrics', id: m.id, data: data.filter((d) => d.name.startsWith('frs_')) }),
        );
    }
  });
}

/** (taken since the check at the start) */
const inUse = (variables: string, port: number, host: string) => (err: NodeJS.ErrnoException) => {
  throw err.code === 'EADDRINUSE' ? portInUse(variables, port, host) : err;
};

/** An address's port as it listens (the setting's, unless that was 0). */
const portOf = (server: Server, setting: number) => {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : setting;
};

/**
 * The public listener: the API, with the settings screen mounted beside it under /portal (as the admin API's
 * database role: the screen changes what the admin API changes). Returns the lines that say where it listens.
 */
async function startPublicListener(settings: Config, database: Database, metrics: ServiceMetrics, logger: Logger) {
  const { service: config, httpLimits, portal } = settings;
  const app = await step('loading the API (document and validators)', async () => {
    const api = await publicApi({
      db: database.forRole('api'),
      logger,
      metrics,
      keyCache: running.keyCache,
      reads: running.reads,
      events: running.events,
    });
    const screen = await createPortal({ ...api.edge, db: database.forRole('admin'), settings: portal });
    return publicListener(api, {
      logger,
      metrics,
      shedEventLoopLagMs: settings.shedEventLoopLagMs,
      beside: [{ prefix: '/portal', serve: screen }],
    });
  });
  const server = await step(`starting the API on ${config.host}:${config.port}`, () =>
    listen(app, config.port, config.host, httpLimits).catch(inUse('PORT (and HOST)', config.port, config.host)),
  );
  running.server = server;
  logDroppedConnections(server, logger, httpLimits.maxConnections, httpLimits.maxConnectionsPerAddress);
  const port = portOf(server, config.port);
  const base = `http://${config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host}:${port}`;
  // The settings screen's links: FRS_PUBLIC_URL, else this listener's real port (also for PORT=0), for the CLI too.
  const linkBase = serverLinkBase(portal, port);
  recordLinkBase(linkBase, settings.dataDir);
  return {
    linkBase,
    lines: [
      `Fleet Rental Service is listening on ${base}`,
      `API reference: ${base}/docs   (OpenAPI document: ${base}/openapi.json)`,
    ],
  };
}

/**
 * The admin API: its own listener, credential and database role (src/admin/app.ts), and the ingest role's small pool
 * for the platform's records (batch writes, import jobs), which the admin role neither reads nor writes.
 */
async function startAdminListener(
  settings: Config,
  database: Database,
  metrics: ServiceMetrics,
  logger: Logger,
  linkBase: string,
): Promise<string> {
  const { service: config, httpLimits } = settings;
  if (config.adminPort === 0) return 'Admin API: off (FRS_ADMIN_PORT=0)';
  const adminApp = await createAdminApp({
    db: database.forRole('admin'),
    ingestDb: database.forRole('ingest'),
    logger,
    metrics,
    shedEventLoopLagMs: settings.shedEventLoopLagMs,
    portalUrl: linkBase,
  });
  running.adminServer = await step(`starting the admin API on ${config.adminHost}:${config.adminPort}`, () =>
    listen(adminApp, config.adminPort, config.adminHost, httpLimits).catch(
      inUse('FRS_ADMIN_PORT (or 0 to switch it off)', config.adminPort, config.adminHost),
    ),
  );
  const adminBase = `http://${config.adminHost}:${portOf(running.adminServer, config.adminPort)}`;
  return `Admin API: ${adminBase}/admin/v1   (reference: ${adminBase}/docs; make a token with: npx fleet-admin admin-token create --name NAME)`;
}

/** The API's listeners (public, with the screen; admin), with the key cache and the read replicas they use. */
async function startApi(settings: Config, database: Database, metrics: ServiceMetrics, logger: Logger) {
  const apiDb = database.forRole('api');
  const readUrls = settings.service.role === 'worker' ? [] : settings.readUrls;
  // Key lookups are kept in memory and dropped on every key or workspace change, announced through the database;
  // heartbeats through the API's pool prove that announcements still arrive.
  running.keyCache = await KeyCache.start(() => database.connectAs('api'), apiDb, logger);
  // The event feed's long polls wait on one LISTEN connection of the API's role (src/api/event-arrivals.ts).
  running.events = await EventArrivals.start(() => database.connectAs('api'), logger);
  // Reads of the API on replicas within the lag bound, when DATABASE_READ_URL names them (src/db/read-routing.ts).
  if (readUrls.length > 0) {
    running.reads = await step(`probing ${readUrls.length} read replica(s)`, () =>
      ReadRouting.start({ database, primary: apiDb, urls: readUrls, maxLagMs: settings.readMaxLagMs, logger, metrics }),
    );
  }
  const { linkBase, lines } = await startPublicListener(settings, database, metrics, logger);
  return [...lines, await startAdminListener(settings, database, metrics, logger, linkBase)];
}

/** The lines printed once ready: where everything is, and the demo workspace's key the first time. */
function readyLines(settings: Config, demoKey: string | undefined): string[] {
  const { service: config, readMaxLagMs, dataDir } = settings;
  const { worker, metricsServer, reads } = running;
  const lines = [
    `Metrics: ${metricsServer ? `http://${config.metricsHost}:${config.metricsPort}/metrics` : 'off (FRS_METRICS_PORT=0)'}`,
    `Webhook worker: ${worker || workerProcess ? `running${workerProcess ? ` in process ${workerProcess.pid}` : ''} (deliveries continuously, calendar every minute)` : 'off (FRS_ROLE=api)'}`,
    `Database: ${config.databaseUrl ? 'DATABASE_URL' : `embedded PostgreSQL under ${path.join(dataDir, 'postgres')}`}` +
      (reads ? `; reads on ${reads.replicaNames.join(', ')} within ${readMaxLagMs} ms, else the primary` : ''),
    `Ready ${process.uptime().toFixed(1)} s after launch. Stop with Ctrl-C (or SIGTERM to this process or to npm).`,
  ];
  if (demoKey) {
    lines.push(
      `Demo workspace "${DEMO_SLUG}" loaded. Its API key, shown this once:`,
      `  ${demoKey}`,
      `Try: curl -H "Authorization: Bearer ${demoKey}" http://localhost:${config.port}/v1/fleet/summary`,
    );
  }
  return lines;
}

/** The metrics listener, unless switched off (FRS_METRICS_PORT=0). */
async function startMetrics(config: ServiceConfig, metrics: ServiceMetrics, db: Knex, logger: Logger): Promise<void> {
  if (config.metricsPort === 0) return;
  running.metricsServer = await step(
    `starting the metrics listener on ${config.metricsHost}:${config.metricsPort}`,
    () =>
      startMetricsListener({
        metrics,
        db,
        logger,
        port: config.metricsPort,
        host: config.metricsHost,
        others: workerProcess && workerProcessMetrics(workerProcess),
      }).catch(inUse('FRS_METRICS_PORT (or 0 to switch it off)', config.metricsPort, config.metricsHost)),
  );
}

/** Every section start-up needs, parsed now: a bad webhook or API setting fails at once, on one line. */
function checkSettings(settings: Config): void {
  if (settings.service.role !== 'api') void settings.worker;
  void settings.httpLimits;
  void settings.shedEventLoopLagMs;
  void settings.apiStatementTimeoutMs;
  void settings.portal;
  if (settings.service.role !== 'worker') void settings.readUrls;
  void settings.readMaxLagMs;
  void settings.dataDir;
  void settings.embeddedPort;
}

async function main(): Promise<void> {
  const settings = loadConfig();
  const config = settings.service;
  isWorkerProcess = config.workerOfParent && typeof process.send === 'function';
  // Before anything else: a process serving the API never holds the master key (src/secrets.ts).
  const masterKey = settleProcessKeys(config.role);
  checkSettings(settings);
  const logger = createLogger(config.logLevel);
  if (!isWorkerProcess) await checkPortsFree(listenersOf(config));
  // Registered first, so a signal during start-up also stops what has been started so far.
  process.on('SIGTERM', () => void stop(logger, 'SIGTERM'));
  process.on('SIGINT', () => void stop(logger, 'SIGINT'));
  // FRS_ROLE=all's worker: it stops when the process that started it goes, however it went, even while it starts.
  if (isWorkerProcess) process.on('disconnect', () => void stop(logger, 'disconnect'));

  database = await openTheDatabase(settings);
  if (stopping) return;
  const { db } = database;
  await checkKeys(db, config.role);
  const workerRunning = config.role === 'all' ? startTheWorkerProcess(settings, masterKey, logger) : undefined;
  let demoKey: string | undefined;
  if (!isWorkerProcess && (await demoWanted(database, !config.databaseUrl, settings.seedDemo))) {
    const { seedDemo } = await import('../seeds/demo.js');
    demoKey = await step(`loading the demo workspace "${DEMO_SLUG}"`, async () => (await seedDemo(db, DEMO_SLUG)).key);
  }
  if (stopping) return;

  // One metrics registry per process: the API and the worker both count into it. Metrics and readiness read as the
  // API's read-only role; the API and the worker each connect as their own database role (src/db/roles.ts).
  const apiDb = database.forRole('api');
  // FRS_ROLE=all's worker process adds its counts to the parent's /metrics: the process's own figures (memory, CPU,
  // start time) are the parent's there, not a sum of two processes'.
  const metrics = new ServiceMetrics({ defaultMetrics: !isWorkerProcess });
  metrics.watchDatabase(apiDb);
  // The worker's first calendar sweep runs in the background: the API answers while it works.
  const workerDb = database.forRole('worker');
  if (config.role === 'worker')
    running.worker = await step('starting the webhook worker', () =>
      startWorker(workerDb, logger, metrics, settings.worker),
    );
  if (stopping) return;
  // FRS_ROLE=all's worker: running (it stops when the process that started it goes: see above).
  if (isWorkerProcess) return reportToParent(metrics);
  const lines = ['', ...(config.role !== 'worker' ? await startApi(settings, database, metrics, logger) : [])];
  await startMetrics(config, metrics, apiDb, logger);
  if (workerRunning) await step("waiting for the webhook worker's process", () => workerRunning);
  lines.push(...readyLines(settings, demoKey));
  // Plain text on stdout for the operator, not a log line: log lines never carry keys.
  process.stdout.write(`${lines.join('\n')}\n\n`);
}

main().catch(async (err) => {
  if (stopping) return; // a signal during start-up: stop() is exiting already
  stopping = true;
  // A configuration error is one line of advice (an embedded database that failed to start appends its log).
  process.stderr.write(`fleet-rental: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  // The worker's process first: it may be starting the embedded cluster itself when this one stops it.
  await stopWorkerProcess().catch(() => undefined);
  await database?.close().catch(() => undefined);
  process.exit(1);
});
