import type { FieldName } from '../errors.js';

// The core names fields as the admin API does (camelCase); the CLI takes each as a flag, `--` and the field in
// kebab-case, except these, whose flags say it shorter.
const FLAGS: Record<string, string> = {
  endpointId: '--endpoint',
  expiresInMinutes: '--minutes',
};

/** The CLI's flag for a field a core refusal names: `url` is `--url`, `expiresAt` `--expires-at`. */
export const flagOf: FieldName = (field) =>
  FLAGS[field] ?? `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
