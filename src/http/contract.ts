// The contract adapter: openapi-backend over a document's strict variant, made fast enough to sit on every request
// (its path templates compiled once, its operation list kept), and the path helpers both listeners route with.
import { createRequire } from 'node:module';
import { OpenAPIBackend, OpenAPIValidator, type Document } from 'openapi-backend';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { strictOpenApiDocument, type OpenApiDocument } from '../contract/document.js';
import { documentFingerprint, generatedRequestValidators } from '../contract/request-validators.js';

/**
 * openapi-backend checks documents against the OpenAPI 3.0 meta-schema and rejects 3.1; the document is guarded
 * by Redocly lint and the contract tests instead.
 */
export class ContractBackend extends OpenAPIBackend {
  override validateDefinition(): Document {
    return this.document;
  }

  /**
   * @param fingerprint the document's (src/contract/request-validators.ts), whose request validators `npm run
   * generate` compiled; undefined: compile them here (what the generator itself does)
   */
  constructor(
    options: ConstructorParameters<typeof OpenAPIBackend>[0],
    private readonly fingerprint: string | undefined,
  ) {
    super(options);
  }

  /**
   * The request validators as openapi-backend builds them, generated ones when the document is the one they were
   * generated from; but not its response and response-header validators: nothing here checks an answer through
   * openapi-backend (the tests check them with generated/validators.cjs), and compiling them was about four fifths of
   * a start's time. One asked for is still compiled when first asked.
   */
  override async init(): Promise<this> {
    const validate = this.validate;
    this.validate = false;
    try {
      await super.init();
    } finally {
      this.validate = validate;
    }
    if (validate !== false) {
      const validator = new OpenAPIValidator({
        definition: this.definition,
        ajvOpts: this.ajvOpts,
        customizeAjv: this.customizeAjv,
        router: this.router,
        lazyCompileValidators: true,
        coerceTypes: this.coerceTypes,
      });
      const generated = this.fingerprint === undefined ? undefined : generatedRequestValidators(this.fingerprint);
      for (const operation of this.router.getOperations()) {
        const id = operation.operationId;
        if (id !== undefined)
          validator.requestValidators[id] = generated?.[id] ?? validator.buildRequestValidatorsForOperation(operation);
      }
      this.validator = validator;
    }
    return this;
  }
}

/** A parameter of an operation, as the document declares it. */
export type Parameter = { name: string; in: string; schema: Record<string, unknown> };

/** A path template of the document (`/v1/webhooks/{id}/test`) as a regular expression over request paths. */
export function pathPattern(template: string): RegExp {
  return new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}/?$`);
}

/** The methods a path answers: its operations', HEAD with GET, and OPTIONS. */
export function allowedMethods(operations: Array<{ path: string; method: string }>, path: string): string[] {
  const methods = operations.filter((op) => pathPattern(op.path).test(path)).map((op) => op.method.toUpperCase());
  if (methods.length === 0) return [];
  if (methods.includes('GET')) methods.push('HEAD');
  return [...methods, 'OPTIONS'];
}

/**
 * The path with every segment that does not percent-decode (`%zz`, a lone `%`, a cut UTF-8 sequence) escaped
 * as literal text: routing and validation then see a parameter that is simply invalid (a 400 naming it, after
 * authentication) instead of failing to decode it.
 */
export function decodablePath(path: string): string {
  if (!path.includes('%')) return path;
  return path
    .split('/')
    .map((segment) => {
      try {
        decodeURIComponent(segment);
        return segment;
      } catch {
        return encodeURIComponent(segment);
      }
    })
    .join('/');
}

/** Query parameters the operation does not declare: the first one is refused by name. */
export function unknownQueryParameter(parameters: Parameter[], query: Record<string, unknown>): string | undefined {
  const known = new Set(parameters.filter((p) => p.in === 'query').map((p) => p.name));
  return Object.keys(query).find((name) => !known.has(name));
}

type PathTemplate = (template: string, patterns?: unknown) => unknown;

/**
 * openapi-backend compiles the matched operation's path template (bath-es5) into regular expressions on every parse
 * of a request, three times per request (about 20 µs of the ~100 µs /v1/me costs, measured); the templates are the
 * document's, so each is compiled once and kept. bath-es5's compiled template is a set of pure functions.
 */
function compilePathTemplatesOnce(): void {
  const bath = createRequire(createRequire(import.meta.url).resolve('openapi-backend'))('bath-es5') as {
    default: PathTemplate;
    compiledOnce?: true;
  };
  if (bath.compiledOnce) return;
  const compile = bath.default;
  const compiled = new Map<string, unknown>();
  bath.default = (template, patterns) => {
    if (patterns !== undefined) return compile(template, patterns);
    let path = compiled.get(template);
    if (path === undefined) compiled.set(template, (path = compile(template)));
    return path;
  };
  bath.compiledOnce = true;
}

/**
 * openapi-backend over the strict variant of a document (the public one unless given): the HTTP operations only (the
 * webhooks section is for receivers), requests validated with Ajv 2020-12, formats and defaults on. Shared with the
 * bench's framework baseline, so that row measures exactly this configuration, and with the admin API (src/admin/).
 */
export function contractBackend(options: {
  handlers: Record<string, unknown>;
  securityHandlers: Record<string, unknown>;
  document?: OpenApiDocument;
  generating?: true;
}): ContractBackend {
  compilePathTemplatesOnce();
  const { webhooks: _webhooks, ...httpDocument } = options.document ?? strictOpenApiDocument();
  return new ContractBackend(
    {
      definition: structuredClone(httpDocument) as unknown as Document,
      strict: true,
      quick: false,
      validate: true,
      coerceTypes: true,
      customizeAjv: (_ajv, ajvOpts) => {
        // Ajv's default draft-07 ignores 2020-12 keywords; formats and defaults must be switched on explicitly.
        // (`npm run generate` keeps each validator's source, for Ajv's standalone code)
        const ajv = new Ajv2020({
          ...ajvOpts,
          strict: false,
          useDefaults: true,
          allErrors: false,
          ...(options.generating && { code: { source: true } }),
        });
        addFormats.default(ajv);
        return ajv as never;
      },
      handlers: options.handlers as never,
      securityHandlers: options.securityHandlers as never,
    },
    options.generating ? undefined : documentFingerprint(httpDocument),
  );
}

/** openapi-backend rebuilds its operation list on every lookup (twice per request); the document is fixed. */
export function memoiseOperations(backend: OpenAPIBackend): ReturnType<OpenAPIBackend['router']['getOperations']> {
  const operations = backend.router.getOperations();
  backend.router.getOperations = () => operations;
  return operations;
}
