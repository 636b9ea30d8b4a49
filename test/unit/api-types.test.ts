/**
 * The API shapes are written once, as the schemas the service serves and validates with: the
 * SDK's types (packages/sdk/src/api-types.ts, named by packages/sdk/src/types.ts) and the pages'
 * types (src/ui/api-types.ts) are generated from them by `npm run gen:types`. Regenerated here in
 * memory: a schema changed without regenerating, or a generated file edited by hand, fails.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { formatted, generateTypes } from '../../scripts/gen-types.ts';

const root = path.resolve(import.meta.dirname, '../..');

describe('generated API types', () => {
  test('each committed file is what the served schemas generate', async () => {
    const files = await formatted(generateTypes());
    assert.deepEqual(Object.keys(files).sort(), ['packages/sdk/src/api-types.ts', 'src/ui/api-types.ts']);
    for (const [rel, text] of Object.entries(files)) {
      assert.equal(fs.readFileSync(path.join(root, rel), 'utf8'), text, `${rel} differs from the schemas: run npm run gen:types`);
    }
  });

  test('every schema of the OpenAPI document has its type, under its component name', () => {
    const sdk = generateTypes()['packages/sdk/src/api-types.ts']!;
    for (const name of [
      'OrderSnapshot',
      'RefundProjection',
      'SettlementView',
      'StatementResponse',
      'WebhookEventPayload',
      'PlatformKeysResponse',
    ]) {
      assert.match(sdk, new RegExp(`export (interface|type) ${name}\\b`));
    }
  });

  test('the SDK restates no enum: its state and kind types are read from the generated ones', () => {
    const types = fs.readFileSync(path.join(root, 'packages/sdk/src/types.ts'), 'utf8');
    assert.doesNotMatch(types, /= '[A-Z_]+' \|/, 'a union of string literals written by hand in packages/sdk/src/types.ts');
  });
});
