import fs from 'node:fs';
import type { Knex } from 'knex';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { progressReporter, type ProgressOptions } from '../../progress.js';
import { deferRollups, finishDeferredRollups } from '../../db/bulk-load.js';
import { findWorkspace } from '../workspaces.js';
import { recordAudit } from '../audit.js';
import { reaches, type Actor } from '../actor.js';
import { InputError, NotFoundError } from '../../errors.js';
import type {
  Booking,
  FleetImportDocument,
  Installment,
  Integration,
  Maintenance,
  Payment,
} from '../../../generated/import-document.js';
import { validators } from '../../contract/validators.js';
import { loadImportSchema } from '../../contract/document.js';

/** An import file that cannot be loaded: unreadable, not JSON, not valid against the schema, or refused by the database. */
export class ImportError extends InputError {}

/** The database refused one record: `at` is where it is (`/bookings/17/plate`, `/upsert/payments/2`, `line 18: /record`). */
export class RecordError extends ImportError {
  constructor(
    readonly at: string,
    readonly problem: string,
  ) {
    super(`import failed at ${at}: ${problem}`);
  }
}

export type DocumentKey = keyof FleetImportDocument & string;
export type ImportRecord = Record<string, unknown> & { id: string };

/** Rows per INSERT statement: well under PostgreSQL's 65535 bind parameters for the widest entity (15 columns). */
export const CHUNK_SIZE = 1000;

export interface EntitySpec {
  key: DocumentKey;
  /** Singular noun for messages ("no fleet ... in this workspace"). */
  noun: string;
  /** Fills the defaults the schema leaves to the importer. */
  withDefaults?: (record: never) => object;
}

// Dependency order: every entity comes after the ones it references. Tables are the keys in snake_case.
export const ENTITIES: EntitySpec[] = [
  { key: 'owners', noun: 'owner' },
  { key: 'fleets', noun: 'fleet' },
  { key: 'vehicles', noun: 'vehicle' },
  { key: 'maintenance', noun: 'maintenance block' },
  { key: 'vehicleDocuments', noun: 'vehicle document' },
  { key: 'customers', noun: 'customer' },
  {
    key: 'bookings',
    noun: 'booking',
    // A booking never extended still ends where it was first booked to end.
    withDefaults: (b: Booking) => ({ ...b, originalDropoffAt: b.originalDropoffAt ?? b.dropoffAt }),
  },
  { key: 'extensions', noun: 'extension' },
  { key: 'invoices', noun: 'invoice' },
  { key: 'payments', noun: 'payment', withDefaults: (p: Payment) => ({ ...p, status: p.status ?? 'captured' }) },
  { key: 'installments', noun: 'installment' },
  { key: 'expenses', noun: 'expense' },
  { key: 'fines', noun: 'fine' },
  { key: 'integrations', noun: 'integration' },
];

/**
 * The table-level CHECK constraints that span several fields (the schema cannot express them), with the field to
 * blame and a test that finds the offending record. Single-field checks never fire: the schema rules them out.
 */
export const CROSS_FIELD_CHECKS: Record<
  string,
  { field: string; rule: string; violatedBy: (record: never) => boolean }
> = {
  maintenance_check: {
    field: 'endsAt',
    rule: 'endsAt must be later than startsAt',
    violatedBy: (m: Maintenance) => Date.parse(m.endsAt) <= Date.parse(m.startsAt),
  },
  bookings_check: {
    field: 'dropoffAt',
    rule: 'dropoffAt must be later than pickupAt',
    violatedBy: (b: Booking) => Date.parse(b.dropoffAt) <= Date.parse(b.pickupAt),
  },
  installments_check: {
    field: 'number',
    rule: 'number must not be greater than of',
    violatedBy: (i: Installment) => i.number > i.of,
  },
  integrations_check: {
    field: 'failingSince',
    rule: 'a failing integration needs failingSince',
    violatedBy: (i: Integration) => i.status === 'failing' && i.failingSince == null,
  },
};

/** Unique keys whose column is derived from a field: the plate is unique ignoring spaces and case. */
const DERIVED_UNIQUE_COLUMNS: Record<string, { field: string; normalize: (value: string) => string }> = {
  plate_key: { field: 'plate', normalize: (plate) => plate.replaceAll(' ', '').toLowerCase() },
};

export const snakeCase = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camelCase = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

interface CompiledSchema {
  validate: ValidateFunction<FleetImportDocument>;
  /**
   * For each document key, the fields its records may carry: the columns written, absent ones as null (`version` is
   * not a column: it is kept in record_versions, src/core/import/versions.ts).
   */
  fieldsByKey: Map<string, string[]>;
}

