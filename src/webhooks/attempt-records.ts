import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { TEST_EVENT } from './catalogue.js';
import type { CompletedDispatch, DeliveryStatus } from './dispatch.js';
import { PENDING, SWITCH_OFF_AFTER_FAILURES } from './endpoint-lifecycle.js';
import { summariseAsks, THROTTLE_DELAYS_MS, type EndpointAsks } from './etiquette.js';
import { column } from './fairness.js';
import type { AttemptOutcome } from './http-attempt.js';
import { nextAttemptAt } from './retry-schedule.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { rows } from '../queries/common.js';

// The record stage: a batch of finished attempts written in one statement (the attempt rows, the deliveries and the
// endpoints' failure streaks, switch-offs and throttles, endpoints locked in id order), then logged and counted.

/**
 * The flush of a batch of finished attempts, as one statement. Order of locks: the endpoints first, in id order
 * (`locked`: every other part reads them only through it, so a row is updated only after it was locked there), so
 * two dispatchers flushing the same endpoints cannot deadlock; NO KEY UPDATE, which does not conflict with the KEY
 * SHARE locks that inserting deliveries (fan-out) takes on their endpoints. `locked` returns each endpoint's newest
 * version (READ COMMITTED re-reads a row updated since the statement's snapshot), so the streaks add to the latest
 * count. The parts of one statement cannot see each other's changes, so the batch's own deliveries of an endpoint
 * switched off here are held by `recorded` itself and `held` takes the others.
 * What the answers asked (etiquette.ts): a 410 switches its endpoint off at once (reason 'gone'); a throttling answer
 * moves the endpoint's throttled_until later (never earlier) and continues its run in a row (throttle_streak), and a
 * retry of the batch's deliveries waits for the throttle's end.
 */
