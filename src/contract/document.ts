import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import { Ajv2020, type Options } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { ROOT_DIR } from '../config.js';

// The contract documents in openapi/ and the one way this codebase turns them into JSON Schema validators.

export const OPENAPI_SCHEMA_ID = 'https://fleet-rental.example/schemas/openapi.json';
export const ADMIN_SCHEMA_ID = 'https://fleet-rental.example/schemas/admin.json';

/**
 * The two HTTP contracts: `openapi` (openapi/openapi.yaml, the public read-only API and the webhooks) and `admin`
 * (openapi/admin.yaml, the admin API on its own listener). Both are loaded, made strict and compiled the same way.
 */
export type ContractName = 'openapi' | 'admin';
const SCHEMA_IDS: Record<ContractName, string> = { openapi: OPENAPI_SCHEMA_ID, admin: ADMIN_SCHEMA_ID };
export const IMPORT_SCHEMA_ID = 'https://fleet-rental.example/schemas/import.schema.json';

export type OpenApiDocument = {
  openapi: string;
  info: { version: string; description: string };
  paths: Record<string, Record<string, OpenApiOperation>>;
  /** The public document's webhook payloads (absent from the admin document: only read from the public one). */
  webhooks: Record<string, { post: OpenApiOperation }>;
  components: { schemas: Record<string, unknown>; [key: string]: unknown };
  [key: string]: unknown;
};
export type OpenApiOperation = {
  operationId: string;
  requestBody?: { content: Record<string, { schema: { $ref?: string } }> };
  responses: Record<string, { $ref?: string; content?: Record<string, { schema: { $ref?: string } }> }>;
  [key: string]: unknown;
};

const cachedDocuments = new Map<ContractName, OpenApiDocument>();
const cachedStrict = new Map<ContractName, OpenApiDocument>();

/**
 * The hand-written OpenAPI document, parsed (once per process): the published one, open to additions. Its objects
 * leave `additionalProperties` unset, and a value set that may grow (error codes, event names, statuses) is written
 * as `x-extensible-enum` (the values known today) on a plain string: clients and receivers must accept what they do
 * not know.
 */
export function loadOpenApiDocument(name: ContractName = 'openapi'): OpenApiDocument {
  let document = cachedDocuments.get(name);
  if (!document) cachedDocuments.set(name, (document = readDocument(name)));
  return document;
}

/** generated/document-sources.json: the SHA-256 of each YAML document that generated/<name>.json was generated from. */
export const DOCUMENT_SOURCES_FILE = path.join(ROOT_DIR, 'generated', 'document-sources.json');

export function sourceFingerprint(yaml: string): string {
  return crypto.createHash('sha256').update(yaml).digest('hex');
}

/**
 * The YAML document, parsed; or, when generated/<name>.json was generated from this very text, that JSON: the same
 * document, read in a fraction of the time the YAML parser takes (a good part of a start's). A YAML edited since the
 * last `npm run generate` is parsed.
 */
function readDocument(name: ContractName): OpenApiDocument {
  const yaml = fs.readFileSync(path.join(ROOT_DIR, 'openapi', `${name}.yaml`), 'utf8');
  try {
    const sources = JSON.parse(fs.readFileSync(DOCUMENT_SOURCES_FILE, 'utf8')) as Record<string, string>;
    if (sources[name] === sourceFingerprint(yaml))
      return JSON.parse(fs.readFileSync(path.join(ROOT_DIR, 'generated', `${name}.json`), 'utf8')) as OpenApiDocument;
  } catch {
    // (nothing generated yet: the YAML it is)
  }
  return YAML.parse(yaml) as OpenApiDocument;
}

/**
 * The strict variant of the document, for this project's own tests and checks: every object schema is closed
 * (`additionalProperties: false` where the document leaves it unset) and every `x-extensible-enum` becomes an exact
 * `enum`, so the service can never send a field or a value the document does not declare.
 */
export function strictOpenApiDocument(name: ContractName = 'openapi'): OpenApiDocument {
  let document = cachedStrict.get(name);
  if (!document) cachedStrict.set(name, (document = strictVariant(loadOpenApiDocument(name)) as OpenApiDocument));
  return document;
}

