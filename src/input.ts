// What every client's input is checked with, at the bottom of the house: any module may import it, and it imports
// nothing of the project's. The CLI prints an InputError's message on one line; other clients map it to their errors.

/** Thrown for operator input that names something missing or invalid; the CLI prints its message on one line. */
export class InputError extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

export function isValidTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}
