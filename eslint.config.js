// The linter (issue 33): typescript-eslint's recommended rules over the code we write (generated/ is not ours).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'generated/**',
      'node_modules/**',
      '.data/**',
      'coverage/**',
      'checks/openapi-typescript/node_modules/**',
      'checks/openapi-typescript/tmp*/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // (TypeScript itself reports an undefined name, knowing the types' globals as the linter does not)
      'no-undef': 'off',
      // a name that starts with _ is left unused on purpose (a rest sibling dropped, a parameter a signature needs)
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // a `let` that a closure made before its one assignment reads (a shutdown handler registered first) stays a let
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  // the settings screen's own scripts run in the browser
  { files: ['src/portal/assets/**/*.js'], languageOptions: { globals: { ...globals.browser } } },
  {
    files: ['test/**/*.ts'],
    rules: {
      // chai's assertions are property reads (`expect(x).to.be.true`)
      '@typescript-eslint/no-unused-expressions': 'off',
      // a test reads the fields of a parsed JSON answer directly, after its document's validator has checked its shape
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
);
