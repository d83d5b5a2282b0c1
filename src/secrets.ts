import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { processConfig, takeVariables, type Env } from './config.js';

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
export const ADMIN_TOKEN_PREFIX = 'fra_';
/** The settings screen's one-time link key, and the session token its opening sets as a cookie (src/core/portal-sessions.ts). */
export const PORTAL_LINK_PREFIX = 'frpl_';
export const PORTAL_SESSION_PREFIX = 'frps_';

/** A new API key: `frs_` + 40 base62 characters (~238 bits). Shown once; only its SHA-256 hash is stored. */
export function newApiKey(): string {
  return API_KEY_PREFIX + randomBase62(40);
}

/** A new admin token: `fra_` + 40 base62 characters, made and hashed as API keys are (hashApiKey). Shown once. */
export function newAdminToken(): string {
  return ADMIN_TOKEN_PREFIX + randomBase62(40);
}

/** A new settings-screen link key or session token: its prefix + 40 base62 characters, hashed as API keys are. Shown once. */
export function newPortalCredential(prefix: typeof PORTAL_LINK_PREFIX | typeof PORTAL_SESSION_PREFIX): string {
  return prefix + randomBase62(40);
}

/** Whether a text holds something that looks like a key, a token or a signing secret: what no log or record may carry. */
export function looksLikeSecret(text: string): boolean {
  return SECRET_SHAPE.test(text);
}

// (an ed25519 private key, whsk_, is base64: + and / among its characters)
const SECRET_SHAPE = /(?:frs|fra|frpl|frps|whsec)_[0-9A-Za-z]{20,}|whsk_[0-9A-Za-z+/]{20,}/;

/** The refusal of a name or role shaped like a key, token or secret: the rule after the field's name. */
export const SECRET_SHAPED =
  'must not look like a key, token or signing secret (frs_, fra_, frpl_, frps_, whsec_ or whsk_ and 20 or more letters and digits): it is shown where a secret never is';

/** `text` with everything shaped like a key, token or signing secret replaced by `[redacted]`. */
export function redactSecrets(text: string): string {
  return text.replace(new RegExp(SECRET_SHAPE.source, 'g'), '[redacted]');
}

/**
 * `text` with the credentials of every URL in it replaced by `[redacted]`: the user and password (`user:pw@`), and each
 * query or fragment parameter whose name says key, token, secret, password, signature, auth or session, or whose value
 * is shaped like a secret or is 20 or more letters, digits and -_.~+/= (an opaque credential). For what may hold a URL
 * a person chose (an endpoint's), in an audit entry.
 */
export function redactUrlCredentials(text: string): string {
  return text.replace(/[a-z][a-z0-9+.-]*:\/\/[^\s"'<>\\]+/gi, (found) => {
    let url: URL;
    try {
      url = new URL(found);
    } catch {
      return found;
    }
    let changed = false;
    const redact = () => {
      changed = true;
      return REDACTED;
    };
    if (url.username) url.username = redact();
    if (url.password) url.password = redact();
    const redactParams = (params: string) => {
      const parsed = new URLSearchParams(params);
      for (const [name, value] of [...parsed]) {
        if (CREDENTIAL_NAME.test(name) || looksLikeSecret(value) || OPAQUE_VALUE.test(value))
          parsed.set(name, redact());
      }
      return parsed.toString();
    };
    if (url.search) url.search = redactParams(url.search.slice(1));
    const fragment = url.hash.slice(1);
    if (fragment.includes('=')) url.hash = redactParams(fragment);
    else if (OPAQUE_VALUE.test(fragment) || looksLikeSecret(fragment)) url.hash = redact();
    // a URL with nothing to redact stays exactly as written (URL would normalise it)
    return changed ? url.toString().replaceAll(encodeURIComponent(REDACTED), REDACTED) : found;
  });
}
const REDACTED = '[redacted]';
const CREDENTIAL_NAME = /key|token|secret|passw|pwd|sig|auth|session|credential/i;
const OPAQUE_VALUE = /^[\w.~+/=-]{20,}$/;

