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

/** When to retry after attempt number `attempt` (1-based) failed at `failedAt`; null when that was the last one. */
export function nextAttemptAt(attempt: number, failedAt: Date): Date | null {
  const delay = RETRY_DELAYS_MS[attempt - 1];
  return delay === undefined ? null : new Date(failedAt.getTime() + delay);
}
