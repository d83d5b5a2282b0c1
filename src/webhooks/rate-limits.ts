// The throttle per endpoint (webhook_endpoints.rate_limit, deliveries a second): a token bucket per throttled endpoint
// in webhook_rate_buckets, so that every dispatcher process shares it. The bucket holds at most one second's worth
// (rate_limit tokens) and refills at rate_limit a second, by the database clock. The claim statement takes it in
// three steps:
//   - rate_buckets: the buckets of the throttled endpoints with due deliveries, locked (in endpoint id order, SKIP
//     LOCKED: one another claim holds is left out of this claim, which then counts as contended and is tried again at
//     once), with their tokens refilled to now: the newest row, whatever this statement's snapshot saw (READ
//     COMMITTED). An endpoint without a bucket yet gets a full one (rate_made), taken from the next claim on;
//   - the fair candidates (fairness.ts) take at most floor(tokens) deliveries of such an endpoint, none of one whose
//     bucket was left out;
//   - rate_taken: the bucket less the deliveries actually leased, written back under the same lock.
// What the bucket does not admit is not leased: it holds no slot, and the other endpoints' deliveries take its place
// in the claim. A claim is sent within READY_FOR_MS (dispatcher.ts) or given back with its token spent. The bucket is
// a table of its own, not columns of the endpoint's row: fan-out locks that row FOR SHARE and the attempts'
// bookkeeping updates it, and the claim must neither wait for them nor skip the endpoint meanwhile.

/**
 * The CTEs `rate_wanted(id, rate_limit)` (throttled endpoints with due deliveries, as this statement's snapshot sees
 * them), `rate_buckets(id, rate_limit, tokens, refilled_at)` (those whose bucket this claim locked, with their tokens
 * now) and `rate_made` (a full bucket for those that have none). `due` is the SQL condition of a due delivery `d` of
 * endpoint `w`; `scope` that of an endpoint `w` the claim reaches.
 */
export function rateBucketsSql(due: string, scope: string): string {
  return `rate_wanted AS (
      SELECT w.id, w.rate_limit FROM webhook_endpoints w
      WHERE w.rate_limit IS NOT NULL AND w.deleted_at IS NULL AND ${scope}
        AND EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = w.id AND ${due})
    ), rate_buckets AS MATERIALIZED (
      SELECT rw.id, rw.rate_limit, b.refilled_at,
             least(rw.rate_limit::float8,
                   b.tokens + greatest(extract(epoch FROM now() - b.refilled_at), 0) * rw.rate_limit) AS tokens
      FROM webhook_rate_buckets b JOIN rate_wanted rw ON rw.id = b.endpoint_id
      ORDER BY b.endpoint_id
      FOR NO KEY UPDATE OF b SKIP LOCKED
    ), rate_made AS (
      INSERT INTO webhook_rate_buckets (endpoint_id, tokens, refilled_at)
      SELECT rw.id, rw.rate_limit, now() FROM rate_wanted rw
      WHERE NOT EXISTS (SELECT 1 FROM webhook_rate_buckets b WHERE b.endpoint_id = rw.id)
      ORDER BY rw.id
      ON CONFLICT (endpoint_id) DO NOTHING
    )`;
}

/**
 * How many deliveries endpoint `w` may be given by its bucket (joined as `rb`): no bound (null, which least() skips)
 * without a throttle; none when its bucket was left out of this claim (or is only being made).
 */
export const RATE_ALLOWANCE = `CASE WHEN w.rate_limit IS NOT NULL THEN floor(coalesce(rb.tokens, 0))::int END`;

/**
 * The CTE `rate_taken(id, tokens)` writing the buckets back: each less the deliveries of `claimed` ("endpointId")
 * leased to it. Its clock never goes back (a claim that started before another one committed sees a later refill time
 * on the row).
 */
export const RATE_TAKEN_SQL = `rate_taken AS (
      UPDATE webhook_rate_buckets b
      SET tokens = rb.tokens - t.n, refilled_at = greatest(now(), rb.refilled_at)
      FROM rate_buckets rb JOIN (SELECT "endpointId" AS id, count(*) AS n FROM claimed GROUP BY 1) t ON t.id = rb.id
      WHERE b.endpoint_id = rb.id
      RETURNING b.endpoint_id AS id, b.tokens
    )`;

/** The SQL condition of a claim that left out a throttled endpoint's bucket (another claim held it, or it was made). */
export const RATE_CONTENDED_SQL = `(SELECT count(*) FROM rate_wanted) > (SELECT count(*) FROM rate_buckets)`;

/**
 * The SQL of how long until the next token of a throttled endpoint whose bucket ran dry in this claim (in ms; null if
 * none did): the dispatcher claims again then, rather than on its next poll.
 */
export const NEXT_TOKEN_SQL = `(SELECT min(ceil((1 - coalesce(t.tokens, rb.tokens)) * 1000 / rb.rate_limit))
       FROM rate_buckets rb LEFT JOIN rate_taken t ON t.id = rb.id
       WHERE coalesce(t.tokens, rb.tokens) < 1)`;
