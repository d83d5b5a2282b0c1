// The SQL of the calendar sweep. Every statement is set-based and covers every workspace at once: it selects the
// occurrences that are due and not yet recorded (by dedupe key), builds each event's `data` as jsonb in the
// database, and inserts them into `events` with ON CONFLICT (workspace_id, dedupe_key) DO NOTHING, so sweeps
// running in several processes at once record every occurrence exactly once.
//
// Each statement starts from `w`: one row per workspace with its time zone (w.tz), its Reminders ahead setting
// (w.n) and today's date on its local calendar (w.today), so "today", "within N days" and "N days overdue" are
// counted on each workspace's own calendar (the per-row form of TODAY in queries/common.ts).
//
// Named bindings: :now the sweep's clock (ISO), :batch how many entity_changes rows one statement consumes,
// :workspaces the workspaces swept (a uuid[] literal, or null for every workspace).
import { NOW } from '../queries/common.js';

/** `column` is one of the swept workspaces. */
export const IN_SCOPE = (column: string) =>
  `(CAST(:workspaces AS uuid[]) IS NULL OR ${column} = ANY(CAST(:workspaces AS uuid[])))`;

/** The swept workspaces, with their local today. */
const WORKSPACES = `w AS MATERIALIZED (
  SELECT id, timezone AS tz, reminders_ahead AS n, (${NOW} AT TIME ZONE timezone)::date AS today FROM workspaces
  WHERE ${IN_SCOPE('id')})`;

/** Overdue notifications, in whole local days past the due date. */
export const OVERDUE_MILESTONES = [1, 7, 30] as const;
/** Document expiry notifications, in whole local days before the expiry date. */
export const EXPIRY_MILESTONES = [30, 7, 0] as const;
/** A milestone whose day lies more than this many days in the past is not sent (history and downtime). */
export const MILESTONE_GRACE_DAYS = 7;

// ---- value formats on the wire

/** ISO 8601 UTC with milliseconds, as text (null stays null): iso_utc_text, the database's one writer of it. */
const iso = (e: string) => `iso_utc_text(${e})`;
/** A plain date as YYYY-MM-DD. */
const ymd = (e: string) => `to_char(${e}, 'YYYY-MM-DD')`;
/** The workspace-local calendar date of a timestamptz. */
const localDate = (e: string) => `((${e}) AT TIME ZONE w.tz)::date`;
/** Local midnight starting the local date `d`, as timestamptz. */
const midnight = (d: string) => `((${d})::timestamp AT TIME ZONE w.tz)`;

// ---- embedded objects: customer {id, name} only, vehicle {id, plate}, fleet {id, code, name}

const customerRef = (a: string) => `jsonb_build_object('id', ${a}.id, 'name', ${a}.name)`;
const vehicleRef = (a: string) => `jsonb_build_object('id', ${a}.id, 'plate', ${a}.plate)`;
const fleetRef = (a: string) => `jsonb_build_object('id', ${a}.id, 'code', ${a}.code, 'name', ${a}.name)`;
const bookingRef = (a: string) => `jsonb_build_object('id', ${a}.id, 'number', ${a}.number)`;
const invoiceRef = (a: string) => `jsonb_build_object('id', ${a}.id, 'number', ${a}.number)`;
/** `ref` when the left-joined row `a` exists, else JSON null. */
const orNull = (a: string, ref: string) => `CASE WHEN ${a}.id IS NULL THEN NULL ELSE ${ref} END`;

/** Not yet recorded for this workspace under `key`. */
const notRecorded = (key: string) =>
  `NOT EXISTS (SELECT 1 FROM events e WHERE e.workspace_id = w.id AND e.dedupe_key = ${key})`;

/**
 * The latest milestone reached, for `t` days on a scale where each milestone is reached at `t >= m` (days past
 * the due date; for expiries, minus the days left). Null before the first one.
 */
