import type { Knex } from 'knex';
import { FieldError } from '../errors.js';
import { describeValidationError, eventDefinition, payloadField, TEST_EVENT } from './catalogue.js';
import { fanOutEvents } from './fanout.js';

// Recording an event: checked against its schema in the document, inserted once per dedupeKey, and fanned out to its
// endpoints, in one transaction. The engine's primitive: the calendar's outbox and derived events and a batch write
// record through it; the publishEvent action (src/core/webhooks/publish.ts) adds the actor's audit entry.

/**
 * A published event that does not match its schema in the document (or names no publishable event); `field` is the
 * request field at fault (`event`, `data`, `dedupeKey`), the message names the exact path.
 */
export class InvalidEventError extends FieldError {}

export type EventSource = 'publish' | 'outbox' | 'calendar' | 'derived';

export interface PublishInput {
  workspaceId: string;
  event: string;
  data: unknown;
  /** Names the occurrence: an event with a key already recorded in the workspace is not recorded again. */
  dedupeKey?: string | null;
  source: EventSource;
}

export interface PublishResult {
  eventId: string;
  /** Deliveries created (queued, or held for switched-off endpoints). */
  deliveries: number;
  /** True when the dedupeKey was already recorded: the existing event is returned and nothing is queued. */
  duplicate: boolean;
}

// Placeholders for the envelope fields fixed later (the delivery id per endpoint, createdAt on insert): the
// check is about the published event and data, validated exactly as a receiver would see them.
const PLACEHOLDER_ID = '00000000-0000-4000-8000-000000000000';

/**
 * Checks an event against its payload schema in the document's webhooks section. Throws InvalidEventError
 * naming the first bad path, e.g. `invalid booking.confirmed event at /data/bookingId: must match format "uuid"`.
 */
export function checkEvent(event: string, data: unknown, dedupeKey: string | null | undefined): void {
  if (event === TEST_EVENT)
    throw new InvalidEventError(`${TEST_EVENT} is sent only by the test operation and cannot be published`, 'event');
  const definition = eventDefinition(event);
  if (!definition) throw new InvalidEventError(`unknown event "${event}"`, 'event');
  const envelope = {
    id: PLACEHOLDER_ID,
    event,
    createdAt: new Date().toISOString(),
    ...(definition.hasDedupeKey && dedupeKey != null ? { dedupeKey } : {}),
    data,
  };
  if (!definition.validate(envelope)) {
    throw new InvalidEventError(
      `invalid ${event} event ${describeValidationError(definition.validate.errors)}`,
      payloadField(definition.validate.errors),
    );
  }
}

/**
 * Validates, records and fans out one event in one transaction (a savepoint when `db` is one). An invalid event is
 * refused (InvalidEventError) and nothing is recorded; a repeated dedupeKey returns the existing event with
 * `duplicate: true`. `onRecorded` runs in the same transaction once a new event is recorded (not for a duplicate).
 */
export async function recordEvent(
  db: Knex,
  input: PublishInput,
  onRecorded?: (trx: Knex.Transaction, recorded: { eventId: string; deliveries: number }) => Promise<void>,
): Promise<PublishResult> {
  checkEvent(input.event, input.data, input.dedupeKey);
  const dedupeKey = input.dedupeKey ?? null;
  return db.transaction(async (trx) => {
    const [inserted] = await trx('events')
      .insert({
        workspace_id: input.workspaceId,
        event: input.event,
        data: JSON.stringify(input.data),
        dedupe_key: dedupeKey,
        source: input.source,
      })
      .onConflict(['workspace_id', 'dedupe_key'])
      .ignore()
      .returning('id');
    if (!inserted) {
      const existing = await trx('events')
        .where({ workspace_id: input.workspaceId, dedupe_key: dedupeKey })
        .first('id');
      return { eventId: existing.id, deliveries: 0, duplicate: true };
    }
    const deliveries = await fanOutEvents(trx, [inserted.id]);
    await onRecorded?.(trx, { eventId: inserted.id, deliveries });
    return { eventId: inserted.id, deliveries, duplicate: false };
  });
}