let compiled: CompiledSchema | undefined;

export function compiledSchema(): CompiledSchema {
  if (compiled) return compiled;
  const schema = loadImportSchema() as {
    properties: Record<string, { items: { $ref: string } }>;
    $defs: Record<string, { properties: object }>;
  };
  const fieldsByKey = new Map<string, string[]>();
  for (const { key } of ENTITIES) {
    const definition = String(schema.properties[key].items.$ref).replace('#/$defs/', '');
    fieldsByKey.set(
      key,
      Object.keys(schema.$defs[definition].properties).filter((field) => field !== 'version'),
    );
  }
  compiled = { validate: validators.ImportDocument as ValidateFunction<FleetImportDocument>, fieldsByKey };
  return compiled;
}

/** One line naming the first bad path and what is wrong with it. */
export function describeSchemaError(error: ErrorObject): string {
  const at = (suffix?: string) =>
    suffix === undefined ? error.instancePath || '/' : `${error.instancePath}/${suffix}`;
  switch (error.keyword) {
    case 'required':
      return `${at(error.params.missingProperty)}: is required`;
    case 'additionalProperties':
      return `${at(error.params.additionalProperty)}: is not a known field`;
    case 'enum':
      return `${at()}: must be one of ${(error.params.allowedValues as unknown[]).join(', ')}`;
    default:
      return `${at()}: ${error.message}`;
  }
}

function validateDocument(doc: unknown): FleetImportDocument {
  const { validate } = compiledSchema();
  if (!validate(doc)) {
    throw new ImportError(`invalid import document at ${describeSchemaError(validate.errors![0])}`);
  }
  // Two records with one id in the same statement would make PostgreSQL refuse the whole upsert without saying
  // which; refusing here names both.
  for (const { key } of ENTITIES) {
    const seen = new Map<string, number>();
    (doc[key] ?? []).forEach((record, index) => {
      const id = record.id.toLowerCase();
      const first = seen.get(id);
      if (first !== undefined)
        throw new ImportError(
          `invalid import document at /${key}/${index}/id: duplicate id (also at /${key}/${first}/id)`,
        );
      seen.set(id, index);
    });
  }
  return doc;
}

/**
 * Loads `doc` into the workspace in one transaction. Into a workspace that holds no records yet (a first import),
 * the running totals are computed once at the end instead of by the triggers chunk by chunk (src/db/bulk-load.ts).
 */
export async function importDocument(
  db: Knex,
  actor: Actor,
  input: ProgressOptions & { workspace: string; document: unknown },
): Promise<{ imported: Record<string, number> }> {
  const { workspace: workspaceSlug, document: doc, ...options } = input;
  const document = validateDocument(doc);
  const workspace = await findWorkspace(db, workspaceSlug);
  // out of reach reads as not there, by the name asked for: the refusal must not give away the other workspace's id
  if (!reaches(actor, workspace.id)) throw new NotFoundError(`no workspace with slug "${workspaceSlug}"`);
  const { fieldsByKey } = compiledSchema();
  const imported: Record<string, number> = {};
  const total = ENTITIES.reduce((sum, entity) => sum + (document[entity.key]?.length ?? 0), 0);
  const progress = progressReporter('import', 'records', total, options);
  try {
    await db.transaction(async (trx) => {
      const deferred = await deferRollups(trx, workspace.id);
      for (const entity of ENTITIES) {
        const records = document[entity.key] as ImportRecord[] | undefined;
        if (!records) continue;
        const fields = fieldsByKey.get(entity.key)!;
        for (let offset = 0; offset < records.length; offset += CHUNK_SIZE) {
          const chunk = records.slice(offset, offset + CHUNK_SIZE);
          await upsertChunk(trx, { entity, fields, workspaceId: workspace.id, workspaceSlug, records: chunk, offset });
          progress.step(entity.key, chunk.length);
        }
        imported[entity.key] = records.length;
      }
      if (deferred) {
        progress.step('running totals', 0);
        await finishDeferredRollups(trx, workspace.id);
      }
      // what was loaded, by entity (counts only: the records are the workspace's own data, not the trail's)
      await recordAudit(trx, actor.audit, {
        action: 'workspace.import',
        workspaceId: workspace.id,
        target: { type: 'workspace', id: workspace.id },
        changes: { imported },
      });
    });
  } finally {
    progress.stop();
  }
  return { imported };
}

