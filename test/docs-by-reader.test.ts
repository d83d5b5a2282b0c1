import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ROOT_DIR } from '../src/config.js';

// Issue 33, point 7: the README is the front door (what the service is, the quick start, where to read next) in at
// most 250 lines; the rest is in docs/, one guide per reader, each linked from the README; and every link between
// them points at a file that is there.

const read = (file: string) => fs.readFileSync(path.join(ROOT_DIR, file), 'utf8');
const guides = fs
  .readdirSync(path.join(ROOT_DIR, 'docs'))
  .filter((name) => name.endsWith('.md'))
  .map((name) => `docs/${name}`);

/** The relative links of a Markdown file (not a web address, not an anchor of the same file), resolved from it. */
function relativeLinks(file: string): string[] {
  const links = [...read(file).matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1])
    .filter((link) => !/^[a-z]+:/.test(link) && !link.startsWith('#'));
  return links.map((link) => path.normalize(path.join(path.dirname(file), link.split('#')[0])));
}

describe('the docs, by reader (issue 33)', () => {
  it('the README is at most 250 lines and links every guide in docs/', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).to.be.at.most(250);
    expect(guides).to.include.members([
      'docs/api.md',
      'docs/webhooks.md',
      'docs/platform.md',
      'docs/operations.md',
      'docs/contributing.md',
    ]);
    expect(relativeLinks('README.md')).to.include.members(guides);
  });

  it('every relative link of the README and the guides points at a file of the repository', () => {
    const broken = ['README.md', ...guides].flatMap((file) =>
      relativeLinks(file)
        .filter((target) => !fs.existsSync(path.join(ROOT_DIR, target)))
        .map((target) => `${file} -> ${target}`),
    );
    expect(broken).to.deep.equal([]);
  });
});
