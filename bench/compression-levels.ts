// npx tsx bench/compression-levels.ts: how the brotli quality and the gzip level of src/api/compression.ts were
// chosen. Takes three real answers of the bench's workspace `large` (today's operations, the largest receivables page,
// a mid-size vehicles page) and prints, for each quality/level, the compressed size as a share of the answer and the
// CPU of one compression (one call, median of many), then the CPU of one answer as koa-compress compresses it (a
// stream per answer). Figures and the choice: src/api/compression.ts.
// Data: as bench/api.ts (DATABASE_URL, or the embedded cluster under .data/large-pg on FRS_BENCH_PG_PORT, 54479).
import path from 'node:path';
import zlib from 'node:zlib';
import { processConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { operationsTodayJson } from '../src/queries/today.js';
import { receivablesJson } from '../src/queries/receivables.js';
import { searchVehiclesJson } from '../src/queries/vehicles.js';

const database = await openDatabase(
  process.env.DATABASE_URL
    ? { schema: 'check' }
    : {
        embeddedDir: path.join(processConfig().dataDir, 'large-pg'),
        embeddedPort: Number(process.env.FRS_BENCH_PG_PORT ?? 54479),
        embeddedDurable: false,
        schema: 'check',
      },
);
const ws = await database.db('workspaces').where({ slug: 'large' }).first('id', 'timezone');
const now = new Date();
const answers: Record<string, string> = {
  'operations/today': await operationsTodayJson(database.db, ws, now),
  'receivables?search=al&limit=200': (await receivablesJson(database.db, ws, { search: 'al', limit: 200 }, now)).json,
  'vehicles?limit=20': (await searchVehiclesJson(database.db, ws, { limit: 20 }, now)).json,
};
await database.close();

const codecs: Array<[string, (b: Buffer) => Buffer]> = [
  ...[1, 2, 3, 4, 5, 6, 9].map((q): [string, (b: Buffer) => Buffer] => [
    `br ${q}`,
    (b) =>
      zlib.brotliCompressSync(b, {
        params: { [zlib.constants.BROTLI_PARAM_QUALITY]: q, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: b.length },
      }),
  ]),
  ...[1, 3, 6, 9].map((l): [string, (b: Buffer) => Buffer] => [`gzip ${l}`, (b) => zlib.gzipSync(b, { level: l })]),
];
for (const [name, text] of Object.entries(answers)) {
  const body = Buffer.from(text);
  console.log(`\n${name}: ${(body.length / 1000).toFixed(1)} kB`);
  for (const [codec, run] of codecs) {
    const times: number[] = [];
    let size = 0;
    for (let i = 0; i < Math.max(5, Math.min(200, Math.round(20_000_000 / body.length))); i++) {
      const started = process.hrtime.bigint();
      size = run(body).length;
      times.push(Number(process.hrtime.bigint() - started) / 1000);
    }
    times.sort((a, b) => a - b);
    const us = times[Math.floor(times.length / 2)];
    console.log(
      `  ${codec.padEnd(8)} ${(size / 1000).toFixed(1).padStart(7)} kB  ÷${(body.length / size).toFixed(1).padStart(5)}  ${us.toFixed(0).padStart(6)} µs  ${(us / (body.length / 1000)).toFixed(2).padStart(6)} µs/kB`,
    );
  }
}

// As koa-compress runs them: a stream per answer, 10 at a time as from 10 connections (a stream's set-up is part of
// the cost: brotli allocates hash tables for its window, 4 MB by default, which under concurrency costs more than the
// compression of a small answer; `window` is the smallest that holds the answer), the CPU of the whole process (the
// zlib thread pool included) per answer, median of 5 batches.
console.log('\nas koa-compress streams, 10 at a time: CPU per answer, median of 5 batches');
const windowFor = (size: number) =>
  Math.max(
    zlib.constants.BROTLI_MIN_WINDOW_BITS,
    Math.min(zlib.constants.BROTLI_MAX_WINDOW_BITS, Math.ceil(Math.log2(size))),
  );
const brotli = (quality: number, size?: number) => () =>
  zlib.createBrotliCompress({
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: quality,
      ...(size ? { [zlib.constants.BROTLI_PARAM_LGWIN]: windowFor(size) } : {}),
    },
  });
for (const [name, text] of Object.entries(answers)) {
  const body = Buffer.from(text);
  const streams: Array<[string, () => zlib.Gzip | zlib.BrotliCompress]> = [
    ...[1, 2, 4].map((q): [string, () => zlib.BrotliCompress] => [`br ${q}`, brotli(q)]),
    ...[1, 2, 3, 4].map((q): [string, () => zlib.BrotliCompress] => [`br ${q} window`, brotli(q, body.length)]),
    ...[1, 3, 6].map((l): [string, () => zlib.Gzip] => [`gzip ${l}`, () => zlib.createGzip({ level: l })]),
  ];
  const line: string[] = [];
  for (const [codec, create] of streams) {
    const batches: number[] = [];
    const n = 10 * Math.max(4, Math.min(40, Math.round(1_000_000 / body.length)));
    for (let batch = 0; batch < 5; batch++) {
      const before = process.cpuUsage();
      for (let i = 0; i < n; i += 10) {
        await Promise.all(
          Array.from({ length: 10 }, async () => {
            const stream = create();
            stream.resume();
            stream.end(body);
            await new Promise((resolve) => stream.once('end', resolve));
          }),
        );
      }
      const used = process.cpuUsage(before);
      batches.push((used.user + used.system) / n);
    }
    batches.sort((a, b) => a - b);
    line.push(`${codec} ${batches[2].toFixed(0)}`);
  }
  console.log(`  ${name.padEnd(32)} µs: ${line.join(', ')}`);
}
