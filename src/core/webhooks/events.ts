import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { InvalidFieldError, isUuid, NotFoundError } from '../../errors.js';
import { workspaceFilter, type Actor } from '../actor.js';
import { eventDefinition, eventDefinitions } from '../../webhooks/catalogue.js';
import { queueTestDelivery } from './test-delivery.js';

// The events a workspace's endpoints can receive, as operators see them (the admin API and the CLI alike): the
// catalogue of the public document's `webhooks`, and an example of one sent on purpose to one endpoint. Publishing is
// publish.ts.

export interface EventType {
  event: string;
  /** The webhook's tag in the public document (`Booking events`...). */
  group: string;
  summary: string;
  description: string;
  /** The document's example `data`: what sendExampleEvent sends. */
  exampleData: Record<string, unknown>;
}

/** Every event of the public document's `webhooks` (webhook.test included), in the document's order: the catalogue, no action. */
export function listEventTypes(): { rows: EventType[] } {
  return {
    rows: eventDefinitions().map((d) => ({
      event: d.event,
      group: d.group,
      summary: d.summary,
      description: d.description,
      exampleData: d.example.data,
    })),
  };
}

/**
 * Sends the document's example of `event` to one endpoint of the workspace (queueTestDelivery): signed like any
 * delivery, counted under the test-delivery limits (LimitError with the seconds to wait), audited as
 * `event.send_example`.
 */
export async function sendExampleEvent(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string | 'every'; endpointId: string; event: string; now: Date },
): Promise<{ deliveryId: string; endpointId: string; event: string }> {
  const { endpointId, event, now } = input;
  const reached = workspaceFilter(actor, input.workspaceId);
  if (!isUuid(endpointId)) throw new InvalidFieldError('endpointId', `must be a UUID, got "${endpointId}"`);
  if (!eventDefinition(event))
    throw new InvalidFieldError(
      'event',
      `must name an event of the webhooks section of openapi/openapi.yaml (or fleet-admin events list), not the unknown event "${event}"`,
    );
  // The CLI names the endpoint only: its workspace is the endpoint's.
  const workspaceId =
    reached ??
    (await db('webhook_endpoints').where({ id: endpointId }).first('workspace_id'))?.workspace_id ??
    undefined;
  if (workspaceId === undefined) throw new NotFoundError(`no webhook endpoint with id ${endpointId}`);
  // Every call is its own (a key nobody else holds): it counts towards the calls a minute, and replays nothing.
  const { deliveryId } = await queueTestDelivery(db, {
    workspaceId,
    endpointId,
    idempotencyKey: `example:${crypto.randomUUID()}`,
    now,
    example: { event, audit: actor.audit },
  });
  return { deliveryId, endpointId, event };
}
