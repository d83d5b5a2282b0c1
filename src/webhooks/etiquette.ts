// What a receiver's answer asks of the sender (RFC 9110, the Standard Webhooks specification): `410 Gone` asks for no
// more deliveries (the endpoint is switched off at once); `429`, `502`, `503` and `504` ask it to slow down (the
// endpoint is throttled: nothing is sent to it until the throttle ends). http-attempt.ts reads the answer,
// attempt-records.ts writes what it asks, the claim (fairness.ts) skips a throttled endpoint.

/** The answer that switches an endpoint off at once: the receiver wants no more deliveries. */
export const GONE_STATUS = 410;
/** The answers that throttle an endpoint. */
export const THROTTLING_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

const SECOND = 1000;
/** The longest wait a `Retry-After` can ask for; a longer one is cut to it. */
export const RETRY_AFTER_CAP_MS = 24 * 60 * 60 * SECOND;

/**
 * The throttle of a throttling answer without a usable `Retry-After`, by its place in a run of throttling answers in
 * a row (1-based): 1 s, doubling with each, up to 5 minutes (1, 2, 4, ... 256, then 300 s). The last entry holds for
 * every later place.
 */
export const THROTTLE_DELAYS_MS: readonly number[] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 300].map((s) => s * SECOND);

/** The throttle of the answer at `place` in a run of throttling answers without a usable `Retry-After`. */
export function throttleDelayMs(place: number): number {
  return THROTTLE_DELAYS_MS[Math.min(Math.max(place, 1), THROTTLE_DELAYS_MS.length) - 1];
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = MONTHS.join('|');
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
/** IMF-fixdate, the preferred form: `Sun, 06 Nov 1994 08:49:37 GMT`. */
const IMF_FIXDATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\\d{2}) (${MONTH}) (\\d{4}) ${TIME} GMT$`);
/** The obsolete RFC 850 form: `Sunday, 06-Nov-94 08:49:37 GMT`. */
const RFC850_DATE = new RegExp(
  `^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-(${MONTH})-(\\d{2}) ${TIME} GMT$`,
);
/** The obsolete asctime form: `Sun Nov  6 08:49:37 1994`. */
const ASCTIME_DATE = new RegExp(`^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (${MONTH}) ([ \\d]\\d) ${TIME} (\\d{4})$`);

/**
 * An HTTP-date (RFC 9110 5.6.7: the IMF-fixdate and the two obsolete forms a recipient must accept), or null. A
 * two-digit year is the most recent one with those digits not more than 50 years after `reference`.
 */
export function parseHttpDate(value: string, reference: Date): Date | null {
  let parts: { day: string; month: string; year: number; h: string; m: string; s: string } | undefined;
  let match = IMF_FIXDATE.exec(value);
  if (match) parts = { day: match[1], month: match[2], year: Number(match[3]), h: match[4], m: match[5], s: match[6] };
  else if ((match = RFC850_DATE.exec(value))) {
    const thisYear = reference.getUTCFullYear();
    let year = thisYear - (thisYear % 100) + Number(match[3]);
    if (year > thisYear + 50) year -= 100;
    parts = { day: match[1], month: match[2], year, h: match[4], m: match[5], s: match[6] };
  } else if ((match = ASCTIME_DATE.exec(value)))
    parts = { day: match[2].trim(), month: match[1], year: Number(match[6]), h: match[3], m: match[4], s: match[5] };
  if (!parts) return null;
  const month = MONTHS.indexOf(parts.month);
  const [day, h, m, s] = [parts.day, parts.h, parts.m, parts.s].map(Number);
  const at = new Date(Date.UTC(parts.year, month, day, h, m, s));
  // (Date.UTC rolls 31 Feb over into March, and 24:00 into the next day: such a date is not one)
  const valid =
    at.getUTCFullYear() === parts.year &&
    at.getUTCMonth() === month &&
    at.getUTCDate() === day &&
    at.getUTCHours() === h;
  return valid && m < 60 && s < 60 ? at : null;
}

/**
 * How long a `Retry-After` value asks to wait, in milliseconds, at most 24 hours (RFC 9110 10.2.3): delay-seconds
 * (digits only), or an HTTP-date measured from `answeredAt` (the answer's own `Date` header when it has a valid one,
 * so that a difference between the receiver's clock and ours does not matter). Null when it is absent, does not
 * parse, or is negative (a date already past): the answer is then treated as one without the header.
 */
export function parseRetryAfter(value: string | undefined, answeredAt: Date): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * SECOND, RETRY_AFTER_CAP_MS);
  const at = parseHttpDate(text, answeredAt);
  if (!at) return null;
  const ms = at.getTime() - answeredAt.getTime();
  return ms < 0 ? null : Math.min(ms, RETRY_AFTER_CAP_MS);
}

/** What one finished attempt asked of its endpoint: only a throttle or gone matter here. */
export interface AskingAttempt {
  claim: { endpointId: string };
  outcome: { gone?: boolean; throttle?: { retryAfterMs: number | null } };
  /** The sweep clock when the attempt ended: a throttle is measured from it. */
  sweepAt: Date;
}

/**
 * What a batch's attempts asked of one endpoint, in the order they finished. The throttle's run of answers in a row
 * continues the endpoint's recorded one (`throttle_streak`) until the batch's first other outcome; the throttle end
 * of an answer in that leading part depends on it, so only the last such answer without a usable `Retry-After` is
 * passed on (`leadingAt`, `leadingPlace`: the latest end); every other end is known here (`knownUntil`).
 */
export interface EndpointAsks {
  endpointId: string;
  /** A 410 Gone came: the endpoint is switched off. */
  gone: boolean;
  /** Some outcome in the batch was not a throttling answer: the run in a row starts again after it. */
  reset: boolean;
  /** Throttling answers before the batch's first other outcome (all of them when there was none). */
  leading: number;
  /** Throttling answers after the batch's last other outcome. */
  trailing: number;
  /** The latest throttle end known from the batch alone (Retry-After ends, and growing delays after a reset). */
  knownUntil: Date | null;
  /** The last leading throttling answer without a usable Retry-After: when it came, and its place among the leading answers. */
  leadingAt: Date | null;
  leadingPlace: number;
}

export function summariseAsks(batch: AskingAttempt[]): EndpointAsks[] {
  const byEndpoint = new Map<string, EndpointAsks>();
  for (const { claim, outcome, sweepAt } of batch) {
    let e = byEndpoint.get(claim.endpointId);
    if (!e) {
      e = {
        endpointId: claim.endpointId,
        gone: false,
        reset: false,
        leading: 0,
        trailing: 0,
        knownUntil: null,
        leadingAt: null,
        leadingPlace: 0,
      };
      byEndpoint.set(claim.endpointId, e);
    }
    if (outcome.gone) e.gone = true;
    if (!outcome.throttle) {
      e.reset = true;
      e.trailing = 0;
      continue;
    }
    e.trailing++;
    if (!e.reset) e.leading++;
    const asked = outcome.throttle.retryAfterMs;
    let until: number | null = asked === null ? null : sweepAt.getTime() + asked;
    if (asked === null && !e.reset) {
      e.leadingAt = sweepAt;
      e.leadingPlace = e.leading;
    } else if (asked === null) until = sweepAt.getTime() + throttleDelayMs(e.trailing);
    if (until !== null && (e.knownUntil === null || until > e.knownUntil.getTime())) e.knownUntil = new Date(until);
  }
  return [...byEndpoint.values()].sort((a, b) => (a.endpointId < b.endpointId ? -1 : 1));
}
