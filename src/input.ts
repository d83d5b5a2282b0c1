// What every client's input is checked with, at the bottom of the house: any module may import it, and it imports
// nothing of the project's. The CLI prints an InputError's message on one line; other clients map it to their errors.

/** Thrown for operator input that names something missing or invalid; the CLI prints its message on one line. */
export class InputError extends Error {}

// What a core function refuses, by kind, so that each client says it its own way: the CLI prints the message on one
// line (they are all InputErrors), the admin API answers 400, 404 or 409 with the field in `reason`.

/**
 * Input that gives a field a value the core refuses; `field` as the admin API names it (camelCase). `operatorDetail`,
 * when given, is the refusal as only the operator may read it (the network, the settings): the admin API and the
 * settings screen answer the message and log the detail; the CLI, the operator's own, prints the detail.
 */
export class InvalidFieldError extends InputError {
  constructor(message: string, readonly field: string, readonly operatorDetail?: string) {
    super(message);
  }
}

/** Input that names a record that does not exist (or not within the caller's reach). */
export class NotFoundError extends InputError {}

/** A change that would clash with a record there already (a workspace slug taken); `field` names what clashes. */
export class ConflictError extends InputError {
  constructor(message: string, readonly field: string) {
    super(message);
  }
}

/** A limit was reached (the test deliveries'); nothing was done. `retryAfterSeconds`: when trying again can succeed. */
export class LimitError extends InputError {
  constructor(message: string, readonly retryAfterSeconds: number) {
    super(message);
  }
}

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

/**
 * A date-time the request's schema let through, as a Date: the format admits a leap second (`…T23:59:60Z`), which no
 * Date holds, so such a value is refused naming its field instead of reaching the database as an invalid time.
 */
export function instant(value: string, field: string): Date {
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw new InvalidFieldError(`${field} must be an ISO 8601 date-time this service can hold (a leap second, :60, is not one)`, field);
  return at;
}
