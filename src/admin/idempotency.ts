import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { ApiError } from '../api/errors.js';
import { openSecret, sealSecret } from '../secrets.js';

// Idempotency-Key on the admin API's creating POSTs. The first answer is kept, per admin token and key, for 24 hours,
// with the SHA-256 of the request it answered (operation, path, canonical body): the same request again answers it
// again and creates nothing; another request with the key is 409. The answer is kept sealed under the master key
// (src/secrets.ts), bound to the token and key: it may hold a new API key, which a repeat must return the same (a
// second key would leave one the client never saw working), and which must never be stored in plain text.
//
// The key's row is inserted in the transaction that makes the change, before it: a concurrent request with the same
// key waits on that row's unique index until the first commits (then replays it) or rolls back (then goes ahead).
// Only a success is kept: a refused request (4xx, 5xx) rolls back with its row, and may be sent again with its key.

export const IDEMPOTENCY_HOURS = 24;

export interface Answer {
  status: number;
  body: unknown;
}

/** JSON with every object's keys sorted: the same body, however its fields were ordered. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Runs `create` (in a transaction it is given) once per token and key within 24 hours; without a key, simply runs it.
 * Returns its answer, or the first answer again (`replayed`).
 */
export async function idempotent(
  db: Knex,
  request: { tokenId: string; key: string | undefined; operationId: string; path: string; body: unknown },
  create: (trx: Knex) => Promise<Answer>,
): Promise<Answer & { replayed: boolean }> {
  const { tokenId, key } = request;
  if (key === undefined) return { ...(await db.transaction(create)), replayed: false };
  const requestHash = crypto.createHash('sha256').update(canonical([request.operationId, request.path, request.body])).digest();
  const context = `admin-idempotency\0${tokenId}\0${key}`;
  return db.transaction(async (trx) => {
    // Forgotten after 24 hours: this token's keys older than that go now (the others with their own token's requests).
    await trx('admin_idempotency_keys').where({ token_id: tokenId }).whereRaw(`created_at < now() - make_interval(hours => ?)`, [IDEMPOTENCY_HOURS]).delete();
    const { rows } = await trx.raw(
      `INSERT INTO admin_idempotency_keys (token_id, key, request_hash) VALUES (?, ?, ?) ON CONFLICT (token_id, key) DO NOTHING RETURNING token_id`,
      [tokenId, key, requestHash],
    );
    if (rows.length === 0) {
      const first = await trx('admin_idempotency_keys').where({ token_id: tokenId, key }).first('request_hash', 'response_key_id', 'response_sealed');
      if (!first || !first.response_sealed || !(first.request_hash as Buffer).equals(requestHash)) {
        throw new ApiError(409, 'idempotency_key_reused', 'This Idempotency-Key was already used, within 24 hours, for another request.', 'Idempotency-Key');
      }
      const answer = JSON.parse(openSecret({ keyId: first.response_key_id, sealed: first.response_sealed }, context)) as Answer;
      return { ...answer, replayed: true };
    }
    const answer = await create(trx);
    const sealed = sealSecret(JSON.stringify(answer), context);
    await trx('admin_idempotency_keys').where({ token_id: tokenId, key }).update({ status: answer.status, response_key_id: sealed.keyId, response_sealed: sealed.sealed });
    return { ...answer, replayed: false };
  });
}
