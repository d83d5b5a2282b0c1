import { expect } from 'chai';
import { loadOpenApiDocument, type ContractName } from '../../src/contract/document.js';
import { apiError, STATUS } from '../../src/http/error-catalogue.js';

// The error catalogue (src/http/error-catalogue.ts STATUS) held against the documents: the codes each declares for its error
// body, the status its description gives each, and the status of every documented answer whose example names a code.

type Json = Record<string, any>;

const DOCUMENTS: ContractName[] = ['openapi', 'admin'];

/** The `code` property of the document's ErrorResponse schema. */
const codeSchema = (name: ContractName): Json =>
  (loadOpenApiDocument(name) as unknown as Json).components.schemas.ErrorResponse.properties.error.properties.code;

/** A local `$ref` of the document, followed. */
function resolved(document: Json, value: Json): Json {
  let current = value;
  while (current && typeof current.$ref === 'string' && current.$ref.startsWith('#/')) {
    current = current.$ref
      .slice(2)
      .split('/')
      .reduce((at: Json, part: string) => at[part.replace(/~1/g, '/').replace(/~0/g, '~')], document);
  }
  return current;
}

/** Every error example of the document's answers: [where, status, code]. */
function documentedAnswers(name: ContractName): Array<[string, number, string]> {
  const document = loadOpenApiDocument(name) as unknown as Json;
  const found: Array<[string, number, string]> = [];
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, operation] of Object.entries(item as Json)) {
      for (const [status, response] of Object.entries((operation as Json)?.responses ?? {})) {
        if (!/^\d{3}$/.test(status)) continue;
        const content = resolved(document, response as Json)?.content ?? {};
        for (const media of Object.values(content) as Json[]) {
          const examples = [
            media.example,
            ...Object.values(media.examples ?? {}).map((e) => resolved(document, e as Json)?.value),
          ];
          for (const example of examples) {
            const code = example?.error?.code;
            if (typeof code === 'string')
              found.push([`${name} ${method.toUpperCase()} ${path} ${status}`, Number(status), code]);
          }
        }
      }
    }
  }
  return found;
}

describe('the error catalogue', () => {
  it('has a status for exactly the codes the documents declare for their error bodies, and no other', () => {
    const declared = new Set(DOCUMENTS.flatMap((name) => codeSchema(name)['x-extensible-enum'] as string[]));
    // (both ways: a code of a document without a status, and a status for a code no document has)
    expect(
      [...declared].filter((code) => !(code in STATUS)),
      'declared, without a status',
    ).to.deep.equal([]);
    expect(
      Object.keys(STATUS).filter((code) => !declared.has(code)),
      'a status, declared by no document',
    ).to.deep.equal([]);
    expect(Object.keys(STATUS)).to.have.lengthOf(19);
  });

  it("gives each code the status the documents' descriptions give it", () => {
    for (const name of DOCUMENTS) {
      const schema = codeSchema(name);
      const described = new Map(
        [...String(schema.description).matchAll(/`([a-z_]+)` \((\d{3})\)/g)].map((m) => [m[1], Number(m[2])]),
      );
      // Every code of the document is described with its status.
      expect([...described.keys()].sort(), name).to.deep.equal([...schema['x-extensible-enum']].sort());
      for (const [code, status] of described)
        expect(STATUS[code as keyof typeof STATUS], `${name}: ${code}`).to.equal(status);
    }
    expect(STATUS).to.include({
      invalid_request: 400,
      unauthorized: 401,
      workspace_frozen: 403,
      conflict: 409,
      rate_limited: 429,
      not_ready: 503,
    });
  });

  it('gives each documented error answer the status of the code its example names', () => {
    const answers = DOCUMENTS.flatMap(documentedAnswers);
    // (the documents do show examples of their errors: the check is not empty)
    expect(answers.length).to.be.greaterThan(20);
    for (const [where, status, code] of answers) expect(STATUS[code as keyof typeof STATUS], where).to.equal(status);
  });

  it("builds an error whose status is its code's: a status cannot be given apart from its code", () => {
    expect(
      [apiError('conflict', 'taken', { reason: 'slug' })].map((e) => [e.status, e.code, e.message, e.reason]),
    ).to.deep.equal([[409, 'conflict', 'taken', 'slug']]);
    expect(apiError('overloaded', 'busy', { headers: { 'Retry-After': '2' } })).to.deep.include({
      status: 503,
      headers: { 'Retry-After': '2' },
    });
    const wrong = () => {
      // @ts-expect-error a status is no code: `new ApiError(404, 'conflict', ...)` cannot be written
      apiError(404, 'conflict');
      // @ts-expect-error nor a code no document declares
      apiError('teapot', 'short and stout');
    };
    expect(wrong).to.be.a('function');
  });
});
