import type { Knex } from 'knex';
import { processConfig, wholeNumberDefault } from '../config.js';
import { failLostImports } from './lost-imports.js';

// Retention: the delivery records are kept for a while, then deleted, so that nothing grows for ever. Each kind
// of row is deleted in batches of `batchSize`, one short statement per batch (rows another transaction holds are
// skipped and taken on a later run), so no table is locked for long. A pending delivery (queued, retrying or held)
// is never deleted.

export const RETENTION_ENV = 'FRS_RETENTION_DAYS';
export const DEFAULT_RETENTION_DAYS = wholeNumberDefault(RETENTION_ENV);
/**
 * Events with a dedupe key are kept at least this long, whatever the retention: the calendar sweep records an
 * occurrence once by its key, and an occurrence can be due up to 60 days ahead (Reminders ahead) plus the 7-day
 * grace of milestones, so a key deleted sooner could be raised and sent again.
 */
export const DEDUPE_KEY_KEEP_DAYS = 90;
export const DEFAULT_BATCH_SIZE = 1000;
/**
 * How long an Idempotency-Key of the test operation is remembered: the test delivery (src/core/webhooks/test-delivery.ts)
 * replays within it, and retention deletes the keys older than it.
 */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

export interface RetentionOptions {
  /** The clock ages are measured by. */
  now: Date;
  /** Default: FRS_RETENTION_DAYS, else 30. */
  retentionDays?: number;
  batchSize?: number;
  /** Only rows of these workspaces (tests). Default: every workspace. */
  workspaceIds?: string[];
}

/** Rows deleted, by kind. */
export interface RetentionCounts {
  idempotencyKeys: number;
  attempts: number;
  deliveries: number;
  events: number;
  outbox: number;
  /** Settings-screen sessions and links that ended (expired) before the cutoff. */
  portalSessions: number;
  /** Tombstones of deleted records (src/core/import/versions.ts) older than the retention. */
  tombstones: number;
  /** Import jobs (src/core/import/jobs.ts) that ended before the cutoff; a running one is never deleted. */
  importJobs: number;
  /** Import jobs found running with their process gone, recorded as failed now (not deleted: they end now). */
  lostImportJobs: number;
}

/** Deletes, batch by batch, the rows of `table` (primary key `key`) that `where` selects (alias t), until none is left. */
async function deleteInBatches(
  db: Knex,
  table: string,
  key: string[],
  where: string,
  bindings: Knex.Value[],
  batchSize: number,
): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await db.raw(
      `DELETE FROM ${table} WHERE (${key.join(', ')}) IN (
         SELECT ${key.map((k) => `t.${k}`).join(', ')} FROM ${table} t WHERE ${where} LIMIT ? FOR UPDATE SKIP LOCKED)`,
      [...bindings, batchSize],
    );
    total += deleted.rowCount;
    if (deleted.rowCount < batchSize) return total;
  }
}

/** What one pass deletes by: its cutoffs (ISO), its batch size and the workspaces it is limited to. */
interface RetentionPass {
  db: Knex;
  batchSize: number;
  /** Delivery records finished before it go. */
  cutoff: string;
  /** Events with a dedupe key go only before it (DEDUPE_KEY_KEEP_DAYS). */
  dedupeCutoff: string;
  /** Idempotency keys go before it. */
  keyCutoff: string;
  scoped: string[] | null;
}

/** One retention pass; returns what it deleted. */
export async function runRetention(db: Knex, options: RetentionOptions): Promise<RetentionCounts> {
  const retentionDays = options.retentionDays ?? processConfig().retentionDays;
  const pass: RetentionPass = {
    db,
    batchSize: options.batchSize ?? DEFAULT_BATCH_SIZE,
    cutoff: new Date(options.now.getTime() - retentionDays * DAY_MS).toISOString(),
    dedupeCutoff: new Date(
      options.now.getTime() - Math.max(retentionDays, DEDUPE_KEY_KEEP_DAYS) * DAY_MS,
    ).toISOString(),
    keyCutoff: new Date(options.now.getTime() - IDEMPOTENCY_WINDOW_MS).toISOString(),
    scoped: options.workspaceIds ?? null,
  };
  const idempotencyKeys = await deleteIdempotencyKeys(pass);
  const history = await deleteDeliveryHistory(pass);
  const leftovers = await deleteSessionsAndTombstones(pass);
  const jobs = await deleteImportJobs(pass);
  return { idempotencyKeys, ...history, ...leftovers, ...jobs };
}

/** The workspace filter on a column, with its bindings. */
function inScope({ scoped }: RetentionPass, col: string): [string, Knex.Value[]] {
  return scoped ? [` AND ${col} = ANY(?::uuid[])`, [scoped as unknown as Knex.Value]] : ['', []];
}

