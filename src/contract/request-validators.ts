import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import { ROOT_DIR } from '../config.js';

/**
 * The request validators openapi-backend builds for each operation of a document (src/http/contract.ts's contractBackend),
 * compiled once by `npm run generate` (Ajv standalone code, generated/request-validators.cjs) instead of at every
 * start, where compiling them was most of the time to ready. They are kept by the fingerprint of the document they were
 * compiled from: a document that differs (an edit not generated yet) finds none, and is compiled at start as before.
 */
export type RequestValidators = Record<string, ValidateFunction[] | null>;

export const REQUEST_VALIDATORS_FILE = path.join(ROOT_DIR, 'generated', 'request-validators.cjs');

/** What a document's validators are kept by: the SHA-256 of its JSON. */
export function documentFingerprint(document: unknown): string {
  return crypto.createHash('sha256').update(JSON.stringify(document)).digest('hex');
}

let generated: Record<string, () => RequestValidators> | undefined;
const evaluated = new Map<string, RequestValidators>();

/**
 * The generated validators of the document with this fingerprint, if any: each set evaluated when first asked, then
 * shared (a validator keeps nothing between calls but the errors of the last, which its caller reads at once).
 */
export function generatedRequestValidators(fingerprint: string): RequestValidators | undefined {
  generated ??= fs.existsSync(REQUEST_VALIDATORS_FILE)
    ? (createRequire(import.meta.url)(REQUEST_VALIDATORS_FILE) as Record<string, () => RequestValidators>)
    : {};
  if (!Object.hasOwn(generated, fingerprint)) return undefined;
  let validators = evaluated.get(fingerprint);
  if (!validators) evaluated.set(fingerprint, (validators = generated[fingerprint]()));
  return validators;
}
