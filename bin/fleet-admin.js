#!/usr/bin/env node
// Launcher for `npx fleet-admin`: runs the TypeScript entry through tsx's ESM loader, so no build step is needed.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/fleet-admin.ts');