function latestReached(t: string, milestones: readonly number[]): string {
  const desc = [...milestones].sort((a, b) => b - a);
  return `CASE ${desc.map((m) => `WHEN ${t} >= ${m} THEN ${m}`).join(' ')} END`;
}

// ---- invoices (aliases i, c, b, v, fl)

const INVOICE_JOINS = `
  JOIN customers c ON c.id = i.customer_id
  LEFT JOIN bookings b ON b.id = i.booking_id
  LEFT JOIN vehicles v ON v.id = b.vehicle_id
  LEFT JOIN fleets fl ON fl.id = v.fleet_id`;

/** InvoiceIssuedData; vehicle and fleet are those of the invoice's booking, null without one. */
const INVOICE_DATA = `jsonb_build_object(
  'invoiceId', i.id, 'number', i.number, 'purpose', i.purpose, 'issueDate', ${ymd('i.issue_date')}, 'dueDate', ${ymd('i.due_date')},
  'total', i.total, 'balance', i.balance, 'customer', ${customerRef('c')}, 'booking', ${orNull('b', bookingRef('b'))},
  'vehicle', ${orNull('v', vehicleRef('v'))}, 'fleet', ${orNull('fl', fleetRef('fl'))})`;

// ---- bookings (aliases b, c, v, fl)

const BOOKING_JOINS = `
  JOIN customers c ON c.id = b.customer_id
  JOIN vehicles v ON v.id = b.vehicle_id
  JOIN fleets fl ON fl.id = v.fleet_id`;

/** The end as first booked: the stored original, else the end before the first extension, else the current end. */
const ORIGINAL_DROPOFF = `coalesce(b.original_dropoff_at,
  (SELECT x0.previous_dropoff_at FROM extensions x0 WHERE x0.booking_id = b.id ORDER BY x0.created_at, x0.id LIMIT 1),
  b.dropoff_at)`;

/** BookingEndingSoonData with `dropoffAt` = `dropoff` and `extensionsCount` = `count`. */
const bookingData = (dropoff: string, count: string) => `jsonb_build_object(
  'bookingId', b.id, 'number', b.number, 'type', b.type, 'pickupAt', ${iso('b.pickup_at')}, 'dropoffAt', ${iso(dropoff)},
  'originalDropoffAt', ${iso(ORIGINAL_DROPOFF)}, 'extensionsCount', ${count}, 'monthlyAmount', b.monthly_amount,
  'customer', ${customerRef('c')}, 'vehicle', ${vehicleRef('v')}, 'fleet', ${fleetRef('fl')},
  'daysLeft', greatest(0, ${localDate(dropoff)} - w.today))`;

// ---- installments (aliases s, b, i, c, v, fl)

const INSTALLMENT_JOINS = `
  JOIN bookings b ON b.id = s.booking_id
  ${BOOKING_JOINS}
  LEFT JOIN invoices i ON i.id = s.invoice_id`;

const INSTALLMENT_DATA = `jsonb_build_object(
  'installmentId', s.id, 'bookingId', b.id, 'bookingNumber', b.number, 'number', s.number, 'of', s."of", 'dueDate', ${ymd('s.due_date')},
  'amount', s.amount, 'invoice', ${orNull('i', invoiceRef('i'))}, 'customer', ${customerRef('c')}, 'vehicle', ${vehicleRef('v')},
  'fleet', ${fleetRef('fl')}, 'daysToDue', s.due_date - w.today)`;

/**
 * Unpaid: its invoice has a balance, or, without an invoice, it has no payment date (and its booking was not
 * canceled: nothing is owed on the schedule of a canceled booking that never invoiced it).
 */
const INSTALLMENT_UNPAID = `(CASE WHEN s.invoice_id IS NOT NULL THEN i.balance > 0 ELSE s.paid_at IS NULL AND b.status <> 'canceled' END)`;
/** The part of INSTALLMENT_UNPAID the installment row alone decides: drops the paid ones before any join. */
const MAYBE_UNPAID = `(s.invoice_id IS NOT NULL OR s.paid_at IS NULL)`;

