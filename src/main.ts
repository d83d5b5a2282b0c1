// `npm start`: the service on DATABASE_URL, or on the embedded PostgreSQL under .data/ when it is unset.
// Migrates, loads the demo workspace on first start (printing its API key that once), then serves the API and
// runs the webhook worker (delivery sweep and calendar sweep). FRS_ROLE=api runs the API alone, FRS_ROLE=worker
// the worker alone; several of either can run against one database.
import type { Server } from 'node:http';
import { readConfig } from './config.js';
import { createLogger } from './logger.js';
import { openDatabase } from './db/database.js';
import { createApp } from './api/app.js';
import { startWorker, type Worker } from './webhooks/worker.js';

const DEMO_SLUG = 'demo';

async function main(): Promise<void> {
  const config = readConfig();
  const logger = createLogger(config.logLevel);
  const database = await openDatabase({ url: config.databaseUrl });
  const { db } = database;

  let demoKey: string | undefined;
  if (!(await db('workspaces').where({ slug: DEMO_SLUG }).first('id'))) {
    const { seedDemo } = await import('../seeds/demo.js');
    demoKey = (await seedDemo(db, DEMO_SLUG)).key;
  }

  const worker: Worker | undefined = config.role === 'api' ? undefined : await startWorker(db, logger);
  let server: Server | undefined;
  const lines = [''];
  if (config.role !== 'worker') {
    const app = await createApp({ db, logger });
    server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(config.port, config.host, () => resolve(s)).on('error', reject);
    });
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const base = `http://${config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host}:${port}`;
    lines.push(
      `Fleet Rental Service is listening on ${base}`,
      `API reference: ${base}/docs   (OpenAPI document: ${base}/openapi.json)`,
    );
  }
  lines.push(
    `Webhook worker: ${worker ? 'running (deliveries continuously, calendar every minute)' : 'off (FRS_ROLE=api)'}`,
    `Database: ${config.databaseUrl ? 'DATABASE_URL' : 'embedded PostgreSQL under .data/'}`,
  );
  if (demoKey) {
    lines.push(
      `Demo workspace "${DEMO_SLUG}" loaded. Its API key, shown this once:`,
      `  ${demoKey}`,
      `Try: curl -H "Authorization: Bearer ${demoKey}" http://localhost:${config.port}/v1/fleet/summary`,
    );
  }
  // Plain text on stdout for the operator, not a log line: log lines never carry keys.
  process.stdout.write(`${lines.join('\n')}\n\n`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // Stop accepting connections and let requests and delivery attempts in flight finish.
    if (server) {
      const closing = new Promise<void>((resolve) => server!.close(() => resolve()));
      server.closeIdleConnections();
      await closing;
    }
    await worker?.stop();
    await database.close();
    logger.info('stopped');
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`fleet-rental: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
