import crypto from 'node:crypto';
import type { Knex } from 'knex';
import type { ValidateFunction } from 'ajv';
import { JSONParser } from '@streamparser/json';
import { createSchemaAjv, IMPORT_SCHEMA_ID } from '../../contract/document.js';
import { recordAudit, type AuditContext } from '../audit.js';
import { mustReach, type Actor } from '../actor.js';
import { BusyError, ConflictError, NotFoundError } from '../../errors.js';
import fs from 'node:fs';
import type { Logger } from 'pino';
import { findWorkspace } from '../workspaces.js';
import { progressReporter, type ProgressOptions } from '../../progress.js';
import { deferRollups, finishDeferredRollups } from '../../db/bulk-load.js';
import {
  compiledSchema,
  CROSS_FIELD_CHECKS,
  describeSchemaError,
  ENTITIES,
  ImportError,
  snakeCase,
  upsertChunk,
  CHUNK_SIZE,
  type DocumentKey,
  type EntitySpec,
  type ImportRecord,
} from './import-document.js';
import { applyVersions, markHistory } from './versions.js';
import { INGEST_POOL_MAX } from '../../db/database.js';
import type { CountsByKey, RecordMetrics } from './records.js';
import { failLostImports } from '../../webhooks/lost-imports.js';

// Import jobs (createImport, getImport, cancelImport in openapi/admin.yaml; `fleet-admin import`): an import document
// of any size, read as a stream (JSON, or NDJSON with one {"key", "record"} a line) and written in ONE transaction, so
// a job is all or nothing. Records are checked as they arrive and written 1,000 at a time, parents first; nothing is
// held but the records of the chunk in hand. The job's row (import_jobs) is written beside the transaction, so its
// progress can be read while it runs. The transaction holds an advisory lock named after the job: a job whose process
// died (its connection gone, its transaction rolled back) no longer holds it, and is shown failed.

export type ImportFormat = 'json' | 'ndjson';
export type ImportPhase = 'running' | 'succeeded' | 'failed' | 'canceled';

export interface ImportJob {
  id: string;
  workspaceId: string;
  phase: ImportPhase;
  format: ImportFormat;
  recordsRead: number;
  recordsApplied: number;
  startedAt: string;
  finishedAt: string | null;
  counts: CountsByKey;
  error: string | null;
}

/** How often a running job writes its progress (and learns whether it was canceled). */
const PROGRESS_INTERVAL_MS = 500;
/** Import jobs one workspace may run at once (each holds a connection and a transaction): createImport refuses more. */
export const MAX_RUNNING_IMPORTS = 2;
/**
 * Import jobs one process runs at once, whatever their workspaces: each holds one of the ingest pool's connections for
 * its whole transaction, so two are always left for batch writes, the jobs' progress and reads of jobs. A job over it
 * is refused (ImportsBusyError) before it takes a connection.
 */
export const MAX_RUNNING_IMPORTS_PER_PROCESS = INGEST_POOL_MAX - 2;
/** When to try again after ImportsBusyError: a job of a few thousand records takes seconds, a large load minutes. */
export const IMPORTS_BUSY_RETRY_AFTER_S = 30;
/** The jobs this process runs now (each counted from before its transaction is opened until it ended). */
let runningInProcess = 0;
/** A job waiting this long for the next bytes of its body fails (its transaction would otherwise sit idle, holding locks). */
export const STALL_MS = 45_000;
/** While records arrive, the job's transaction runs a statement at least this often (below the idle limit). */
const KEEP_BUSY_MS = 20_000;
/** PostgreSQL ends the job's transaction if it sits idle this long anyway (a backstop for the watch above). */
const IDLE_IN_TRANSACTION_TIMEOUT = '60s';
/** The job's error when the process failed in a way the caller cannot act on (the detail goes to the server log). */
export const INTERNAL_JOB_ERROR =
  'the job stopped on an unexpected error; nothing was written (the server log has the detail, under the job id)';

class JobCanceled extends Error {}

/** This process already runs MAX_RUNNING_IMPORTS_PER_PROCESS jobs: nothing was started (the admin API answers 503). */
export class ImportsBusyError extends BusyError {
  constructor(message: string) {
    super(message, IMPORTS_BUSY_RETRY_AFTER_S);
  }
}

