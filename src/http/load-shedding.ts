import { performance } from 'node:perf_hooks';
import type Koa from 'koa';
import { wholeNumberDefault } from '../config.js';
import { apiError } from './error-catalogue.js';

// The load shedder, the first step of the edge after the request id: while the process's event loop lags, a new
// request is answered at once with 503 `overloaded` and Retry-After, which costs far less than serving it, instead of
// joining a queue that only grows. The health probes are never shed: a busy process is alive, and /readyz says
// whether the database answers (an orchestrator that restarted an overloaded process would only move the load).

export const SHED_LAG_ENV = 'FRS_SHED_EVENT_LOOP_LAG_MS';
/** The event-loop lag past which new requests are shed; far above what a served request ever causes (a few ms). */
export const DEFAULT_SHED_LAG_MS = wholeNumberDefault(SHED_LAG_ENV);
/** Whole seconds a shed request is asked to wait: the lag is sampled every 50 ms, so a second sees it gone or not. */
export const OVERLOADED_RETRY_AFTER_S = 1;
const SAMPLE_INTERVAL_MS = 50;
const NEVER_SHED = new Set(['/healthz', '/readyz']);

/**
 * The event loop's lag, from a timer that should fire every SAMPLE_INTERVAL_MS: how late it fired last, or how late
 * it is now if it is overdue (so a request read in the same turn of the loop as the end of a stall still sees it).
 * One sampler per process; its timer does not keep the process alive.
 */
class EventLoopLag {
  private lastMs = 0;
  private due = Infinity;

  /** Started by the first request, so the work of starting the service is not taken for lag. */
  private start(): void {
    this.due = performance.now() + SAMPLE_INTERVAL_MS;
    setInterval(() => {
      const now = performance.now();
      this.lastMs = Math.max(0, now - this.due);
      this.due = now + SAMPLE_INTERVAL_MS;
    }, SAMPLE_INTERVAL_MS).unref();
  }

  get ms(): number {
    if (this.due === Infinity) this.start();
    return Math.max(this.lastMs, performance.now() - this.due);
  }
}

let sampler: EventLoopLag | undefined;

export const overloaded = () =>
  apiError('overloaded', `The service is overloaded just now. Try again in ${OVERLOADED_RETRY_AFTER_S} second(s).`, {
    headers: { 'Retry-After': String(OVERLOADED_RETRY_AFTER_S) },
  });

/** Koa middleware shedding every request but the health probes while the event loop lags past `thresholdMs` (0: never). */
export function loadShedding(thresholdMs: number): Koa.Middleware {
  if (thresholdMs === 0) return (_ctx, next) => next();
  const lag = (sampler ??= new EventLoopLag());
  return (ctx, next) => {
    if (lag.ms > thresholdMs && !NEVER_SHED.has(ctx.path)) throw overloaded();
    return next();
  };
}
