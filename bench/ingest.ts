// `npm run bench:ingest`: what keeping the service current costs (issue 32), in one run so that every ratio compares
// figures measured on the same machine at the same time.
//   1. Batch writes (bench/ingest/batch-writes.ts): 1,000 mixed records through writeRecords against a bare multi-row
//      INSERT ... ON CONFLICT DO UPDATE into trigger-less copies of the same tables; 4 batch writers into 4 workspaces.
//   2. Direct writers (bench/ingest/direct-writers.ts): 8 writers doing one-row transactions straight into one
//      workspace's tables against the same writers on trigger-less copies; commit to derived event queued.
// Each part runs alone too (`npx tsx bench/ingest/<part>.ts`); DATABASE_URL points both at a server of your own.
import path from 'node:path';
import { processConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { runBatchWrites } from './ingest/batch-writes.js';
import { directWriters } from './ingest/direct-writers.js';

const log = (line: string) => console.log(line);

log('== batch writes (writeRecords) vs a bare INSERT ... ON CONFLICT into trigger-less copies');
const batch = await runBatchWrites({ log });

log('\n== 8 direct writers of one workspace vs the same writers on trigger-less copies');
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
let direct;
try {
  direct = await directWriters(database.db, database.url, { log });
} finally {
  await database.close();
}

log('\n== summary (targets from issue 32)');
log(`batch of ${batch.batchRecords}: ${batch.ratio}x the bare insert's records/s (target >= 0.3x)`);
log(
  `4 batch writers: ${batch.fourWritersRatio}x one writer (target >= 1.5x), ${batch.deadlocks} deadlocks, ${batch.errors} errors (target 0, 0)`,
);
log(
  `8 direct writers: ${direct.commitsRatio}x the commits/s (target >= 0.5x), p99 ${direct.p99Ratio}x (target <= 5x), ` +
    `deadlocks and serialization failures ${direct.failedShare}% (target < 0.1%)`,
);
process.exit(0);
