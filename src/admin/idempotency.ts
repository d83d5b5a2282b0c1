import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { apiError } from '../http/error-catalogue.js';
import { apiSecretId, derivedKeys } from '../secrets.js';

// Idempotency-Key on the admin API's creating POSTs. The first answer is kept, per admin token and key, for 24 hours,
// with the SHA-256 of the request it answered (operation, path, canonical body): the same request again answers it
// again and creates nothing; another request with the key is 409. The answer may hold a new API key or signing
// secret, which a repeat must return the same (a second key would leave one the client never saw working), and which
// must never be stored in plain text, nor openable by a key the process holds for every answer. So the key is kept
// as its SHA-256 only, and the answer is sealed (AES-256-GCM) under a key derived (HKDF) from the Idempotency-Key
// itself, the token, and a key of the API process's own secret (src/secrets.ts derivedKeys; not the master key,
// which it does not hold): at rest an answer opens only for a request presenting the same Idempotency-Key, in a
// process holding that secret. A master-key rotation leaves them as they are. A random key (a UUID) is what
// clients are asked to send: a guessable one would make its answer as easy to open as it is to guess.
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
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** The HKDF label of the stored answers' key (see derivedKeys()). */
export const ANSWER_KEY_LABEL = 'admin-idempotency-answers-v1';
const ANSWER_VERSION = 1;

let answerKeys: { id: string; keys: Buffer[] } | undefined;

/** The answer key of one token and Idempotency-Key, under each of the process's API secrets (the current one first). */
function answerKeysFor(tokenId: string, key: string): { id: string; keys: Buffer[] } {
  answerKeys ??= { id: apiSecretId(), keys: derivedKeys(ANSWER_KEY_LABEL) };
  const info = `admin-idempotency\0${tokenId}\0${key}`;
  return {
    id: answerKeys.id,
    keys: answerKeys.keys.map((k) => Buffer.from(crypto.hkdfSync('sha256', k, Buffer.alloc(0), info, 32))),
  };
}

function sealAnswer(answer: Answer, key: Buffer): Buffer {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(JSON.stringify(answer), 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([ANSWER_VERSION]), iv, cipher.getAuthTag(), ciphertext]);
}

/** The answer, or undefined when none of the keys opens it (the API secret it was sealed under is gone). */
function openAnswer(sealed: Buffer, keys: Buffer[]): Answer | undefined {
  if (sealed[0] !== ANSWER_VERSION || sealed.length < 1 + 12 + 16) return undefined;
  for (const key of keys) {
    const decipher = crypto.createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 13));
    decipher.setAuthTag(sealed.subarray(13, 29));
    try {
      return JSON.parse(
        Buffer.concat([decipher.update(sealed.subarray(29)), decipher.final()]).toString('utf8'),
      ) as Answer;
    } catch {
      // another key's
    }
  }
  return undefined;
}

/** How an Idempotency-Key is kept: its SHA-256, in hex. */
export function idempotencyKeyDigest(key: string): string {
  return crypto.createHash('sha256').update(key, 'utf8').digest('hex');
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
  const requestHash = crypto
    .createHash('sha256')
    .update(canonical([request.operationId, request.path, request.body]))
    .digest();
  const digest = idempotencyKeyDigest(key);
  const answerKey = answerKeysFor(tokenId, key);
  return db.transaction(async (trx) => {
    // Forgotten after 24 hours: this token's keys older than that go now (the others with their own token's requests).
    await trx('admin_idempotency_keys')
      .where({ token_id: tokenId })
      .whereRaw(`created_at < now() - make_interval(hours => ?)`, [IDEMPOTENCY_HOURS])
      .delete();
    const { rows } = await trx.raw(
      `INSERT INTO admin_idempotency_keys (token_id, key, request_hash) VALUES (?, ?, ?) ON CONFLICT (token_id, key) DO NOTHING RETURNING token_id`,
      [tokenId, digest, requestHash],
    );
    if (rows.length === 0) {
      const first = await trx('admin_idempotency_keys')
        .where({ token_id: tokenId, key: digest })
        .first('request_hash', 'response_sealed');
      const answer =
        first?.response_sealed && (first.request_hash as Buffer).equals(requestHash)
          ? openAnswer(first.response_sealed, answerKey.keys)
          : undefined;
      if (!answer) {
        throw apiError(
          'idempotency_key_reused',
          'This Idempotency-Key was already used, within 24 hours, for another request.',
          { reason: 'Idempotency-Key' },
        );
      }
      return { ...answer, replayed: true };
    }
    const answer = await create(trx);
    await trx('admin_idempotency_keys')
      .where({ token_id: tokenId, key: digest })
      .update({
        status: answer.status,
        response_key_id: answerKey.id,
        response_sealed: sealAnswer(answer, answerKey.keys[0]),
      });
    return { ...answer, replayed: false };
  });
}
