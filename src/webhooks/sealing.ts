import type { Knex } from 'knex';
import {
  apiSecretIds,
  givenMasterKeys,
  mayHoldMasterKeys,
  MasterKeyError,
  NoSealingKeyError,
  openSecret,
  PREVIOUS_SECRET_KEYS_ENV,
  SECRET_KEY_ENV,
  SECRET_KEY_FILE_ENV,
  sealingKeys,
  sealingPublicKey,
  sealSecret,
  sealToRecordedKey,
  type MasterKeyIds,
  type SealedSecret,
} from '../secrets.js';

// Endpoints' signing secrets at rest: sealed to the master key's public key (a sealed box, see src/secrets.ts) in
// webhook_endpoints.secret_sealed with the master key's id in secret_key_id. A process holding no master key (the
// API process: admin API, settings screen) seals to the public key the database records; only the worker (and the
// CLI's sealing commands) open them. The admin role may write them, not read them (src/db/roles.ts). This is the
// engine's half (sealing, opening, the start checks); the actions that rotate and re-seal are
// src/core/webhooks/signing-secrets.ts.

/** The authenticated context of an endpoint's sealed secret: it opens only on that endpoint's row. */
function sealingContext(endpointId: string): string {
  return `webhook_endpoints.secret:${endpointId}`;
}

/**
 * The authenticated context of an endpoint's sealed ed25519 private key: it opens only on that endpoint's row, and
 * only as a private key (a sealed secret put in its place does not open).
 */
function privateKeyContext(endpointId: string): string {
  return `webhook_endpoints.signing_private_key:${endpointId}`;
}

/** An endpoint's ed25519 private key, sealed, as its columns hold it. */
export interface SealedPrivateKeyColumns {
  signing_private_key_key_id: string;
  signing_private_key_sealed: Buffer;
}

/** Seals signing secrets under one master key, inside a sealing transaction (withSealingLock). */
export interface Sealer {
  /** The master key every secret of this transaction is sealed with. */
  keyId: string;
  /** The columns holding an endpoint's signing secret, sealed. */
  columns(endpointId: string, secret: string): { secret_key_id: string; secret_sealed: Buffer };
  /** The columns holding an endpoint's ed25519 private key (`whsk_` text), sealed the same way. */
  privateKeyColumns(endpointId: string, privateKey: string): SealedPrivateKeyColumns;
}

/**
 * Runs `work` in a transaction holding the sealing lock: shared for a writer that seals a secret (the master key is
 * read after the lock is taken), exclusive for the master-key rotation's re-seal. So a secret sealed under the old
 * key is either committed before the re-seal starts (and re-sealed by it) or sealed under the new key: none is
 * left under a key the rotation then removes from the key file. `work` seals with the Sealer it is given, and the
 * database's record of the master key is updated in the same transaction (recordSealingKey).
 */
export function withSealingLock<T>(
  db: Knex,
  mode: 'shared' | 'exclusive',
  work: (trx: Knex.Transaction, sealer: Sealer) => Promise<T>,
): Promise<T> {
  return db.transaction(async (trx) => {
    await trx.raw(
      mode === 'shared' ? 'SELECT pg_advisory_xact_lock_shared(?::bigint)' : 'SELECT pg_advisory_xact_lock(?::bigint)',
      [SEALING_LOCK],
    );
    return recordSealingKey(trx, mode, work);
  });
}

/** The advisory lock key of sealing (an arbitrary constant of this service's). */
const SEALING_LOCK = '7262193140017346561';

/**
 * The columns holding an endpoint's current signing secret, sealed, outside a sealing transaction: only for tests'
 * fixtures (the migration that sealed the secrets stored in plain text has its own frozen copy under migrations/support/).
 */
export function sealedSecretColumns(
  endpointId: string,
  secret: string,
): { secret_key_id: string; secret_sealed: Buffer } {
  const { keyId, sealed } = sealSecret(secret, sealingContext(endpointId));
  return { secret_key_id: keyId, secret_sealed: sealed };
}