/** An import_jobs row as the driver gives it (bigint counts as text). */
interface ImportJobRow {
  id: string;
  workspace_id: string;
  phase: ImportPhase;
  format: ImportFormat;
  records_read: string | number;
  records_applied: string | number;
  started_at: Date;
  finished_at: Date | null;
  counts: ImportJob['counts'];
  error: string | null;
}

const view = (row: ImportJobRow): ImportJob => ({
  id: row.id,
  workspaceId: row.workspace_id,
  phase: row.phase,
  format: row.format,
  recordsRead: Number(row.records_read),
  recordsApplied: Number(row.records_applied),
  startedAt: row.started_at.toISOString(),
  finishedAt: row.finished_at ? row.finished_at.toISOString() : null,
  counts: row.counts,
  error: row.error,
});

/** The lock a running job's transaction holds (two int4 halves of the job id's hash). */
const LOCK = `pg_advisory_xact_lock(hashtextextended('frs.import:' || ?::text, 0))`;

let recordValidators: Map<string, ValidateFunction> | undefined;

/** One validator per document key: a record is checked alone, as it arrives. */
function validatorOf(key: string): ValidateFunction | undefined {
  if (!recordValidators) {
    const ajv = createSchemaAjv();
    const schema = ajv.getSchema(IMPORT_SCHEMA_ID)!.schema as {
      properties: Record<string, { items: { $ref: string } }>;
    };
    recordValidators = new Map(
      ENTITIES.map(({ key: k }) => [k, ajv.getSchema(`${IMPORT_SCHEMA_ID}${schema.properties[k].items.$ref}`)!]),
    );
  }
  return recordValidators.get(key);
}

interface Incoming {
  key: DocumentKey;
  record: ImportRecord & { version?: number };
  /** Where the record is, for errors: `/bookings/17` or `line 18: /record`. */
  at: string;
}

/** The longest NDJSON line held (a record is a few hundred bytes; 1 MiB of characters is far beyond any). */
export const MAX_LINE_CHARS = 1024 * 1024;
const lineTooLong = (line: number) =>
  new ImportError(`invalid import stream at line ${line}: a line is longer than ${MAX_LINE_CHARS} characters (1 MiB)`);

/** Records of the body as they arrive. */
function recordsOf(
  body: AsyncIterable<Buffer | string>,
  format: ImportFormat,
  source = 'the import document',
): AsyncGenerator<Incoming> {
  return format === 'ndjson' ? ndjsonRecords(body) : jsonRecords(body, source);
}

/** The records of an NDJSON body: one {"key", "record"} a line, blank lines skipped. */
async function* ndjsonRecords(body: AsyncIterable<Buffer | string>): AsyncGenerator<Incoming> {
  let rest = '';
  let line = 0;
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    // Only the new text is searched for a line's end (the part before it was, and held none), and a line is held up to
    // MAX_LINE_CHARS: a stream without newlines can neither grow without bound nor cost a rescan per chunk.
    let text = typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = text.indexOf('\n')) >= 0) {
      const whole = rest + text.slice(0, newline);
      rest = '';
      text = text.slice(newline + 1);
      if (whole.length > MAX_LINE_CHARS) throw lineTooLong(line + 1);
      const record = parseLine(whole, ++line);
      if (record) yield record;
    }
    rest += text;
    if (rest.length > MAX_LINE_CHARS) throw lineTooLong(line + 1);
  }
  if (rest !== '') {
    const record = parseLine(rest, ++line);
    if (record) yield record;
  }
}

/** The record on line `line` of an NDJSON body (1-based), or none for a blank line. */
function parseLine(text: string, line: number): Incoming | undefined {
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ImportError(`invalid import stream at line ${line}: not JSON`);
  }
  const { key, record, ...other } = (value ?? {}) as { key?: unknown; record?: unknown };
  if (typeof key !== 'string' || !validatorOf(key))
    throw new ImportError(
      `invalid import stream at line ${line}: /key: must be one of ${ENTITIES.map((e) => e.key).join(', ')}`,
    );
  if (!record || typeof record !== 'object' || Object.keys(other).length > 0)
    throw new ImportError(
      `invalid import stream at line ${line}: a line is {"key": ..., "record": {...}} and nothing else`,
    );
  return { key: key as DocumentKey, record: record as Incoming['record'], at: `line ${line}: /record` };
}

