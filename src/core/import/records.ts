import type { Knex } from 'knex';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { createSchemaAjv, schemaRef } from '../../contract/document.js';
import { recordAudit } from '../audit.js';
import { mustReach, type Actor } from '../actor.js';
import { ConflictError, FieldError, InputError, TooLargeError } from '../../errors.js';
import { findWorkspace } from '../workspaces.js';
import { checkEvent, recordEvent } from '../../webhooks/record-event.js';
import {
  compiledSchema,
  CROSS_FIELD_CHECKS,
  describeSchemaError,
  ENTITIES,
  RecordError,
  snakeCase,
  upsertChunk,
  CHUNK_SIZE,
  type DocumentKey,
  type EntitySpec,
  type ImportRecord,
} from './import-document.js';
import { applyVersions, markHistory, type Versioned } from './versions.js';
import { keepUpkeepInline } from '../../db/upkeep.js';

// Batch writes (writeRecords in openapi/admin.yaml): records upserted and deleted, and events published, in one
// transaction, so that the records, their running totals, the events and their deliveries commit together or not at
// all. The admin API and any other client call writeRecords; nothing of it lives in a client.

/** At most this many records (upserts and deletes together) in one batch. */
export const MAX_BATCH_RECORDS = 5000;
/** At most this many bytes in one batch's body. */
export const MAX_BATCH_BYTES = 8 * 1024 * 1024;
/** At most this many bad records are named in one refusal. */
export const MAX_NAMED_ERRORS = 20;

/** A batch over a limit (records or bytes); nothing was done. */
export class BatchTooLargeError extends TooLargeError {}

/** Records that are not valid: `problems` names each by JSON pointer (`/upsert/bookings/17/pickupAt: ...`). */
export class InvalidRecordsError extends FieldError {
  constructor(readonly problems: string[]) {
    super(
      `${problems.length === 1 ? '1 record is' : `${problems.length >= MAX_NAMED_ERRORS ? `at least ${problems.length}` : problems.length} records are`} invalid; nothing was written: ${problems.join('; ')}`,
      problems[0].split(':')[0],
    );
  }
}

/** A refusal of the batch as a whole for what it points at (`missing_reference`, `dependent_records`). */
export class RecordConflictError extends ConflictError {
  constructor(
    readonly code: 'missing_reference' | 'dependent_records',
    readonly problems: string[],
  ) {
    super(`${problems.join('; ')}; nothing was written`, problems[0].split(':')[0], code);
  }
}

/** Each reference a record makes: the field, and the document key of the record it names. */
export const REFERENCES: Partial<Record<DocumentKey, Array<{ field: string; parent: DocumentKey }>>> = {
  fleets: [{ field: 'ownerId', parent: 'owners' }],
  vehicles: [{ field: 'fleetId', parent: 'fleets' }],
  maintenance: [{ field: 'vehicleId', parent: 'vehicles' }],
  vehicleDocuments: [{ field: 'vehicleId', parent: 'vehicles' }],
  bookings: [
    { field: 'customerId', parent: 'customers' },
    { field: 'vehicleId', parent: 'vehicles' },
  ],
  extensions: [{ field: 'bookingId', parent: 'bookings' }],
  invoices: [
    { field: 'customerId', parent: 'customers' },
    { field: 'bookingId', parent: 'bookings' },
  ],
  payments: [
    { field: 'customerId', parent: 'customers' },
    { field: 'bookingId', parent: 'bookings' },
    { field: 'invoiceId', parent: 'invoices' },
  ],
  installments: [
    { field: 'bookingId', parent: 'bookings' },
    { field: 'invoiceId', parent: 'invoices' },
  ],
  expenses: [{ field: 'vehicleId', parent: 'vehicles' }],
  fines: [
    { field: 'vehicleId', parent: 'vehicles' },
    { field: 'bookingId', parent: 'bookings' },
    { field: 'customerId', parent: 'customers' },
  ],
};

export interface BatchEvent {
  event: string;
  data: unknown;
  dedupeKey?: string;
}