/** A new webhook signing secret: `whsec_` + 40 base62 characters. */
export function newSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBase62(40);
}

export function hashApiKey(key: string): Buffer {
  return crypto.createHash('sha256').update(key, 'utf8').digest();
}

// ---------------------------------------------------------------------------------------------------------------
// Secrets at rest: sealed to a public key (X25519, see sealToPublicKey below): any process may seal, only the holder
// of the master key opens. This is the only code that touches master keys.
//
// The master key is FRS_SECRET_KEY (base64 of 32 random bytes) when set, else the key file: FRS_SECRET_KEY_FILE, by
// default `secret.key` in the data folder. It holds one base64 key per line, the current one first; older lines
// exist only while a master-key rotation is in progress. During a rotation with FRS_SECRET_KEY,
// FRS_SECRET_KEY_PREVIOUS (comma-separated) lists the old keys. Every sealed value records the id of the key that
// sealed it (a hash of the key, never the key). A master key's sealing key pair is derived from it (HKDF): the
// private half never leaves the process holding the master key (the worker, and the CLI's sealing commands); the
// public half is recorded in the database (master_key_record.public_key), where a process that only seals (the API
// process: admin API and settings screen) reads it. Such a process holds no master key at all (forgoMasterKeys).
//
// A master key is never made by accident: only the embedded default (no DATABASE_URL) creates its key file, on the
// worker's first start, so that it needs no set-up. With DATABASE_URL a process without a key refuses to seal: a key
// made by a one-off process (a release container running `fleet-admin migrate`) would leave with it, and every secret
// sealed under it would be lost. There the key is given, or made on purpose by `fleet-admin secrets
// create-master-key`. A key file other users can read is refused.
//
// The API process's own secret (FRS_API_SECRET, else its key file, `api-secret.key` in the data folder) is loaded the
// same way and is a key of another kind: the keys of the API's list cursors, of the settings screen's CSRF tokens and
// of the admin API's stored answers are derived from it (derivedKeys), and nothing is ever sealed to it; it opens no
// signing secret.

export const SECRET_KEY_ENV = 'FRS_SECRET_KEY';
export const PREVIOUS_SECRET_KEYS_ENV = 'FRS_SECRET_KEY_PREVIOUS';
export const SECRET_KEY_FILE_ENV = 'FRS_SECRET_KEY_FILE';
export const API_SECRET_ENV = 'FRS_API_SECRET';
export const PREVIOUS_API_SECRETS_ENV = 'FRS_API_SECRET_PREVIOUS';
export const API_SECRET_FILE_ENV = 'FRS_API_SECRET_FILE';
const SEALED_VERSION = 1;
/** A sealed box (sealToPublicKey): version (1 byte) | ephemeral public key (32) | GCM tag (16) | ciphertext. */
const BOX_VERSION = 2;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** What a key loader loads: the master key (sealing) or the API process's secret (cursors, CSRF, stored answers). */
interface KeyKind {
  /** As messages name it: "master key", "API secret". */
  name: string;
  env: string;
  previousEnv: string;
  fileEnv: string;
  fileName: string;
  idPrefix: string;
  /** How to make a key file on purpose, for the refusal of a missing key. */
  makeHint: string;
}

const MASTER: KeyKind = {
  name: 'master key',
  env: SECRET_KEY_ENV,
  previousEnv: PREVIOUS_SECRET_KEYS_ENV,
  fileEnv: SECRET_KEY_FILE_ENV,
  fileName: 'secret.key',
  idPrefix: 'mk',
  makeHint: ' (for a database that holds no signing secret yet, "fleet-admin secrets create-master-key" makes one)',
};
const API_SECRET: KeyKind = {
  name: 'API secret',
  env: API_SECRET_ENV,
  previousEnv: PREVIOUS_API_SECRETS_ENV,
  fileEnv: API_SECRET_FILE_ENV,
  fileName: 'api-secret.key',
  idPrefix: 'as',
  makeHint: ' (make one with: openssl rand -base64 32; every API process needs the same)',
};

/** A secret sealed under a master key: `sealed` is a sealed box (version 2), or version 1 (IV, GCM tag, ciphertext) from before. */
export interface SealedSecret {
  keyId: string;
  sealed: Buffer;
}

