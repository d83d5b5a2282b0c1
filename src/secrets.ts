import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DATA_DIR } from './config.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniformly random base62 string (rejection sampling, so no character is more likely than another). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export const API_KEY_PREFIX = 'frs_';
export const SIGNING_SECRET_PREFIX = 'whsec_';

/** A new API key: `frs_` + 40 base62 characters (~238 bits). Shown once; only its SHA-256 hash is stored. */
export function newApiKey(): string {
  return API_KEY_PREFIX + randomBase62(40);
}

/** A new webhook signing secret: `whsec_` + 40 base62 characters. */
export function newSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBase62(40);
}

export function hashApiKey(key: string): Buffer {
  return crypto.createHash('sha256').update(key, 'utf8').digest();
}

// ---------------------------------------------------------------------------------------------------------------
// Secrets at rest: AES-256-GCM under a master key. This is the only code that touches master keys.
//
// The master key is FRS_SECRET_KEY (base64 of 32 random bytes) when set, else the key file under the data folder
// (`secret.key`, mode 0600), created on first use so that the embedded default needs no set-up. The key file
// holds one base64 key per line, the current one first; older lines exist only while a master-key rotation is in
// progress. During a rotation with FRS_SECRET_KEY, FRS_SECRET_KEY_PREVIOUS (comma-separated) lists the old keys.
// Every sealed value records the id of the key that sealed it (a hash of the key, never the key).

export const SECRET_KEY_ENV = 'FRS_SECRET_KEY';
export const PREVIOUS_SECRET_KEYS_ENV = 'FRS_SECRET_KEY_PREVIOUS';
const KEY_FILE_NAME = 'secret.key';
const SEALED_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A secret sealed under a master key: `sealed` is version (1 byte) | IV (12) | GCM tag (16) | ciphertext. */
export interface SealedSecret {
  keyId: string;
  sealed: Buffer;
}

/** A sealed value's key is not among this process's master keys (or the key file/variable is unusable). */
export class MasterKeyError extends Error {}

interface MasterKey {
  id: string;
  key: Buffer;
}

interface Keyring {
  current: MasterKey;
  byId: Map<string, MasterKey>;
  /** Where the keys came from: FRS_SECRET_KEY, or the key file at this path. */
  source: { kind: 'env' } | { kind: 'file'; path: string };
}

export interface KeyringOptions {
  env?: NodeJS.ProcessEnv;
  /** Folder of the key file (default FRS_DATA_DIR, else .data/). */
  dataDir?: string;
  /**
   * Create the key file when there is none (default true). Only a process about to seal may: one that only opens
   * secrets (a worker) and finds no key must say so, not make a new key that opens nothing.
   */
  createIfMissing?: boolean;
}

function masterKeyId(key: Buffer): string {
  return `mk_${crypto.createHash('sha256').update('frs-master-key-id\0').update(key).digest('hex').slice(0, 16)}`;
}

function parseMasterKey(text: string, where: string): MasterKey {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32 || !/^[A-Za-z0-9+/]{43}=$/.test(text.trim())) {
    throw new MasterKeyError(`${where} must be the base64 of 32 random bytes (make one with: openssl rand -base64 32)`);
  }
  return { id: masterKeyId(key), key };
}

function newMasterKeyText(): string {
  return crypto.randomBytes(32).toString('base64');
}

/** The key file's path: `secret.key` in the data folder. */
export function masterKeyFile(dataDir: string = DATA_DIR): string {
  return path.join(dataDir, KEY_FILE_NAME);
}

