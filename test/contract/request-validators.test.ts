import { expect } from 'chai';
import type { Request } from 'openapi-backend';
import { contractBackend } from '../../src/http/contract.js';
import { withoutCoreBodies } from '../../src/admin/app.js';
import { strictOpenApiDocument, type OpenApiDocument } from '../../src/contract/document.js';
import { documentFingerprint, generatedRequestValidators } from '../../src/contract/request-validators.js';

// The request validators of both documents are compiled by `npm run generate` (generated/request-validators.cjs), not
// at every start: a backend on the document uses those, and compiles none of the response validators it never uses.
// A document that differs from the generated one (edited, not generated yet) is compiled at start, and validates alike.

const DOCUMENTS: Array<[string, () => OpenApiDocument]> = [
  ['public', () => strictOpenApiDocument()],
  ['admin (as src/admin/ serves it)', () => withoutCoreBodies(strictOpenApiDocument('admin'))],
];

function generatedFor(document: OpenApiDocument) {
  const { webhooks: _webhooks, ...httpDocument } = document;
  return generatedRequestValidators(documentFingerprint(httpDocument));
}

async function backendOn(document: OpenApiDocument) {
  const backend = contractBackend({ handlers: {}, securityHandlers: {}, document });
  await backend.init();
  return backend;
}

/** Requests good and bad, for either document, as the backend sees them. */
const REQUESTS: Request[] = [
  { method: 'get', path: '/v1/vehicles', query: 'limit=5', headers: {} },
  { method: 'get', path: '/v1/vehicles', query: 'limit=0', headers: {} },
  { method: 'get', path: '/v1/vehicles', query: 'from=yesterday', headers: {} },
  { method: 'post', path: '/v1/webhooks/00000000-0000-4000-8000-000000000000/test', query: '', headers: {} },
  {
    method: 'post',
    path: '/v1/webhooks/00000000-0000-4000-8000-000000000000/test',
    query: '',
    headers: { 'idempotency-key': 'k-1' },
  },
  {
    method: 'post',
    path: '/admin/v1/workspaces',
    query: '',
    headers: {},
    body: { slug: 'desert-drive', timezone: 'Asia/Dubai' },
  },
  { method: 'post', path: '/admin/v1/workspaces', query: '', headers: {}, body: { slug: 42 } },
  { method: 'get', path: '/admin/v1/workspaces', query: 'limit=10', headers: {} },
];

describe('request validators compiled by npm run generate', () => {
  for (const [name, document] of DOCUMENTS) {
    it(`the ${name} document's: every operation's, and the very ones a backend on it uses`, async () => {
      const generated = generatedFor(document());
      expect(generated, 'generated/request-validators.cjs holds this document: run npm run generate').not.to.equal(
        undefined,
      );
      const backend = await backendOn(document());
      const ids = backend.router
        .getOperations()
        .map((operation) => operation.operationId!)
        .sort();
      expect(ids.length).to.be.above(10);
      expect(Object.keys(generated!).sort()).to.deep.equal(ids);
      for (const id of ids) expect(backend.validator.requestValidators[id], id).to.equal(generated![id]);
      expect(backend.validator.responseValidators, 'response validators compiled at start').to.deep.equal({});
    });

    it(`the ${name} document edited: compiled at start, and validating requests as the generated ones do`, async () => {
      const edited = structuredClone(document());
      edited.info = { ...edited.info, description: `${edited.info.description} (edited)` };
      expect(generatedFor(edited)).to.equal(undefined);
      const [compiled, generated] = [await backendOn(edited), await backendOn(document())];
      const ids = compiled.router.getOperations().map((operation) => operation.operationId!);
      for (const id of ids)
        expect(compiled.validator.requestValidators[id], id).not.to.equal(generated.validator.requestValidators[id]);
      let valid = 0;
      let invalid = 0;
      for (const request of REQUESTS) {
        const operation = generated.router.matchOperation(request);
        if (!operation) continue;
        const [a, b] = [
          compiled.validateRequest(structuredClone(request)),
          generated.validateRequest(structuredClone(request)),
        ];
        expect(a, `${request.method} ${request.path}?${request.query}`).to.deep.equal(b);
        if (b.valid) valid++;
        else invalid++;
      }
      expect(valid, 'valid requests compared').to.be.at.least(1);
      expect(invalid, 'invalid requests compared').to.be.at.least(2);
    });
  }
});