export interface RecordBatch {
  upsert?: Partial<Record<DocumentKey, Array<ImportRecord & { version?: number }>>>;
  delete?: Partial<Record<DocumentKey, Array<{ id: string; version?: number }>>>;
  events?: BatchEvent[];
  /** The records are history (a backfill): the service raises no derived events for them (`frs.history`). */
  history?: boolean;
}

export type CountsByKey = Partial<Record<DocumentKey, number>>;

export interface BatchResult {
  upserted: CountsByKey;
  unchanged: CountsByKey;
  stale: CountsByKey;
  deleted: CountsByKey;
  /** The ids of the events recorded (an event whose dedupeKey was already recorded: the existing one's). */
  events: string[];
}

/** Counters of what batch writes and import jobs did (src/observability/metrics.ts registers them). */
export interface RecordMetrics {
  written: { inc(labels: { key: string; operation: 'upsert' | 'delete' }, value: number): void };
  stale: { inc(labels: { key: string }, value: number): void };
  refused: { inc(labels: { reason: string }, value?: number): void };
}

let batchValidator: ValidateFunction | undefined;

/**
 * The batch body's schema errors (RecordsWrite in openapi/admin.yaml, the import document by reference): the first
 * error of each bad record, at most MAX_NAMED_ERRORS records, else the body's first error. Checked without allErrors
 * (one record of a million unknown members costs one error, not a million): the whole body first, then, only when it
 * is bad, one record at a time (each in a body of its own, its pointer put back) until enough are named.
 */
function validateBatchShape(body: unknown): ErrorObject[] {
  batchValidator ??= createSchemaAjv({ allErrors: false }, 'strict', 'admin').getSchema(
    schemaRef('RecordsWrite', 'admin'),
  )!;
  if (batchValidator(body)) return [];
  const first = batchValidator.errors ?? [];
  const errors: ErrorObject[] = [];
  const batch = body as Record<string, unknown> | null;
  const item = (wrapped: unknown, at: string, inner: string) => {
    if (errors.length >= MAX_NAMED_ERRORS || batchValidator!(wrapped)) return;
    const error = batchValidator!.errors![0];
    errors.push({
      ...error,
      instancePath: error.instancePath.startsWith(inner)
        ? at + error.instancePath.slice(inner.length)
        : error.instancePath,
    });
  };
  if (batch && typeof batch === 'object' && !Array.isArray(batch)) {
    for (const member of ['upsert', 'delete'] as const) {
      const section = batch[member];
      if (!section || typeof section !== 'object' || Array.isArray(section)) continue;
      for (const [key, list] of Object.entries(section)) {
        if (!Array.isArray(list)) continue;
        list.forEach((record, index) =>
          item({ [member]: { [key]: [record] } }, `/${member}/${key}/${index}`, `/${member}/${key}/0`),
        );
      }
    }
    if (Array.isArray(batch.events))
      batch.events.forEach((event, index) => item({ events: [event] }, `/events/${index}`, '/events/0'));
  }
  // (an error outside every record, such as an unknown member of the body, is named too)
  const outside = first.filter((e) => !/^\/(?:(?:upsert|delete)\/[^/]+|events)\/\d+(?:\/|$)/.test(e.instancePath));
  return errors.length > 0 ? [...outside, ...errors] : first;
}

/** The record a schema error is in (`/upsert/bookings/17`), so that one record is named once. */
const recordOf = (pointer: string) => pointer.split('/').slice(0, 4).join('/');