// ---- the calendar statement: occurrences due now and not yet recorded

const OVERDUE_LAST = Math.max(...OVERDUE_MILESTONES) + MILESTONE_GRACE_DAYS;
const OVERDUE_FIRST = Math.min(...OVERDUE_MILESTONES);
const EXPIRY_FIRST = Math.max(...EXPIRY_MILESTONES);

/**
 * One calendar branch: for each workspace `w`, the occurrences `source` yields (aliased `alias`; its rows carry
 * `key`, the occurrence's dedupe key) that are not yet recorded, with their `data`. OFFSET 0 keeps the subquery
 * from being flattened into a join: it runs once per workspace with w's values as parameters, an index range
 * scan (invoices_open, installments_due, bookings by status or drop-off, vehicle_documents_expiry) probing the
 * events' unique key per candidate, whatever the number of workspaces.
 */
function branch(event: string, alias: string, source: string, data: string, joins = '', where = 'true'): string {
  return `SELECT w.id AS workspace_id, '${event}' AS event, ${alias}.key AS dedupe_key, ${data} AS data
   FROM w
   CROSS JOIN LATERAL (
     SELECT * FROM (${source}) ${alias}
     WHERE ${notRecorded(`${alias}.key`)}
     OFFSET 0) ${alias}
   ${joins}
   WHERE ${where}`;
}

/** The latest overdue milestone reached by `days` past due, and the days, for rows of `table` due in the window. */
const overdueSource = (table: string, a: string, extra: string) => `
  SELECT ${a}.*, o.days, o.milestone
  FROM ${table} ${a}
  CROSS JOIN LATERAL (SELECT w.today - ${a}.due_date AS days) d
  CROSS JOIN LATERAL (SELECT d.days, ${latestReached('d.days', OVERDUE_MILESTONES)} AS milestone) o
  WHERE ${a}.workspace_id = w.id AND ${extra}
    AND ${a}.due_date BETWEEN w.today - ${OVERDUE_LAST} AND w.today - ${OVERDUE_FIRST}
    AND o.days - o.milestone <= ${MILESTONE_GRACE_DAYS}`;

