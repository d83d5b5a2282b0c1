import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Used by migration 20261123000900_sealed_signing_secrets only, and frozen: how that migration sealed the signing
// secrets stored in plain text (and how its down opens them), copied from src/secrets.ts and
// src/core/webhooks/signing-secrets.ts when migrations stopped importing src/. The live code may move on (another format,
// another place for the key); this must keep sealing what the workers of that time and since can open, so it is never
// changed in a way that changes what it seals or opens, or under which key.
//
// A sealed secret is version 1 (1 byte) | IV (12) | AES-256-GCM tag (16) | ciphertext, with `webhook_endpoints.secret:<id>`
// authenticated with it, so it opens only on its own row. The master key is FRS_SECRET_KEY (older ones in
// FRS_SECRET_KEY_PREVIOUS, comma-separated), else the key file: FRS_SECRET_KEY_FILE, else secret.key in FRS_DATA_DIR or
// the checkout's .data/, one base64 key per line, the current first, readable by its owner only. Only the embedded
// default (no DATABASE_URL) makes the key file when there is none. A key's id is `mk_` and 16 hex digits of a hash.

const SEALED_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

interface MasterKey {
  id: string;
  key: Buffer;
}

/** The checkout: two folders up, whether under tsx (migrations/support) or built (dist/migrations/support). */
const ROOT_DIR = (() => {
  const up = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
  return path.basename(up) === 'dist' ? path.resolve(up, '..') : up;
})();

function parseMasterKey(text: string, where: string): MasterKey {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32 || !/^[A-Za-z0-9+/]{43}=$/.test(text.trim())) {
    throw new Error(`${where} must be the base64 of 32 random bytes (make one with: openssl rand -base64 32)`);
  }
  return {
    id: `mk_${crypto.createHash('sha256').update('frs-master-key-id\0').update(key).digest('hex').slice(0, 16)}`,
    key,
  };
}

function readKeyFile(file: string, createIfMissing: boolean): MasterKey[] {
  for (;;) {
    try {
      const fd = fs.openSync(file, 'r');
      let text: string;
      try {
        const mode = fs.fstatSync(fd).mode & 0o777;
        if ((mode & 0o077) !== 0) {
          throw new Error(
            `the master key file ${file} is open to other users (mode ${mode.toString(8).padStart(4, '0')}): run chmod 600 ${file}`,
          );
        }
        text = fs.readFileSync(fd, 'utf8');
      } finally {
        fs.closeSync(fd);
      }
      const lines = text.split('\n').filter((line) => line.trim() !== '');
      if (lines.length === 0) throw new Error(`the master key file ${file} is empty`);
      return lines.map((line, i) => parseMasterKey(line, `line ${i + 1} of the master key file ${file}`));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (!createIfMissing) {
      throw new Error(
        `there is no master key: no FRS_SECRET_KEY and no key file ${file}; set FRS_SECRET_KEY, or FRS_SECRET_KEY_FILE to the key file ` +
          `(for a database that holds no signing secret yet, "fleet-admin secrets create-master-key" makes one)`,
      );
    }
    // Another process may create it first: then theirs is read.
    fs.mkdirSync(path.dirname(file), { recursive: true });
    try {
      fs.writeFileSync(file, `${crypto.randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

/** This process's master keys, the current one first. `create`: make the key file when there is none (embedded default only). */
function masterKeys(create: boolean): MasterKey[] {
  const env = process.env;
  if (env.FRS_SECRET_KEY) {
    const previous = (env.FRS_SECRET_KEY_PREVIOUS ?? '').split(',').filter((t) => t.trim() !== '');
    return [
      parseMasterKey(env.FRS_SECRET_KEY, 'FRS_SECRET_KEY'),
      ...previous.map((text) => parseMasterKey(text, 'FRS_SECRET_KEY_PREVIOUS')),
    ];
  }
  const file = env.FRS_SECRET_KEY_FILE || path.join(env.FRS_DATA_DIR ?? path.join(ROOT_DIR, '.data'), 'secret.key');
  return readKeyFile(file, create && !env.DATABASE_URL);
}

const context = (endpointId: string) => `webhook_endpoints.secret:${endpointId}`;

/** The columns holding an endpoint's signing secret, sealed under the current master key. */
export function sealedSecretColumns(
  endpointId: string,
  secret: string,
): { secret_key_id: string; secret_sealed: Buffer } {
  const [current] = masterKeys(true);
  const iv = crypto.randomBytes(IV_BYTES);
  const cipher = crypto.createCipheriv('aes-256-gcm', current.key, iv);
  cipher.setAAD(Buffer.from(context(endpointId), 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return {
    secret_key_id: current.id,
    secret_sealed: Buffer.concat([Buffer.from([SEALED_VERSION]), iv, cipher.getAuthTag(), ciphertext]),
  };
}

/** Opens an endpoint's signing secret sealed under one of this process's master keys. */
export function openSigningSecret(endpointId: string, secret: { keyId: string; sealed: Buffer }): string {
  const masterKey = masterKeys(false).find((k) => k.id === secret.keyId);
  if (!masterKey) {
    throw new Error(
      `a secret is sealed with master key ${secret.keyId}, which this process does not have: set FRS_SECRET_KEY ` +
        `(and FRS_SECRET_KEY_PREVIOUS during a master-key rotation), or FRS_SECRET_KEY_FILE to the key file holding it`,
    );
  }
  const { sealed } = secret;
  if (sealed[0] !== SEALED_VERSION || sealed.length < 1 + IV_BYTES + TAG_BYTES)
    throw new Error(`a sealed secret has an unknown format`);
  const decipher = crypto.createDecipheriv('aes-256-gcm', masterKey.key, sealed.subarray(1, 1 + IV_BYTES));
  decipher.setAAD(Buffer.from(context(endpointId), 'utf8'));
  decipher.setAuthTag(sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    throw new Error(
      `a sealed secret failed authentication under master key ${secret.keyId} (altered, or moved to another row)`,
    );
  }
}
