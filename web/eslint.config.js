// ESLint for the console (flat config): typescript-eslint's type-checked rules and React's
// hooks rules, the React Compiler's included, on every TypeScript file. `noInlineConfig`
// makes an `eslint-disable` comment itself a finding: a rule that is wrong for this code is
// turned off here, with the reason, not silenced where it fires.

import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import reactHooks from 'eslint-plugin-react-hooks';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'src/generated/', 'test-results/', 'playwright-report/', 'e2e/screenshots/'] },
  { linterOptions: { noInlineConfig: true, reportUnusedDisableDirectives: 'error' } },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // React ignores what an event handler returns, so an async one is fine there; each
      // reports its own failure (useNotices().run, or its own catch).
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { attributes: false } }],
      // `_x`: a parameter a callback's signature has and this code does not need.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    // The app and its unit tests run in the browser (jsdom for the tests).
    files: ['src/**/*.{ts,tsx}', 'test/**/*.{ts,tsx}'],
    languageOptions: { globals: globals.browser },
    extends: [reactHooks.configs.flat['recommended-latest']],
    rules: {
      // A missing dependency is a stale value on screen: an error, not a warning.
      'react-hooks/exhaustive-deps': 'error',
    },
  },
  {
    // The unit tests: `act(async () => fireEvent.click(…))` makes act wait for the updates
    // the click starts; the callback itself has nothing to await.
    files: ['test/**/*.{ts,tsx}'],
    rules: { '@typescript-eslint/require-await': 'off' },
  },
  {
    // The build's and the e2e's scripts run in Node.
    files: ['*.{js,ts,mjs}', 'scripts/**', 'e2e/**'],
    languageOptions: { globals: globals.node },
  },
  {
    // Playwright reads a hook's fixtures from its first parameter's pattern: `({}, testInfo)`
    // is how a hook that needs none says so.
    files: ['e2e/**'],
    rules: { 'no-empty-pattern': ['error', { allowObjectPatternsAsParameters: true }] },
  },
  {
    // Plain JavaScript has no types to check: every value would be `any` to the type-checked
    // rules.
    files: ['**/*.{js,mjs}'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