/** Each branch yields (workspace_id, event, dedupe_key, data). */
const CALENDAR_BRANCHES = [
  // invoice.due_soon: an open invoice due 0..N local days ahead; once per due date
  branch(
    'invoice.due_soon',
    'i',
    `SELECT i.*, 'invoice.due_soon:' || i.id || ':' || ${ymd('i.due_date')} AS key
     FROM invoices i
     WHERE i.workspace_id = w.id AND i.balance > 0 AND i.status = 'issued' AND i.due_date BETWEEN w.today AND w.today + w.n`,
    `${INVOICE_DATA} || jsonb_build_object('daysToDue', i.due_date - w.today)`,
    INVOICE_JOINS,
  ),

  // invoice.overdue: the latest of the 1/7/30-day milestones reached, unless its day is more than 7 days past
  branch(
    'invoice.overdue',
    'i',
    `SELECT i.*, 'invoice.overdue:' || i.id || ':' || i.milestone AS key
     FROM (${overdueSource('invoices', 'i', `i.balance > 0 AND i.status = 'issued'`)}) i`,
    `${INVOICE_DATA} || jsonb_build_object('daysOverdue', i.days)`,
    INVOICE_JOINS,
  ),

  // installment.due_soon: an unpaid installment due 0..N local days ahead; once per due date
  branch(
    'installment.due_soon',
    's',
    `SELECT s.*, 'installment.due_soon:' || s.id || ':' || ${ymd('s.due_date')} AS key
     FROM installments s
     WHERE s.workspace_id = w.id AND s.due_date BETWEEN w.today AND w.today + w.n AND ${MAYBE_UNPAID}`,
    INSTALLMENT_DATA,
    INSTALLMENT_JOINS,
    INSTALLMENT_UNPAID,
  ),

  // installment.overdue: as invoice.overdue; daysToDue = -daysOverdue
  branch(
    'installment.overdue',
    's',
    `SELECT s.*, 'installment.overdue:' || s.id || ':' || s.milestone AS key
     FROM (${overdueSource('installments', 's', MAYBE_UNPAID)}) s`,
    `${INSTALLMENT_DATA} || jsonb_build_object('daysOverdue', s.days)`,
    INSTALLMENT_JOINS,
    INSTALLMENT_UNPAID,
  ),

  // booking.ending_soon: an active booking whose drop-off falls on a local date 0..N days ahead; once per end
  branch(
    'booking.ending_soon',
    'b',
    `SELECT b.*, 'booking.ending_soon:' || b.id || ':' || ${iso('b.dropoff_at')} AS key
     FROM bookings b
     WHERE b.workspace_id = w.id AND b.status = 'active'
       AND b.dropoff_at >= ${midnight('w.today')} AND b.dropoff_at < ${midnight('w.today + w.n + 1')}`,
    bookingData('b.dropoff_at', '(SELECT count(*) FROM extensions y WHERE y.booking_id = b.id)'),
    BOOKING_JOINS,
  ),

  // vehicle.document_expiring: the latest of the 30/7/0-days-before milestones reached, unless its day is more
  // than 7 days past (so daysLeft runs from 30 down to -7); documents of inactive (sold, retired) cars are skipped
  branch(
    'vehicle.document_expiring',
    'd',
    `SELECT d.*, o.t, 'vehicle.document_expiring:' || d.id || ':' || (-o.milestone) AS key
     FROM vehicle_documents d
     CROSS JOIN LATERAL (SELECT w.today - d.expires_at AS t) x
     CROSS JOIN LATERAL (SELECT x.t, ${latestReached(
       'x.t',
       EXPIRY_MILESTONES.map((m) => -m),
     )} AS milestone) o
     WHERE d.workspace_id = w.id
       AND d.expires_at BETWEEN w.today - ${MILESTONE_GRACE_DAYS} AND w.today + ${EXPIRY_FIRST}
       AND o.t - o.milestone <= ${MILESTONE_GRACE_DAYS}`,
    `jsonb_build_object(
       'vehicleId', v.id, 'plate', v.plate, 'make', v.make, 'model', v.model, 'docType', d.doc_type,
       'detail', nullif(d.detail, ''), 'expiresAt', ${ymd('d.expires_at')}, 'daysLeft', -d.t, 'fleet', ${fleetRef('fl')})`,
    `JOIN vehicles v ON v.id = d.vehicle_id
     JOIN fleets fl ON fl.id = v.fleet_id`,
    `v.state <> 'inactive'`,
  ),

  // integration.failed: once per local day while the integration is failing
  branch(
    'integration.failed',
    'g',
    `SELECT g.*, coalesce(nullif(btrim(g.integration), ''), 'integration') AS name,
            'integration.failed:' || g.id || ':' || ${ymd('w.today')} AS key
     FROM integrations g
     WHERE g.workspace_id = w.id AND g.status = 'failing'`,
    `jsonb_build_object(
       'integration', g.name,
       'detail', CASE WHEN btrim(coalesce(g.detail, '')) = '' THEN 'No error detail was recorded from the provider.' ELSE g.detail END,
       'hint', CASE WHEN btrim(coalesce(g.hint, '')) = ''
                    THEN 'Check the ' || g.name || ' integration under Settings > Integrations and reconnect it.' ELSE g.hint END,
       'failingSince', ${iso('g.failing_since')})`,
  ),
];

