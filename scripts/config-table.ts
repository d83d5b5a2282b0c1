// npx tsx scripts/config-table.ts: rewrites the configuration tables of the operators' guide (docs/operations.md) from
// src/config.ts's SETTINGS and TEST_SETTINGS (test/config.test.ts holds the guide against them).
import fs from 'node:fs';
import path from 'node:path';
import { ROOT_DIR, SETTINGS, settingRow, TEST_SETTINGS } from '../src/config.js';

const row = (cells: string[]) => `| ${cells.join(' | ')} |`;
const tables: Array<[string, string[]]> = [
  [
    '## Configuration',
    [
      row(['Variable', 'Default', 'Range', 'Read by', 'Meaning']),
      '|---|---|---|---|---|',
      ...SETTINGS.map((s) => row(settingRow(s))),
    ],
  ],
  [
    'Settings of the tests',
    [
      row(['Variable', 'Default', 'Meaning']),
      '|---|---|---|',
      ...TEST_SETTINGS.map((s) => row([`\`${s.name}\``, s.default, s.meaning])),
    ],
  ],
];
const GUIDE = 'docs/operations.md';
const file = path.join(ROOT_DIR, GUIDE);
const lines = fs.readFileSync(file, 'utf8').split('\n');
for (const [after, table] of tables) {
  let start = lines.findIndex((line) => line.startsWith(after));
  if (start < 0) throw new Error(`${GUIDE} has no line starting "${after}"`);
  while (!lines[start].startsWith('|')) start++;
  let end = start;
  while (lines[end]?.startsWith('|')) end++;
  lines.splice(start, end - start, ...table);
}
fs.writeFileSync(file, lines.join('\n'));