/** Every problem of the batch found without the database, at most MAX_NAMED_ERRORS, each naming its JSON pointer. */
function batchProblems(body: unknown): string[] {
  const problems: string[] = [];
  const named = new Set<string>();
  const add = (record: string, problem: string) => {
    if (named.has(record) || problems.length >= MAX_NAMED_ERRORS) return;
    named.add(record);
    problems.push(problem);
  };
  for (const error of validateBatchShape(body)) {
    const problem = describeSchemaError(error);
    add(recordOf(problem.split(':')[0]), problem);
  }
  if (problems.length > 0) return problems;
  const batch = body as RecordBatch;
  for (const { key } of ENTITIES) {
    const seen = new Map<string, string>();
    const records = batch.upsert?.[key] ?? [];
    records.forEach((record, index) => {
      const at = `/upsert/${key}/${index}`;
      for (const [, check] of Object.entries(CROSS_FIELD_CHECKS)) {
        if (CROSS_FIELD_CHECKS_BY_KEY[key]?.includes(check) && check.violatedBy(record as never))
          add(at, `${at}/${check.field}: ${check.rule}`);
      }
      const id = record.id.toLowerCase();
      const first = seen.get(id);
      if (first !== undefined) add(at, `${at}/id: duplicate id (also at ${first}/id)`);
      seen.set(id, at);
    });
    (batch.delete?.[key] ?? []).forEach((record, index) => {
      const at = `/delete/${key}/${index}`;
      const id = record.id.toLowerCase();
      const first = seen.get(id);
      if (first !== undefined) add(at, `${at}/id: duplicate id (also at ${first}/id)`);
      seen.set(id, at);
    });
  }
  (batch.events ?? []).forEach((event, index) => {
    try {
      checkEvent(event.event, event.data, event.dedupeKey);
    } catch (err) {
      if (!(err instanceof InputError)) throw err;
      add(`/events/${index}`, `/events/${index}: ${err.message}`);
    }
  });
  return problems;
}

/** The cross-field checks by the key whose records they concern (the constraint is named after its table). */
const CROSS_FIELD_CHECKS_BY_KEY: Partial<Record<DocumentKey, Array<(typeof CROSS_FIELD_CHECKS)[string]>>> =
  Object.fromEntries(
    ENTITIES.map(({ key }) => [
      key,
      Object.entries(CROSS_FIELD_CHECKS)
        .filter(([name]) => name === `${snakeCase(key)}_check`)
        .map(([, check]) => check),
    ]),
  );

/** How many records a batch holds (upserts and deletes), for the limit; counted before the schema is checked. */
export function batchRecordCount(body: unknown): number {
  let count = 0;
  for (const member of ['upsert', 'delete'] as const) {
    const section = (body as Record<string, unknown> | null)?.[member];
    if (section && typeof section === 'object')
      for (const list of Object.values(section)) if (Array.isArray(list)) count += list.length;
  }
  return count;
}

interface Planned {
  entity: EntitySpec;
  /** Upserts to write (versions allowed them, or they carry none), with their index in the request. */
  upserts: Array<{ record: ImportRecord; index: number; versioned: boolean }>;
  deletes: Array<{ id: string; index: number; versioned: boolean }>;
}

const addCount = (counts: CountsByKey, key: DocumentKey, n: number) => {
  if (n > 0) counts[key] = (counts[key] ?? 0) + n;
};

/**
 * Writes one batch into the workspace `workspaceId`, all or nothing (see RecordBatch). Refuses, changing nothing:
 * BatchTooLargeError (over MAX_BATCH_RECORDS), InvalidRecordsError (400: every bad record by pointer),
 * RecordConflictError (409: a reference to nothing, or a delete that leaves records pointing at it), NotFoundError
 * (no such workspace). `db` may be a transaction (the caller's Idempotency-Key row is then in it).
 */