/** The records of a JSON import document (an object of arrays by document key), each once its value has ended. */
async function* jsonRecords(body: AsyncIterable<Buffer | string>, source: string): AsyncGenerator<Incoming> {
  const pending: Incoming[] = [];
  let emitted = 0;
  let failure: Error | undefined;
  let ended = false;
  const parser = new JSONParser({ paths: ['$.*.*'], keepStack: false });
  parser.onValue = ({ value, key, stack }) => {
    const documentKey = stack[1]?.key;
    if (typeof documentKey !== 'string' || !validatorOf(documentKey)) {
      failure ??= new ImportError(`invalid import document at /${String(documentKey)}: is not a known field`);
      return;
    }
    if (typeof key !== 'number') {
      failure ??= new ImportError(`invalid import document at /${documentKey}: must be array`);
      return;
    }
    pending.push({
      key: documentKey as DocumentKey,
      record: value as Incoming['record'],
      at: `/${documentKey}/${key}`,
    });
  };
  parser.onError = (err) => {
    failure ??= new ImportError(`${source} is not valid JSON: ${err.message}`);
  };
  parser.onEnd = () => {
    ended = true;
  };
  // The parser holds what it has read of a value until the value ends: bytes that make no record (one endless string,
  // a record nested without end) are capped as an NDJSON line is, so no upload can fill the memory.
  let sinceRecord = 0;
  for await (const chunk of body) {
    if (!ended) {
      try {
        parser.write(chunk);
      } catch (err) {
        failure ??= new ImportError(`${source} is not valid JSON: ${(err as Error).message}`);
      }
    }
    if (failure) throw failure;
    sinceRecord = pending.length > 0 ? 0 : sinceRecord + chunk.length;
    if (sinceRecord > MAX_LINE_CHARS) {
      throw new ImportError(
        `invalid import document: more than ${MAX_LINE_CHARS} bytes (1 MiB) without a whole record after record ${emitted}`,
      );
    }
    emitted += pending.length;
    yield* pending.splice(0);
  }
  if (!ended) {
    try {
      parser.end();
    } catch (err) {
      failure ??= new ImportError(`${source} is not valid JSON: ${(err as Error).message}`);
    }
    if (!ended) failure ??= new ImportError(`${source} is not valid JSON: it ends before the document does`);
  }
  if (failure) throw failure;
  yield* pending.splice(0);
}

/** Checks one record alone (its schema, the checks across its fields); the error names it. */
function checkRecord(item: Incoming): void {
  const validate = validatorOf(item.key)!;
  if (!validate(item.record)) {
    const problem = describeSchemaError(validate.errors![0]);
    throw new ImportError(
      `invalid import document at ${item.at}${problem === '/' ? '' : problem.startsWith('/:') ? problem.slice(1) : problem}`,
    );
  }
  for (const [name, check] of Object.entries(CROSS_FIELD_CHECKS)) {
    if (name === `${snakeCase(item.key)}_check` && check.violatedBy(item.record as never))
      throw new ImportError(`invalid import document at ${item.at}/${check.field}: ${check.rule}`);
  }
}

export interface StartImportOptions {
  /** The body, as it arrives. */
  body: AsyncIterable<Buffer | string>;
  format: ImportFormat;
  audit: AuditContext;
  metrics?: RecordMetrics;
  /** What the body is called in an error ("the import document", a file's path). */
  source?: string;
  /** Called as the job moves (the CLI shows it). */
  onProgress?: (job: { recordsRead: number; recordsApplied: number; stage: string }) => void;
  /** Where the raw detail of an unexpected failure goes (the caller is shown INTERNAL_JOB_ERROR). */
  logger?: Pick<Logger, 'error'>;
}

/** What a client gives startImport: the workspace, and the job's options but its audit (the actor's). */
export type StartImportInput = Omit<StartImportOptions, 'audit'> & { workspaceId: string };

/**
 * Starts an import job into the workspace and returns it running, with `done`: the job as it ended (never rejects), and
 * `received`: settled once the whole body was read (or the job ended first).
 * Throws NotFoundError for an unknown workspace, before a byte of the body is read.
 */
