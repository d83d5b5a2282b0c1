import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { recordAudit, type AuditContext } from '../audit.js';
import { ConflictError, KeyReusedError, LimitError, NotFoundError } from '../../errors.js';
import { lockTestDeliveries, SWITCH_ON_FIRST } from '../../webhooks/endpoint-lifecycle.js';
import { eventDefinition, TEST_EVENT } from '../../webhooks/catalogue.js';
import { createDeliveries } from '../../webhooks/fanout.js';
import { IDEMPOTENCY_WINDOW_MS } from '../../webhooks/retention.js';

/** The fixed text of `data.message` in a webhook.test payload. */
export const TEST_MESSAGE = 'This is a test delivery from Fleet Rental Service.';

/** Test deliveries pending (queued or retrying) to one endpoint at most; another is refused until one finishes. */
export const MAX_PENDING_TESTS_PER_ENDPOINT = 5;
/** Test calls that queue a delivery, per workspace, within any RATE_WINDOW_MS. */
export const MAX_TEST_CALLS_PER_MINUTE = 60;
const RATE_WINDOW_MS = 60_000;

export interface TestDeliveryResult {
  deliveryId: string;
  /** The same key for the same endpoint within the window: the first delivery, nothing new queued. */
  replayed: boolean;
}

/** What a refusal by a limit says, to either client. */
export function testLimitMessage(limit: 'pending_per_endpoint' | 'calls_per_minute'): string {
  return limit === 'pending_per_endpoint'
    ? `This endpoint already has ${MAX_PENDING_TESTS_PER_ENDPOINT} test deliveries pending; try again when one has finished.`
    : `At most ${MAX_TEST_CALLS_PER_MINUTE} test deliveries a minute per workspace; try again later.`;
}

const secondsUntil = (at: Date, now: Date) => Math.max(1, Math.ceil((at.getTime() - now.getTime()) / 1000));

/** An example event sent on purpose (the admin API's sendExampleEvent, `fleet-admin events send-example`). */
export interface ExampleEvent {
  event: string;
  /** Who asked for it, audited as `event.send_example`. */
  audit: AuditContext;
}

/**
 * Queues a test delivery to one endpoint of the workspace, within the limits: at most 5 test deliveries pending per
 * endpoint and 60 queued test calls a minute per workspace (a replay of a key neither counts nor is refused). Without
 * `example` it is a webhook.test, sent whether the endpoint is switched on or off and whatever its event list says;
 * with one, the document's example payload of that event (an event of source `test`, counted under the same limits),
 * to that endpoint only, which must be switched on (what a switched-off endpoint would hold is no test: a
 * ConflictError naming the switch). A workspace's requests are serialised by a transaction-scoped advisory lock, so concurrent
 * requests with one key queue one delivery and concurrent requests cannot pass a limit together. Refusals: NotFoundError
 * (no such endpoint in the workspace), KeyReusedError (the key was used for another endpoint of the workspace within
 * the window), LimitError (a limit was reached, nothing queued, with the seconds until trying again can succeed).
 * Takes no actor: the public API's test operation calls it for its key's own workspace (an API key is no actor of the
 * audit trail), and sendExampleEvent (src/core/webhooks/events.ts) once it reached the workspace, with its audit.
 */