/** Records the calendar events due now in every workspace; returns the new events' ids. */
export const CALENDAR_SQL = `
  WITH ${WORKSPACES}
  INSERT INTO events (workspace_id, event, dedupe_key, data, source, created_at)
  SELECT o.workspace_id, o.event, o.dedupe_key, o.data, 'calendar', ${NOW}
  FROM (${CALENDAR_BRANCHES.join('\n  UNION ALL\n')}) o
  ORDER BY o.workspace_id, o.dedupe_key
  ON CONFLICT (workspace_id, dedupe_key) DO NOTHING
  RETURNING id`;

// ---- derived events, from the entity_changes the triggers recorded (aliases ch: the consumed change)

/** Each branch yields (event, dedupe_key, source, data) for one kind of change. */
const DERIVED_BRANCHES = [
  // booking.confirmed: ids plus the car
  `SELECT w.id AS workspace_id, ch.event, 'booking.confirmed:' || b.id AS dedupe_key, 'derived' AS source, jsonb_build_object(
     'bookingId', b.id, 'customerId', b.customer_id, 'vehicleId', b.vehicle_id, 'fleet', ${fleetRef('fl')}, 'vehicle', ${vehicleRef('v')}) AS data
   FROM claimed ch
   JOIN w ON w.id = ch.workspace_id
   JOIN bookings b ON b.id = ch.entity_id AND b.workspace_id = w.id
   JOIN vehicles v ON v.id = b.vehicle_id
   JOIN fleets fl ON fl.id = v.fleet_id
   WHERE ch.event = 'booking.confirmed'`,

  // booking.completed: the finished booking and what is still owed on it
  `SELECT w.id, ch.event, 'booking.completed:' || b.id, 'derived', jsonb_build_object(
     'bookingId', b.id, 'number', b.number, 'type', b.type, 'pickupAt', ${iso('b.pickup_at')}, 'dropoffAt', ${iso('b.dropoff_at')},
     'returnedAt', ${iso('b.returned_at')}, 'amount', b.amount,
     'balanceDue', (SELECT coalesce(sum(oi.balance), 0) FROM invoices oi WHERE oi.booking_id = b.id AND oi.balance > 0),
     'customer', ${customerRef('c')}, 'vehicle', ${vehicleRef('v')}, 'fleet', ${fleetRef('fl')})
   FROM claimed ch
   JOIN w ON w.id = ch.workspace_id
   JOIN bookings b ON b.id = ch.entity_id AND b.workspace_id = w.id
   ${BOOKING_JOINS}
   WHERE ch.event = 'booking.completed'`,

  // payment.captured / refunded / deposit_held / canceled: the payment as stored
  `SELECT w.id, ch.event, ch.event || ':' || p.id, 'derived', jsonb_build_object(
     'paymentId', p.id, 'kind', p.kind, 'status', p.status, 'amount', p.amount, 'at', ${iso('p.at')},
     'booking', ${orNull('b', bookingRef('b'))}, 'invoice', ${orNull('i', invoiceRef('i'))}, 'customer', ${customerRef('c')},
     'vehicle', ${orNull('v', vehicleRef('v'))}, 'fleet', ${orNull('fl', fleetRef('fl'))})
   FROM claimed ch
   JOIN w ON w.id = ch.workspace_id
   JOIN payments p ON p.id = ch.entity_id AND p.workspace_id = w.id
   JOIN customers c ON c.id = p.customer_id
   LEFT JOIN bookings b ON b.id = p.booking_id
   LEFT JOIN vehicles v ON v.id = b.vehicle_id
   LEFT JOIN fleets fl ON fl.id = v.fleet_id
   LEFT JOIN invoices i ON i.id = p.invoice_id
   WHERE ch.event IN ('payment.captured', 'payment.refunded', 'payment.deposit_held', 'payment.canceled')`,

  // invoice.issued
  `SELECT w.id, ch.event, 'invoice.issued:' || i.id, 'calendar', ${INVOICE_DATA}
   FROM claimed ch
   JOIN w ON w.id = ch.workspace_id
   JOIN invoices i ON i.id = ch.entity_id AND i.workspace_id = w.id
   ${INVOICE_JOINS}
   WHERE ch.event = 'invoice.issued' AND i.status = 'issued'`,

  // fine.created: the customer is the fine's own, else its booking's
  `SELECT w.id, ch.event, 'fine.created:' || f.id, 'calendar', jsonb_build_object(
     'fineId', f.id, 'kind', f.kind, 'type', f.type, 'date', ${ymd('f.date')}, 'amount', f.amount, 'authority', f.authority,
     'violation', nullif(f.violation, ''), 'number', f.number, 'status', f.status, 'customer', ${orNull('c', customerRef('c'))},
     'booking', ${orNull('b', bookingRef('b'))}, 'vehicle', ${vehicleRef('v')}, 'fleet', ${fleetRef('fl')})
   FROM claimed ch
   JOIN w ON w.id = ch.workspace_id
   JOIN fines f ON f.id = ch.entity_id AND f.workspace_id = w.id
   JOIN vehicles v ON v.id = f.vehicle_id
   JOIN fleets fl ON fl.id = v.fleet_id
   LEFT JOIN bookings b ON b.id = f.booking_id
   LEFT JOIN customers c ON c.id = coalesce(f.customer_id, b.customer_id)
   WHERE ch.event = 'fine.created'`,

  // booking.extended: the booking as this extension left it (dropoffAt = its new end, extensionsCount = its rank)
  `SELECT w.id, ch.event, 'booking.extended:' || x.id, 'calendar',
     ${bookingData('x.new_dropoff_at', 'n.count')} || jsonb_build_object('addedDays', x.added_days, 'extensionAmount', x.amount)
   FROM claimed ch
   JOIN w ON w.id = ch.workspace_id
   JOIN extensions x ON x.id = ch.entity_id AND x.workspace_id = w.id
   JOIN bookings b ON b.id = x.booking_id
   ${BOOKING_JOINS}
   CROSS JOIN LATERAL (SELECT count(*) AS count FROM extensions y
                       WHERE y.booking_id = x.booking_id AND (y.created_at, y.id) <= (x.created_at, x.id)) n
   WHERE ch.event = 'booking.extended'`,
];

