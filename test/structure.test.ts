import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import ts from 'typescript';
import { ROOT_DIR } from '../src/config.js';
import { migrationSource } from '../src/db/migrate.js';

// The house's rules, read from the code's own imports (every relative import, type-only and import() included), so
// that they keep holding: src/ has no import cycle; a migration imports nothing but migrations/ (its helpers under
// migrations/support/), never src/, whose meaning changes with the product; nothing below the CLI imports it.

const relative = (file: string) => path.relative(ROOT_DIR, file).split(path.sep).join('/');

function tsFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT_DIR, dir), { withFileTypes: true }).flatMap((entry) => {
    const name = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return tsFiles(name);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [name] : [];
  });
}

/** The project files `file` imports by a relative path (`./x.js` is the module `./x.ts`), as paths from the root. */
function importsOf(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(fs.readFileSync(path.join(ROOT_DIR, file), 'utf8'), true, true);
  return importedFiles
    .map((imported) => imported.fileName)
    .filter((specifier) => specifier.startsWith('.'))
    .map((specifier) => relative(path.resolve(ROOT_DIR, path.dirname(file), specifier)).replace(/\.js$/, '.ts'));
}

/** Every cycle of the import graph, one per strongly connected component of two or more files (or a file importing itself). */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)!.includes(file)) found.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

describe('the house: which code may import which', () => {
  const src = new Map(tsFiles('src').map((file) => [file, importsOf(file)]));

  it('reads the imports it judges (a known import of each kind is seen)', () => {
    expect(src.get('src/webhooks/attempt-records.ts')).to.include('src/webhooks/endpoint-lifecycle.ts');
    expect(src.get('src/api/auth.ts'), 'import type').to.include('src/api/key-cache.ts');
    expect(src.get('src/main.ts'), 'import()').to.include('seeds/demo.ts');
    expect(
      cycles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).to.deep.equal([['a', 'b', 'c']]);
  });

  it('src/ has no import cycle', () => {
    expect(cycles(src), 'files of src/ that import each other in a loop').to.deep.equal([]);
  });

  it('a migration imports nothing outside migrations/ (never src/): what it did must not change with the code', () => {
    const outside = tsFiles('migrations').flatMap((file) =>
      importsOf(file)
        .filter((target) => !target.startsWith('migrations/'))
        .map((target) => `${file} -> ${target}`),
    );
    expect(outside).to.deep.equal([]);
  });

  it('the migration source lists the migrations, never a helper of migrations/support/', async () => {
    const source = migrationSource();
    const listed = (await source.getMigrations([])).map((file) => source.getMigrationName(file));
    const migrations = fs
      .readdirSync(path.join(ROOT_DIR, 'migrations'))
      .filter((name) => /^\d{14}_.*\.ts$/.test(name))
      .map((name) => name.replace(/\.ts$/, ''));
    expect(listed).to.deep.equal(migrations.sort());
    expect(tsFiles('migrations/support')).not.to.be.empty;
  });

  it('only src/config.ts reads the environment: no other file of src/ mentions process.env', () => {
    const readers = [...src.keys()].filter((file) =>
      fs.readFileSync(path.join(ROOT_DIR, file), 'utf8').includes('process.env'),
    );
    expect(readers).to.deep.equal(['src/config.ts']);
  });

  it('the engine (src/webhooks/, and the database, query and metrics code below it) imports nothing of src/core/', () => {
    const engine = [...src.keys()].filter((file) =>
      ['src/webhooks/', 'src/observability/', 'src/db/', 'src/queries/'].some((dir) => file.startsWith(dir)),
    );
    const actions = engine.flatMap((file) =>
      (src.get(file) ?? []).filter((target) => target.startsWith('src/core/')).map((target) => `${file} -> ${target}`),
    );
    expect(actions).to.deep.equal([]);
  });

  it('src/core/ imports no client (src/api, src/admin, src/portal, src/cli, src/http, src/main.ts)', () => {
    const clients = ['src/api/', 'src/admin/', 'src/portal/', 'src/cli/', 'src/http/', 'src/main.ts'];
    const upward = [...src.keys()]
      .filter((file) => file.startsWith('src/core/'))
      .flatMap((file) =>
        (src.get(file) ?? [])
          .filter((target) => clients.some((client) => target.startsWith(client)))
          .map((target) => `${file} -> ${target}`),
      );
    expect(upward).to.deep.equal([]);
  });

  it('nothing below the CLI imports src/cli/ (the import, the seeds, the migrations, the rest of src/)', () => {
    const files = [...src.keys(), ...tsFiles('seeds'), ...tsFiles('migrations')].filter(
      (file) => !file.startsWith('src/cli/'),
    );
    const upward = files.flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith('src/cli/'))
        .map((target) => `${file} -> ${target}`),
    );
    expect(upward).to.deep.equal([]);
  });
});
