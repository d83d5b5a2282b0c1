import path from 'node:path';
import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import { ROOT_DIR } from '../config.js';

/**
 * The Ajv validators `npm run generate` compiled from the document, by schema name: every response schema, every
 * webhook payload (e.g. `WebhookTestEvent`) and `ImportDocument`. Ajv's standalone code is CommonJS.
 */
export const validators = createRequire(import.meta.url)(path.join(ROOT_DIR, 'generated', 'validators.cjs')) as Record<
  string,
  ValidateFunction
>;

/** The same for the admin API's document (openapi/admin.yaml): every response schema of its operations. */
export const adminValidators = createRequire(import.meta.url)(
  path.join(ROOT_DIR, 'generated', 'admin-validators.cjs'),
) as Record<string, ValidateFunction>;