export async function startImport(
  db: Knex,
  actor: Actor,
  input: StartImportInput,
): Promise<{ job: ImportJob; done: Promise<ImportJob>; received: Promise<void> }> {
  const { workspaceId, ...given } = input;
  mustReach(actor, workspaceId);
  const options: StartImportOptions = { ...given, audit: actor.audit };
  const workspace = await findWorkspace(db, { id: workspaceId });
  // Counted before the job takes its connection (and without an await between the check and the count).
  if (runningInProcess >= MAX_RUNNING_IMPORTS_PER_PROCESS) {
    throw new ImportsBusyError(
      `The service already runs ${MAX_RUNNING_IMPORTS_PER_PROCESS} import jobs, the most it runs at once: nothing was started. Try again in ${IMPORTS_BUSY_RETRY_AFTER_S} seconds.`,
    );
  }
  runningInProcess++;
  let counted = true;
  const uncount = () => {
    if (counted) runningInProcess--;
    counted = false;
  };
  const id = crypto.randomUUID();
  let trx: Knex.Transaction;
  try {
    trx = await db.transaction();
  } catch (err) {
    uncount();
    throw err;
  }
  let row: ImportJobRow;
  try {
    // Held before the row exists: a job seen running without its lock has lost its process.
    await trx.raw(`SELECT ${LOCK}`, [id]);
    // A job waiting on a stalled upload must not keep its transaction (and the locks it took) open for ever.
    await trx.raw(`SET LOCAL idle_in_transaction_session_timeout = '${IDLE_IN_TRANSACTION_TIMEOUT}'`);
    row = await insertRunningJob(db, id, workspace.id, options);
  } catch (err) {
    await trx.rollback().catch(() => undefined);
    uncount();
    throw err;
  }
  let bodyRead!: () => void;
  const received = new Promise<void>((resolve) => {
    bodyRead = resolve;
  });
  // Never rejects (the job's own failures end as phase failed): a last read of the row that fails (the pool busy, the
  // database gone) gives the job as its start left it, failed, rather than an unhandled rejection ending the process.
  const done = runJob(db, trx, id, workspace, options, bodyRead)
    .catch((err: unknown): ImportJob => {
      options.logger?.error(
        { err, importJob: id, workspaceId: workspace.id },
        'import job: its end could not be read back',
      );
      return { ...view(row), phase: 'failed', error: INTERNAL_JOB_ERROR };
    })
    .finally(uncount);
  return { job: view(row), done, received: Promise.race([received, done.then(() => undefined)]) };
}

/**
 * The running job's row, in a transaction of its own. Counted and inserted under the workspace's lock, so two requests
 * at once cannot both take the last place. A job counts while its transaction holds its lock (one whose process died
 * does not).
 */
async function insertRunningJob(
  db: Knex,
  id: string,
  workspaceId: string,
  options: StartImportOptions,
): Promise<ImportJobRow> {
  const [row] = await db.transaction(async (t) => {
    await t.raw(`SELECT pg_advisory_xact_lock(hashtextextended('frs.import-start:' || ?::text, 0))`, [workspaceId]);
    const { rows } = await t.raw(
      `SELECT count(*)::int AS n FROM import_jobs j WHERE j.workspace_id = ? AND j.phase = 'running'
         AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                       AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('frs.import:' || j.id::text, 0))`,
      [workspaceId],
    );
    if (rows[0].n >= MAX_RUNNING_IMPORTS) {
      throw new ConflictError(
        `This workspace already runs ${MAX_RUNNING_IMPORTS} import jobs, the most it may at once: wait for one to end (getImport) or cancel one (cancelImport).`,
        'running_imports',
      );
    }
    return t('import_jobs')
      .insert({
        id,
        workspace_id: workspaceId,
        phase: 'running',
        format: options.format,
        started_by: options.audit.actor.name.slice(0, 200),
      })
      .returning('*');
  });
  return row;
}

async function runJob(
  db: Knex,
  trx: Knex.Transaction,
  id: string,
  workspace: { id: string; slug: string },
  options: StartImportOptions,
  bodyRead: () => void,
): Promise<ImportJob> {
  return new ImportRun(db, trx, id, workspace, options).run(bodyRead);
}