/**
 * Consumes up to :batch entity_changes (rows another process holds are skipped; the consumed rows are deleted in
 * the same transaction) and records their events. Returns how many changes it consumed and the new events' ids.
 * A change whose record has gone raises nothing.
 */
export const DERIVED_SQL = `
  WITH ${WORKSPACES},
  -- a change is taken once the direct writers' changes up to it are applied (src/db/upkeep.ts): its figures include
  -- them; the oldest unapplied change looked up once per workspace, not per change
  unapplied AS MATERIALIZED (
    SELECT x.workspace_id, coalesce(upkeep_oldest(x.workspace_id), 'infinity') AS since
    FROM (SELECT DISTINCT workspace_id FROM entity_changes WHERE ${IN_SCOPE('workspace_id')}) x
  ), claimed AS (
    DELETE FROM entity_changes WHERE id IN (
      SELECT e.id FROM entity_changes e JOIN unapplied u ON u.workspace_id = e.workspace_id
      WHERE e.recorded_at < u.since
      ORDER BY e.id LIMIT CAST(:batch AS integer) FOR UPDATE OF e SKIP LOCKED)
    RETURNING workspace_id, event, entity_id
  ), inserted AS (
    INSERT INTO events (workspace_id, event, dedupe_key, data, source, created_at)
    SELECT o.workspace_id, o.event, o.dedupe_key, o.data, o.source, ${NOW}
    FROM (${DERIVED_BRANCHES.join('\n    UNION ALL\n')}) o
    ORDER BY o.workspace_id, o.dedupe_key
    ON CONFLICT (workspace_id, dedupe_key) DO NOTHING
    RETURNING id
  )
  SELECT (SELECT count(*) FROM claimed)::int AS claimed,
         coalesce((SELECT array_agg(id) FROM inserted), '{}'::uuid[]) AS ids`;
