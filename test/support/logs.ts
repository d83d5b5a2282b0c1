import { Writable } from 'node:stream';
import pino, { type Logger } from 'pino';

/** A debug-level logger whose lines are kept, parsed, in `logs`: what a test reads to check what was (never) logged. */
export function capturedLogger(): { logger: Logger; logs: Array<Record<string, unknown>> } {
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), logs };
}