export interface Chunk {
  entity: EntitySpec;
  fields: string[];
  workspaceId: string;
  workspaceSlug: string;
  records: ImportRecord[];
  /** Index of the first of `records` in its document array, for error paths. */
  offset: number;
  /** What stands before `/<key>/<index>` in an error path (`/upsert` in a batch write). */
  prefix?: string;
  /** The index in the document of each of `records`, where they are not consecutive from `offset`. */
  indexes?: number[];
  /** Where a record's field is, for errors, where the records do not come from one document array (a stream's lines). */
  pathOf?: (index: number, field: string) => string;
}

/**
 * Upserts a chunk of one entity's records. With `changedOnly`, a record equal to its row is left alone (no write, no
 * trigger work) and the ids returned are those inserted or changed; the caller then checks ids of other workspaces
 * itself (writeRecords does, before writing).
 */
export async function upsertChunk(trx: Knex.Transaction, c: Chunk, changedOnly = false): Promise<string[]> {
  const table = snakeCase(c.entity.key);
  const columns = c.fields.map(snakeCase);
  const rows = c.records.map((record) => {
    const filled = (c.entity.withDefaults?.(record as never) ?? record) as Record<string, unknown>;
    const row: Record<string, unknown> = { workspace_id: c.workspaceId };
    for (const field of c.fields) row[snakeCase(field)] = filled[field] ?? null;
    return row;
  });
  // The WHERE keeps a row of another workspace untouched; such a row is then missing from RETURNING.
  const merged = columns.filter((column) => column !== 'id');
  const write = (some: Record<string, unknown>[]): Promise<{ id: string }[]> => {
    const statement = trx(table)
      .insert(some)
      .onConflict('id')
      .merge(merged)
      .where(`${table}.workspace_id`, trx.ref('excluded.workspace_id'));
    if (changedOnly) {
      const list = (prefix: string) => merged.map((column) => `${prefix}."${column}"`).join(', ');
      statement.whereRaw(`(${list(table)}) IS DISTINCT FROM (${list('excluded')})`);
    }
    return statement.returning('id');
  };
  let returned: { id: string }[];
  // (a savepoint, so that a data error no constraint names can be traced to its record: see firstFailingRecord)
  await trx.raw('SAVEPOINT upsert_chunk');
  try {
    returned = await write(rows);
  } catch (err) {
    if (!isDataError(err)) throw err;
    const named = databaseErrorToImportError(err, c);
    if (named instanceof ImportError) throw named;
    await trx.raw('ROLLBACK TO SAVEPOINT upsert_chunk');
    const index = await firstFailingRecord(trx, write, rows);
    throw new RecordError(chunkPath(c, index, 'id').replace(/\/id$/, ''), dataErrorReason(err as PgError));
  }
  await trx.raw('RELEASE SAVEPOINT upsert_chunk');
  if (changedOnly) return returned.map((row) => row.id);
  if (returned.length < rows.length) {
    const written = new Set(returned.map((row) => row.id));
    const index = c.records.findIndex((record) => !written.has(record.id.toLowerCase()));
    throw new ImportError(
      `import failed at ${c.pathOf?.(index, 'id') ?? `${c.prefix ?? ''}/${c.entity.key}/${c.offset + index}/id`}: id belongs to another workspace`,
    );
  }
  return returned.map((row) => row.id);
}

/** Where a record's field is, for errors. */
const chunkPath = (c: Chunk, index: number, field: string) =>
  c.pathOf?.(index, field) ?? `${c.prefix ?? ''}/${c.entity.key}/${c.indexes?.[index] ?? c.offset + index}/${field}`;

/** A data exception (SQLSTATE class 22) or an integrity constraint violation (23): the records' fault, not the service's. */
const isDataError = (err: unknown) =>
  typeof (err as PgError)?.code === 'string' && /^2[23]/.test((err as PgError).code!);

/**
 * The index of the record that makes the chunk fail: the shortest failing prefix, found by halving (about 10 statements
 * for 1,000 records, each rolled back), so that a record failing only beside an earlier one of the chunk is found too.
 * Runs only after the whole chunk failed, inside the transaction that is failing anyway.
 */
async function firstFailingRecord(
  trx: Knex.Transaction,
  write: (rows: Record<string, unknown>[]) => Promise<unknown>,
  rows: Record<string, unknown>[],
): Promise<number> {
  // (a prefix of `ok` records is written without error; one of `fails` is not)
  let ok = 0;
  let fails = rows.length;
  while (fails - ok > 1) {
    const middle = (ok + fails) >> 1;
    await trx.raw('SAVEPOINT upsert_probe');
    try {
      await write(rows.slice(0, middle));
      ok = middle;
    } catch (err) {
      if (!isDataError(err)) throw err;
      fails = middle;
    }
    await trx.raw('ROLLBACK TO SAVEPOINT upsert_probe');
    await trx.raw('RELEASE SAVEPOINT upsert_probe');
  }
  return fails - 1;
}

