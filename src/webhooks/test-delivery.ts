import type { Knex } from 'knex';
import { TEST_EVENT } from './catalogue.js';
import { createDeliveries } from './fanout.js';

/** The fixed text of `data.message` in a webhook.test payload. */
export const TEST_MESSAGE = 'This is a test delivery from Fleet Rental Service.';

/** How long an Idempotency-Key of the test operation is remembered. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

export type TestDeliveryResult =
  | { outcome: 'queued'; deliveryId: string }
  /** The same key for the same endpoint within the window: the first delivery, nothing new queued. */
  | { outcome: 'replayed'; deliveryId: string }
  | { outcome: 'not_found' }
  /** The key was used for another endpoint of the workspace within the window. */
  | { outcome: 'key_reused' };

/**
 * Queues a webhook.test delivery to one endpoint of the workspace, whether it is switched on or off and whatever
 * its event list says. Requests with one key are serialised by a transaction-scoped advisory lock, so two
 * concurrent requests with the same key queue one delivery.
 */
export async function queueTestDelivery(
  db: Knex,
  input: { workspaceId: string; endpointId: string; idempotencyKey: string; now: Date },
): Promise<TestDeliveryResult> {
  const { workspaceId, endpointId, idempotencyKey: key, now } = input;
  return db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock(hashtextextended(?, 0))', [`test-delivery:${workspaceId}:${key}`]);
    const endpoint = await trx('webhook_endpoints').where({ id: endpointId, workspace_id: workspaceId }).first('id');
    if (!endpoint) return { outcome: 'not_found' };
    const previous = await trx('test_idempotency_keys')
      .where({ workspace_id: workspaceId, key })
      .where('created_at', '>', new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS))
      .first('endpoint_id', 'delivery_id');
    if (previous) {
      return previous.endpoint_id === endpointId ? { outcome: 'replayed', deliveryId: previous.delivery_id } : { outcome: 'key_reused' };
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
