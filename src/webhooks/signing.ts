import crypto from 'node:crypto';

/** Seconds a receiver should allow between `t` and its own clock, in either direction. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** HMAC-SHA256 of `<t>.<body>` with the signing secret, as lowercase hex. */
export function signatureDigest(secret: string, timestamp: number, body: string | Buffer): string {
  return crypto.createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

/**
 * The `service-signature` header value for one attempt: `t=<unix seconds>,v1=<hex digest>`, one `v1` per secret
 * in the order given (during a rotation's overlap: the new secret first).
 */
export function signatureHeader(
  secrets: string | readonly string[],
  body: string | Buffer,
  timestamp = Math.floor(Date.now() / 1000),
): string {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  return `t=${timestamp},${list.map((secret) => `v1=${signatureDigest(secret, timestamp, body)}`).join(',')}`;
}

// Standard Webhooks (standardwebhooks.com), beside the service's own headers: `webhook-id` (the delivery id),
// `webhook-timestamp` (the same unix seconds as `t`), `webhook-signature` (`v1,<base64 HMAC-SHA256>` of
// `<id>.<timestamp>.<body>`, one per secret, space-separated), keyed with the base64-decoded part of the secret
// after `whsec_`. Every secret the service generates is `whsec_` + 40 base62 characters: base62 characters are
// base64 characters and 40 is a multiple of 4, so the part decodes strictly (to 30 bytes) in every Standard
// Webhooks library. The service's own `service-signature` keeps using the whole secret text as its key.

/** The HMAC key Standard Webhooks derives from a `whsec_` secret: the base64-decoded part after the prefix. */
export function standardWebhooksKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

/** One Standard Webhooks signature: base64 HMAC-SHA256 of `<id>.<timestamp>.<body>`. */
export function standardWebhooksSignature(
  secret: string,
  id: string,
  timestamp: number,
  body: string | Buffer,
): string {
  return crypto
    .createHmac('sha256', standardWebhooksKey(secret))
    .update(`${id}.${timestamp}.`)
    .update(body)
    .digest('base64');
}

/** The three Standard Webhooks headers of one attempt, signed with every secret given, in that order. */
export function standardWebhooksHeaders(
  secrets: string | readonly string[],
  id: string,
  body: string | Buffer,
  timestamp: number,
): { 'webhook-id': string; 'webhook-timestamp': string; 'webhook-signature': string } {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': list.map((secret) => `v1,${standardWebhooksSignature(secret, id, timestamp, body)}`).join(' '),
  };
}

export type VerifyFailure =
  | 'missing_header'
  | 'missing_timestamp'
  | 'bad_timestamp'
  | 'timestamp_out_of_tolerance'
  | 'no_signature'
  | 'signature_mismatch';

export type VerifyResult = { ok: true; timestamp: number } | { ok: false; reason: VerifyFailure };

export interface VerifyOptions {
  /** Allowed difference between `t` and now, in seconds, in either direction. Default 300. */
  toleranceSeconds?: number;
  /** The receiver's clock, in milliseconds since the epoch. Default Date.now(). */
  now?: number;
}

/**
 * Verifies a delivery the way the document tells receivers to: against the raw body bytes (before any JSON
 * parsing), with a two-sided time tolerance, comparing digests in constant time. Any `v1` value may match, so
 * a sender rotating secrets can send several.
 */
export function verifyWebhook(
  rawBody: string | Buffer,
  signatureHeaderValue: string | undefined | null,
  secret: string,
  options: VerifyOptions = {},
): VerifyResult {
  if (!signatureHeaderValue) return { ok: false, reason: 'missing_header' };
  let timestampText: string | undefined;
  const signatures: string[] = [];
  for (const part of signatureHeaderValue.split(',')) {
    const eq = part.indexOf('=');
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') timestampText = value;
    else if (key === 'v1') signatures.push(value);
  }
  if (timestampText === undefined || timestampText === '') return { ok: false, reason: 'missing_timestamp' };
  if (!/^\d{1,12}$/.test(timestampText)) return { ok: false, reason: 'bad_timestamp' };
  const timestamp = Number(timestampText);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = (options.now ?? Date.now()) / 1000;
  if (Math.abs(nowSeconds - timestamp) > tolerance) return { ok: false, reason: 'timestamp_out_of_tolerance' };
  if (signatures.length === 0) return { ok: false, reason: 'no_signature' };
  const expected = Buffer.from(signatureDigest(secret, timestamp, rawBody), 'utf8');
  const matched = signatures.some((candidate) => {
    const given = Buffer.from(candidate, 'utf8');
    return given.length === expected.length && crypto.timingSafeEqual(given, expected);
  });
  return matched ? { ok: true, timestamp } : { ok: false, reason: 'signature_mismatch' };
}

