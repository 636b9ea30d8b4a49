// Lint: typescript-eslint's recommended rules (syntax-level, fast); formatting is Prettier's job.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', 'bench/results/**', 'test-results/**', 'packages/*/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', URL: 'readonly', TextDecoder: 'readonly', TextEncoder: 'readonly', fetch: 'readonly', performance: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', structuredClone: 'readonly', document: 'readonly', window: 'readonly', NodeJS: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-control-regex': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  {
    // SQL lives in the repositories of src/store (docs/architecture.md): nowhere else in the service
    // is a statement issued or the driver imported.
    files: ['src/**/*.ts'],
    ignores: ['src/store/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.property.name='query']",
          message: 'SQL belongs in a repository of src/store/: call one of its named functions.',
        },
      ],
      'no-restricted-imports': ['error', { paths: [{ name: 'pg', message: 'The database driver is used only in src/store/.' }] }],
    },
  },
);
