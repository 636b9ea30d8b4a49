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