/**
 * What a data error no constraint of ours names means, in the caller's words: never the database's own message, which
 * names tables, columns and constraints of the schema (and may quote values).
 */
function dataErrorReason(err: PgError): string {
  const reasons: Record<string, string> = {
    '22001': 'a text is longer than the service stores',
    '22003': 'a number is beyond what the service stores',
    '22007': 'a date or time is not one the service can store',
    '22008': 'a date or time is out of the range the service stores',
    '22P02': "a value is not of its field's type",
    '23502': 'a field that must be given is missing',
    '23503': 'it refers to a record that does not exist',
    '23505': 'it repeats a value that must be unique',
    '23514': 'it breaks a rule of its record',
    '23P01': 'it overlaps another record',
  };
  return `the record cannot be stored: ${reasons[err.code ?? ''] ?? (err.code?.startsWith('22') ? 'a value is not one the service can store' : "it conflicts with the workspace's records")}`;
}

interface PgError {
  code?: string;
  constraint?: string;
  detail?: string;
  message: string;
}

/** Parses `Key (a, b)=(x, y) ...` from a constraint error's detail into the non-workspace column and its value. */
function violatedKey(detail: string | undefined): { column: string; value: string } | undefined {
  const match = /^Key \(([^)]*)\)=\((.*?)\) /.exec(detail ?? '');
  if (!match) return undefined;
  const columns = match[1].split(', ');
  const values = match[2].split(', ');
  const at = columns.findIndex((column) => column !== 'workspace_id');
  // Values are uuids, codes, numbers or plate keys; a comma inside one would misalign them, so give up then.
  if (at < 0 || columns.length !== values.length) return undefined;
  return { column: columns[at], value: values[at] };
}

/**
 * Turns a constraint violation into one line naming the record (its path in the document) and what the constraint
 * means (an ImportError). Anything else, a data error whose record it cannot tell included, is passed on unchanged
 * (upsertChunk finds the record of the latter).
 */
export function databaseErrorToImportError(err: unknown, c: Chunk): Error {
  const pgError = err as PgError;
  if (!isDataError(err)) return err as Error;
  const { noun } = c.entity;
  const pathOf = (index: number, field: string) => chunkPath(c, index, field);
  const valueOf = (record: ImportRecord, field: string) => String(record[field] ?? '').toLowerCase();

  if (pgError.code === '23503') {
    // Key (workspace_id, fleet_id)=(..., ...) is not present in table "fleets".
    const violation = violatedKey(pgError.detail);
    const referenced = /table "([^"]+)"/.exec(pgError.detail ?? '')?.[1];
    if (violation) {
      const field = camelCase(violation.column);
      const index = c.records.findIndex((record) => valueOf(record, field) === violation.value.toLowerCase());
      const target = ENTITIES.find((e) => snakeCase(e.key) === referenced)?.noun ?? referenced ?? 'record';
      if (index >= 0) {
        return new RecordError(
          pathOf(index, field),
          `no ${target} ${violation.value} in workspace "${c.workspaceSlug}" (neither in the file nor imported before)`,
        );
      }
    }
  }

  if (pgError.code === '23505') {
    // Key (workspace_id, plate_key)=(..., dubaia12345) already exists.
    const violation = violatedKey(pgError.detail);
    if (violation) {
      const derived = DERIVED_UNIQUE_COLUMNS[violation.column];
      const field = derived?.field ?? camelCase(violation.column);
      const normalize = derived?.normalize ?? ((value: string) => value);
      const holds = (record: ImportRecord) =>
        normalize(String(record[field] ?? '')).toLowerCase() === violation.value.toLowerCase();
      // Blame the last record holding the value: within the file, the earlier one was accepted first.
      let index = c.records.length - 1;
      while (index >= 0 && !holds(c.records[index])) index--;
      if (index >= 0) {
        return new RecordError(
          pathOf(index, field),
          `${field} "${String(c.records[index][field])}" is already used by another ${noun} in workspace "${c.workspaceSlug}"`,
        );
      }
    }
  }

  if (pgError.code === '23514' && pgError.constraint) {
    const check = CROSS_FIELD_CHECKS[pgError.constraint];
    const index = check ? c.records.findIndex((record) => check.violatedBy(record as never)) : -1;
    if (check && index >= 0) return new RecordError(pathOf(index, check.field), check.rule);
  }

  return err as Error;
}

/** Reads and parses an import file; the document itself is checked by importDocument. */
export function readImportFile(file: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new ImportError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ImportError(`${file} is not valid JSON: ${(err as Error).message}`);
  }
}
