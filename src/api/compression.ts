// Answers compressed when the client asks: koa-compress negotiates br or gzip by Accept-Encoding (q-values, `identity`,
// `*`, `br;q=0`), for compressible types over 1 kB, and says `Vary: Accept-Encoding` on every answer through it
// (compressed or not). Errors thrown by a later step pass through uncompressed (the error middleware, earlier in the
// chain, writes their small documented body); 204 and 304 have no body and are left alone.
import { Stream } from 'node:stream';
import zlib from 'node:zlib';
import type Koa from 'koa';
import compress from 'koa-compress';

/**
 * The levels, measured with bench/compression-levels.ts on the bench's workspace `large` (2 shared cores), CPU of one
 * answer as a koa-compress stream (set-up included) and its compressed size:
 *
 *   answer                        size     br 1          br 2          br 4 (default)   gzip 1        gzip 3        gzip 6 (default)
 *   operations/today              29.5 kB  231 µs 10.8   201 µs 9.5    303 µs 9.4       336 µs 10.4   307 µs 10.1   368 µs 9.7
 *   receivables search, 200 rows  41.8 kB  252 µs 11.4   289 µs 11.0   457 µs 10.7      299 µs 12.4   355 µs 11.7   643 µs 10.7
 *   vehicles, 20 rows              2.9 kB   81 µs  0.8   113 µs 0.7    113 µs 0.7       129 µs  0.8    89 µs  0.8    92 µs  0.7
 *
 * Brotli 2 is within 3% of the default 4's size at two thirds of its CPU (quality 5 and up cost twice as much again
 * for 1-3%); gzip 3 costs what gzip 1 does and is 3-6% smaller, gzip 6 costs up to twice as much for 5-8%. The API
 * is bound by CPU, not by its network, so the cheaper levels win.
 */
export const BROTLI_QUALITY = 2;
export const GZIP_LEVEL = 3;

/** Answers smaller than this are sent as they are: a compressed frame would save a few bytes for the CPU it costs. */
export const COMPRESSION_THRESHOLD_BYTES = 1024;

export function compression(): Koa.Middleware {
  const negotiated = compress({
    threshold: COMPRESSION_THRESHOLD_BYTES,
    br: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
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
        if (ctx.body !== null && typeof ctx.body === 'object' && !Buffer.isBuffer(ctx.body) && !(ctx.body instanceof Stream)) ctx.body = JSON.stringify(ctx.body);
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