/** One job as it runs: what it read and applied, its progress, and the watch that can stop it while it waits. */
class ImportRun {
  private readonly counts: CountsByKey = {};
  private read = 0;
  private applied = 0;
  private lastReport = 0;
  // Watched on a timer, not only as records are written: a cancel, or a body that stopped arriving, ends a job that
  // waits for input (the wait is raced against `stopped`).
  private stop!: (err: Error) => void;
  private readonly stopped = new Promise<never>((_, reject) => {
    this.stop = reject;
  });
  /** Since when the job waits for the body's next record, while it waits. */
  private waitingSince: number | undefined;
  private lastStatement = Date.now();

  constructor(
    private readonly db: Knex,
    private readonly trx: Knex.Transaction,
    private readonly id: string,
    private readonly workspace: { id: string; slug: string },
    private readonly options: StartImportOptions,
  ) {
    this.stopped.catch(() => undefined);
  }

  async run(bodyRead: () => void): Promise<ImportJob> {
    const { db, id, options } = this;
    let outcome: { phase: ImportPhase; error: string | null };
    const watch = setInterval(() => this.watch(), PROGRESS_INTERVAL_MS);
    const records = recordsOf(options.body, options.format, options.source);
    try {
      await this.load(records, bodyRead);
      outcome = { phase: 'succeeded', error: null };
    } catch (err) {
      outcome = await this.failed(err, records);
    } finally {
      clearInterval(watch);
    }
    const row = await db('import_jobs').where({ id }).first();
    if (outcome.phase === 'succeeded' && options.metrics)
      for (const [key, n] of Object.entries(this.counts)) options.metrics.written.inc({ key, operation: 'upsert' }, n);
    return view(row);
  }

  /** Calls onProgress, and writes the progress (at most every PROGRESS_INTERVAL_MS unless `force`); a cancel throws. */
  private async report(stage: string, force = false): Promise<void> {
    const { db, id } = this;
    this.options.onProgress?.({ recordsRead: this.read, recordsApplied: this.applied, stage });
    if (!force && Date.now() - this.lastReport < PROGRESS_INTERVAL_MS) return;
    this.lastReport = Date.now();
    const [state] = await db('import_jobs')
      .where({ id })
      .update({ records_read: this.read, records_applied: this.applied, updated_at: db.fn.now() })
      .returning('cancel_requested');
    if (state?.cancel_requested) throw new JobCanceled();
  }

  /** The timer's look: a stalled upload, or a cancel, stops the job. */
  private watch(): void {
    if (this.waitingSince !== undefined && Date.now() - this.waitingSince > STALL_MS)
      this.stop(new ImportError(`the upload stalled: nothing arrived for ${STALL_MS / 1000} s; nothing was written`));
    void this.db('import_jobs')
      .where({ id: this.id })
      .first('cancel_requested')
      .then(
        (state) => {
          if (state?.cancel_requested) this.stop(new JobCanceled());
        },
        () => undefined,
      );
  }

  /** The job's transaction from its start to its commit: the records written, the totals, the audit, its end. */
  private async load(records: AsyncGenerator<Incoming>, bodyRead: () => void): Promise<void> {
    const { db, trx, id, workspace, options } = this;
    // A job is history: the records were true before they arrived here.
    await markHistory(trx);
    // No statement limit (the ingest pool's sessions carry the API's): a first load's rebuild of the totals, one
    // statement over millions of rows, may take minutes. A stalled upload is ended by the job's own watch.
    await trx.raw(`SET LOCAL statement_timeout = 0`);
    const bulk = await deferRollups(trx, workspace.id);
    if (bulk) await db('import_jobs').where({ id }).update({ bulk: true });
    const versionsKept = bulk
      ? false
      : (await trx('record_versions').where({ workspace_id: workspace.id }).first(trx.raw('1 AS x'))) !== undefined;
    await this.write(records, versionsKept, bodyRead);
    if (bulk) {
      await this.report('running totals', true);
      await finishDeferredRollups(trx, workspace.id);
    }
    // (as the import always has: what was loaded, by entity; the job's row says the rest)
    await recordAudit(trx, options.audit, {
      action: 'workspace.import',
      workspaceId: workspace.id,
      target: { type: 'workspace', id: workspace.id },
      changes: { imported: this.counts },
    });
    await this.report('committing', true);
    // The job's end is written in its own transaction: it is seen succeeded exactly when its records are there (and a
    // reader never finds it running without its lock in between).
    await trx('import_jobs')
      .where({ id })
      .update(finalState('succeeded', null, this.read, this.applied, this.counts, trx));
    await trx.commit();
  }