// Standard Webhooks' asymmetric scheme, `v1a`: an ed25519 signature of the same `<id>.<timestamp>.<body>`, base64,
// verified with the endpoint's public key. Keys are written as Standard Webhooks serializes them: the public key
// `whpk_` + base64 of its raw 32 bytes, the private key `whsk_` + base64 of the 64 bytes of seed and public key (the
// form libsodium and Svix use). The private key is sealed at rest (src/webhooks/sealing.ts) and only the worker opens
// it; a receiver needs only the public key.

export const PUBLIC_KEY_PREFIX = 'whpk_';
export const PRIVATE_KEY_PREFIX = 'whsk_';
/** The DER header of a PKCS #8 ed25519 private key, before its 32-byte seed (RFC 8410). */
const ED25519_PKCS8_HEADER = Buffer.from('302e020100300506032b657004220420', 'hex');
/** The DER header of an SPKI ed25519 public key, before its 32 raw bytes. */
const ED25519_SPKI_HEADER = Buffer.from('302a300506032b6570032100', 'hex');

/** An ed25519 key pair as kept: the raw public key and the `whsk_` private key text (which is sealed at once). */
export interface SigningKeyPair {
  publicKey: Buffer;
  privateKey: string;
}

/** A new ed25519 key pair (Node's generator); `seed` (32 bytes) makes a fixed one, for the test vectors. */
export function newSigningKeyPair(seed?: Buffer): SigningKeyPair {
  const key = seed
    ? crypto.createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_HEADER, seed]), format: 'der', type: 'pkcs8' })
    : crypto.generateKeyPairSync('ed25519').privateKey;
  const raw = key.export({ format: 'der', type: 'pkcs8' }).subarray(ED25519_PKCS8_HEADER.length);
  const publicKey = crypto
    .createPublicKey(key)
    .export({ format: 'der', type: 'spki' })
    .subarray(ED25519_SPKI_HEADER.length);
  return { publicKey, privateKey: `${PRIVATE_KEY_PREFIX}${Buffer.concat([raw, publicKey]).toString('base64')}` };
}

/** The `whpk_` text of a raw 32-byte public key, as the admin API, the CLI and the settings screen show it. */
export function publicKeyText(raw: Buffer): string {
  return `${PUBLIC_KEY_PREFIX}${raw.toString('base64')}`;
}

/** The raw public key of a `whpk_` text; undefined when it is not one. */
export function publicKeyBytes(text: string): Buffer | undefined {
  if (!text.startsWith(PUBLIC_KEY_PREFIX)) return undefined;
  const raw = Buffer.from(text.slice(PUBLIC_KEY_PREFIX.length), 'base64');
  return raw.length === 32 ? raw : undefined;
}

/** A Node public key object of a raw 32-byte ed25519 public key (for crypto.verify). */
export function ed25519PublicKey(raw: Buffer): crypto.KeyObject {
  return crypto.createPublicKey({ key: Buffer.concat([ED25519_SPKI_HEADER, raw]), format: 'der', type: 'spki' });
}

/** The signing key of a `whsk_` private key text (its first 32 bytes are the seed). */
export function ed25519PrivateKey(privateKey: string): crypto.KeyObject {
  const bytes = Buffer.from(privateKey.slice(PRIVATE_KEY_PREFIX.length), 'base64');
  if (!privateKey.startsWith(PRIVATE_KEY_PREFIX) || bytes.length !== 64) throw new Error('not a whsk_ ed25519 key');
  return crypto.createPrivateKey({
    key: Buffer.concat([ED25519_PKCS8_HEADER, bytes.subarray(0, 32)]),
    format: 'der',
    type: 'pkcs8',
  });
}

/** One `v1a` signature: base64 ed25519 of `<id>.<timestamp>.<body>` (deterministic: RFC 8032). */
export function ed25519Signature(key: crypto.KeyObject, id: string, timestamp: number, body: string | Buffer): string {
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), Buffer.from(body)]);
  return crypto.sign(null, signed, key).toString('base64');
}

/** The `v1a,<base64>` entries of `webhook-signature`, one per key given, in that order, space-separated. */
export function asymmetricSignatures(
  keys: readonly crypto.KeyObject[],
  id: string,
  body: string | Buffer,
  timestamp: number,
): string {
  return keys.map((key) => `v1a,${ed25519Signature(key, id, timestamp, body)}`).join(' ');
}
