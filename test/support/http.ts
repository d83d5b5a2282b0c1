// The tests' one HTTP client and one check of a response against the document that declares it: the public API
// (openapi/openapi.yaml), the admin API and the settings screen's API (both openapi/admin.yaml). Every response a
// client receives is checked with the committed validators generated from its document.
import { expect } from 'chai';
import { pathPattern } from '../../src/http/contract.js';
import { loadOpenApiDocument, type ContractName, type OpenApiOperation } from '../../src/contract/document.js';
import { adminValidators, validators } from '../../src/contract/validators.js';
import { expectValidPayload } from './calendar-fixtures.js';

/** The document a listener serves, the security scheme its client calls with, and where its operations are. */
export interface Contract {
  document: ContractName;
  scheme: 'bearerAuth' | 'adminToken' | 'portalSession';
  /**
   * For a listener that serves more than the document (the screen's pages): only responses under this path are
   * checked, and the admin operations the screen shares are found under it too (/portal/api/admin/v1/...).
   */
  prefix?: string;
}

export const PUBLIC_API = { document: 'openapi', scheme: 'bearerAuth' } as const satisfies Contract;
export const ADMIN_API = { document: 'admin', scheme: 'adminToken' } as const satisfies Contract;
export const SCREEN_API = {
  document: 'admin',
  scheme: 'portalSession',
  prefix: '/portal/api',
} as const satisfies Contract;
// (every client, for the open operations that lie under one's prefix)
const CONTRACTS: Contract[] = [PUBLIC_API, ADMIN_API, SCREEN_API];

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A response as the check reads it: one a test built from another client (a browser, openapi-fetch) may lack its text. */
export type CheckedResponse = Omit<ApiResponse<unknown>, 'text'> & { text?: string };

type DeclaredResponse = OpenApiOperation['responses'][string] & { headers?: Record<string, unknown> };

interface Operation {
  method: string;
  template: string;
  regex: RegExp;
  operation: OpenApiOperation;
}

const VALIDATORS = { openapi: validators, admin: adminValidators };

/** What a document's listener adds to every response, checked beside its schema. */
const ALSO_CHECKED: Record<ContractName, (response: CheckedResponse, schema?: string) => void> = {
  openapi: (response, schema) => {
    expectStalenessBound(response);
    // A delivery's payload is declared free-form there; it is the event's own payload, checked as strictly.
    if (schema === 'DeliveryDetail') expectValidPayload((response.body as { payload: { event: string } }).payload);
  },
  admin: () => {},
};

/** Every answer of the public API says at most how old its data is (components/headers/DataMaxStaleness). */
function expectStalenessBound(response: CheckedResponse): void {
  expect(response.headers.get('data-max-staleness-ms'), 'Data-Max-Staleness-Ms').to.match(/^(0|[1-9]\d{0,6})$/);
}

const operationsOf = new Map<ContractName, Operation[]>();

function operations(name: ContractName): Operation[] {
  let found = operationsOf.get(name);
  if (!found) {
    const document = loadOpenApiDocument(name);
    found = Object.entries(document.paths).flatMap(([template, item]) =>
      Object.entries(item)
        .filter(([, operation]) => operation.responses)
        .map(([method, operation]) => ({
          method: method.toUpperCase(),
          template,
          regex: pathPattern(template),
          operation,
        })),
    );
    operationsOf.set(name, found);
  }
  return found;
}

/**
 * Whether a client may call an operation: its security lists the client's scheme, or it has none and lies under no
 * other client's prefix (POST /portal/api/session is the screen's alone, /healthz anyone's). Any other operation is
 * no route for that client.
 */
function inReach(contract: Contract, template: string, operation: OpenApiOperation): boolean {
  const security = (operation.security ?? loadOpenApiDocument(contract.document).security ?? []) as Array<
    Record<string, unknown>
  >;
  if (security.length > 0) return security.some((requirement) => contract.scheme in requirement);
  const owner = CONTRACTS.find((c) => c.prefix !== undefined && template.startsWith(`${c.prefix}/`));
  return owner === undefined || owner.prefix === contract.prefix;
}

/**
 * The operation a request reached: at its own path, or, for a client with a prefix, one of the document's other
 * operations under it (the admin operations the screen shares, /portal/api/admin/v1/...; not its own twice over).
 */
function operationAt(contract: Contract, method: string, pathname: string): Operation | undefined {
  const { prefix } = contract;
  const shared = prefix !== undefined && pathname.startsWith(`${prefix}/`) ? pathname.slice(prefix.length) : undefined;
  return operations(contract.document).find(
    (o) =>
      o.method === method &&
      inReach(contract, o.template, o.operation) &&
      (o.regex.test(pathname) ||
        (shared !== undefined && !o.template.startsWith(`${prefix}/`) && o.regex.test(shared))),
  );
}

function declaredResponse(contract: Contract, operation: OpenApiOperation, status: number): DeclaredResponse {
  const declared = operation.responses[String(status)];
  expect(declared, `${operation.operationId} does not document status ${status}`).to.exist;
  const responses = loadOpenApiDocument(contract.document).components.responses as Record<string, DeclaredResponse>;
  return declared.$ref ? responses[declared.$ref.split('/').pop()!] : declared;
}