export async function writeRecords(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; body: unknown; metrics?: RecordMetrics },
): Promise<BatchResult> {
  const { workspaceId, body } = input;
  mustReach(actor, workspaceId);
  const options = { audit: actor.audit, metrics: input.metrics };
  const refuse = (reason: string, err: Error) => {
    options.metrics?.refused.inc({ reason }, Math.max(1, batchRecordCount(body)));
    return err;
  };
  const batch = checkedBatch(body, refuse);
  const workspace = await findWorkspace(db, { id: workspaceId });
  const result: BatchResult = { upserted: {}, unchanged: {}, stale: {}, deleted: {}, events: [] };

  try {
    await db.transaction(async (trx) => {
      // the batch's totals commit with its records (src/db/upkeep.ts)
      await keepUpkeepInline(trx);
      if (batch.history) await markHistory(trx);
      const plans: Planned[] = [];
      for (const entity of ENTITIES) {
        const plan = await planEntity(trx, workspace.id, entity, batch, result);
        if (plan) plans.push(plan);
      }

      await refuseMissingReferences(trx, workspace.id, plans);
      await refuseDependents(trx, workspace.id, plans);
      await writeUpserts(trx, workspace, plans, result);
      await writeDeletes(trx, workspace.id, plans, result);

      for (const event of batch.events ?? []) {
        const published = await recordEvent(trx, {
          workspaceId: workspace.id,
          event: event.event,
          data: event.data,
          dedupeKey: event.dedupeKey,
          source: 'publish',
        });
        result.events.push(published.eventId);
      }
      // Counts only: the records are the workspace's data, not the trail's.
      {
        await recordAudit(trx, options.audit, {
          action: 'workspace.records_write',
          workspaceId: workspace.id,
          target: { type: 'workspace', id: workspace.id },
          changes: {
            upserted: result.upserted,
            unchanged: result.unchanged,
            stale: result.stale,
            deleted: result.deleted,
            events: result.events.length,
            history: batch.history === true,
          },
        });
      }
    });
  } catch (err) {
    if (err instanceof RecordConflictError) throw refuse(err.code, err);
    // A record the database refused (src/core/import/importDocument.ts), named by its pointer as the others are.
    if (err instanceof RecordError) throw refuse('invalid', new InvalidRecordsError([`${err.at}: ${err.problem}`]));
    if (err instanceof InputError) throw refuse('invalid', err);
    throw err;
  }
  if (options.metrics) countWritten(options.metrics, result);
  return result;
}

/** The batch, once within MAX_BATCH_RECORDS and valid; else the refusal, counted by `refuse`. */
function checkedBatch(body: unknown, refuse: (reason: string, err: Error) => Error): RecordBatch {
  const total = batchRecordCount(body);
  if (total > MAX_BATCH_RECORDS) {
    throw refuse(
      'too_large',
      new BatchTooLargeError(
        `A batch holds at most ${MAX_BATCH_RECORDS} records (upserts and deletes together); this one holds ${total}. Send the rest in another batch, or a large load as an import job.`,
      ),
    );
  }
  const problems = batchProblems(body ?? {});
  if (problems.length > 0) throw refuse('invalid', new InvalidRecordsError(problems));
  return (body ?? {}) as RecordBatch;
}

/**
 * What the batch does to one entity's records, once their versions are applied (versions.ts): the upserts and
 * deletes their versions allow, or that carry none. Stale and unchanged versions are counted in `result`.
 */
async function planEntity(
  trx: Knex.Transaction,
  workspaceId: string,
  entity: EntitySpec,
  batch: RecordBatch,
  result: BatchResult,
): Promise<Planned | undefined> {
  const upserts = (batch.upsert?.[entity.key] ?? []) as Array<ImportRecord & { version?: number }>;
  const deletes = batch.delete?.[entity.key] ?? [];
  if (upserts.length === 0 && deletes.length === 0) return undefined;
  await refuseOtherWorkspaces(
    trx,
    workspaceId,
    entity,
    upserts.map((r, index) => ({ id: r.id, at: `/upsert/${entity.key}/${index}/id` })),
  );
  const versioned: Versioned[] = [
    ...upserts.flatMap((r, index) =>
      r.version === undefined ? [] : [{ id: r.id, version: r.version, deleting: false, index }],
    ),
    ...deletes.flatMap((r, index) =>
      r.version === undefined ? [] : [{ id: r.id, version: r.version, deleting: true, index }],
    ),
  ];
  const unversioned = {
    upserts: upserts.filter((r) => r.version === undefined).map((r) => r.id),
    deletes: deletes.filter((r) => r.version === undefined).map((r) => r.id),
  };
  const outcome = await applyVersions(trx, workspaceId, entity.key, versioned, unversioned);
  addCount(result.stale, entity.key, outcome.stale.length);
  addCount(result.unchanged, entity.key, outcome.unchanged.length);
  const allowed = new Set(outcome.applied.map((v) => `${v.deleting}:${v.index}`));
  return {
    entity,
    upserts: upserts.flatMap((record, index) =>
      record.version === undefined || allowed.has(`false:${index}`)
        ? [{ record, index, versioned: record.version !== undefined }]
        : [],
    ),
    deletes: deletes.flatMap((record, index) =>
      record.version === undefined || allowed.has(`true:${index}`)
        ? [{ id: record.id, index, versioned: record.version !== undefined }]
        : [],
    ),
  };
}

