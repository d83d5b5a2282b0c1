import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EtagInputs, OperationContext } from './operation.js';
import { answerVersion } from '../queries/data-versions.js';

// Conditional GETs (RFC 9110 §13.1.2). Every /v1 GET answer carries a weak ETag, and If-None-Match with a current
// tag is answered 304 without building the answer. A tag is a digest of everything the answer is made of: the code
// that builds it, the operation and its parameters (after validation and defaults), the caller's workspace, time
// zone and role, and the answer's data version (src/queries/data-versions.ts): the version the database keeps of the
// area of tables the operation reads, the local date where the answer depends on it, and what else of the clock
// decides it. So the tag changes whenever the answer would, and deciding a 304 costs one statement of index look-ups.
// Weak: equal tags promise the same data, not the same bytes (a compressed answer has other bytes).

/**
 * The code that builds answers: a digest of every file of the service's source (this folder's parent: src/, or the
 * built dist/src/), so that every process running the same code makes the same tags,
 * and a deploy that changes how an answer is built changes every tag (a fixed figure is not answered 304).
 */
function codeIdentity(): string {
  const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
  const hash = crypto.createHash('sha256');
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (/\.[cm]?[jt]s$/.test(entry.name))
        hash.update(path.relative(root, file)).update('\0').update(fs.readFileSync(file)).update('\0');
    }
  };
  walk(root);
  return hash.digest('base64url');
}

let code: string | undefined;

/** Object keys in order, so that equal parameters make equal text whatever order they came in. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined';
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  return `{${entries
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`)
    .join(',')}}`;
}

/** What of an operation's context its tag is made of. */
export type TaggedRequest = Pick<OperationContext, 'db' | 'caller' | 'now' | 'query' | 'params'>;

/**
 * The answer's current ETag, made of what the operation says it depends on (src/api/operations/, its `etag`), or
 * undefined for an operation that has none (not a GET of /v1).
 */
export async function entityTag(
  operationId: string,
  made: EtagInputs | undefined,
  { db, caller, now, query, params }: TaggedRequest,
): Promise<string | undefined> {
  if (!made) return undefined;
  code ??= codeIdentity();
  const { workspace } = caller;
  const version = made.inputs ? await answerVersion(db, workspace, made.inputs, now) : '';
  const clock = made.clock ? made.clock(query, now) : '';
  const digest = crypto
    .createHash('sha256')
    .update(
      canonical([
        code,
        operationId,
        query,
        params,
        workspace.id,
        workspace.timezone,
        workspace.slug,
        workspace.status,
        caller.role,
        version,
        clock,
      ]),
    )
    .digest('base64url')
    .slice(0, 27);
  return `W/"${digest}"`;
}

/** Whether If-None-Match is `*`: any current answer (RFC 9110 §13.1.2), which only the built answer can tell exists. */
export const noneMatchAny = (header: string | undefined): boolean => header?.trim() === '*';

/**
 * Whether If-None-Match names the tag (weak comparison, RFC 9110 §13.1.2: `W/` ignored on either side). A malformed
 * field matches nothing: the answer is sent whole. (`*` is noneMatchAny's.)
 */
export function noneMatchHolds(header: string | undefined, tag: string): boolean {
  if (header === undefined) return false;
  const opaque = tag.replace(/^W\//, '');
  for (const candidate of header.match(/(?:W\/)?"[^"]*"/g) ?? []) {
    if (candidate.replace(/^W\//, '') === opaque) return true;
  }
  return false;
}

/** Cache-Control of an answer with a tag: any cache may keep it for this caller only, and must ask before reusing it. */
export const REVALIDATED_CACHE_CONTROL = 'private, no-cache';