/** Not modified (to GET or HEAD): documented, no body, the tag it confirms, as the 200 would carry it. */
function expectNotModified(contract: Contract, method: string, path: string, response: CheckedResponse): void {
  const pathname = new URL(path, 'http://x').pathname;
  const get = operationAt(contract, 'GET', pathname);
  expect(method === 'GET' || method === 'HEAD', `${method} ${path} answered 304`).to.equal(true);
  expect(get?.operation.responses['304'], `${method} ${path} does not document 304`).to.exist;
  expect(response.text).to.equal('');
  expect(response.headers.get('etag')).to.match(/^W\/"[A-Za-z0-9_-]+"$/);
  expect(response.headers.get('cache-control')).to.equal('private, no-cache');
  expect(response.headers.get('x-request-id'), 'x-request-id').to.be.a('string').and.not.empty;
  ALSO_CHECKED[contract.document](response);
}

/**
 * Checks a response against its document: a status the operation declares (or 404/405 for no operation), its
 * schema, JSON, x-request-id, the ETag exactly when declared, and what the listener adds to every response.
 */
export function expectDocumented(contract: Contract, method: string, path: string, response: CheckedResponse): void {
  if (response.status === 304) return expectNotModified(contract, method, path, response);
  const pathname = new URL(path, 'http://x').pathname;
  const match = operationAt(contract, method, pathname);
  if (!match) expect(response.status, `${method} ${pathname} is not an operation`).to.be.oneOf([404, 405]);
  const declared = match && declaredResponse(contract, match.operation, response.status);
  if (declared && !declared.content) {
    // A declared response without a body (204): none sent, and the request id still there.
    expect(response.headers.get('content-type'), `${method} ${path} ${response.status} has a body`).to.equal(null);
    expect(response.headers.get('x-request-id')).to.be.a('string').and.not.empty;
    return;
  }
  const schema = declared ? declared.content!['application/json'].schema.$ref!.split('/').pop()! : 'ErrorResponse';
  expect(response.headers.get('content-type')).to.match(/^application\/json/);
  const requestId = response.headers.get('x-request-id');
  expect(requestId, 'x-request-id').to.be.a('string').and.not.empty;
  if (declared?.headers?.ETag) {
    expect(response.headers.get('etag'), `${method} ${path}: ETag`).to.match(/^W\/"[A-Za-z0-9_-]+"$/);
    expect(response.headers.get('cache-control')).to.equal('private, no-cache');
  } else {
    expect(response.headers.get('etag'), `${method} ${path} ${response.status}: no ETag`).to.equal(null);
  }
  ALSO_CHECKED[contract.document](response, schema);
  const validate = VALIDATORS[contract.document][schema];
  expect(validate, `no generated validator for ${schema}`).to.be.a('function');
  expect(
    validate(response.body),
    `${method} ${path} ${response.status} does not match ${schema}: ${JSON.stringify(validate.errors)}`,
  ).to.equal(true);
  if (response.status >= 400)
    expect((response.body as { error: { requestId: string } }).error.requestId).to.equal(requestId);
}

/** A result of a generated client (openapi-fetch): its response, its parsed body (`data`, or `error`). */
export interface ClientResult {
  data?: unknown;
  error?: unknown;
  response: Response;
}

/**
 * A check of a generated client's results against the contract, as `expectDocumented` checks a response: it returns
 * the result it was given, so a test checks and reads in one expression.
 */
export function documentedResults(contract: Contract) {
  return <T extends ClientResult>(method: string, path: string, result: T): T => {
    expectDocumented(contract, method, path, {
      status: result.response.status,
      headers: result.response.headers,
      body: result.data ?? result.error,
    });
    return result;
  };
}

export interface DocumentedClient {
  /**
   * One request, redirects not followed; a body that is not a string is sent as JSON, and any body as
   * application/json unless `headers` say otherwise. The response's body is parsed when it is JSON.
   */
  request(
    method: string,
    path: string,
    options?: { headers?: Record<string, string>; body?: unknown },
  ): Promise<ApiResponse>;
}

/** A client of one listener, every response of which (under the contract's prefix) is checked against its document. */
export function documentedClient({ baseUrl, ...contract }: Contract & { baseUrl: string }): DocumentedClient {
  return {
    async request(method, path, { headers = {}, body } = {}) {
      const res = await fetch(baseUrl + path, {
        method,
        headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
        redirect: 'manual',
      });
      const text = await res.text();
      const json = (res.headers.get('content-type') ?? '').startsWith('application/json');
      const response = {
        status: res.status,
        headers: res.headers,
        text,
        body: json && text ? JSON.parse(text) : undefined,
      };
      // (a HEAD response has no body to check, unless it is a 304 confirming a tag)
      const checked = path.startsWith(`${contract.prefix ?? ''}/`) && (method !== 'HEAD' || res.status === 304);
      if (checked) expectDocumented(contract, method, path, response);
      return response;
    },
  };
}