/** A sealed value's key is not among this process's master keys (or the key file/variable is unusable). */
export class MasterKeyError extends Error {}

/** Nothing to seal to yet: the database records no sealing public key and this process holds no master key. */
export class NoSealingKeyError extends MasterKeyError {}

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

/** The ids of a process's master keys and the setting they came from, for checks against the database's record. */
export interface MasterKeyIds {
  /** The newest key: the one a master-key rotation re-seals under, and a first seal uses. */
  currentId: string;
  /** Every key it opens with: the current one, and the old ones during a master-key rotation. */
  ids: ReadonlySet<string>;
  /** The setting that gave them, as an error names it: `FRS_SECRET_KEY` or `the key file <path> (FRS_SECRET_KEY_FILE)`. */
  setting: string;
}

export interface KeyringOptions {
  env?: Env;
  /** Folder of the key file when FRS_SECRET_KEY_FILE is unset (default FRS_DATA_DIR, else .data/). */
  dataDir?: string;
  /**
   * Create the key file when there is none. Only a process about to seal may, and only on the embedded default (the
   * default: true without DATABASE_URL, false with it): one that only opens secrets (a worker) and finds no key must
   * say so, not make a new key that opens nothing.
   */
  createIfMissing?: boolean;
}

function masterKeyId(key: Buffer, kind: KeyKind = MASTER): string {
  const label = kind === MASTER ? 'frs-master-key-id\0' : 'frs-api-secret-id\0';
  return `${kind.idPrefix}_${crypto.createHash('sha256').update(label).update(key).digest('hex').slice(0, 16)}`;
}

function parseMasterKey(text: string, where: string, kind: KeyKind = MASTER): MasterKey {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32 || !/^[A-Za-z0-9+/]{43}=$/.test(text.trim())) {
    throw new MasterKeyError(`${where} must be the base64 of 32 random bytes (make one with: openssl rand -base64 32)`);
  }
  return { id: masterKeyId(key, kind), key };
}

function newMasterKeyText(): string {
  return crypto.randomBytes(32).toString('base64');
}

/** The key file's default path: `secret.key` in the data folder. */
export function masterKeyFile(dataDir: string = processConfig().dataDir): string {
  return path.join(dataDir, MASTER.fileName);
}

/** The key file this process reads: FRS_SECRET_KEY_FILE, else `secret.key` in the data folder (FRS_API_SECRET_FILE, `api-secret.key` for the API secret). */
function keyFilePath(env: Env, dataDir?: string, kind: KeyKind = MASTER): string {
  return env[kind.fileEnv] || path.join(dataDir ?? env.FRS_DATA_DIR ?? processConfig().dataDir, kind.fileName);
}

