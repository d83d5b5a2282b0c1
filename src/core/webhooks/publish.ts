import type { Knex } from 'knex';
import { recordAudit } from '../audit.js';
import { mustReach, type Actor } from '../actor.js';
import { recordEvent, type PublishInput, type PublishResult } from '../../webhooks/record-event.js';

export {
  checkEvent,
  InvalidEventError,
  type EventSource,
  type PublishInput,
  type PublishResult,
} from '../../webhooks/record-event.js';

/**
 * Publishes one event on the actor's behalf: validated, recorded and fanned out (recordEvent, the engine's), audited
 * as `event.publish` in the same transaction. An invalid event is refused (InvalidEventError) and nothing is
 * recorded; a repeated dedupeKey returns the existing event with `duplicate: true` (and records no entry).
 */
export async function publishEvent(db: Knex, actor: Actor, input: PublishInput): Promise<PublishResult> {
  mustReach(actor, input.workspaceId);
  // (the data is the event's record, not the change: it stays in `events`)
  return recordEvent(db, input, (trx, { eventId, deliveries }) =>
    recordAudit(trx, actor.audit, {
      action: 'event.publish',
      workspaceId: input.workspaceId,
      target: { type: 'event', id: eventId },
      changes: { event: input.event, dedupeKey: input.dedupeKey ?? null, deliveries },
    }),
  );
}