function strictVariant(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(strictVariant);
  if (!node || typeof node !== 'object') return node;
  // Examples are data, not schemas.
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    // `properties` maps names to schemas: its keys are not keywords, and a property may be named like one.
    if (key === 'properties' && value && typeof value === 'object') {
      out.properties = Object.fromEntries(Object.entries(value).map(([name, schema]) => [name, strictVariant(schema)]));
    } else if (key === 'example' || key === 'examples') {
      out[key] = value;
    } else if (key === 'x-extensible-enum') {
      out.enum = value;
    } else {
      out[key] = strictVariant(value);
    }
  }
  // Only objects that declare their properties are closed: a free-form object stays free-form.
  const declaresProperties = out.properties !== null && typeof out.properties === 'object';
  if (declaresProperties && !('additionalProperties' in out) && !('patternProperties' in out))
    out.additionalProperties = false;
  return out;
}

export function loadImportSchema(): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(ROOT_DIR, 'openapi', 'import.schema.json'), 'utf8'));
}

const schemaName = (ref: string | undefined): string | undefined => ref?.match(/^#\/components\/schemas\/(\w+)$/)?.[1];

/** Names of the component schemas that some response of some operation returns (error body included). */
export function responseSchemaNames(document: OpenApiDocument): string[] {
  const names = new Set<string>();
  const sharedResponses = (document.components.responses ?? {}) as Record<
    string,
    OpenApiOperation['responses'][string]
  >;
  for (const item of Object.values(document.paths)) {
    for (const operation of Object.values(item)) {
      // (a path item's other keys, such as its shared `parameters`, are not operations)
      if (!operation || typeof operation !== 'object' || !('responses' in operation)) continue;
      for (const response of Object.values(operation.responses)) {
        const resolved = response.$ref ? sharedResponses[response.$ref.split('/').pop()!] : response;
        const name = schemaName(resolved?.content?.['application/json']?.schema.$ref);
        if (name) names.add(name);
      }
    }
  }
  return [...names].sort();
}

/** Event name -> the component schema of its delivery payload, from the document's `webhooks` section. */
export function webhookPayloadSchemas(document: OpenApiDocument): Map<string, string> {
  const map = new Map<string, string>();
  for (const [event, item] of Object.entries(document.webhooks ?? {})) {
    const name = schemaName(item.post.requestBody?.content['application/json']?.schema.$ref);
    if (!name) throw new Error(`webhook ${event} has no payload schema`);
    map.set(event, name);
  }
  return map;
}

export function webhookSchemaNames(document: OpenApiDocument): string[] {
  return [...new Set(webhookPayloadSchemas(document).values())].sort();
}

/** Rewrites OpenAPI component references into references to the schema's own $defs. */
function toJsonSchemaRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toJsonSchemaRefs);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string' ? v.replace('#/components/schemas/', '#/$defs/') : toJsonSchemaRefs(v),
      ]),
    );
  }
  return value;
}

/**
 * An Ajv 2020-12 instance holding a document's component schemas (as `<OPENAPI_SCHEMA_ID>#/$defs/<Name>`, or the
 * admin document's under ADMIN_SCHEMA_ID) and the import document schema: the strict variant's (the default: what
 * this project checks itself against), or the published document's (what a client or receiver that validates meets).
 * Formats are checked; `example` (an OpenAPI keyword) and `x-extensible-enum` are allowed.
 */
export function createSchemaAjv(
  options: Options = {},
  variant: 'strict' | 'published' = 'strict',
  name: ContractName = 'openapi',
): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, allErrors: false, ...options });
  addFormats.default(ajv);
  ajv.addVocabulary(['example', 'x-extensible-enum']);
  const document = variant === 'strict' ? strictOpenApiDocument(name) : loadOpenApiDocument(name);
  ajv.addSchema({ $id: SCHEMA_IDS[name], $defs: toJsonSchemaRefs(document.components.schemas) as object });
  ajv.addSchema(loadImportSchema());
  return ajv;
}

export function schemaRef(schema: string, name: ContractName = 'openapi'): string {
  return `${SCHEMA_IDS[name]}#/$defs/${schema}`;
}
