/** Refusal messages of the body validator state the rule that was broken. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { patternRule, validate } from '../../src/domain/schema.ts';

test('a simple pattern is put in words; others are not', () => {
  assert.equal(patternRule('^[A-Za-z0-9_-]{6,64}$'), '6-64 characters of A-Za-z0-9_-');
  assert.equal(patternRule('^[\\x21-\\x7e]{1,128}$'), '1-128 characters of visible ASCII');
  assert.equal(patternRule('^[0-9]{12,19}$'), '12-19 characters of 0-9');
  assert.equal(patternRule('^ord_[0-9a-z]+$'), null);
});

test('the refusal names the field and the rule', () => {
  const schema = {
    type: 'object',
    additionalProperties: false,
    required: ['no', 'name'],
    properties: { no: { type: 'string', pattern: '^[A-Za-z0-9_-]{6,64}$' }, name: { type: 'string', minLength: 1, maxLength: 3 } },
  } as const;
  assert.deepEqual(validate(schema, { no: 'RF_T1', name: 'x' }), {
    field: 'no',
    message: 'no has an invalid format (6-64 characters of A-Za-z0-9_-)',
  });
  assert.equal(validate(schema, { no: 'RF_T1_OK', name: '' })?.message, 'name must have at least 1 character');
  assert.equal(validate(schema, { no: 'RF_T1_OK', name: 'abcd' })?.message, 'name must have at most 3 characters');
});

test('an integer is one however large; a decimal or exponent literal, or a fraction, is not', () => {
  const schema = {
    type: 'object',
    additionalProperties: false,
    required: ['n'],
    properties: { n: { type: 'integer', minimum: 1, maximum: 100 } },
  } as const;
  const unbounded = { ...schema, properties: { n: { type: 'integer', minimum: 1 } } } as const;
  for (const text of ['9007199254740993', '1' + '0'.repeat(30), '9'.repeat(400)]) {
    const n = (JSON.parse(`{"n":${text}}`) as { n: number }).n;
    assert.equal(validate(schema, { n })?.message, 'n must be at most 100', text);
    assert.equal(validate(unbounded, { n }), null, text);
  }
  assert.equal(validate(schema, { n: -Infinity })?.message, 'n must be at least 1');
  assert.equal(validate(unbounded, { n: 2.5 })?.message, 'n must be an integer, not decimal number');
  assert.equal(validate(unbounded, { n: 100 }, '', new Set(['n']))?.message, 'n must be an integer, not number');
  assert.equal(validate(unbounded, { n: Number.NaN })?.message?.startsWith('n must be an integer'), true);
});