/** The key file's contents, refused when its group or other users may read or change it. */
function readPrivateFile(file: string, kind: KeyKind = MASTER): string {
  const fd = fs.openSync(file, 'r');
  try {
    const mode = fs.fstatSync(fd).mode & 0o777;
    if ((mode & 0o077) !== 0) {
      throw new MasterKeyError(
        `the ${kind.name} file ${file} is open to other users (mode ${mode.toString(8).padStart(4, '0')}): run chmod 600 ${file}`,
      );
    }
    return fs.readFileSync(fd, 'utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes a new key file holding one new key, readable by its owner only; false when the file exists already. */
function writeNewKeyFile(file: string): boolean {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  try {
    fs.writeFileSync(file, `${newMasterKeyText()}\n`, { mode: 0o600, flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return false;
  }
}

function readKeyFile(file: string, createIfMissing: boolean, kind: KeyKind = MASTER): MasterKey[] {
  for (;;) {
    try {
      const lines = readPrivateFile(file, kind)
        .split('\n')
        .filter((line) => line.trim() !== '');
      if (lines.length === 0) throw new MasterKeyError(`the ${kind.name} file ${file} is empty`);
      return lines.map((line, i) => parseMasterKey(line, `line ${i + 1} of the ${kind.name} file ${file}`, kind));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (!createIfMissing) {
      throw new MasterKeyError(
        `there is no ${kind.name}: no ${kind.env} and no key file ${file}; set ${kind.env}, or ${kind.fileEnv} to the key file${kind.makeHint}`,
      );
    }
    // Another process may create it first: then theirs is read.
    writeNewKeyFile(file);
  }
}

/**
 * Writes the key file through a temporary file and a rename, so a reader never sees half of it. The temporary file
 * has a name no one can guess and is created afresh (never through a file or link someone left there), its owner's
 * alone from the start.
 */
export function writeKeyFile(file: string, keys: string[]): void {
  const temporary = `${file}.${crypto.randomBytes(12).toString('hex')}.tmp`;
  fs.writeFileSync(temporary, `${keys.join('\n')}\n`, { mode: 0o600, flag: 'wx' });
  fs.renameSync(temporary, file);
}

export function loadKeyring(options: KeyringOptions = {}, kind: KeyKind = MASTER): Keyring {
  const env = options.env ?? processConfig().env;
  let keys: MasterKey[];
  let source: Keyring['source'];
  if (env[kind.env]) {
    keys = [parseMasterKey(env[kind.env]!, kind.env, kind)];
    for (const text of (env[kind.previousEnv] ?? '').split(',').filter((t) => t.trim() !== '')) {
      keys.push(parseMasterKey(text, kind.previousEnv, kind));
    }
    source = { kind: 'env' };
  } else {
    const file = keyFilePath(env, options.dataDir, kind);
    keys = readKeyFile(file, options.createIfMissing ?? !env.DATABASE_URL, kind);
    source = { kind: 'file', path: file };
  }
  return { current: keys[0], byId: new Map(keys.map((k) => [k.id, k])), source };
}

let processKeyring: Keyring | undefined;
/** Why this process holds no master key, once forgoMasterKeys() was called: it then never reads one. */
let forgone: string | undefined;

/**
 * This process serves the API (the public listener, the admin API, the settings screen): it never reads a master
 * key, from the variable or the key file, whatever it is given; every use of one is refused (it seals to the
 * recorded public key instead). Called by src/main.ts before anything else.
 */
export function forgoMasterKeys(why: string): void {
  forgone = why;
  processKeyring = undefined;
}

/** Whether this process may hold master keys (forgoMasterKeys was not called). */
export function mayHoldMasterKeys(): boolean {
  return forgone === undefined;
}

/**
 * This process's keyring, loaded on first use. The key file is read again when a key id is missing or when
 * `fresh` (before sealing), so a rotation by another process is picked up. Only sealing (`create`) may create the
 * key file, and only on the embedded default.
 */
function keyring(options: { wantedId?: string; fresh?: boolean; create?: boolean } = {}): Keyring {
  if (forgone !== undefined) throw new MasterKeyError(`this process holds no master key: ${forgone}`);
  const createIfMissing = options.create === true && !processConfig().env.DATABASE_URL;
  processKeyring ??= loadKeyring({ createIfMissing });
  const stale = options.fresh || (options.wantedId !== undefined && !processKeyring.byId.has(options.wantedId));
  if (stale && processKeyring.source.kind === 'file') processKeyring = loadKeyring({ createIfMissing });
  return processKeyring;
}

function keyIds(ring: Keyring): MasterKeyIds {
  const previous = ring.source.kind === 'env' && ring.byId.size > 1 ? ` with ${PREVIOUS_SECRET_KEYS_ENV}` : '';
  return {
    currentId: ring.current.id,
    ids: new Set(ring.byId.keys()),
    setting:
      ring.source.kind === 'env'
        ? `${SECRET_KEY_ENV}${previous}`
        : `the key file ${ring.source.path} (${SECRET_KEY_FILE_ENV})`,
  };
}

/**
 * The master keys this process was given (FRS_SECRET_KEY, or an existing key file), read afresh; undefined when it
 * has none. Creates nothing, unless `createOnEmbedded` (a worker's start) and this is the embedded default (no
 * DATABASE_URL): then the key file is made when there is none. Throws MasterKeyError for a malformed key or a key
 * file other users can read.
 */
export function givenMasterKeys(options: { createOnEmbedded?: boolean } = {}): MasterKeyIds | undefined {
  if (forgone !== undefined) return undefined;
  const { env } = processConfig();
  if (options.createOnEmbedded && !env.DATABASE_URL) return keyIds(keyring({ fresh: true, create: true }));
  if (!env[SECRET_KEY_ENV] && !fs.existsSync(keyFilePath(env))) return undefined;
  return keyIds(keyring({ fresh: true }));
}

/** The variables that give a master key: only the worker holds them (FRS_ROLE=all hands them to its worker process). */
const MASTER_KEY_VARIABLES = [SECRET_KEY_ENV, PREVIOUS_SECRET_KEYS_ENV];

/**
 * For `npm start` with FRS_ROLE=all, before anything else: removes the master key's variables from this process's
 * environment and returns them, for the worker process it starts, which alone holds them. (The process's initial
 * environment block, /proc/<pid>/environ, still shows what it was started with: hence the README's advice to give
 * the key as a key file, or to run FRS_ROLE=api and FRS_ROLE=worker as processes of their own.)
 */
export function takeMasterKeyVariables(): Record<string, string> {
  return takeVariables(MASTER_KEY_VARIABLES);
}

/**
 * The keys a process of `role` holds, settled before it does anything else (src/main.ts): the API process (FRS_ROLE
 * api, or all, which runs its worker as a process of its own) forgoes the master key; FRS_ROLE=api refuses one
 * given in its environment; FRS_ROLE=all takes the key's variables out of its environment and returns them, for its
 * worker's process.
 */
export function settleProcessKeys(role: 'all' | 'api' | 'worker'): Record<string, string> {
  const taken = role === 'all' ? takeMasterKeyVariables() : {};
  if (role === 'api') refuseMasterKeyVariables();
  if (role !== 'worker')
    forgoMasterKeys(`it serves the API (FRS_ROLE=${role}); only the webhook worker holds the master key`);
  return taken;
}

/** FRS_ROLE=api: refuses a master key given in the environment, naming the variable (the API process holds none). */
export function refuseMasterKeyVariables(): void {
  const given = MASTER_KEY_VARIABLES.filter((name) => processConfig().env[name]);
  if (given.length > 0) {
    throw new MasterKeyError(
      `${given.join(' and ')} ${given.length > 1 ? 'are' : 'is'} set, but this process serves the API (FRS_ROLE=api), which holds no master key: unset ${given.length > 1 ? 'them' : 'it'} here and give ${given.length > 1 ? 'them' : 'it'} to the worker (FRS_ROLE=worker) only`,
    );
  }
}

/**
 * Keys for a purpose other than sealing (`label`, such as signing the API's list cursors), derived from the API
 * process's own secret (FRS_API_SECRET, else its key file) with HKDF-SHA256 (RFC 5869) and the label as its info:
 * the same in every process given the same secret and across restarts, never the secret itself, and neither it nor
 * another purpose's key can be worked out from one. Nothing is sealed to them: they open no signing secret. The
 * current secret's first (to sign with), then those of FRS_API_SECRET_PREVIOUS (what was signed before a change of
 * the secret still verifies). Only the embedded default creates the key file when there is none. `options`: the
 * keys of another environment than this process's (tests).
 */
export function derivedKeys(label: string, options?: KeyringOptions): Buffer[] {
  const ring = loadKeyring(options ?? {}, API_SECRET);
  const keys = [ring.current, ...[...ring.byId.values()].filter((k) => k.id !== ring.current.id)];
  return keys.map((k) => Buffer.from(crypto.hkdfSync('sha256', k.key, Buffer.alloc(0), `frs-${label}`, 32)));
}

/** The id of this process's API secret (a hash, never the secret), as loaded by derivedKeys. */
export function apiSecretId(options?: KeyringOptions): string {
  return loadKeyring(options ?? {}, API_SECRET).current.id;
}

/** The ids of this process's API secrets (the current one first) and the setting they came from, as a refusal names it. */
export function apiSecretIds(): { currentId: string; ids: string[]; setting: string } {
  const ring = loadKeyring({}, API_SECRET);
  const setting =
    ring.source.kind === 'env'
      ? `${API_SECRET_ENV}${ring.byId.size > 1 ? ` with ${PREVIOUS_API_SECRETS_ENV}` : ''}`
      : `the key file ${ring.source.path} (${API_SECRET_FILE_ENV})`;
  return { currentId: ring.current.id, ids: [...ring.byId.keys()], setting };
}

// ---------------------------------------------------------------------------------------------------------------
// Sealed boxes: bytes sealed to an X25519 public key, as libsodium's sealed box does it, with Node's own crypto. Each
// seal makes an ephemeral key pair; the shared secret of its private half and the recipient's public key, through
// HKDF-SHA256 (salted with both public keys), gives an AES-256-GCM key and IV used this once; `context` (what the
// value is sealed for, such as the owning row's id) is authenticated with it. Anyone with the public key seals; only
// the private key opens. Generic: bytes in, bytes out, for any secret a later part seals the same way.

const X25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b656e04220420', 'hex');
const X25519_SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');
const BOX_INFO = 'frs-sealed-box-v1';

/** A value that does not open: altered, sealed to another key, or for another context. */
export class SealedBoxError extends Error {}

/** An X25519 private key from its 32 raw bytes. */
export function x25519PrivateKey(raw: Buffer): crypto.KeyObject {
  return crypto.createPrivateKey({ key: Buffer.concat([X25519_PKCS8_PREFIX, raw]), format: 'der', type: 'pkcs8' });
}

/** The 32 raw bytes of an X25519 key's public half. */
export function x25519PublicBytes(key: crypto.KeyObject): Buffer {
  return (crypto.createPublicKey(key).export({ format: 'der', type: 'spki' }) as Buffer).subarray(
    X25519_SPKI_PREFIX.length,
  );
}

function boxKey(shared: Buffer, ephemeralPublic: Buffer, recipientPublic: Buffer): { key: Buffer; iv: Buffer } {
  const okm = Buffer.from(
    crypto.hkdfSync('sha256', shared, Buffer.concat([ephemeralPublic, recipientPublic]), BOX_INFO, 32 + IV_BYTES),
  );
  return { key: okm.subarray(0, 32), iv: okm.subarray(32) };
}

/** Seals `plain` to `recipientPublic` (32 raw bytes), bound to `context`: version 2 | ephemeral public key | tag | ciphertext. */
export function sealToPublicKey(recipientPublic: Buffer, plain: Buffer, context: string): Buffer {
  if (recipientPublic.length !== 32) throw new SealedBoxError('a sealing public key is 32 bytes');
  const recipient = crypto.createPublicKey({
    key: Buffer.concat([X25519_SPKI_PREFIX, recipientPublic]),
    format: 'der',
    type: 'spki',
  });
  const ephemeral = crypto.generateKeyPairSync('x25519');
  const ephemeralPublic = x25519PublicBytes(ephemeral.privateKey);
  const { key, iv } = boxKey(
    crypto.diffieHellman({ privateKey: ephemeral.privateKey, publicKey: recipient }),
    ephemeralPublic,
    recipientPublic,
  );
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plain), cipher.final()]);
  return Buffer.concat([Buffer.from([BOX_VERSION]), ephemeralPublic, cipher.getAuthTag(), ciphertext]);
}

/** Opens a sealed box with the recipient's private key and the `context` it was sealed for; throws SealedBoxError when it cannot. */
export function openSealedBox(recipientPrivate: crypto.KeyObject, sealed: Buffer, context: string): Buffer {
  if (sealed[0] !== BOX_VERSION || sealed.length < 1 + 32 + TAG_BYTES) throw new SealedBoxError('not a sealed box');
  const ephemeralPublic = sealed.subarray(1, 33);
  try {
    const ephemeral = crypto.createPublicKey({
      key: Buffer.concat([X25519_SPKI_PREFIX, ephemeralPublic]),
      format: 'der',
      type: 'spki',
    });
    const { key, iv } = boxKey(
      crypto.diffieHellman({ privateKey: recipientPrivate, publicKey: ephemeral }),
      ephemeralPublic,
      x25519PublicBytes(recipientPrivate),
    );
    const decipher = crypto.createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(sealed.subarray(33, 33 + TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(33 + TAG_BYTES)), decipher.final()]);
  } catch {
    throw new SealedBoxError(
      'a sealed box failed authentication (altered, sealed to another key, or moved to another row)',
    );
  }
}

/** A master key's sealing key pair: derived from it (HKDF), so the master key is all a worker needs to hold. */
function sealingPair(masterKey: MasterKey): { privateKey: crypto.KeyObject; publicKey: Buffer } {
  const privateKey = x25519PrivateKey(
    Buffer.from(crypto.hkdfSync('sha256', masterKey.key, Buffer.alloc(0), 'frs-sealing-x25519-v1', 32)),
  );
  return { privateKey, publicKey: x25519PublicBytes(privateKey) };
}

/** The sealing public key of one of this process's master keys (the database records it for processes that hold none). */
export function sealingPublicKey(keyId: string): Buffer {
  const masterKey = keyring({ wantedId: keyId }).byId.get(keyId);
  if (!masterKey)
    throw new MasterKeyError(`cannot work out the public key of master key ${keyId}: this process does not hold it`);
  return sealingPair(masterKey).publicKey;
}

/** Seals `plain` to a recorded public key (`keyId`: the master key it belongs to), for a process that holds no master key. */
export function sealToRecordedKey(keyId: string, publicKey: Buffer, plain: string, context: string): SealedSecret {
  return { keyId, sealed: sealToPublicKey(publicKey, Buffer.from(plain, 'utf8'), context) };
}

/** A sealer holding this process's master keys, as read at one instant. */
export interface SealingKeys extends MasterKeyIds {
  /** Seals under the key `keyId` names (one of `ids`), by default the current one. */
  seal(plain: string, context: string, keyId?: string): SealedSecret;
  /** The sealing public key of `keyId` (default the current key). */
  publicKey(keyId?: string): Buffer;
}

/**
 * The keys sealing may use now, read afresh (another process may have rotated the key file). With `create` (only
 * when nothing is sealed yet) the embedded default creates its key file when there is none.
 */
export function sealingKeys(options: { create: boolean }): SealingKeys {
  const ring = keyring({ fresh: true, create: options.create });
  const ids = keyIds(ring);
  return {
    ...ids,
    seal(plain, context, keyId = ring.current.id) {
      const masterKey = ring.byId.get(keyId);
      if (!masterKey) throw new MasterKeyError(`cannot seal with master key ${keyId}: ${ids.setting} does not hold it`);
      return sealToRecordedKey(keyId, sealingPair(masterKey).publicKey, plain, context);
    },
    publicKey(keyId = ring.current.id) {
      const masterKey = ring.byId.get(keyId);
      if (!masterKey) throw new MasterKeyError(`cannot seal with master key ${keyId}: ${ids.setting} does not hold it`);
      return sealingPair(masterKey).publicKey;
    },
  };
}

/**
 * `fleet-admin secrets create-master-key`: writes a new key file (FRS_SECRET_KEY_FILE, else `secret.key` in the data
 * folder) readable by its owner only; refused when the file exists or FRS_SECRET_KEY is set (it would not be read).
 */
export function createMasterKeyFile(env: Env = processConfig().env): { keyId: string; file: string } {
  if (env[SECRET_KEY_ENV])
    throw new MasterKeyError(
      `${SECRET_KEY_ENV} is set and is the master key: a key file would not be read (unset ${SECRET_KEY_ENV} to use one)`,
    );
  const file = keyFilePath(env);
  if (!writeNewKeyFile(file)) {
    throw new MasterKeyError(
      `the master key file ${file} exists already: a new key would open none of the secrets sealed under it (to replace it: fleet-admin secrets rotate-master-key)`,
    );
  }
  return { keyId: loadKeyring({ env, createIfMissing: false }).current.id, file };
}

/**
 * Seals `plain` to the current master key's public key. `context` (e.g. the owning row's id) is authenticated too. Outside
 * a sealing transaction (src/webhooks/sealing.ts) only for what records no key: tests' fixtures (the
 * migration that sealed the secrets once stored in plain text has its own frozen copy under migrations/support/).
 */
export function sealSecret(plain: string, context: string): SealedSecret {
  return sealingKeys({ create: true }).seal(plain, context);
}

/** Decrypts a value sealed by sealSecret with the same `context`; throws MasterKeyError when it cannot. */
export function openSecret(secret: SealedSecret, context: string): string {
  const masterKey = keyring({ wantedId: secret.keyId }).byId.get(secret.keyId);
  if (!masterKey) {
    throw new MasterKeyError(
      `a secret is sealed with master key ${secret.keyId}, which this process does not have: set ${SECRET_KEY_ENV} ` +
        `(and ${PREVIOUS_SECRET_KEYS_ENV} during a master-key rotation), or ${SECRET_KEY_FILE_ENV} to the key file holding it`,
    );
  }
  const { sealed } = secret;
  if (sealed[0] === BOX_VERSION) {
    try {
      return openSealedBox(sealingPair(masterKey).privateKey, sealed, context).toString('utf8');
    } catch {
      throw new MasterKeyError(
        `a sealed secret failed authentication under master key ${secret.keyId} (altered, or moved to another row)`,
      );
    }
  }
  // Version 1, from before sealed boxes: AES-256-GCM under the master key itself, until a master-key rotation re-seals it.
  if (sealed[0] !== SEALED_VERSION || sealed.length < 1 + IV_BYTES + TAG_BYTES)
    throw new MasterKeyError(`a sealed secret has an unknown format`);
  const decipher = crypto.createDecipheriv('aes-256-gcm', masterKey.key, sealed.subarray(1, 1 + IV_BYTES));
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    throw new MasterKeyError(
      `a sealed secret failed authentication under master key ${secret.keyId} (altered, or moved to another row)`,
    );
  }
}

/**
 * Master-key rotation, around re-sealing every stored secret in one transaction (`reseal`, which gets the new
 * key's id). With the key file: a new key is written first, the old ones kept below it until `reseal` has
 * committed, so a crash at any point leaves every secret readable. With FRS_SECRET_KEY: the operator has already
 * set the new key there and the old one in FRS_SECRET_KEY_PREVIOUS; this re-seals under FRS_SECRET_KEY.
 *
 * With DATABASE_URL the key file may be this host's own copy (a one-off container's, one host's of several): the
 * new key would reach no other process, and every secret re-sealed under it would open only here. So the key file
 * is rotated there only when the operator says every process reads this very file (`keyFileIsShared`).
 */
export async function rotateMasterKey<T>(
  reseal: (currentKeyId: string) => Promise<T>,
  options: { keyFileIsShared?: boolean } = {},
): Promise<{ keyId: string; source: 'env'; result: T } | { keyId: string; source: 'file'; file: string; result: T }> {
  let ring = keyring({ fresh: true, create: true });
  if (ring.source.kind === 'file') {
    const file = ring.source.path;
    if (processConfig().env.DATABASE_URL && !options.keyFileIsShared) {
      throw new MasterKeyError(
        `the master key is in the key file ${file} (${SECRET_KEY_FILE_ENV}) and DATABASE_URL is set: a new key would be written to this host's file only, ` +
          `and processes reading another copy could open none of the secrets re-sealed under it; if every process reads this same file, run again with ` +
          `--key-file-is-shared, else rotate with the new key in ${SECRET_KEY_ENV} and the old one in ${PREVIOUS_SECRET_KEYS_ENV} on every process`,
      );
    }
    const previous = fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '');
    writeKeyFile(file, [newMasterKeyText(), ...previous]);
    ring = processKeyring = loadKeyring({ createIfMissing: false });
    const result = await reseal(ring.current.id);
    writeKeyFile(file, [ring.current.key.toString('base64')]);
    return { keyId: ring.current.id, source: 'file', file, result };
  }
  return { keyId: ring.current.id, source: 'env', result: await reseal(ring.current.id) };
}
