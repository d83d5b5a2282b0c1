import type { Knex } from 'knex';
import type { VehicleRow, VehicleSearchResult } from '../../generated/strict/types.gen.js';
import {
  containsPattern,
  FETCH_SIZE,
  jsonArrayText,
  jsonObjectText,
  jsonPage,
  jsonValue,
  pageOf,
  positionValue,
  trigramSearchable,
  WORKSPACE,
  type JsonPage,
  type WorkspaceRef,
} from './common.js';

export type { VehicleRow, VehicleSearchResult };

export interface VehicleSearchParams {
  /** Case-insensitive substring of make, model or plate (spaces in the plate ignored). */
  q?: string;
  /** The window [from, to): both or neither, from < to (validated by the API layer). */
  from?: Date;
  to?: Date;
  limit: number;
  /** The page after this vehicle's place in the order (a page's `next`); none: the first page. */
  after?: VehiclePosition;
}

/** A vehicle's place in the list's order: its make, model and plate (unique in a workspace: see plate_key). */
export type VehiclePosition = [make: string, model: string, plate: string];

/** A row's place in the order, as `after` takes it. */
export const vehiclePosition = (row: Pick<VehicleRow, 'make' | 'model' | 'plate'>): VehiclePosition => [
  row.make,
  row.model,
  row.plate,
];

/** A page as the query module answers it: the rows, and the position the next page starts after (null: the last). */
export type VehiclePage = Omit<VehicleSearchResult, 'nextCursor'> & { next: VehiclePosition | null };

/**
 * Vehicles ordered by make, model, plate. With a window, `available` is worked out for the returned rows only:
 * state active, no confirmed/active booking overlapping [from, to) (an active booking that is late back runs
 * until now), and no maintenance block overlapping it. Ranges are half-open, so a return at 11:00 does not
 * clash with a pickup at 11:00.
 */
export async function searchVehicles(
  db: Knex,
  workspace: WorkspaceRef,
  params: VehicleSearchParams,
  now: Date,
): Promise<VehiclePage> {
  const page = await searchVehiclesJson(db, workspace, params, now);
  return {
    ...(JSON.parse(page.json) as Omit<VehicleSearchResult, 'nextCursor'>),
    next: page.next as VehiclePosition | null,
  };
}

/**
 * The same page as searchVehicles(), its rows as the JSON text of the document's VehicleSearchResult without
 * `nextCursor` (the API appends it, signed, from `next`): what the API sends.
 */
export async function searchVehiclesJson(
  db: Knex,
  workspace: WorkspaceRef,
  params: VehicleSearchParams,
  now: Date,
): Promise<JsonPage> {
  const { sql, bindings } = vehicleSearchStatement(workspace, params, now);
  return jsonPage(db, sql, bindings, { prepared: true });
}

/**
 * The one way the clock enters a search's answer: with a window, whether now is past its start (an active booking
 * late back runs until now, so it overlaps the window once now is past `from`: `w.now > w.win_start` below). An
 * answer's tag that includes it changes exactly when the clock would change the answer (src/api/revalidation.ts).
 */
export function availabilityClock(params: Pick<VehicleSearchParams, 'from'>, now: Date): string {
  return params.from === undefined ? '' : String(now.getTime() > params.from.getTime());
}

/** Which of the twelve statements answers `params`, and its named bindings (the tests read its plan). */
export function vehicleSearchStatement(
  workspace: WorkspaceRef,
  params: VehicleSearchParams,
  now: Date,
): { sql: string; bindings: Record<string, unknown> } {
  const bindings: Record<string, unknown> = { ws: workspace.id, limit: params.limit };
  if (params.after) [bindings.afterMake, bindings.afterModel, bindings.afterPlate] = params.after;
  const q = params.q?.trim();
  let term: Term = 'none';
  if (q) {
    bindings.q = q;
    const plateKey = q.replace(/ /g, '');
    if (trigramSearchable(plateKey)) {
      term = 'trigram';
      bindings.platePattern = containsPattern(plateKey);
    } else {
      term = 'short';
      bindings.plateKey = plateKey;
    }
  }
  const window = params.from !== undefined && params.to !== undefined;
  if (window) {
    bindings.from = params.from!.toISOString();
    bindings.to = params.to!.toISOString();
    bindings.now = now.toISOString();
  }
  return { sql: vehicleStatement(term, window, params.after !== undefined), bindings };
}

