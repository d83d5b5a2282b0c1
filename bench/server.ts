// A server process for the benchmark: the real app on the given database, or the plain-Koa baseline that answers
// a fixed JSON body with no database (the ceiling of Koa on this machine). Prints "listening <port>" when ready.
import Koa from 'koa';
import pino from 'pino';
import { createApp } from '../src/api/app.js';
import { openDatabase } from '../src/db/database.js';

const [mode, databaseUrl] = process.argv.slice(2);
let app: Koa;
if (mode === 'baseline') {
  app = new Koa();
  const body = JSON.stringify({ total: 10000, byStatus: { available: 1, rented: 2, in_service: 3, inactive: 4 } });
  app.use((ctx) => {
    ctx.type = 'application/json';
    ctx.body = body;
  });
} else {
  const database = await openDatabase({ url: databaseUrl, poolMax: 20, schema: 'as-is' });
  // As in production: the API's connections run as its database role.
  app = await createApp({ db: database.forRole('api'), logger: pino({ level: 'warn' }) });
}
const server = app.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