  /** Reads the records as they arrive, each checked alone, and writes them CHUNK_SIZE at a time, parents first. */
  private async write(records: AsyncGenerator<Incoming>, versionsKept: boolean, bodyRead: () => void): Promise<void> {
    const { trx, workspace, options } = this;
    const { fieldsByKey } = compiledSchema();
    const buffers = new Map<DocumentKey, Incoming[]>();
    let buffered = 0;
    const flush = async () => {
      for (const entity of ENTITIES) {
        const items = buffers.get(entity.key);
        if (!items || items.length === 0) continue;
        buffers.set(entity.key, []);
        this.applied += await writeChunk(
          trx,
          workspace,
          entity,
          fieldsByKey.get(entity.key)!,
          items,
          versionsKept,
          this.counts,
          options.metrics,
        );
      }
      buffered = 0;
      this.lastStatement = Date.now();
      await this.report('writing');
    };
    for (;;) {
      this.waitingSince = Date.now();
      const next = await Promise.race([records.next(), this.stopped]);
      this.waitingSince = undefined;
      if (next.done) break;
      const item = next.value;
      this.read++;
      checkRecord(item);
      const list = buffers.get(item.key) ?? [];
      // The same id twice in one statement: the later one wins, as it would in a later chunk.
      list.push(item);
      buffers.set(item.key, list);
      if (++buffered >= CHUNK_SIZE) await flush();
      else if (Date.now() - this.lastStatement > KEEP_BUSY_MS) {
        // A slow but steady upload: the transaction is touched so PostgreSQL's idle limit ends only a stalled one.
        await trx.raw('SELECT 1');
        this.lastStatement = Date.now();
      }
    }
    bodyRead();
    await flush();
  }

  /** Ends a job that failed or was canceled: its end written, its transaction rolled back, nothing kept. */
  private async failed(
    err: unknown,
    records: AsyncGenerator<Incoming>,
  ): Promise<{ phase: ImportPhase; error: string | null }> {
    const { db, trx, id, workspace, options } = this;
    let outcome: { phase: ImportPhase; error: string | null };
    // What still reads the body stops (a stream is destroyed: its sender's upload ends).
    (options.body as { destroy?: () => void }).destroy?.();
    void records.return(undefined).catch(() => undefined);
    if (err instanceof JobCanceled) outcome = { phase: 'canceled', error: null };
    else if (err instanceof ImportError) outcome = { phase: 'failed', error: err.message.slice(0, 2000) };
    else {
      // A driver's or the database's own words are for the operator, not the caller.
      options.logger?.error(
        { err, importJob: id, workspaceId: workspace.id },
        'import job stopped on an unexpected error',
      );
      outcome = { phase: 'failed', error: INTERNAL_JOB_ERROR };
    }
    if (!(err instanceof JobCanceled))
      options.metrics?.refused.inc({ reason: 'import_failed' }, Math.max(this.read, 1));
    this.applied = 0;
    // Written while the transaction still holds the job's lock, then rolled back: never seen as a lost process.
    await db('import_jobs')
      .where({ id })
      .update(finalState(outcome.phase, outcome.error, this.read, 0, {}, db))
      .catch(() => undefined);
    await trx.rollback().catch(() => undefined);
    return outcome;
  }
}

// (the wall clock, not now(): a job's own transaction began before its row was inserted, so its start would put the
// end before startedAt)
const finalState = (
  phase: ImportPhase,
  error: string | null,
  read: number,
  applied: number,
  counts: CountsByKey,
  db: Knex,
) => ({
  phase,
  error,
  records_read: read,
  records_applied: applied,
  counts: JSON.stringify(counts),
  updated_at: db.raw('clock_timestamp()'),
  finished_at: db.raw('clock_timestamp()'),
});

