import type { Knex } from 'knex';
import { TEST_EVENT } from './catalogue.js';
import { createDeliveries } from './fanout.js';

/** The fixed text of `data.message` in a webhook.test payload. */
export const TEST_MESSAGE = 'This is a test delivery from Fleet Rental Service.';

/** How long an Idempotency-Key of the test operation is remembered. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** Test deliveries pending (queued or retrying) to one endpoint at most; another is refused until one finishes. */
export const MAX_PENDING_TESTS_PER_ENDPOINT = 5;
/** Test calls that queue a delivery, per workspace, within any RATE_WINDOW_MS. */
export const MAX_TEST_CALLS_PER_MINUTE = 60;
const RATE_WINDOW_MS = 60_000;

export type TestDeliveryResult =
  | { outcome: 'queued'; deliveryId: string }
  /** The same key for the same endpoint within the window: the first delivery, nothing new queued. */
  | { outcome: 'replayed'; deliveryId: string }
  | { outcome: 'not_found' }
  /** The key was used for another endpoint of the workspace within the window. */
  | { outcome: 'key_reused' }
  /** A limit was reached; nothing queued. `retryAfterSeconds`: when trying again can succeed. */
  | { outcome: 'rate_limited'; limit: 'pending_per_endpoint' | 'calls_per_minute'; retryAfterSeconds: number };

const secondsUntil = (at: Date, now: Date) => Math.max(1, Math.ceil((at.getTime() - now.getTime()) / 1000));

/**
 * Queues a webhook.test delivery to one endpoint of the workspace, whether it is switched on or off and whatever
 * its event list says, within the limits: at most 5 test deliveries pending per endpoint and 60 queued test calls
 * a minute per workspace (a replay of a key neither counts nor is refused). A workspace's requests are serialised
 * by a transaction-scoped advisory lock, so concurrent requests with one key queue one delivery and concurrent
 * requests cannot pass a limit together.
 */
export async function queueTestDelivery(
  db: Knex,
  input: { workspaceId: string; endpointId: string; idempotencyKey: string; now: Date },
): Promise<TestDeliveryResult> {
  const { workspaceId, endpointId, idempotencyKey: key, now } = input;
  return db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`test-delivery:${workspaceId}`]);
    const endpoint = await trx('webhook_endpoints').where({ id: endpointId, workspace_id: workspaceId }).whereNull('deleted_at').first('id');
    if (!endpoint) return { outcome: 'not_found' };
    const previous = await trx('test_idempotency_keys')
      .where({ workspace_id: workspaceId, key })
      .where('created_at', '>', new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS))
      .first('endpoint_id', 'delivery_id');
    if (previous) {
      return previous.endpoint_id === endpointId ? { outcome: 'replayed', deliveryId: previous.delivery_id } : { outcome: 'key_reused' };
    }
    const pending = await trx('deliveries')
      .where({ endpoint_id: endpointId, event: TEST_EVENT })
      .whereIn('status', ['queued', 'retrying'])
      .select(trx.raw('count(*)::int AS n'), trx.raw('min(next_attempt_at) AS next'))
      .first();
    if (pending.n >= MAX_PENDING_TESTS_PER_ENDPOINT) {
      return { outcome: 'rate_limited', limit: 'pending_per_endpoint', retryAfterSeconds: secondsUntil(pending.next, now) };
    }
    // Every queued call wrote its key's row at its `now`; a replay writes nothing.
    const recent = await trx('test_idempotency_keys')
      .where({ workspace_id: workspaceId })
      .where('created_at', '>', new Date(now.getTime() - RATE_WINDOW_MS))
      .select(trx.raw('count(*)::int AS n'), trx.raw('min(created_at) AS oldest'))
      .first();
    if (recent.n >= MAX_TEST_CALLS_PER_MINUTE) {
      return { outcome: 'rate_limited', limit: 'calls_per_minute', retryAfterSeconds: secondsUntil(new Date(recent.oldest.getTime() + RATE_WINDOW_MS), now) };
    }
    const [event] = await trx('events')
      .insert({ workspace_id: workspaceId, event: TEST_EVENT, data: JSON.stringify({ endpointId, message: TEST_MESSAGE }), source: 'test' })
      .returning('id');
    const [delivery] = await createDeliveries(trx, [event.id], { kind: 'endpoint', endpointId });
    // An expired key is taken over by this request.
    await trx('test_idempotency_keys')
      .insert({ workspace_id: workspaceId, key, endpoint_id: endpointId, delivery_id: delivery.id, created_at: now })
      .onConflict(['workspace_id', 'key'])
      .merge(['endpoint_id', 'delivery_id', 'created_at']);
    return { outcome: 'queued', deliveryId: delivery.id };
  });
}