async function deleteIdempotencyKeys(pass: RetentionPass): Promise<number> {
  const { db, keyCutoff, batchSize } = pass;
  const [keyScope, keyBind] = inScope(pass, 't.workspace_id');
  const testKeys = await deleteInBatches(
    db,
    'test_idempotency_keys',
    ['workspace_id', 'key'],
    `t.created_at < ?${keyScope}`,
    [keyCutoff, ...keyBind],
    batchSize,
  );
  // The admin API's keys, with the sealed first answers they replay (src/admin/idempotency.ts): gone after the same 24
  // hours whether or not their token ever sends another key (a revoked or quiet token's included).
  const [tokenScope, tokenBind] = inScope(pass, '(SELECT a.workspace_id FROM admin_tokens a WHERE a.id = t.token_id)');
  const adminKeys = await deleteInBatches(
    db,
    'admin_idempotency_keys',
    ['token_id', 'key'],
    `t.created_at < ?${tokenScope}`,
    [keyCutoff, ...tokenBind],
    batchSize,
  );
  return testKeys + adminKeys;
}

/** Finished deliveries with their attempts, then the events and outbox rows nothing refers to any more. */
async function deleteDeliveryHistory(
  pass: RetentionPass,
): Promise<Pick<RetentionCounts, 'attempts' | 'deliveries' | 'events' | 'outbox'>> {
  const { db, cutoff, dedupeCutoff, batchSize } = pass;
  const [attemptScope, attemptBind] = inScope(
    pass,
    '(SELECT w.workspace_id FROM webhook_endpoints w WHERE w.id = t.endpoint_id)',
  );
  // Only a finished delivery's attempts: a delivery still retrying keeps its whole history, however old.
  const attempts = await deleteInBatches(
    db,
    'delivery_attempts',
    ['id'],
    `t.started_at < ? AND EXISTS (SELECT 1 FROM deliveries d WHERE d.id = t.delivery_id AND d.status IN ('accepted', 'failed'))${attemptScope}`,
    [cutoff, ...attemptBind],
    batchSize,
  );

  const [deliveryScope, deliveryBind] = inScope(pass, 't.workspace_id');
  const deliveries = await deleteInBatches(
    db,
    'deliveries',
    ['id'],
    `t.status IN ('accepted', 'failed') AND t.finished_at < ?${deliveryScope}`,
    [cutoff, ...deliveryBind],
    batchSize,
  );

  const events = await deleteInBatches(
    db,
    'events',
    ['id'],
    `t.created_at < ? AND (t.dedupe_key IS NULL OR t.created_at < ?)
     AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = t.id)${deliveryScope}`,
    [cutoff, dedupeCutoff, ...deliveryBind],
    batchSize,
  );

  const outbox = await deleteInBatches(
    db,
    'outbox',
    ['id'],
    `t.processed_at < ?${deliveryScope}`,
    [cutoff, ...deliveryBind],
    batchSize,
  );
  return { attempts, deliveries, events, outbox };
}

async function deleteSessionsAndTombstones(
  pass: RetentionPass,
): Promise<Pick<RetentionCounts, 'portalSessions' | 'tombstones'>> {
  const { db, cutoff, batchSize } = pass;
  const [scope, bind] = inScope(pass, 't.workspace_id');
  // Settings-screen sessions: a session is over by its expiry at the latest; its record goes with the delivery records'
  // age (what it changed stays in the audit trail).
  const portalSessions = await deleteInBatches(
    db,
    'portal_sessions',
    ['id'],
    `t.expires_at < ?${scope}`,
    [cutoff, ...bind],
    batchSize,
  );

  // A deleted record's tombstone keeps a late upsert of an older version out for the retention period, then goes.
  const tombstones = await deleteInBatches(
    db,
    'record_versions',
    ['workspace_id', 'key', 'id'],
    `t.deleted_at < ?${scope}`,
    [cutoff, ...bind],
    batchSize,
  );
  return { portalSessions, tombstones };
}

async function deleteImportJobs(pass: RetentionPass): Promise<Pick<RetentionCounts, 'importJobs' | 'lostImportJobs'>> {
  const { db, cutoff, batchSize, scoped } = pass;
  const [scope, bind] = inScope(pass, 't.workspace_id');
  // A job whose process died stays `running` until someone reads it (getImport): it is recorded failed here, as getImport
  // would, so that it is seen ended, and goes with the others' age.
  const lostImportJobs = (await failLostImports(db, { workspaceIds: scoped })).length;
  // An import job's row is its progress and outcome, read while it runs and soon after: gone with the same age.
  const importJobs = await deleteInBatches(
    db,
    'import_jobs',
    ['id'],
    `t.phase <> 'running' AND t.finished_at < ?${scope}`,
    [cutoff, ...bind],
    batchSize,
  );
  return { importJobs, lostImportJobs };
}
