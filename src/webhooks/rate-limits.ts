// The throttle per endpoint (webhook_endpoints.rate_limit, deliveries a second): a token bucket on the endpoint's row,
// so that every dispatcher process shares it. The bucket holds at most one second's worth (rate_limit tokens; a
// bucket never written, rate_tokens null, is full) and refills at rate_limit a second, by the database clock. The
// claim statement takes it in three steps:
//   - rate_buckets: the throttled endpoints with due deliveries, locked (in id order, SKIP LOCKED: one locked by
//     another claim or a flush is left out of this claim, which then counts as contended and is tried again at once),
//     with their tokens refilled to now: the newest row, whatever this statement's snapshot saw (READ COMMITTED);
//   - the fair candidates (fairness.ts) take at most floor(tokens) deliveries of such an endpoint, none of one
//     that was left out;
//   - rate_taken: the bucket less the deliveries actually leased, written back under the same lock.
// What the bucket does not admit is not leased: it holds no slot, and the other endpoints' deliveries take its
// place in the claim. A claim is sent within READY_FOR_MS (dispatcher.ts) or given back with its token spent.

/**
 * The CTEs `rate_wanted(id)` (throttled endpoints with due deliveries, as this statement's snapshot sees them) and
 * `rate_buckets(id, rate_limit, tokens, refilled_at)` (those of them this claim locked, with their tokens now).
 * `due` is the SQL condition of a due delivery `d` of endpoint `w`; `scope` that of an endpoint `w` the claim reaches.
 */
export function rateBucketsSql(due: string, scope: string): string {
  return `rate_wanted AS (
      SELECT w.id FROM webhook_endpoints w
      WHERE w.rate_limit IS NOT NULL AND w.deleted_at IS NULL AND ${scope}
        AND EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = w.id AND ${due})
    ), rate_buckets AS (
      SELECT w.id, w.rate_limit, w.rate_refilled_at AS refilled_at,
             least(w.rate_limit::float8, coalesce(w.rate_tokens, w.rate_limit)
               + greatest(extract(epoch FROM now() - w.rate_refilled_at), 0) * w.rate_limit) AS tokens
      FROM webhook_endpoints w
      WHERE w.id IN (SELECT id FROM rate_wanted) AND w.rate_limit IS NOT NULL AND w.deleted_at IS NULL
      ORDER BY w.id
      FOR NO KEY UPDATE OF w SKIP LOCKED
    )`;
}

/**
 * How many deliveries endpoint `w` may be given by its bucket (joined as `rb`): no bound (null, which least() skips)
 * without a throttle; none when its bucket was left out of this claim.
 */
export const RATE_ALLOWANCE = `CASE WHEN w.rate_limit IS NOT NULL THEN floor(coalesce(rb.tokens, 0))::int END`;

/**
 * The CTE `rate_taken(id, rate_limit, tokens)` writing the buckets back: each less the deliveries of `claimed`
 * ("endpointId") leased to it. Its clock never goes back (a claim that started before another one committed sees a
 * later refill time on the row).
 */
export const RATE_TAKEN_SQL = `rate_taken AS (
      UPDATE webhook_endpoints w
      SET rate_tokens = rb.tokens - t.n, rate_refilled_at = greatest(now(), rb.refilled_at)
      FROM rate_buckets rb JOIN (SELECT "endpointId" AS id, count(*) AS n FROM claimed GROUP BY 1) t ON t.id = rb.id
      WHERE w.id = rb.id
      RETURNING w.id, w.rate_limit, w.rate_tokens AS tokens
    )`;

/**
 * The SQL of how long until the next token of a throttled endpoint whose bucket ran dry in this claim (in ms; null if
 * none did): the dispatcher claims again then, rather than on its next poll.
 */
export const NEXT_TOKEN_SQL = `(SELECT min(ceil((1 - coalesce(t.tokens, rb.tokens)) * 1000 / rb.rate_limit))
       FROM rate_buckets rb LEFT JOIN rate_taken t ON t.id = rb.id
       WHERE coalesce(t.tokens, rb.tokens) < 1)`;