/** The planned upserts, parents before children, in chunks of CHUNK_SIZE; written and unchanged counted. */
async function writeUpserts(
  trx: Knex.Transaction,
  workspace: { id: string; slug: string },
  plans: Planned[],
  result: BatchResult,
): Promise<void> {
  const { fieldsByKey } = compiledSchema();
  for (const plan of plans) {
    const fields = fieldsByKey.get(plan.entity.key)!;
    for (let offset = 0; offset < plan.upserts.length; offset += CHUNK_SIZE) {
      const chunk = plan.upserts.slice(offset, offset + CHUNK_SIZE);
      const changed = new Set(
        await upsertChunk(
          trx,
          {
            entity: plan.entity,
            fields,
            workspaceId: workspace.id,
            workspaceSlug: workspace.slug,
            records: chunk.map((u) => u.record),
            offset: 0,
            prefix: '/upsert',
            indexes: chunk.map((u) => u.index),
          },
          true,
        ),
      );
      // A versioned record whose version moved on was written even where its fields were the same.
      const written = chunk.filter((u) => changed.has(u.record.id.toLowerCase()) || u.versioned).length;
      addCount(result.upserted, plan.entity.key, written);
      addCount(result.unchanged, plan.entity.key, chunk.length - written);
    }
  }
}

/** The planned deletes, after the upserts and children before parents; deleted and unchanged counted. */
async function writeDeletes(
  trx: Knex.Transaction,
  workspaceId: string,
  plans: Planned[],
  result: BatchResult,
): Promise<void> {
  for (const plan of [...plans].reverse()) {
    if (plan.deletes.length === 0) continue;
    const table = snakeCase(plan.entity.key);
    const gone = new Set(
      (
        await trx(table)
          .where({ workspace_id: workspaceId })
          .whereIn(
            'id',
            plan.deletes.map((d) => d.id),
          )
          .delete()
          .returning('id')
      ).map((r: { id: string }) => r.id),
    );
    // A versioned delete of a record not there leaves its tombstone: it is a change (a late upsert stays out).
    const deleted = plan.deletes.filter((d) => gone.has(d.id.toLowerCase()) || d.versioned).length;
    addCount(result.deleted, plan.entity.key, deleted);
    addCount(result.unchanged, plan.entity.key, plan.deletes.length - deleted);
  }
}

function countWritten(metrics: RecordMetrics, result: BatchResult): void {
  for (const [key, n] of Object.entries(result.upserted)) metrics.written.inc({ key, operation: 'upsert' }, n);
  for (const [key, n] of Object.entries(result.deleted)) metrics.written.inc({ key, operation: 'delete' }, n);
  for (const [key, n] of Object.entries(result.stale)) metrics.stale.inc({ key }, n);
}

/** An id of another workspace's record cannot be written here (ids are unique across workspaces). */
async function refuseOtherWorkspaces(
  trx: Knex,
  workspaceId: string,
  entity: EntitySpec,
  ids: Array<{ id: string; at: string }>,
): Promise<void> {
  if (ids.length === 0) return;
  const foreign = new Set(
    (
      await trx(snakeCase(entity.key))
        .whereIn(
          'id',
          ids.map((i) => i.id),
        )
        .whereNot({ workspace_id: workspaceId })
        .select('id')
    ).map((r: { id: string }) => r.id),
  );
  const problems = ids
    .filter((i) => foreign.has(i.id.toLowerCase()))
    .slice(0, MAX_NAMED_ERRORS)
    .map((i) => `${i.at}: id belongs to another workspace`);
  if (problems.length > 0) throw new InvalidRecordsError(problems);
}