/** No term; a term whose plate matches the trigram index serves; a shorter one. */
type Term = 'none' | 'trigram' | 'short';
/** The statement texts by term, window and page (the first, or one after a position), each built once: twelve in all. */
const statements = new Map<string, string>();

function vehicleStatement(term: Term, window: boolean, after: boolean): string {
  const key = `${term} ${window} ${after}`;
  let sql = statements.get(key);
  if (sql === undefined) statements.set(key, (sql = buildVehicleStatement(term, window, after)));
  return sql;
}

/**
 * Keyset paging: a later page is the rows after the position in (make, model, plate) order, a row comparison that
 * vehicles_order (workspace_id, make, model, plate) serves as the start of its walk, so a deep page reads what the
 * first does. Plates are unique in a workspace (plate_key, the plate lower-cased without spaces, is: so equal plates
 * are impossible), so the three keys order every vehicle and no id is needed to break ties. The position's values are
 * scalar subqueries (see WORKSPACE): one generic plan for every position.
 */
const AFTER_POSITION = `(${positionValue('afterMake', 'text')}, ${positionValue('afterModel', 'text')}, ${positionValue('afterPlate', 'text')})`;
const afterPosition = (alias: string) => `(${alias}.make, ${alias}.model, ${alias}.plate) > ${AFTER_POSITION}`;

/** Whether the term is a case-insensitive substring of the make or the model of `alias`'s row. */
const modelMatches = (alias: string) =>
  `(strpos(lower(${alias}.make), lower(:q)) > 0 OR strpos(lower(${alias}.model), lower(:q)) > 0)`;

const COLUMNS = 'v.id, v.make, v.model, v.plate, v.category, v.daily_rate, v.state';

function buildVehicleStatement(term: Term, window: boolean, after: boolean): string {
  // Prepared once per connection: the plan below suits every term, so PostgreSQL keeps a generic one instead of
  // planning the statement on every request.
  const page = term === 'none' ? vehiclePage(after) : matchingPage(term, after);
  return pageAsJson(page, window);
}

const andAfter = (after: boolean, alias: string) => (after ? `AND ${afterPosition(alias)}` : '');

/**
 * The page of vehicles and one more (whether a next page exists), picked first (LIMIT inside), in make, model, plate
 * order, on one kept plan (WORKSPACE).
 */
function vehiclePage(after: boolean): string {
  return `SELECT ${COLUMNS} FROM vehicles v WHERE v.workspace_id = ${WORKSPACE} ${andAfter(after, 'v')}
    ORDER BY v.make, v.model, v.plate LIMIT ${FETCH_SIZE}`;
}

/**
 * The page of the vehicles a term matches. A match is a case-insensitive substring of the make, the model or the
 * plate (spaces in the plate ignored).
 * Make and model: the matching rows of vehicle_models (a few per workspace), each model's vehicles read in
 * plate order from vehicles_order and cut at the page size, so only the models that reach the page are
 * read. Plate: for a term the trigram index can serve, its matches are taken from the index (LIKE, wildcards
 * escaped; plate_key is already lower-cased) and sorted (vehicles_workspace_plate_trgm: GIN on the workspace and
 * the plate's trigrams, so the scan returns this workspace's plates, never another tenant's); MATERIALIZED keeps
 * a generic plan from walking every plate in order instead, as it did for `toyota` on the large data set. A shorter
 * term is tested in order (strpos) and stops at the page size. All are substring tests of lower-cased text. The
 * plate side leaves out vehicles whose make or model matches, so the two sides never share a vehicle and are
 * appended without the sort that removing duplicates takes (about an eighth of the statement): such a vehicle is on
 * the first side, or behind a full page of it and so not on the page at all. The whole is cut to the page in the
 * same order. A later page: each side keeps the rows after the position (the models from the position's own on, each
 * model's vehicles walked from the position on), so it reads what the first page does.
 */