export async function queueTestDelivery(
  db: Knex,
  input: { workspaceId: string; endpointId: string; idempotencyKey: string; now: Date; example?: ExampleEvent },
): Promise<TestDeliveryResult> {
  const { workspaceId, endpointId, idempotencyKey: key, now, example } = input;
  return db.transaction(async (trx) => {
    await lockTestDeliveries(trx, workspaceId);
    const endpoint = await trx('webhook_endpoints')
      .where({ id: endpointId, workspace_id: workspaceId })
      .whereNull('deleted_at')
      .first('id', 'is_active');
    if (!endpoint) throw new NotFoundError('No webhook endpoint with this id in your workspace.');
    if (example && example.event !== TEST_EVENT && !endpoint.is_active) {
      throw new ConflictError(
        `webhook endpoint ${endpointId} is switched off; ${SWITCH_ON_FIRST(endpointId)}`,
        'endpointId',
      );
    }
    const previous = await trx('test_idempotency_keys')
      .where({ workspace_id: workspaceId, key })
      .where('created_at', '>', new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS))
      .first('endpoint_id', 'delivery_id');
    if (previous) {
      if (previous.endpoint_id !== endpointId)
        throw new KeyReusedError('This Idempotency-Key was already used for another webhook endpoint.');
      return { deliveryId: previous.delivery_id, replayed: true };
    }
    // Test deliveries: of webhook.test and of example events alike (their events' source is `test`).
    const pending = await trx('deliveries as d')
      .join('events as e', 'e.id', 'd.event_id')
      .where({ 'd.endpoint_id': endpointId, 'e.source': 'test' })
      .whereIn('d.status', ['queued', 'retrying'])
      .select(trx.raw('count(*)::int AS n'), trx.raw('min(d.next_attempt_at) AS next'))
      .first();
    if (pending.n >= MAX_PENDING_TESTS_PER_ENDPOINT) {
      throw new LimitError(testLimitMessage('pending_per_endpoint'), secondsUntil(pending.next, now));
    }
    // Every queued call wrote its key's row at its `now`; a replay writes nothing.
    const recent = await trx('test_idempotency_keys')
      .where({ workspace_id: workspaceId })
      .where('created_at', '>', new Date(now.getTime() - RATE_WINDOW_MS))
      .select(trx.raw('count(*)::int AS n'), trx.raw('min(created_at) AS oldest'))
      .first();
    if (recent.n >= MAX_TEST_CALLS_PER_MINUTE) {
      throw new LimitError(
        testLimitMessage('calls_per_minute'),
        secondsUntil(new Date(recent.oldest.getTime() + RATE_WINDOW_MS), now),
      );
    }
    const [event] = await trx('events')
      .insert({ workspace_id: workspaceId, ...testEvent(endpointId, example?.event ?? TEST_EVENT), source: 'test' })
      .returning('id');
    const [delivery] = await createDeliveries(trx, [event.id], { kind: 'endpoint', endpointId });
    if (!delivery)
      throw new Error(`queueTestDelivery: no delivery made for endpoint ${endpointId}, which this transaction holds`);
    if (example) {
      await recordAudit(trx, example.audit, {
        action: 'event.send_example',
        workspaceId,
        target: { type: 'delivery', id: delivery.id },
        changes: { event: example.event, endpointId },
      });
    }
    // An expired key is taken over by this request.
    await trx('test_idempotency_keys')
      .insert({ workspace_id: workspaceId, key, endpoint_id: endpointId, delivery_id: delivery.id, created_at: now })
      .onConflict(['workspace_id', 'key'])
      .merge(['endpoint_id', 'delivery_id', 'created_at']);
    return { deliveryId: delivery.id, replayed: false };
  });
}

/**
 * The events row of a test delivery: webhook.test's fixed data, or the document's example of the event. An example
 * that carries a dedupeKey gets one of its own (`example:<uuid>`): a second example is another occurrence, and keys
 * are unique in a workspace.
 */
function testEvent(endpointId: string, event: string): { event: string; data: string; dedupe_key: string | null } {
  if (event === TEST_EVENT)
    return { event, data: JSON.stringify({ endpointId, message: TEST_MESSAGE }), dedupe_key: null };
  const definition = eventDefinition(event);
  if (!definition) throw new Error(`queueTestDelivery: unknown event ${event}`);
  return {
    event,
    data: JSON.stringify(definition.example.data),
    dedupe_key: definition.hasDedupeKey ? `example:${crypto.randomUUID()}` : null,
  };
}
