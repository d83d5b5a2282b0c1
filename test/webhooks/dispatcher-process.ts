// A dispatcher in a process of its own, for the multi-process tests:
//   DATABASE_URL=... node --import tsx test/webhooks/dispatcher-process.ts '<DispatcherOptions as JSON>'
// Prints "ready" once it listens; SIGTERM stops it gracefully (in-flight attempts are finished and recorded) and
// prints what it attempted as one JSON line.
import pino from 'pino';
import { createKnex } from '../../src/db/database.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';

const db = createKnex(process.env.DATABASE_URL!, 4);
const dispatcher = new Dispatcher({
  db,
  logger: pino({ level: 'warn' }, pino.destination(2)),
  ...JSON.parse(process.argv[2] ?? '{}'),
});
await dispatcher.start();
process.stdout.write('ready\n');
process.on('SIGTERM', async () => {
  await dispatcher.stop();
  process.stdout.write(`${JSON.stringify(dispatcher.totals)}\n`);
  await db.destroy();
  process.exit(0);
});
