// What every client's input is checked with, at the bottom of the house: any module may import it, and it imports
// nothing of the project's. Each client says an InputError in its own words (the CLI with its flags, the HTTP APIs
// with their fields and documented codes, src/http/error-catalogue.ts).

/** How a client names a field of its input: the CLI `--url` (src/cli/flags.ts), the HTTP APIs `"url"`. */
export type FieldName = (field: string) => string;

/** The words of a refusal: a sentence, or one that names fields, built with the client's names for them. */
export type Phrase = string | ((name: FieldName) => string);

/** The core's own names: the field as the admin API names it (camelCase), what `message` says (logs, tests). */
const asField: FieldName = (field) => field;
const phrased = (phrase: Phrase, name: FieldName) => (typeof phrase === 'string' ? phrase : phrase(name));

/**
 * Thrown for operator input that names something missing or invalid. The core never names a client's way of giving
 * a field (a CLI flag, a JSON field): each client says the refusal in its own words with `say`.
 */
export class InputError extends Error {
  constructor(private readonly phrase: Phrase) {
    super(phrased(phrase, asField));
  }

  /** The refusal, each field it names as `name` names it (`lead`: the field it is about, where it starts with it). */
  say(name: FieldName, _lead: FieldName = name): string {
    return phrased(this.phrase, name);
  }
}

// What a core function refuses, by kind, so that each client says it its own way: the CLI prints the message on one
// line (they are all InputErrors), the HTTP APIs answer 400, 404, 409, 413, 429 or 503 (src/http/error-catalogue.ts coreError).

/** A refusal of one field's value, said in a sentence of its own (an event's payload, a batch's records). */
export class FieldError extends InputError {
  constructor(
    phrase: Phrase,
    readonly field: string,
  ) {
    super(phrase);
  }
}

/**
 * Input that gives a field a value the core refuses: `new InvalidFieldError('url', 'must be an absolute http or https
 * URL')`, said `--url must be…` by the CLI and `Field "url" must be…` by the HTTP APIs. `field` as the admin API names
 * it (camelCase). `operatorRule`, when given, is the refusal as only the operator may read it (the network, the
 * settings): the HTTP APIs answer the rule and log this detail; the CLI, the operator's own, prints the detail.
 */
export class InvalidFieldError extends FieldError {
  constructor(
    field: string,
    private readonly rule: Phrase,
    private readonly operatorRule?: Phrase,
  ) {
    super((name) => `${name(field)} ${phrased(rule, name)}`, field);
  }

  override say(name: FieldName, lead: FieldName = name): string {
    return `${lead(this.field)} ${phrased(this.rule, name)}`;
  }

  /** The refusal as the operator may read it, or undefined when it has no detail of the operator's. */
  sayToOperator(name: FieldName, lead: FieldName = name): string | undefined {
    return this.operatorRule === undefined ? undefined : `${lead(this.field)} ${phrased(this.operatorRule, name)}`;
  }

  /** The operator's detail in the core's own names (for the server log), if any. */
  get operatorDetail(): string | undefined {
    return this.sayToOperator(asField);
  }
}

/** Input that names a record that does not exist (or not within the caller's reach). */
export class NotFoundError extends InputError {}

/**
 * A change that would clash with a record there already (a workspace slug taken); `field` names what clashes. `kind`:
 * what it clashes with, where a batch of records says more (a reference to nothing, records left pointing at nothing).
 */
export class ConflictError extends InputError {
  constructor(
    phrase: Phrase,
    readonly field: string,
    readonly kind: 'conflict' | 'missing_reference' | 'dependent_records' = 'conflict',
  ) {
    super(phrase);
  }
}

/** The idempotency key was used, within its window, for another request (another endpoint's test delivery). */
export class KeyReusedError extends InputError {}

/** A limit was reached (the test deliveries'); nothing was done. `retryAfterSeconds`: when trying again can succeed. */
export class LimitError extends InputError {
  constructor(
    phrase: Phrase,
    readonly retryAfterSeconds: number,
  ) {
    super(phrase);
  }
}

/** Input over a size limit (a batch's records or bytes); nothing was done. */
export class TooLargeError extends InputError {}

/** The service runs as much of this work as it may at once; nothing was started. Try again after `retryAfterSeconds`. */
export class BusyError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
  }
}

/** Why a credential opens nothing: the HTTP APIs' 401 `reason` (`missing`: none was sent). */
export type CredentialFailure = 'missing' | 'unknown' | 'revoked' | 'expired' | 'ended';

/**
 * A credential that opens nothing (an admin token, a settings-screen session or the one-time key of its link), and
 * why. Not an InputError: only the HTTP APIs take credentials, and answer it 401.
 */
export class CredentialError extends Error {
  constructor(
    readonly credential: 'admin_token' | 'portal_session' | 'portal_link',
    readonly failure: CredentialFailure,
  ) {
    super(`${credential.replace('_', ' ')}: ${failure}`);
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
  if (Number.isNaN(at.getTime()))
    throw new InvalidFieldError(
      field,
      'must be an ISO 8601 date-time this service can hold (a leap second, :60, is not one)',
    );
  return at;
}
