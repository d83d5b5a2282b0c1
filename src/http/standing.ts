import type { RateLimiterRes } from 'rate-limiter-flexible';
import { apiError, type ApiError } from './error-catalogue.js';

// Where a caller stands with a limit, as the IETF RateLimit header fields say it, and the held 429 of a limit: shared
// by the public API's workspace limits and both listeners' failure limit on authentication.

/** Where a caller stands with one policy, as the RateLimit header fields say it. */
export interface Standing {
  policy: string;
  /** The quota of the window, and the window in seconds. */
  quota: number;
  windowS: number;
  /** What is left of the quota, and whole seconds until the window starts again. */
  remaining: number;
  resetS: number;
}

/** The two RateLimit header fields of a standing. */
export function rateLimitHeaders(s: Standing): Record<'RateLimit-Policy' | 'RateLimit', string> {
  return {
    'RateLimit-Policy': `"${s.policy}";q=${s.quota};w=${s.windowS}`,
    RateLimit: `"${s.policy}";r=${s.remaining};t=${s.resetS}`,
  };
}

/** A standing from what the limiter says of a key (null: nothing used in the current window). */
export function standingOf(policy: string, quota: number, windowS: number, res: RateLimiterRes | null): Standing {
  if (!res || res.msBeforeNext < 0) return { policy, quota, windowS, remaining: quota, resetS: 0 };
  return {
    policy,
    quota,
    windowS,
    remaining: Math.min(quota, Math.max(0, quota - res.consumedPoints)),
    resetS: Math.ceil(res.msBeforeNext / 1000),
  };
}

/**
 * A refusal is held this long at most before it is sent (the wait its Retry-After asks for, up to this): a client
 * that ignores Retry-After and asks again at once cannot make the service answer thousands of refusals a second
 * (each costs little, but on two cores ten thousand a second, and the flood's own client, took the CPU the others
 * needed). A held refusal costs a socket and a timer, and nothing is kept for it.
 */
export const MAX_REFUSAL_HOLD_MS = 1000;

/**
 * The 429 of a limit, with Retry-After (whole seconds, at least 1) and the standing's header fields, held until
 * `holdMs` (the moment trying again can succeed), at most MAX_REFUSAL_HOLD_MS.
 */
export function rateLimited(
  reason: 'rate' | 'concurrency' | 'auth_failures',
  message: string,
  retryAfterS: number,
  standing: Standing | undefined,
  holdMs = 1000 * Math.max(1, retryAfterS),
): ApiError {
  const refusal = apiError('rate_limited', message, {
    reason,
    headers: { 'Retry-After': String(Math.max(1, retryAfterS)), ...(standing && rateLimitHeaders(standing)) },
  });
  refusal.holdMs = Math.min(MAX_REFUSAL_HOLD_MS, Math.max(0, holdMs));
  return refusal;
}