/** Refuses (409 missing_reference) a record that points at an id neither in the workspace nor written by the batch. */
async function refuseMissingReferences(trx: Knex, workspaceId: string, plans: Planned[]): Promise<void> {
  const byKey = new Map(plans.map((p) => [p.entity.key, p]));
  const upserted = (key: DocumentKey) => new Set((byKey.get(key)?.upserts ?? []).map((u) => u.record.id.toLowerCase()));
  const deleting = (key: DocumentKey) => new Set((byKey.get(key)?.deletes ?? []).map((d) => d.id.toLowerCase()));
  const problems: string[] = [];
  for (const plan of plans) {
    for (const { field, parent } of REFERENCES[plan.entity.key] ?? []) {
      const inBatch = upserted(parent);
      const gone = deleting(parent);
      const wanted = plan.upserts.filter(
        (u) => typeof u.record[field] === 'string' && !inBatch.has((u.record[field] as string).toLowerCase()),
      );
      if (wanted.length === 0 && gone.size === 0) continue;
      const ids = [...new Set(wanted.map((u) => (u.record[field] as string).toLowerCase()))];
      const there = new Set(
        ids.length === 0
          ? []
          : (await trx(snakeCase(parent)).where({ workspace_id: workspaceId }).whereIn('id', ids).select('id')).map(
              (r: { id: string }) => r.id,
            ),
      );
      const noun = ENTITIES.find((e) => e.key === parent)!.noun;
      for (const u of plan.upserts) {
        const value = u.record[field];
        if (typeof value !== 'string') continue;
        const id = value.toLowerCase();
        if ((inBatch.has(id) || there.has(id)) && !gone.has(id)) continue;
        if (problems.length < MAX_NAMED_ERRORS) {
          problems.push(
            `/upsert/${plan.entity.key}/${u.index}/${field}: no ${noun} ${value} in the workspace or the request${gone.has(id) ? ' (the request deletes it)' : ''}`,
          );
        }
      }
    }
  }
  if (problems.length > 0) throw new RecordConflictError('missing_reference', problems);
}

/** Refuses (409 dependent_records) a delete that would leave records pointing at the deleted one. */
async function refuseDependents(trx: Knex, workspaceId: string, plans: Planned[]): Promise<void> {
  const byKey = new Map(plans.map((p) => [p.entity.key, p]));
  const problems: string[] = [];
  for (const plan of plans) {
    if (plan.deletes.length === 0) continue;
    const deletedIds = plan.deletes.map((d) => d.id.toLowerCase());
    const dependents = new Map<string, string[]>();
    for (const [child, references] of Object.entries(REFERENCES) as Array<
      [DocumentKey, Array<{ field: string; parent: DocumentKey }>]
    >) {
      for (const { field, parent } of references) {
        if (parent !== plan.entity.key) continue;
        const childPlan = byKey.get(child);
        const childDeleted = new Set((childPlan?.deletes ?? []).map((d) => d.id.toLowerCase()));
        // A child the batch moves to another parent no longer points here once written.
        const moved = new Map(
          (childPlan?.upserts ?? []).map((u) => [u.record.id.toLowerCase(), u.record[field] as string | undefined]),
        );
        const column = snakeCase(field);
        const rows: Array<{ id: string; parent: string }> = await trx(snakeCase(child))
          .where({ workspace_id: workspaceId })
          .whereIn(column, deletedIds)
          .select('id', `${column} as parent`)
          .limit(MAX_NAMED_ERRORS + childDeleted.size + moved.size);
        for (const row of rows) {
          if (childDeleted.has(row.id)) continue;
          if (moved.has(row.id) && moved.get(row.id)?.toLowerCase() !== row.parent) continue;
          const list = dependents.get(row.parent) ?? [];
          list.push(`${child} ${row.id}`);
          dependents.set(row.parent, list);
        }
        // Records the batch writes pointing at a record it deletes are refused as missing references instead.
      }
    }
    for (const d of plan.deletes) {
      const list = dependents.get(d.id.toLowerCase());
      if (list && problems.length < MAX_NAMED_ERRORS) {
        problems.push(
          `/delete/${plan.entity.key}/${d.index}: ${plan.entity.noun} ${d.id} is still referenced by ${list.slice(0, 5).join(', ')}${list.length > 5 ? ` and ${list.length - 5} more` : ''} (delete them in the same request, or point them elsewhere)`,
        );
      }
    }
  }
  if (problems.length > 0) throw new RecordConflictError('dependent_records', problems);
}
