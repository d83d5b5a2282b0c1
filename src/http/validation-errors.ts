// A request the document's validation refused, as the documented 400 that names what is wrong in words: the parameter
// or the body's field, and what it must be ("an integer from 1 to 50").
import type { ErrorObject } from 'ajv';
import { ApiError, invalidRequest } from './error-catalogue.js';
import type { Parameter } from './contract.js';

/** "an integer from 1 to 50", "an ISO 8601 date-time", ... from a parameter schema, for error messages. */
export function describeSchema(schema: Record<string, unknown>): string {
  if (schema.type === 'integer') {
    return schema.minimum !== undefined && schema.maximum !== undefined
      ? `an integer from ${schema.minimum} to ${schema.maximum}`
      : 'an integer';
  }
  if (schema.format === 'date-time') return 'an ISO 8601 date-time with an offset, such as 2026-11-22T08:30:00.000Z';
  // (a list in one value: `style: form, explode: false`, as the event feed's `types`)
  if (schema.type === 'array' && schema.items && typeof schema.items === 'object') {
    const count =
      schema.maxItems !== undefined ? `${String(schema.minItems ?? 0)} to ${String(schema.maxItems)}` : 'some';
    return `a comma-separated list of ${count} values, each ${describeSchema(schema.items as Record<string, unknown>)}`;
  }
  if (schema.format === 'uuid') return 'a UUID';
  const values = enumerated(schema);
  if (values.length > 0)
    return values.length <= 8
      ? `one of ${values.join(', ')}`
      : `one of the ${values.length} values the document lists for it`;
  if (schema.type === 'string' && schema.minLength !== undefined && schema.maxLength !== undefined) {
    const length = `a string of ${schema.minLength} to ${schema.maxLength} characters`;
    if (schema.pattern === '^[^\\u0000]*$') return `${length}, with no NUL character`;
    return schema.pattern ? `${length} matching ${String(schema.pattern)}` : length;
  }
  return `a valid ${String(schema.type ?? 'value')}`;
}

/** The values an enum, a const or an anyOf of them admits. */
function enumerated(schema: Record<string, unknown>): string[] {
  if (Array.isArray(schema.enum)) return schema.enum.map(String);
  if (schema.const !== undefined) return [String(schema.const)];
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Array<Record<string, unknown>>).flatMap(enumerated);
  return [];
}

const LOCATION_NAMES: Record<string, string> = { query: 'Query parameter', header: 'Header', path: 'Path parameter' };
const LOCATION_IN: Record<string, string> = { query: 'query', header: 'header', path: 'path' };

/** A name the caller sent, as an error repeats it: cut to 100 characters, within the documented bounds of `reason`. */
const echoed = (name: string) => (name.length > 100 ? `${name.slice(0, 100)}…` : name);

export const unknownQuery = (name: string) =>
  invalidRequest(
    echoed(name),
    `Query parameter "${echoed(name)}" is not known to this operation; see /openapi.json for its parameters.`,
  );

/** A date-time whose offset's `+` was sent unencoded: URL decoding made it a space (`…T06:00:00 04:00`). */
const PLUS_AS_SPACE = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)? \d\d:?\d\d$/;

/**
 * The first request-validation error, as the documented 400 naming the parameter (or the body's field). A single-valued query parameter
 * given more than once arrives as a list and fails whatever check comes first: it is named as repeated, before that.
 */
export function validationError(
  parameters: Parameter[],
  errors: ErrorObject[],
  query: Record<string, unknown> = {},
): ApiError {
  const repeated = parameters.find(
    (p) => p.in === 'query' && p.schema.type !== 'array' && Array.isArray(query[p.name]),
  );
  if (repeated) {
    const times = (query[repeated.name] as unknown[]).length;
    return invalidRequest(
      repeated.name,
      `Query parameter "${repeated.name}" was given ${times === 2 ? 'twice' : `${times} times`}; send it once, as ${describeSchema(repeated.schema)}.`,
    );
  }
  const err = errors[0];
  const [, location = '', instanceName] = err.instancePath.split('/');
  if (location === 'requestBody' || (err.keyword === 'required' && err.params.missingProperty === 'requestBody'))
    return bodyValidationError(err);
  const name = err.keyword === 'required' ? String(err.params.missingProperty) : decodeURIComponent(instanceName ?? '');
  if (err.keyword === 'additionalProperties' && location === 'query')
    return unknownQuery(String(err.params.additionalProperty));
  const parameter = parameters.find(
    (p) => p.in === LOCATION_IN[location] && p.name.toLowerCase() === name.toLowerCase(),
  );
  if (!parameter)
    return invalidRequest(echoed(name) || 'request', `The request is invalid: ${err.message ?? 'unknown problem'}.`);
  const label = `${LOCATION_NAMES[location]} "${parameter.name}"`;
  if (err.keyword === 'required')
    return invalidRequest(parameter.name, `${label} is required; send ${describeSchema(parameter.schema)}.`);
  if (
    parameter.schema.format === 'date-time' &&
    location === 'query' &&
    PLUS_AS_SPACE.test(String(query[parameter.name]))
  ) {
    return invalidRequest(
      parameter.name,
      `${label} must be ${describeSchema(parameter.schema)}; its "+" arrived as a space, as an unencoded "+" in a URL does: encode "+" as %2B (…T06:00:00%2B04:00).`,
    );
  }
  return invalidRequest(parameter.name, `${label} must be ${describeSchema(parameter.schema)}.`);
}

/** A body field's validation error (the admin API's bodies): the field, named as in the document, or `body`. */
export function bodyValidationError(err: ErrorObject): ApiError {
  if (err.keyword === 'required' && err.params.missingProperty === 'requestBody')
    return invalidRequest('body', 'The request needs a JSON body; see /openapi.json for its fields.');
  const path = err.instancePath.split('/').slice(2).map(decodeURIComponent);
  if (err.keyword === 'required') path.push(String(err.params.missingProperty));
  if (err.keyword === 'additionalProperties') {
    const name = echoed(String(err.params.additionalProperty));
    return invalidRequest(name, `Field "${name}" is not known to this operation; see /openapi.json for its fields.`);
  }
  const field = echoed(path.join('.')) || 'body';
  if (err.keyword === 'required') return invalidRequest(field, `Field "${field}" is required.`);
  return invalidRequest(
    field,
    field === 'body'
      ? `The request body ${err.message ?? 'is invalid'}.`
      : `Field "${field}" ${err.message ?? 'is invalid'}.`,
  );
}