/** Writes one key's buffered records; returns how many were written (a stale version is skipped). */
async function writeChunk(
  trx: Knex.Transaction,
  workspace: { id: string; slug: string },
  entity: EntitySpec,
  fields: string[],
  items: Incoming[],
  versionsKept: boolean,
  counts: CountsByKey,
  metrics?: RecordMetrics,
): Promise<number> {
  // The same id twice in one statement is refused by PostgreSQL: the later one stands.
  const byId = new Map<string, Incoming>();
  for (const item of items) byId.set(item.record.id.toLowerCase(), item);
  let chosen = [...byId.values()];
  const versioned = chosen.filter((i) => i.record.version !== undefined);
  if (versioned.length > 0 || versionsKept) {
    const outcome = await applyVersions(
      trx,
      workspace.id,
      entity.key,
      versioned.map((i, index) => ({ id: i.record.id, version: i.record.version!, deleting: false, index })),
      { upserts: chosen.filter((i) => i.record.version === undefined).map((i) => i.record.id), deletes: [] },
    );
    const skipped = new Set([...outcome.stale, ...outcome.unchanged].map((v) => v.id.toLowerCase()));
    if (outcome.stale.length > 0) metrics?.stale.inc({ key: entity.key }, outcome.stale.length);
    chosen = chosen.filter((i) => !skipped.has(i.record.id.toLowerCase()));
  }
  if (chosen.length === 0) return 0;
  await upsertChunk(trx, {
    entity,
    fields,
    workspaceId: workspace.id,
    workspaceSlug: workspace.slug,
    records: chosen.map((i) => i.record),
    offset: 0,
    pathOf: (index, field) => `${chosen[index].at}/${field}`,
  });
  counts[entity.key] = (counts[entity.key] ?? 0) + chosen.length;
  return chosen.length;
}

/** The job, within the workspace; a running job whose process is gone is recorded as failed first. */
export async function getImport(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; importId: string },
): Promise<ImportJob> {
  const { workspaceId, importId: id } = input;
  mustReach(actor, workspaceId);
  const row = await db('import_jobs').where({ id, workspace_id: workspaceId }).first();
  if (!row) throw new NotFoundError(`No import job with id ${id} in this workspace.`);
  if (row.phase !== 'running') return view(row);
  if ((await failLostImports(db, { id })).length === 0) return view(row);
  return view(await db('import_jobs').where({ id }).first());
}

/** Asks a running job to stop (it ends `canceled`, nothing written); ConflictError for a job that already ended. */
export async function cancelImport(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; importId: string },
): Promise<ImportJob> {
  const { workspaceId, importId: id } = input;
  const { audit } = actor;
  const job = await getImport(db, actor, input);
  if (job.phase !== 'running') throw new ConflictError(`The import job already ended (${job.phase}).`, 'phase');
  return db.transaction(async (trx) => {
    const [row] = await trx('import_jobs')
      .where({ id, phase: 'running' })
      .update({ cancel_requested: true })
      .returning('*');
    if (!row) throw new ConflictError('The import job already ended.', 'phase');
    await recordAudit(trx, audit, {
      action: 'workspace.import_cancel',
      workspaceId,
      target: { type: 'workspace', id: workspaceId },
      changes: { importJob: id },
    });
    return view(row);
  });
}

/**
 * Runs an import job from a file (`fleet-admin import`): the same job as createImport, its progress shown as the job
 * reports it (bytes of the file read, records applied). Throws the job's error (ImportError) when it fails.
 */
export async function importFile(
  db: Knex,
  actor: Actor,
  input: ProgressOptions & { workspaceId: string; file: string; format?: ImportFormat },
): Promise<{ jobId: string; imported: CountsByKey }> {
  const { file, ...options } = input;
  let size: number;
  try {
    size = fs.statSync(file).size;
  } catch (err) {
    throw new ImportError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const workspace = await findWorkspace(db, { id: input.workspaceId });
  const progress = progressReporter('import', 'bytes', size, options);
  let applied = 0;
  async function* counted(): AsyncGenerator<Buffer> {
    for await (const chunk of fs.createReadStream(file)) {
      progress.step(`${applied.toLocaleString('en-US')} records applied`, (chunk as Buffer).length);
      yield chunk as Buffer;
    }
  }
  const format = options.format ?? (/\.(ndjson|jsonl)$/i.test(file) ? 'ndjson' : 'json');
  try {
    const { done } = await startImport(db, actor, {
      workspaceId: workspace.id,
      body: counted(),
      format,
      source: file,
      onProgress: (p) => {
        applied = p.recordsApplied;
        if (p.stage !== 'writing') progress.step(p.stage, 0);
      },
    });
    const job = await done;
    if (job.phase !== 'succeeded') throw new ImportError(job.error ?? `the import job ended ${job.phase}`);
    return { jobId: job.id, imported: job.counts };
  } finally {
    progress.stop();
  }
}