// ---------------------------------------------------------------------------------------------------------------
// The record of the master key (master_key_record, one row): the id of the key the stored signing secrets are
// sealed with, NULL until the first one is sealed, and that key's sealing public key, which processes holding no
// master key seal to (recorded by the first process holding the key that seals or starts a worker). Every seal checks it in the transaction of the rows it seals and
// seals under that key; only the master-key rotation's re-seal moves it, with every secret. Every process checks its
// key against it at start (checkMasterKey). So a process given no key, or another key, refuses at once, naming the
// setting, instead of sealing secrets no worker can open or leaving deliveries waiting for a key that never comes;
// and a process given only the new key of a rotation under way is refused until the re-seal has moved everything.

const RECORD_TABLE = 'master_key_record';

/**
 * The signing secrets the database holds: undefined when none; else the key the record names (`keyId`), or on a
 * database from before the record (only `fleet-admin migrate` opens one) no id, and `plain` when they are still in
 * plain text (a migration seals them under the key `migrate` is given).
 */
export async function storedSecrets(db: Knex): Promise<{ keyId?: string; plain?: true } | undefined> {
  const {
    rows: [tables],
  } = await db.raw(
    `SELECT to_regclass(?) IS NOT NULL AS recorded, to_regclass('webhook_endpoints') IS NOT NULL AS endpoints`,
    [RECORD_TABLE],
  );
  if (tables.recorded) {
    const keyId: string | null | undefined = (await db(RECORD_TABLE).first('key_id'))?.key_id;
    return keyId ? { keyId } : undefined;
  }
  if (!tables.endpoints || !(await db('webhook_endpoints').first(db.raw('1 AS stored')))) return undefined;
  return (await db.schema.hasColumn('webhook_endpoints', 'secret_key_id')) ? {} : { plain: true };
}

/** How to give a process its key, for the refusals below. */
export const KEY_SETTINGS = `${SECRET_KEY_ENV}, or ${SECRET_KEY_FILE_ENV} for a key file; during a master-key rotation the old key goes in ${PREVIOUS_SECRET_KEYS_ENV}`;

/** Refuses keys that do not open what the database holds: one line naming the setting. */
function mismatch(keys: MasterKeyIds, recorded: string): MasterKeyError {
  const held =
    keys.ids.size > 1 ? `hold master keys ${[...keys.ids].join(', ')}` : `holds master key ${keys.currentId}`;
  return new MasterKeyError(
    `${keys.setting} ${held}, but the database's signing secrets are sealed with ${recorded}: give this process that key (${KEY_SETTINGS})`,
  );
}

function missing(stored: { keyId?: string; plain?: true }): MasterKeyError {
  const which = stored.plain
    ? ' in plain text, which a migration seals,'
    : stored.keyId
      ? ` sealed with master key ${stored.keyId}`
      : '';
  const key = stored.plain
    ? 'one (for a key file: fleet-admin secrets create-master-key)'
    : 'the key they were sealed with';
  return new MasterKeyError(
    `the database holds signing secrets${which} and this process has no master key: give it ${key} (${KEY_SETTINGS})`,
  );
}

/**
 * The check every process makes at start, before it does anything: when the database holds signing secrets, a
 * process that opens or seals them (`needed`: the worker, `fleet-admin migrate` and the sealing commands) must have
 * their key, and any process given a key (`if-given`: the API, which never opens a secret, and the other commands)
 * must have theirs. Nothing sealed yet: any key, or none. A malformed key, or a key file others can read, is refused.
 */
export async function checkMasterKey(db: Knex, use: 'needed' | 'if-given'): Promise<void> {
  const keys = givenMasterKeys();
  const stored = await storedSecrets(db);
  if (!stored) return;
  if (!keys) {
    if (use === 'needed') throw missing(stored);
    return;
  }
  if (stored.keyId && !keys.ids.has(stored.keyId)) throw mismatch(keys, stored.keyId);
}

/**
 * Runs `work` with a Sealer, after checking that the record's key is one of this process's (the current one, or an
 * old one during a master-key rotation). A writer (`shared`) seals under the recorded key, so that the secrets stay
 * under one key until the re-seal: during a rotation the new key may not yet be on every worker. Only the re-seal
 * (`exclusive`) and the first seal of all use the current key and record it (the re-seal even when it found nothing
 * to re-seal: the old key is about to be dropped). The record's row stays locked until the transaction ends, so
 * sealers holding different keys cannot both record theirs. Only when nothing is recorded may the embedded default
 * create its key file (src/secrets.ts).
 */