function readKeyFile(file: string, createIfMissing: boolean): MasterKey[] {
  for (;;) {
    try {
      const lines = fs.readFileSync(file, 'utf8').split('\n').filter((line) => line.trim() !== '');
      if (lines.length === 0) throw new MasterKeyError(`the master key file ${file} is empty`);
      return lines.map((line, i) => parseMasterKey(line, `line ${i + 1} of the master key file ${file}`));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (!createIfMissing) {
      throw new MasterKeyError(
        `there is no master key: no ${SECRET_KEY_ENV} and no key file ${file}; give this process the key the secrets were sealed with ` +
          `(${SECRET_KEY_ENV}, or that file, or FRS_DATA_DIR pointing at its folder)`,
      );
    }
    fs.mkdirSync(path.dirname(file), { recursive: true });
    try {
      fs.writeFileSync(file, `${newMasterKeyText()}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      // Another process created it first: use theirs.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

/** Writes the key file through a temporary file and a rename, so a reader never sees half of it. */
function writeKeyFile(file: string, keys: string[]): void {
  const temporary = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, `${keys.join('\n')}\n`, { mode: 0o600 });
  fs.renameSync(temporary, file);
}

export function loadKeyring(options: KeyringOptions = {}): Keyring {
  const env = options.env ?? process.env;
  let keys: MasterKey[];
  let source: Keyring['source'];
  if (env[SECRET_KEY_ENV]) {
    keys = [parseMasterKey(env[SECRET_KEY_ENV]!, SECRET_KEY_ENV)];
    for (const text of (env[PREVIOUS_SECRET_KEYS_ENV] ?? '').split(',').filter((t) => t.trim() !== '')) {
      keys.push(parseMasterKey(text, PREVIOUS_SECRET_KEYS_ENV));
    }
    source = { kind: 'env' };
  } else {
    const file = masterKeyFile(options.dataDir ?? env.FRS_DATA_DIR);
    keys = readKeyFile(file, options.createIfMissing ?? true);
    source = { kind: 'file', path: file };
  }
  return { current: keys[0], byId: new Map(keys.map((k) => [k.id, k])), source };
}

let processKeyring: Keyring | undefined;

/**
 * This process's keyring, loaded on first use. The key file is read again when a key id is missing or when
 * `fresh` (before sealing), so a rotation by another process is picked up.
 */
function keyring(options: { wantedId?: string; fresh?: boolean } = {}): Keyring {
  // Only sealing (`fresh`) may create the key file.
  processKeyring ??= loadKeyring({ createIfMissing: options.fresh === true });
  const stale = options.fresh || (options.wantedId !== undefined && !processKeyring.byId.has(options.wantedId));
  if (stale && processKeyring.source.kind === 'file') processKeyring = loadKeyring({ createIfMissing: options.fresh === true });
  return processKeyring;
}

/** Encrypts `plain` under the current master key. `context` (e.g. the owning row's id) is authenticated too. */
export function sealSecret(plain: string, context: string): SealedSecret {
  const { current } = keyring({ fresh: true });
  const iv = crypto.randomBytes(IV_BYTES);
  const cipher = crypto.createCipheriv('aes-256-gcm', current.key, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return { keyId: current.id, sealed: Buffer.concat([Buffer.from([SEALED_VERSION]), iv, cipher.getAuthTag(), ciphertext]) };
}

/** Decrypts a value sealed by sealSecret with the same `context`; throws MasterKeyError when it cannot. */
export function openSecret(secret: SealedSecret, context: string): string {
  const masterKey = keyring({ wantedId: secret.keyId }).byId.get(secret.keyId);
  if (!masterKey) {
    throw new MasterKeyError(
      `a secret is sealed with master key ${secret.keyId}, which this process does not have: set ${SECRET_KEY_ENV} ` +
        `(and ${PREVIOUS_SECRET_KEYS_ENV} during a master-key rotation) or use the key file it was sealed with`,
    );
  }
  const { sealed } = secret;
  if (sealed[0] !== SEALED_VERSION || sealed.length < 1 + IV_BYTES + TAG_BYTES) throw new MasterKeyError(`a sealed secret has an unknown format`);
  const decipher = crypto.createDecipheriv('aes-256-gcm', masterKey.key, sealed.subarray(1, 1 + IV_BYTES));
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new MasterKeyError(`a sealed secret failed authentication under master key ${secret.keyId} (altered, or moved to another row)`);
  }
}

/** The id of the key sealSecret uses now. */
export function currentMasterKeyId(): string {
  return keyring({ fresh: true }).current.id;
}

/**
 * Master-key rotation, around re-sealing every stored secret in one transaction (`reseal`, which gets the new
 * key's id). With the key file: a new key is written first, the old ones kept below it until `reseal` has
 * committed, so a crash at any point leaves every secret readable. With FRS_SECRET_KEY: the operator has already
 * set the new key there and the old one in FRS_SECRET_KEY_PREVIOUS; this re-seals under FRS_SECRET_KEY.
 */
export async function rotateMasterKey<T>(reseal: (currentKeyId: string) => Promise<T>): Promise<{ keyId: string; source: 'env' | 'file'; result: T }> {
  let ring = keyring({ fresh: true });
  if (ring.source.kind === 'file') {
    const file = ring.source.path;
    const previous = fs.readFileSync(file, 'utf8').split('\n').filter((line) => line.trim() !== '');
    writeKeyFile(file, [newMasterKeyText(), ...previous]);
    ring = processKeyring = loadKeyring();
    const result = await reseal(ring.current.id);
    writeKeyFile(file, [ring.current.key.toString('base64')]);
    return { keyId: ring.current.id, source: 'file', result };
  }
  return { keyId: ring.current.id, source: 'env', result: await reseal(ring.current.id) };
}
