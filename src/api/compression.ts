// Answers compressed when the client asks: koa-compress negotiates br or gzip by Accept-Encoding (q-values, `identity`,
// `*`, `br;q=0`), for compressible types over 1 kB, and says `Vary: Accept-Encoding` on every answer through it
// (compressed or not). Errors thrown by a later step pass through uncompressed (the error middleware, earlier in the
// chain, writes their small documented body); 204 and 304 have no body and are left alone.
import { Stream } from 'node:stream';
import zlib from 'node:zlib';
import type Koa from 'koa';
import compress from 'koa-compress';

/**
 * The levels, measured with bench/compression-levels.ts on the bench's workspace `large` (2 shared cores): the CPU of
 * one answer as koa-compress compresses it (a stream per answer, 10 at a time as from 10 connections) and its size:
 *
 *   answer                        size     br 1          br 2 (window)  br 4 (default)  gzip 1        gzip 3        gzip 6 (default)
 *   operations/today              29.5 kB  196 µs 10.8   218 µs 9.5     312 µs 9.4      300 µs 10.4   255 µs 10.1   367 µs 9.7
 *   receivables search, 200 rows  41.8 kB  131 µs 11.4   273 µs 11.0    400 µs 10.7     274 µs 12.4   329 µs 11.7   576 µs 10.7
 *   vehicles, 20 rows              2.9 kB   36 µs  0.8    42 µs 0.7      95 µs 0.7       48 µs  0.8    43 µs  0.8    47 µs  0.7
 *
 * Brotli 2 is within 3% of the default 4's size at two thirds of its CPU, and 4-14% smaller than brotli 1 (which is
 * larger than gzip 3 on today's operations); quality 5 and up cost twice as much again for 1-3%. Its window is fitted
 * to the answer: with the default 4 MB window, brotli 2 allocates hash tables that cost 1.3 ms an answer under
 * concurrency, six times the compression itself (a window at least the answer's size loses nothing). gzip 3 costs what
 * gzip 1 does and is 3-6% smaller; gzip 6 costs up to twice as much for 5-8%. The API is bound by its CPU, so the
 * cheap levels win. Even so, in npm run bench a br answer costs the service 220-540 µs more CPU than the same answer
 * sent as is (today's operations, 30 kB -> 10 kB: 300 -> 740 µs; vehicles, 3 kB -> 1 kB: 230 -> 450 µs), about twice
 * the compression measured alone: the rest is koa-compress's stream per answer, piped out in chunks.
 */
export const BROTLI_QUALITY = 2;
export const GZIP_LEVEL = 3;

/** The smallest brotli window (in bits) that holds an answer of `size` bytes; the default (4 MB) for a stream of unknown size. */
function brotliWindowBits(size: number | undefined): number {
  if (!Number.isFinite(size)) return zlib.constants.BROTLI_DEFAULT_WINDOW;
  return Math.max(
    zlib.constants.BROTLI_MIN_WINDOW_BITS,
    Math.min(zlib.constants.BROTLI_MAX_WINDOW_BITS, Math.ceil(Math.log2(size as number))),
  );
}

/** Answers smaller than this are sent as they are: a compressed frame would save a few bytes for the CPU it costs. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

export function compression(): Koa.Middleware {
  const negotiated = compress({
    threshold: COMPRESSION_THRESHOLD_BYTES,
    br: (_type, size) => ({
      params: {
        [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
        [zlib.constants.BROTLI_PARAM_LGWIN]: brotliWindowBits(size),
      },
    }),
    gzip: { level: GZIP_LEVEL },
    // `Accept-Encoding: *` admits either: the preferred one, as on a tie (koa-compress would pick gzip).
    wildcardAcceptEncoding: 'br',
    // br and gzip only, as documented (zstd, on a newer Node, and deflate, whose framing clients disagree on, are off).
    deflate: false,
    zstd: false,
  });
  return async (ctx, next) => {
    const head = ctx.method === 'HEAD';
    try {
      await negotiated(ctx, async () => {
        await next();
        // An object body serialised once here (koa-compress and Koa would each serialise it to learn its size).
        if (
          ctx.body !== null &&
          typeof ctx.body === 'object' &&
          !Buffer.isBuffer(ctx.body) &&
          !(ctx.body instanceof Stream)
        )
          ctx.body = JSON.stringify(ctx.body);
        // koa-compress leaves HEAD alone; HEAD is to carry GET's headers (Content-Encoding), so it is decided as GET.
        if (head) ctx.method = 'GET';
      });
    } finally {
      if (head) ctx.method = 'HEAD';
    }
    // HEAD sends no body: the compressing stream is dropped before it is read (Koa sends the headers only).
    if (head && ctx.body instanceof Stream) (ctx.body as Stream & { destroy(): void }).destroy();
  };
}
