# Shortcuts for the npm scripts; npm is the source of truth.
.PHONY: install start test generate lint check ci bench

install:
	npm install
start:
	npm start
test:
	npm test
generate:
	npm run generate
lint:
	npm run lint:openapi
check: lint
	npm run typecheck
	npm run check:openapi-typescript
ci:
	bash .ci/run
bench:
	npm run bench