async function recordSealingKey<T>(
  trx: Knex.Transaction,
  mode: 'shared' | 'exclusive',
  work: (trx: Knex.Transaction, sealer: Sealer) => Promise<T>,
): Promise<T> {
  if (mode === 'shared') {
    // The usual case: the record is complete, and every writer seals to its public key (a process holding the keys
    // checks the record against them first). Only a record still lacking its public key is written below.
    const record: { key_id: string | null; public_key: Buffer | null } | undefined = await trx(RECORD_TABLE).first(
      'key_id',
      'public_key',
    );
    const keys = givenMasterKeys();
    if (record?.key_id && record.public_key) {
      if (keys && !keys.ids.has(record.key_id)) throw mismatch(keys, record.key_id);
      if (keys && !record.public_key.equals(sealingPublicKey(record.key_id))) throw tampered(record.key_id);
      return sealToRecord(trx, record.key_id, record.public_key, work);
    }
    // (a process that may hold a master key but was given none, such as the CLI, is told so below)
    if (!keys && !mayHoldMasterKeys()) {
      throw new NoSealingKeyError(
        `the database records no sealing public key yet, and this process holds no master key (it serves the API): start the webhook worker, which records the public key of its master key (${KEY_SETTINGS})`,
      );
    }
  }
  const record: { key_id: string | null; public_key: Buffer | null } | undefined = await trx(RECORD_TABLE)
    .forUpdate()
    .first('key_id', 'public_key');
  const recorded = record?.key_id;
  if (recorded && !givenMasterKeys()) throw missing({ keyId: recorded });
  const keys = sealingKeys({ create: !recorded });
  if (recorded && !keys.ids.has(recorded)) throw mismatch(keys, recorded);
  const sealWith = mode === 'shared' && recorded ? recorded : keys.currentId;
  let sealed = false;
  const result = await work(trx, {
    keyId: sealWith,
    columns(endpointId, secret) {
      sealed = true;
      const { keyId, sealed: value } = keys.seal(secret, sealingContext(endpointId), sealWith);
      return { secret_key_id: keyId, secret_sealed: value };
    },
    privateKeyColumns(endpointId, privateKey) {
      sealed = true;
      const { keyId, sealed: value } = keys.seal(privateKey, privateKeyContext(endpointId), sealWith);
      return { signing_private_key_key_id: keyId, signing_private_key_sealed: value };
    },
  });
  if ((sealed || recorded) && (recorded !== sealWith || !record?.public_key)) {
    await trx(RECORD_TABLE)
      .insert({ singleton: true, key_id: sealWith, public_key: keys.publicKey(sealWith) })
      .onConflict('singleton')
      .merge();
  }
  return result;
}

/** The recorded public key is not the one of the recorded master key: the record was changed by hand (or by an attacker). */
function tampered(keyId: string): MasterKeyError {
  return new MasterKeyError(
    `the database records a sealing public key that is not master key ${keyId}'s: nothing is sealed to it; set master_key_record.public_key back (a worker holding ${keyId} records it when it is NULL)`,
  );
}

/**
 * Sealing to the public key the database records, under the recorded key's id: all a process holding no master key
 * (the API process) can do; it can seal, never open. The shared sealing lock keeps a re-seal from moving the record
 * meanwhile.
 */
function sealToRecord<T>(
  trx: Knex.Transaction,
  keyId: string,
  publicKey: Buffer,
  work: (trx: Knex.Transaction, sealer: Sealer) => Promise<T>,
): Promise<T> {
  return work(trx, {
    keyId,
    columns(endpointId, secret) {
      const { sealed } = sealToRecordedKey(keyId, publicKey, secret, sealingContext(endpointId));
      return { secret_key_id: keyId, secret_sealed: sealed };
    },
    privateKeyColumns(endpointId, privateKey) {
      const { sealed } = sealToRecordedKey(keyId, publicKey, privateKey, privateKeyContext(endpointId));
      return { signing_private_key_key_id: keyId, signing_private_key_sealed: sealed };
    },
  });
}

