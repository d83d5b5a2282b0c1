#!/usr/bin/env bash
# A second, independent generator (openapi-typescript 7 with TypeScript 5, installed in checks/openapi-typescript
# from its own lockfile, with openapi-fetch) turns each document (the public one and the admin one) into types, and a strict tsc compile of a file that
# uses them, and of the API guide's openapi-fetch example (docs/api.md), must pass. Fails on any generator error or type error.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
check="$here/checks/openapi-typescript"
[ -d "$check/node_modules" ] || npm ci --prefix "$check" --no-audit --no-fund >/dev/null
# Inside the check's folder: the files resolve openapi-fetch from its node_modules, as ES modules.
out="$(mktemp -d "$check/tmp.XXXXXX")"
trap 'rm -rf "$out"' EXIT
"$check/node_modules/.bin/openapi-typescript" "$here/openapi/openapi.yaml" --output "$out/api.d.ts" --immutable
"$check/node_modules/.bin/openapi-typescript" "$here/openapi/admin.yaml" --output "$out/admin.d.ts" --immutable >/dev/null
cat > "$out/use.ts" <<'TS'
import type { components, paths, webhooks } from './api.js';
import type { components as adminComponents } from './admin.js';
type Summary = paths['/v1/fleet/summary']['get']['responses'][200]['content']['application/json'];
const summary: Summary = { total: 1, byStatus: { available: 1, rented: 0, in_service: 0, inactive: 0 }, available: 1, rented: 0, inService: 0, utilization: 0 };
type Test = webhooks['webhook.test']['post']['requestBody']['content']['application/json'];
const event: Test['event'] = 'webhook.test';
type ErrorBody = components['schemas']['ErrorResponse'];
const error: ErrorBody = { error: { code: 'not_found', message: 'x', requestId: 'r' } };
const adminError: adminComponents['schemas']['ErrorResponse'] = { error: { code: 'not_found', message: 'x', requestId: 'r' } };
export { summary, event, error, adminError };
TS
# The API guide's openapi-fetch example (docs/api.md), against types generated as its command does (no options).
"$check/node_modules/.bin/openapi-typescript" "$here/openapi/openapi.yaml" --output "$out/fleet-api.d.ts" >/dev/null
awk '/^```ts$/{code=1; body=""; next} /^```$/{if (code && body ~ /^\/\/ fleet-openapi-fetch\.ts/) printf "%s", body; code=0; next} code{body=body $0 "\n"}' \
  "$here/docs/api.md" | sed "s#from './fleet-api'#from './fleet-api.js'#" > "$out/fleet-openapi-fetch.ts"
[ -s "$out/fleet-openapi-fetch.ts" ] || { echo "docs/api.md: no fleet-openapi-fetch.ts example" >&2; exit 1; }
"$check/node_modules/.bin/tsc" --strict --noEmit --skipLibCheck --types node --target es2022 --module nodenext --moduleResolution nodenext \
  "$out/api.d.ts" "$out/admin.d.ts" "$out/use.ts" "$out/fleet-api.d.ts" "$out/fleet-openapi-fetch.ts"
echo "openapi-typescript: $(wc -l < "$out/api.d.ts") + $(wc -l < "$out/admin.d.ts") lines of types (public, admin) compile with tsc $("$check/node_modules/.bin/tsc" --version)"
