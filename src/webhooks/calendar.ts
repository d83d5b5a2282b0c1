// The calendar sweep (every minute): one pass over every workspace that
//   1. starts the workspace's calendar on its first sweep (calendar_state; from then on the triggers record the
//      changes the derived events are made from, so records that were already there raise nothing),
//   2. turns the recorded changes into booking.confirmed, booking.completed, payment.*, invoice.issued,
//      fine.created and booking.extended events,
//   3. raises the calendar events due now on the workspace's local calendar (due soon, overdue and expiry
//      milestones, ending soon, integration.failed once a local day),
// and then publishes what the rental platform queued in the outbox.
//
// Safe to run in several processes at once: every occurrence has a dedupe key and is inserted with ON CONFLICT
// DO NOTHING (in key order, so two sweeps cannot deadlock on each other's keys); changes and outbox rows are
// claimed with FOR UPDATE SKIP LOCKED and consumed in the transaction that records their events. Deliveries are
// created in that same transaction, so an event is never recorded without them.
import type { Knex } from 'knex';
import { CALENDAR_SQL, DERIVED_SQL, IN_SCOPE } from './calendar-sql.js';
import { fanOutEvents } from './fanout.js';
import { foldUpkeep } from '../db/upkeep.js';
import { InvalidEventError, recordEvent } from './record-event.js';

export { EXPIRY_MILESTONES, MILESTONE_GRACE_DAYS, OVERDUE_MILESTONES } from './calendar-sql.js';

/** entity_changes consumed per statement. */
const CHANGES_BATCH = 1000;

interface OutboxRow {
  id: string;
  workspace_id: string;
  event: string;
  data: unknown;
  dedupe_key: string | null;
}

export interface CalendarSweepResult {
  /** Events recorded by this sweep (calendar, derived and outbox). */
  events: number;
}

export interface CalendarSweepOptions {
  /** Sweep only these workspaces (an operator's `sweep --workspace`, and tests that share a database). Default: all. */
  workspaceIds?: string[];
}

/** What every statement of one sweep binds: its clock and its workspace scope. */
interface SweepScope {
  now: string;
  workspaces: string | null;
}

export async function runCalendarSweep(
  db: Knex,
  now: Date,
  options: CalendarSweepOptions = {},
): Promise<CalendarSweepResult> {
  const scope: SweepScope = {
    now: now.toISOString(),
    workspaces: options.workspaceIds ? `{${options.workspaceIds.join(',')}}` : null,
  };
  // A workspace's first sweep starts its calendar; later ones move last_swept_at forward.
  await db.raw(
    `INSERT INTO calendar_state (workspace_id, first_swept_at, last_swept_at)
     SELECT id, CAST(:now AS timestamptz), CAST(:now AS timestamptz) FROM workspaces WHERE ${IN_SCOPE('id')} ORDER BY id
     ON CONFLICT (workspace_id) DO UPDATE SET last_swept_at = greatest(calendar_state.last_swept_at, excluded.last_swept_at)`,
    { ...scope },
  );
  // what is due, and the figures an event carries (an invoice's balance), with the direct writers' changes applied
  await foldUpkeep(db, options.workspaceIds ?? null);
  const events = (await sweepDerived(db, scope)) + (await sweepCalendar(db, scope)) + (await sweepOutbox(db, scope));
  return { events };
}

/**
 * Only the derived events of the workspaces (booking.confirmed, payment.captured, ...): what the worker runs as soon as
 * a commit announces recorded changes (change-listener.ts; null: every workspace), instead of waiting for the minute's sweep. Safe beside any
 * other sweep: changes are claimed with SKIP LOCKED and events inserted by dedupe key. Returns the events recorded.
 */
export async function runDerivedSweep(
  db: Knex,
  now: Date,
  workspaceIds: string[] | null,
  options: { folded?: boolean } = {},
): Promise<number> {
  // (the upkeep loop has just folded: it says so)
  if (!options.folded) await foldUpkeep(db, workspaceIds);
  return sweepDerived(db, { now: now.toISOString(), workspaces: workspaceIds ? `{${workspaceIds.join(',')}}` : null });
}

/** Derived events from the recorded changes of the swept workspaces, a batch per transaction until none are left. */
async function sweepDerived(db: Knex, scope: SweepScope): Promise<number> {
  let recorded = 0;
  for (;;) {
    const { claimed, ids } = await db.transaction(async (trx) => {
      const [row] = (await trx.raw(DERIVED_SQL, { ...scope, batch: CHANGES_BATCH })).rows as {
        claimed: number;
        ids: string[];
      }[];
      if (row.ids.length > 0) await fanOutEvents(trx, row.ids, scope.now);
      return row;
    });
    recorded += ids.length;
    if (claimed < CHANGES_BATCH) return recorded;
  }
}

/** The calendar events due now in the swept workspaces, recorded with their deliveries in one transaction. */
async function sweepCalendar(db: Knex, scope: SweepScope): Promise<number> {
  return db.transaction(async (trx) => {
    const ids = ((await trx.raw(CALENDAR_SQL, { ...scope })).rows as { id: string }[]).map((r) => r.id);
    if (ids.length > 0) await fanOutEvents(trx, ids, scope.now);
    return ids.length;
  });
}

/**
 * Publishes the outbox rows not yet processed, oldest first, one row per transaction: a valid row becomes an
 * event (or finds the one its dedupe key already names) and gets processed_at and event_id; a row the schema
 * refuses gets processed_at and the reason in `error`, and nothing is queued. A row that fails for any other
 * reason (the database, say) is left for the next sweep; the first such error is rethrown after the others ran.
 */
async function sweepOutbox(db: Knex, scope: SweepScope): Promise<number> {
  let recorded = 0;
  const skipped: string[] = [];
  let failure: unknown;
  for (;;) {
    let row: OutboxRow | undefined;
    try {
      const done = await db.transaction(async (trx) => {
        [row] = (
          await trx.raw(
            `SELECT id, workspace_id, event, data, dedupe_key FROM outbox
             WHERE processed_at IS NULL AND NOT (id = ANY(CAST(:skipped AS bigint[]))) AND ${IN_SCOPE('workspace_id')}
             ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`,
            { skipped: `{${skipped.join(',')}}`, workspaces: scope.workspaces },
          )
        ).rows as OutboxRow[];
        if (!row) return true;
        const claimed = row;
        try {
          // recordEvent validates before it writes anything, and writes inside its own savepoint
          const result = await recordEvent(trx, {
            workspaceId: claimed.workspace_id,
            event: claimed.event,
            data: claimed.data,
            dedupeKey: claimed.dedupe_key,
            source: 'outbox',
          });
          await trx('outbox')
            .where({ id: claimed.id })
            .update({ processed_at: trx.fn.now(), event_id: result.eventId, error: null });
          if (!result.duplicate) recorded += 1;
        } catch (err) {
          if (!(err instanceof InvalidEventError)) throw err;
          await trx('outbox').where({ id: claimed.id }).update({ processed_at: trx.fn.now(), error: err.message });
        }
        return false;
      });
      if (done) return finish();
    } catch (err) {
      if (!row) throw err;
      failure ??= err;
      skipped.push(String((row as OutboxRow).id));
    }
  }
  function finish(): number {
    if (failure) throw failure;
    return recorded;
  }
}