const RECORD_ATTEMPTS = `
  WITH attempt AS (
    SELECT * FROM unnest(:deliveryIds::uuid[], :endpointIds::uuid[], :numbers::int[], :startedAt::timestamptz[], :durations::int[], :statusCodes::int[],
                         :errorKinds::text[], :errors::text[], :responseBodies::text[], :statuses::text[], :nextAttempts::timestamptz[])
      AS v(delivery_id, endpoint_id, number, started_at, duration_ms, status_code, error_kind, error, response_body, status, next_attempt_at)
  ), streak AS (
    SELECT * FROM unnest(:streakEndpoints::uuid[], :successes::int[], :leading::int[], :trailing::int[], :longest::int[], :lastSuccessAt::timestamptz[],
                         :gone::boolean[], :throttleReset::boolean[], :throttleLeading::int[], :throttleTrailing::int[], :knownUntil::timestamptz[], :leadingAt::timestamptz[], :leadingPlace::int[])
      AS v(id, successes, leading_failures, trailing_failures, longest_failures, last_success_at,
           gone, throttle_reset, throttle_leading, throttle_trailing, known_until, leading_at, leading_place)
  ), locked AS MATERIALIZED (
    SELECT e.id, e.is_active, e.consecutive_failures, e.throttled_until, e.throttle_streak FROM webhook_endpoints e
    WHERE e.id IN (SELECT id FROM streak)
    ORDER BY e.id
    FOR NO KEY UPDATE
  ), streak_change AS MATERIALIZED (
    -- consecutive_failures counts failed attempts in a row; a run reaching the threshold switches the endpoint off
    SELECT s.*, (l.is_active AND (s.gone OR (s.leading_failures > 0 AND l.consecutive_failures + s.leading_failures >= :switchOffAfter) OR s.longest_failures >= :switchOffAfter)) AS switch_off,
           CASE WHEN s.gone THEN 'gone' ELSE 'failures' END AS off_reason,
           CASE WHEN s.throttle_reset THEN s.throttle_trailing ELSE l.throttle_streak + s.throttle_leading END AS new_throttle_streak,
           -- (the leading answer's place continues the recorded run; greatest() skips the nulls)
           greatest(l.throttled_until, s.known_until, s.leading_at + (:throttleDelays::int[])[least(l.throttle_streak + s.leading_place, cardinality(:throttleDelays::int[]))] * interval '1 millisecond') AS new_throttled_until
    FROM streak s JOIN locked l ON l.id = s.id
  ), endpoint AS (
    UPDATE webhook_endpoints w SET
      consecutive_failures = CASE WHEN s.successes > 0 THEN s.trailing_failures ELSE w.consecutive_failures + s.leading_failures END,
      last_success_at = CASE WHEN s.successes > 0 THEN greatest(w.last_success_at, s.last_success_at) ELSE w.last_success_at END,
      is_active = w.is_active AND NOT s.switch_off,
      disabled_at = CASE WHEN s.switch_off THEN now() ELSE w.disabled_at END,
      disabled_reason = CASE WHEN s.switch_off THEN s.off_reason ELSE w.disabled_reason END,
      throttle_streak = s.new_throttle_streak,
      throttled_until = s.new_throttled_until
    FROM streak_change s
    WHERE w.id = s.id
    RETURNING w.id, s.switch_off, s.off_reason, s.new_throttled_until
  ), attempt_row AS (
    -- (joined to deliveries: a delivery deleted meanwhile, with its endpoint or workspace, gets no attempt row)
    INSERT INTO delivery_attempts (delivery_id, endpoint_id, number, started_at, duration_ms, status_code, error_kind, error, response_body)
    SELECT v.delivery_id, v.endpoint_id, v.number, v.started_at, v.duration_ms, v.status_code, v.error_kind, v.error, v.response_body
    FROM attempt v JOIN deliveries d ON d.id = v.delivery_id
    ON CONFLICT (delivery_id, number) DO NOTHING
    RETURNING 1
  ), recorded AS (
    -- A delivery that was held while its attempt was in flight, or whose endpoint this batch switches off, is held
    -- (test deliveries are sent to a switched-off endpoint too).
    UPDATE deliveries d SET
      status = CASE WHEN v.status = 'retrying' AND (d.status = 'held' OR (s.switch_off AND d.event <> :testEvent)) THEN 'held' ELSE v.status END,
      next_attempt_at = CASE WHEN v.status = 'retrying' AND (d.status = 'held' OR (s.switch_off AND d.event <> :testEvent)) THEN NULL
                             WHEN v.status = 'retrying' THEN greatest(v.next_attempt_at, s.new_throttled_until) END,
      attempts = greatest(d.attempts, v.number),
      last_status_code = v.status_code,
      last_error = v.error,
      finished_at = CASE WHEN v.status IN ('accepted', 'failed') THEN now() END,
      lease_owner = NULL,
      lease_until = NULL
    FROM attempt v JOIN streak_change s ON s.id = v.endpoint_id
    WHERE d.id = v.delivery_id AND d.lease_owner = :owner
    RETURNING d.id, d.created_at, d.next_attempt_at
  ), held AS (
    -- the pending deliveries of the endpoints switched off here (what holdPendingDeliveries in endpoint-lifecycle.ts does)
    UPDATE deliveries d SET status = 'held', next_attempt_at = NULL
    FROM streak_change s
    WHERE s.switch_off AND d.endpoint_id = s.id AND d.${PENDING} AND d.event <> :testEvent
      AND d.id NOT IN (SELECT id FROM recorded)
    RETURNING 1
  )
  SELECT (SELECT coalesce(json_agg(json_build_object('id', id, 'createdAt', created_at, 'next', next_attempt_at)), '[]') FROM recorded) AS recorded,
         (SELECT coalesce(json_agg(json_build_object('id', id, 'reason', off_reason) ORDER BY id), '[]') FROM endpoint WHERE switch_off) AS switched,
         (SELECT coalesce(json_object_agg(id, new_throttled_until), '{}') FROM endpoint WHERE new_throttled_until IS NOT NULL) AS throttled,
         (SELECT count(*) FROM attempt_row) AS attempt_rows,
         (SELECT count(*) FROM held) AS held`;

/** Failure-streak summary of one endpoint's attempts in a flushed batch, in the order they finished. */
export interface Streak {
  endpointId: string;
  successes: number;
  /** Failures before the first success (all of them when there was none). */
  leading: number;
  /** Failures after the last success. */
  trailing: number;
  /** The longest run of failures after the first success. */
  longestAfterSuccess: number;
  lastSuccessAt: string | null;
}

