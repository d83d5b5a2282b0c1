import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ROOT_DIR } from '../../src/config.js';
import { loadOpenApiDocument } from '../../src/contract/document.js';
import { publicOperations } from '../../src/api/operations/index.js';

// Each operation of the public API is one file, src/api/operations/<operationId in kebab-case>.ts, holding its handler
// and what its ETag depends on: "where is getReceivables?" has one answer.

const kebab = (operationId: string) => operationId.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`);

describe('the public API: one file per operation', () => {
  const documented = Object.values(loadOpenApiDocument().paths)
    .flatMap((item) => Object.values(item as Record<string, { operationId?: string }>))
    .map((operation) => operation.operationId)
    .filter((id): id is string => id !== undefined)
    .sort();

  it("names the files of src/api/operations/ after the document's operation ids", () => {
    const files = fs
      .readdirSync(path.join(ROOT_DIR, 'src/api/operations'))
      .filter((name) => name !== 'index.ts')
      .map((name) => name.replace(/\.ts$/, ''))
      .sort();
    expect(files).to.deep.equal(documented.map(kebab).sort());
  });

  it('collects every operation of the document, and only those, in the index', () => {
    expect(Object.keys(publicOperations).sort()).to.deep.equal(documented);
  });
});
