const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/** Delays before the 1st to 8th retry, each measured from the failed attempt before it. */
export const RETRY_DELAYS_MS: readonly number[] = [
  MINUTE,
  5 * MINUTE,
  15 * MINUTE,
  HOUR,
  3 * HOUR,
  6 * HOUR,
  12 * HOUR,
  24 * HOUR,
];

/** The first attempt plus eight retries. */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/**
 * Each retry waits its delay plus a random share of it, up to this much (0 to 10%: 1 min becomes 60 to 66 s, 24 h
 * up to 26.4 h), so that the retries of many deliveries that failed together (a receiver that was down) do not
 * all come back at the same instant.
 */
export const RETRY_JITTER_SHARE = 0.1;

/**
 * When to retry after attempt number `attempt` (1-based) failed at `failedAt`; null when that was the last one.
 * `random` gives the jitter's share of its maximum: a value in [0, 1] (Math.random; tests pass 0 or 1 for exact
 * instants).
 */
export function nextAttemptAt(attempt: number, failedAt: Date, random: () => number = Math.random): Date | null {
  const delay = RETRY_DELAYS_MS[attempt - 1];
  if (delay === undefined) return null;
  const jitter = Math.floor(Math.min(Math.max(random(), 0), 1) * RETRY_JITTER_SHARE * delay);
  return new Date(failedAt.getTime() + delay + jitter);
}