export function summariseStreaks(
  batch: Array<{ claim: { endpointId: string }; outcome: Pick<AttemptOutcome, 'ok' | 'startedAt' | 'durationMs'> }>,
): Streak[] {
  const byEndpoint = new Map<string, Streak>();
  for (const { claim, outcome } of batch) {
    let s = byEndpoint.get(claim.endpointId);
    if (!s) {
      s = {
        endpointId: claim.endpointId,
        successes: 0,
        leading: 0,
        trailing: 0,
        longestAfterSuccess: 0,
        lastSuccessAt: null,
      };
      byEndpoint.set(claim.endpointId, s);
    }
    if (outcome.ok) {
      s.successes++;
      s.trailing = 0;
      s.lastSuccessAt = new Date(outcome.startedAt.getTime() + outcome.durationMs).toISOString();
    } else if (s.successes === 0) {
      s.leading++;
      s.trailing++;
    } else {
      s.trailing++;
      s.longestAfterSuccess = Math.max(s.longestAfterSuccess, s.trailing);
    }
  }
  // Locks are taken in id order, so two dispatchers flushing the same endpoints cannot deadlock.
  return [...byEndpoint.values()].sort((a, b) => (a.endpointId < b.endpointId ? -1 : 1));
}

/** What a dispatcher records with, fixed for its life. */
export interface RecordSettings {
  db: Knex;
  logger: Logger;
  metrics: ServiceMetrics | undefined;
  /** The dispatcher's lease_owner: only its own leases are recorded. */
  owner: string;
  /** The retries' jitter (retry-schedule.ts nextAttemptAt): Math.random unless a test fixes it. */
  random?: () => number;
}

/** What one finished attempt makes of its delivery. */
interface DeliveryChange {
  id: string;
  status: DeliveryStatus;
  /** When it is tried again (ISO), if it is. */
  next: string | null;
}

/**
 * A recorded batch: each attempt's delivery status (in the batch's order), the endpoints it switched off, and the
 * throttle end of each of its endpoints that has one (it may be past).
 */
export interface RecordedBatch {
  statuses: DeliveryStatus[];
  switchedOff: Set<string>;
  throttledUntil: Map<string, Date>;
}

/** What RECORD_ATTEMPTS returns. */
interface RecordResult {
  recorded: Array<{ id: string; createdAt: string; next: string | null }>;
  switched: Array<{ id: string; reason: 'failures' | 'gone' }>;
  throttled: Record<string, string>;
}

/**
 * Records a batch of finished attempts in one statement, in a transaction of its own (rows() indexPlans):
 * the attempt rows, the deliveries, the endpoints' failure streaks and switch-offs, and the pending deliveries of
 * endpoints switched off, held. The endpoints are locked first, in id order (see RECORD_ATTEMPTS).
 */
export async function recordAttempts(settings: RecordSettings, batch: CompletedDispatch[]): Promise<RecordedBatch> {
  const deliveries = batch.map((completed) => deliveryChange(completed, settings.random));
  const [result] = await rows<RecordResult>(
    settings.db,
    RECORD_ATTEMPTS,
    {
      ...attemptColumns(batch, deliveries),
      ...streakColumns(summariseStreaks(batch), summariseAsks(batch)),
      switchOffAfter: SWITCH_OFF_AFTER_FAILURES,
      throttleDelays: column(THROTTLE_DELAYS_MS),
      owner: settings.owner,
      testEvent: TEST_EVENT,
    },
    { prepared: true, indexPlans: true },
  );
  // (a retry waits for its endpoint's throttle: the recorded time is the one logged)
  const byId = new Map(deliveries.map((d) => [d.id, d]));
  for (const r of result.recorded) {
    const change = byId.get(r.id);
    if (change?.next && r.next) change.next = new Date(r.next).toISOString();
  }
  report(settings, batch, deliveries, new Map(result.recorded.map((r) => [r.id, new Date(r.createdAt)])));
  for (const { id, reason } of result.switched) {
    if (reason === 'gone')
      settings.logger.info({ endpointId: id, reason }, 'webhook endpoint switched off: the receiver answered 410 Gone');
    else
      settings.logger.info(
        { endpointId: id, reason, failures: SWITCH_OFF_AFTER_FAILURES },
        'webhook endpoint switched off after failed attempts in a row',
      );
  }
  settings.metrics?.endpointSwitchOffs.inc(result.switched.length);
  return {
    statuses: deliveries.map((d) => d.status),
    switchedOff: new Set(result.switched.map((e) => e.id)),
    throttledUntil: new Map(Object.entries(result.throttled).map(([id, until]) => [id, new Date(until)])),
  };
}

