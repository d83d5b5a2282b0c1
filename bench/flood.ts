// A flood for the noisy-neighbour bench, in a process of its own (so that it does not slow the measuring loop's event
// loop): autocannon with CONNECTIONS connections for SECONDS against the heaviest read operations, each request with
// the next of the given keys, or with a made-up key each time. Prints the answers' statuses as JSON when done.
import autocannon from 'autocannon';
import { newApiKey } from '../src/secrets.js';

const [base, seconds, connections, keysJson] = process.argv.slice(2);
const keys: string[] | 'made-up' = keysJson === 'made-up' ? 'made-up' : JSON.parse(keysJson);
/** The heaviest operations on the demo data: long pages, a search, the day's list, the finance figures. */
const HEAVY = [
  '/v1/receivables?search=al&limit=200',
  '/v1/receivables?limit=200',
  '/v1/operations/today',
  '/v1/vehicles?q=a&from=2026-12-01T06:00:00Z&to=2026-12-04T06:00:00Z&limit=50',
  '/v1/finance/overview',
];
let n = 0;
const statuses: Record<string, number> = {};
const instance = autocannon(
  {
    url: base,
    connections: Number(connections),
    duration: Number(seconds),
    requests: [
      {
        setupRequest: (request) => {
          const key = keys === 'made-up' ? newApiKey() : keys[n % keys.length];
          request.path = HEAVY[n++ % HEAVY.length];
          request.headers = { ...request.headers, authorization: `Bearer ${key}` };
          return request;
        },
      },
    ],
  },
  (err) => {
    if (err) throw err;
    process.stdout.write(`${JSON.stringify(statuses)}\n`);
  },
);
instance.on('response', (_client, statusCode) => {
  statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
});