/**
 * The worker's start (as the owner's connection; on the embedded default it makes the key file when there is none):
 * records the public key of the master key that seals the stored secrets when the record lacks it (nothing sealed yet: of this process's current key; a database from before
 * sealed boxes: of the recorded key), so that the API process can seal; refuses a recorded public key that is not its
 * key's. Run after checkMasterKey.
 */
export async function recordPublicKey(db: Knex, options: { createOnEmbedded?: boolean } = {}): Promise<void> {
  const keys = givenMasterKeys(options);
  if (!keys) return;
  await db.transaction(async (trx) => {
    await trx.raw('SELECT pg_advisory_xact_lock_shared(?::bigint)', [SEALING_LOCK]);
    const record: { key_id: string | null; public_key: Buffer | null } | undefined = await trx(RECORD_TABLE)
      .forUpdate()
      .first('key_id', 'public_key');
    const keyId = record?.key_id ?? keys.currentId;
    if (!keys.ids.has(keyId)) throw mismatch(keys, keyId);
    const publicKey = sealingPublicKey(keyId);
    if (record?.public_key) {
      if (!record.public_key.equals(publicKey)) throw tampered(keyId);
      return;
    }
    await trx(RECORD_TABLE)
      .insert({ singleton: true, key_id: keyId, public_key: publicKey })
      .onConflict('singleton')
      .merge();
  });
}

/**
 * An API process's start (as the owner's connection): every API process must hold the API secret the database
 * records (master_key_record.api_secret_id), so that cursors, CSRF tokens and stored answers made by one hold at
 * every other. None recorded: this one's is. A process whose previous secrets (FRS_API_SECRET_PREVIOUS) hold the
 * recorded one moves the record to its current one: the change of the secret has begun, and a process still given
 * only the old one (stale) then refuses to start, in one line naming the setting. A restart is what makes a running
 * process take a new secret.
 */
export async function checkApiSecret(db: Knex): Promise<void> {
  let held: ReturnType<typeof apiSecretIds>;
  try {
    held = apiSecretIds();
  } catch (err) {
    if (err instanceof MasterKeyError)
      throw new MasterKeyError(
        `the API signs its list cursors with a key derived from its API secret, and ${err.message}`,
      );
    throw err;
  }
  await db.transaction(async (trx) => {
    const recorded: string | null | undefined = (await trx(RECORD_TABLE).forUpdate().first('api_secret_id'))
      ?.api_secret_id;
    if (recorded && !held.ids.includes(recorded)) {
      throw new MasterKeyError(
        `${held.setting} holds API secret ${held.ids.join(', ')}, but the database records ${recorded}, the one every API process holds: give this process that secret ` +
          `(during a change of it, the new one in FRS_API_SECRET and the old one in FRS_API_SECRET_PREVIOUS)`,
      );
    }
    if (recorded !== held.currentId)
      await trx(RECORD_TABLE)
        .insert({ singleton: true, api_secret_id: held.currentId })
        .onConflict('singleton')
        .merge(['api_secret_id']);
  });
}

/** Opens one sealed signing secret of an endpoint. */
export function openSigningSecret(endpointId: string, secret: SealedSecret): string {
  return openSecret(secret, sealingContext(endpointId));
}

/**
 * The secrets an attempt is signed with, newest first: the current one, and the previous one while a rotation's
 * overlap lasts (the caller passes it only then).
 */
export function openSigningSecrets(endpointId: string, current: SealedSecret, previous: SealedSecret | null): string[] {
  return previous
    ? [openSigningSecret(endpointId, current), openSigningSecret(endpointId, previous)]
    : [openSigningSecret(endpointId, current)];
}

/** Opens one sealed ed25519 private key of an endpoint: its `whsk_` text. */
export function openPrivateKey(endpointId: string, key: SealedSecret): string {
  return openSecret(key, privateKeyContext(endpointId));
}

/**
 * The fixture columns of an endpoint's ed25519 private key, sealed outside a sealing transaction: only for tests (as
 * sealedSecretColumns).
 */
export function sealedPrivateKeyColumns(endpointId: string, privateKey: string): SealedPrivateKeyColumns {
  const { keyId, sealed } = sealSecret(privateKey, privateKeyContext(endpointId));
  return { signing_private_key_key_id: keyId, signing_private_key_sealed: sealed };
}