/** A success is accepted; a 410 is failed at once; another failure is retried on the schedule while it lasts. */
function deliveryChange({ claim, outcome, sweepAt }: CompletedDispatch, random?: () => number): DeliveryChange {
  const next = outcome.ok || outcome.gone ? null : nextAttemptAt(claim.attempt, sweepAt, random);
  const status: DeliveryStatus = outcome.ok ? 'accepted' : next ? 'retrying' : 'failed';
  return { id: claim.deliveryId, status, next: next?.toISOString() ?? null };
}

/** RECORD_ATTEMPTS' `attempt` columns: one value per finished attempt. */
function attemptColumns(batch: CompletedDispatch[], deliveries: DeliveryChange[]): Record<string, Knex.Value> {
  return {
    deliveryIds: column(deliveries.map((d) => d.id)),
    endpointIds: column(batch.map((f) => f.claim.endpointId)),
    numbers: column(batch.map((f) => f.claim.attempt)),
    startedAt: column(batch.map((f) => f.outcome.startedAt.toISOString())),
    durations: column(batch.map((f) => f.outcome.durationMs)),
    statusCodes: column(batch.map((f) => f.outcome.statusCode)),
    errorKinds: column(batch.map((f) => f.outcome.errorKind)),
    errors: column(batch.map((f) => f.outcome.error)),
    responseBodies: column(batch.map((f) => f.outcome.responseBody)),
    statuses: column(deliveries.map((d) => d.status)),
    nextAttempts: column(deliveries.map((d) => d.next)),
  };
}

/** RECORD_ATTEMPTS' `streak` columns: one value per endpoint, in id order (both summaries are). */
function streakColumns(perEndpoint: Streak[], asks: EndpointAsks[]): Record<string, Knex.Value> {
  const iso = (at: Date | null) => at?.toISOString() ?? null;
  return {
    gone: column(asks.map((a) => a.gone)),
    throttleReset: column(asks.map((a) => a.reset)),
    throttleLeading: column(asks.map((a) => a.leading)),
    throttleTrailing: column(asks.map((a) => a.trailing)),
    knownUntil: column(asks.map((a) => iso(a.knownUntil))),
    leadingAt: column(asks.map((a) => iso(a.leadingAt))),
    leadingPlace: column(asks.map((a) => a.leadingPlace)),
    streakEndpoints: column(perEndpoint.map((s) => s.endpointId)),
    successes: column(perEndpoint.map((s) => s.successes)),
    leading: column(perEndpoint.map((s) => s.leading)),
    trailing: column(perEndpoint.map((s) => s.trailing)),
    longest: column(perEndpoint.map((s) => s.longestAfterSuccess)),
    lastSuccessAt: column(perEndpoint.map((s) => s.lastSuccessAt)),
  };
}

/**
 * One log line per recorded attempt (failures at warn, successes at debug) and the attempt metrics. Ids, kinds
 * and numbers only: never the payload, the URL, the secret or the response body.
 */
function report(
  { logger, metrics }: RecordSettings,
  batch: CompletedDispatch[],
  deliveries: DeliveryChange[],
  createdAt: Map<string, Date>,
): void {
  batch.forEach(({ claim, outcome }, i) => {
    const fields = {
      deliveryId: claim.deliveryId,
      endpointId: claim.endpointId,
      event: claim.event,
      attempt: claim.attempt,
      errorKind: outcome.errorKind,
      statusCode: outcome.statusCode,
      durationMs: outcome.durationMs,
      status: deliveries[i].status,
      nextAttemptAt: deliveries[i].next,
      // (the operator's detail of a refusal, which the record names by its class only)
      ...(outcome.detail !== undefined && { detail: outcome.detail }),
    };
    if (outcome.ok) logger.debug(fields, 'webhook delivery accepted');
    else
      logger.warn(
        fields,
        deliveries[i].status === 'failed'
          ? 'webhook delivery attempt failed; no retries left'
          : 'webhook delivery attempt failed',
      );
    metrics?.deliveryAttempts.inc({
      outcome: outcome.ok ? 'accepted' : 'failed',
      error_kind: outcome.errorKind ?? 'none',
    });
    const queuedAt = createdAt.get(claim.deliveryId);
    if (outcome.ok && queuedAt) {
      metrics?.deliveryLag.observe(
        Math.max(0, outcome.startedAt.getTime() + outcome.durationMs - queuedAt.getTime()) / 1000,
      );
    }
  });
}