function matchingPage(term: Exclude<Term, 'none'>, after: boolean): string {
  let plates: string;
  let plateMatches: string;
  if (term === 'trigram') {
    plates = `WITH plates AS MATERIALIZED (
        SELECT ${COLUMNS} FROM vehicles v WHERE v.workspace_id = :ws AND v.plate_key LIKE lower(:platePattern) ESCAPE '\\'
          AND NOT ${modelMatches('v')} ${andAfter(after, 'v')}
      )`;
    plateMatches = 'SELECT * FROM plates v ORDER BY v.make, v.model, v.plate LIMIT :limit + 1';
  } else {
    plates = '';
    plateMatches = `SELECT ${COLUMNS} FROM vehicles v WHERE v.workspace_id = :ws AND strpos(v.plate_key, lower(:plateKey)) > 0
           AND NOT ${modelMatches('v')} ${andAfter(after, 'v')}
         ORDER BY v.make, v.model, v.plate LIMIT :limit + 1`;
  }
  return `
      ${plates}
      SELECT * FROM (
        (SELECT ${COLUMNS}
         FROM vehicle_models g
         CROSS JOIN LATERAL (
           SELECT ${COLUMNS} FROM vehicles v
           WHERE v.workspace_id = :ws AND v.make = g.make AND v.model = g.model ${andAfter(after, 'v')}
           ORDER BY v.plate LIMIT :limit + 1
         ) v
         WHERE g.workspace_id = :ws AND g.vehicles > 0
           AND ${modelMatches('g')} ${after ? `AND (g.make, g.model) >= (${positionValue('afterMake', 'text')}, ${positionValue('afterModel', 'text')})` : ''}
         ORDER BY g.make, g.model, v.plate
         LIMIT :limit + 1)
        UNION ALL
        (${plateMatches})
      ) m
      ORDER BY make, model, plate
      LIMIT :limit + 1`;
}

/**
 * Availability is probed per returned vehicle (LATERAL ... LIMIT 1, index-only on bookings_vehicle_open and
 * maintenance_vehicle_starts), never across all bookings of the window. Ranges are half-open: a booking or a block
 * overlaps [from, to) when it starts before `to` and ends after `from`; an active booking ends at the later of its
 * dropoff and now. The vehicle alone selects its bookings and blocks: their foreign keys carry the workspace with
 * the vehicle.
 */
const AVAILABILITY = `CROSS JOIN (SELECT CAST(:from AS timestamptz) AS win_start, CAST(:to AS timestamptz) AS win_end, CAST(:now AS timestamptz) AS now) w
    LEFT JOIN LATERAL (
      SELECT 1 AS hit FROM bookings b
      WHERE b.vehicle_id = l.id AND b.status IN ('confirmed', 'active') AND b.pickup_at < w.win_end
        AND (b.dropoff_at > w.win_start OR (b.status = 'active' AND w.now > w.win_start))
      LIMIT 1
    ) bk ON true
    LEFT JOIN LATERAL (
      SELECT 1 AS hit FROM maintenance m WHERE m.vehicle_id = l.id AND m.starts_at < w.win_end AND m.ends_at > w.win_start LIMIT 1
    ) mt ON true`;

/**
 * The page as JSON text, built by PostgreSQL (concatenation: see jsonObjectText) and handed over as text, which the
 * API sends as it is: Node neither parses the rows nor serialises them again. Keys and their order are the
 * document's VehicleRow; `available` only with a window (AVAILABILITY).
 */
function pageAsJson(page: string, window: boolean): string {
  const row = jsonObjectText([
    ['id', jsonValue.plainString('l.id')],
    ['make', jsonValue.string('l.make')],
    ['model', jsonValue.string('l.model')],
    ['plate', jsonValue.string('l.plate')],
    ['category', jsonValue.string('l.category')],
    ['dailyRate', jsonValue.number('l.daily_rate')],
    ...(window
      ? [
          ['available', jsonValue.boolean(`l.state = 'active' AND bk.hit IS NULL AND mt.hit IS NULL`)] as [
            string,
            string,
          ],
        ]
      : []),
  ]);
  // The rows are numbered in the order: the page is rows 1 to limit, and its last one's keys are `next` when a row
  // follows it.
  const order = pageOf('l', 'make, model, plate', ['l.make', 'l.model', 'l.plate']);
  return `
    SELECT ${jsonObjectText([['rows', jsonArrayText(row, 'l.make, l.model, l.plate', order.inPage)]])} AS body, ${order.next} AS next
    FROM (SELECT p.*, ${order.number} FROM (${page}) p) l
    ${window ? AVAILABILITY : ''}
    `;
}
