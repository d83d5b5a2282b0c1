import type { ErrorObject, ValidateFunction } from 'ajv';
import { loadOpenApiDocument, webhookPayloadSchemas } from '../contract/document.js';
import { validators } from '../contract/validators.js';

// The event catalogue: every event name the document's `webhooks` section declares, the schema of its delivery
// payload and the committed validator generated from that schema. Nothing here is hand-listed.

/** The event the test operation sends; it is never published or fanned out to subscribers. */
export const TEST_EVENT = 'webhook.test';

export interface EventDefinition {
  event: string;
  /** Component schema of the delivery payload, e.g. `BookingConfirmedEvent`. */
  schema: string;
  /** True when the payload carries a top-level `dedupeKey` (the calendar events and integration.failed). */
  hasDedupeKey: boolean;
  /** The generated validator of the whole payload (envelope and data). */
  validate: ValidateFunction;
  /** Its group (the webhook's tag in the document), summary and description, as the document says. */
  group: string;
  summary: string;
  description: string;
  /** The document's example payload: what an example delivery of the event sends (its `data`, and `dedupeKey`). */
  example: { data: Record<string, unknown>; dedupeKey?: string };
}

let cached: Map<string, EventDefinition> | undefined;

function catalogue(): Map<string, EventDefinition> {
  if (cached) return cached;
  const document = loadOpenApiDocument();
  const schemas = document.components.schemas as Record<string, { required?: string[] }>;
  const webhooks = document.webhooks as unknown as Record<
    string,
    {
      post: {
        tags?: string[];
        summary?: string;
        description?: string;
        requestBody: { content: Record<string, { example?: EventDefinition['example'] }> };
      };
    }
  >;
  cached = new Map();
  for (const [event, schema] of webhookPayloadSchemas(document)) {
    const validate = validators[schema];
    if (!validate) throw new Error(`no generated validator for ${schema}; run npm run generate`);
    const { tags, summary, description, requestBody } = webhooks[event].post;
    const example = requestBody.content['application/json'].example;
    if (!example) throw new Error(`webhook ${event} has no example payload in the document`);
    cached.set(event, {
      event,
      schema,
      hasDedupeKey: (schemas[schema].required ?? []).includes('dedupeKey'),
      validate,
      group: tags?.[0] ?? 'Events',
      summary: summary ?? event,
      description: description ?? '',
      example: { data: example.data, ...(example.dedupeKey !== undefined ? { dedupeKey: example.dedupeKey } : {}) },
    });
  }
  return cached;
}

/** Every event name in the document, webhook.test included. */
export function eventNames(): string[] {
  return [...catalogue().keys()];
}

/** Event names an endpoint can subscribe to and the platform can publish (everything but webhook.test). */
export function subscribableEvents(): string[] {
  return eventNames().filter((event) => event !== TEST_EVENT);
}

export function eventDefinition(event: string): EventDefinition | undefined {
  return catalogue().get(event);
}

/** Events whose payload carries `dedupeKey`; fan-out puts the key in the body only for these. */
export function eventsWithDedupeKey(): string[] {
  return [...catalogue().values()].filter((d) => d.hasDedupeKey).map((d) => d.event);
}

/** Every event of the document, webhook.test included, in the document's order. */
export function eventDefinitions(): EventDefinition[] {
  return [...catalogue().values()];
}

/**
 * The request field an Ajv error of a payload is about, as a publishing client names it: `data` for anything in the
 * event's data, else the envelope field (`dedupeKey`), a missing one included.
 */
export function payloadField(errors: ErrorObject[] | null | undefined): string {
  const err = errors?.[0];
  const first = err?.instancePath.split('/')[1];
  if (first) return first;
  return err?.keyword === 'required' ? String(err.params.missingProperty) : 'data';
}

/** `at /data/bookingId: must match format "uuid"` from the first Ajv error. */
export function describeValidationError(errors: ErrorObject[] | null | undefined): string {
  const err = errors?.[0];
  if (!err) return 'at /: invalid';
  const extra = err.keyword === 'additionalProperties' ? ` (${String(err.params.additionalProperty)})` : '';
  return `at ${err.instancePath || '/'}: ${err.message ?? 'invalid'}${extra}`;
}

/**
 * Checks a whole delivery payload against its event's schema. Returns undefined when valid, else the reason
 * naming the first bad path.
 */
export function payloadProblem(payload: { event: string } & Record<string, unknown>): string | undefined {
  const definition = eventDefinition(payload.event);
  if (!definition) return `unknown event "${payload.event}"`;
  return definition.validate(payload) ? undefined : describeValidationError(definition.validate.errors);
}
