import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { loadOpenApiDocument, type OpenApiDocument } from '../src/contract/document.js';

// The curl examples of the README (and of docs/) as a reader copies them: each one that calls an operation sends the
// headers the document requires of it, and an `Idempotency-Key` where the operation takes one (the safe way to repeat
// a POST, which a reader's example should show).
const ROOT = fileURLToPath(new URL('..', import.meta.url));

function markdownFiles(): string[] {
  const files = [path.join(ROOT, 'README.md')];
  const walk = (dir: string) => {
    for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
      if (entry.isDirectory()) walk(path.join(dir, entry.name));
      else if (entry.name.endsWith('.md')) files.push(path.join(dir, entry.name));
    }
  };
  walk(path.join(ROOT, 'docs'));
  return files;
}

interface Curl {
  file: string;
  command: string;
  method: string;
  path: string;
  headers: string[];
}

/** Every curl command of a file (lines continued with `\` joined), with its method, path and header names. */
function curls(file: string): Curl[] {
  const text = fs.readFileSync(file, 'utf8').replace(/\\\n\s*/g, ' ');
  return text
    .split('\n')
    .filter((line) => /^\s*(?:#\s*)?curl\s/.test(line) || /\$\(curl\s/.test(line))
    .flatMap((command) => {
      const url = /https?:\/\/[^\s"']+/.exec(command)?.[0];
      if (!url) return [];
      return [
        {
          file: path.relative(ROOT, file),
          command: command.trim(),
          method: (
            /(?:-X|--request)\s+(\w+)/.exec(command)?.[1] ?? (/\s(?:-d|--data)\s/.test(command) ? 'POST' : 'GET')
          ).toLowerCase(),
          path: new URL(url.replace(/\$\{?\w+\}?/g, 'x')).pathname,
          headers: [...command.matchAll(/-H\s+(?:'([^':]+):|"([^":]+):)/g)].map((m) => (m[1] ?? m[2]).toLowerCase()),
        },
      ];
    });
}

type Parameter = { name: string; in: string; required?: boolean; $ref?: string };

/** The header parameters of the operation a request goes to (none found: undefined). */
function headerParameters(document: OpenApiDocument, method: string, requestPath: string): Parameter[] | undefined {
  for (const [template, item] of Object.entries(document.paths)) {
    if (!new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(requestPath)) continue;
    const operation = item[method];
    if (!operation) return undefined;
    const resolve = (p: Parameter) =>
      p.$ref ? (document.components.parameters as Record<string, Parameter>)[p.$ref.split('/').pop()!] : p;
    const shared = ((item as { parameters?: Parameter[] }).parameters ?? []).map(resolve);
    return [...shared, ...((operation.parameters as Parameter[] | undefined) ?? []).map(resolve)].filter(
      (p) => p.in === 'header',
    );
  }
  return undefined;
}

describe('the curl examples of the README and docs/', () => {
  const all = markdownFiles().flatMap(curls);
  const documents = { public: loadOpenApiDocument('openapi'), admin: loadOpenApiDocument('admin') };

  it('send every header the operation requires, and an Idempotency-Key wherever the operation takes one', () => {
    const missing: string[] = [];
    let checked = 0;
    for (const curl of all) {
      const parameters = headerParameters(
        curl.path.startsWith('/admin/') ? documents.admin : documents.public,
        curl.method,
        curl.path,
      );
      if (!parameters) continue;
      checked++;
      for (const parameter of parameters) {
        if (
          (parameter.required || parameter.name === 'Idempotency-Key') &&
          !curl.headers.includes(parameter.name.toLowerCase())
        ) {
          missing.push(`${curl.file}: ${parameter.name} missing from: ${curl.command}`);
        }
      }
    }
    expect(checked, 'curl examples that call an operation of either document').to.be.at.least(20);
    expect(missing).to.deep.equal([]);
  });

  it('show the test delivery (POST /v1/webhooks/{id}/test) with its Idempotency-Key', () => {
    const tests = all.filter((curl) => curl.method === 'post' && /^\/v1\/webhooks\/[^/]+\/test$/.test(curl.path));
    // (in the receivers' guide, where a receiver looks for how to try its endpoint)
    expect(tests.map((curl) => curl.file)).to.include('docs/webhooks.md');
    for (const curl of tests) expect(curl.headers, curl.command).to.include('idempotency-key');
  });
});
