/**
 * A deliberately small JSON Schema subset, interpreted exactly: no type coercion, no silent
 * stripping of unknown properties, string lengths in Unicode code points (decisions.md section 6).
 * The same schema objects are published in the OpenAPI document, so what is documented is what
 * is enforced.
 */
export interface StringSchema {
  type: 'string';
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  enum?: readonly string[];
  const?: string;
  format?: string;
  description?: string;
}
export interface IntegerSchema {
  type: 'integer';
  minimum?: number;
  maximum?: number;
  description?: string;
}
export interface BooleanSchema {
  type: 'boolean';
  description?: string;
}
export interface ArraySchema {
  type: 'array';
  items: Schema;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  description?: string;
}
export interface ObjectSchema {
  type: 'object';
  properties: Record<string, Schema>;
  required?: readonly string[];
  additionalProperties: false;
  minProperties?: number;
  description?: string;
}
export interface NullableSchema {
  anyOf: readonly [Schema, { type: 'null' }];
  description?: string;
}
export type Schema = StringSchema | IntegerSchema | BooleanSchema | ArraySchema | ObjectSchema | NullableSchema;

export interface SchemaViolation {
  /** Dotted path of the offending field ('' for the whole body). */
  field: string;
  message: string;
}

export function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

const LONE_SURROGATE = /\p{Cs}/u;

/**
 * The rule of a simple pattern in words, for the refusal message: `^[A-Za-z0-9_-]{6,64}$` is
 * "6-64 characters of A-Za-z0-9_-". Other patterns get no wording (the field's documentation has it).
 */
export function patternRule(pattern: string): string | null {
  const m = /^\^\[([^\]]+)\]\{(\d+),(\d+)\}\$$/.exec(pattern);
  if (!m) return null;
  const set = m[1] === '\\x21-\\x7e' ? 'visible ASCII' : m[1];
  return `${m[2]}-${m[3]} characters of ${set}`;
}

const patternCache = new Map<string, RegExp>();
function re(p: string): RegExp {
  let r = patternCache.get(p);
  if (r === undefined) {
    r = new RegExp(p, 'u');
    patternCache.set(p, r);
  }
  return r;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (v instanceof Number) return 'decimal number';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number' && !Number.isInteger(v)) return 'decimal number';
  return typeof v;
}

/**
 * Validates `value` against `schema`; returns the first violation or null.
 * `decimalLiterals` names top-level keys whose number was written with a fraction or exponent
 * (so `1.0` is refused where an integer is required).
 */
export function validate(
  schema: Schema,
  value: unknown,
  field = '',
  decimalLiterals: ReadonlySet<string> = new Set(),
): SchemaViolation | null {
  if ('anyOf' in schema) {
    if (value === null) return null;
    return validate(schema.anyOf[0], value, field, decimalLiterals);
  }
  switch (schema.type) {
    case 'string': {
      if (typeof value !== 'string') return { field, message: `${field || 'value'} must be a string, not ${describe(value)}` };
      // PostgreSQL text cannot hold U+0000: such a value is refused here, as input, not stored.
      if (value.includes('\u0000')) return { field, message: `${field || 'value'} must not contain the NUL character (U+0000)` };
      // A lone surrogate (JSON "\ud800") is not a character: it would be stored as U+FFFD, so the
      // value kept would differ from the value answered.
      if (LONE_SURROGATE.test(value))
        return { field, message: `${field || 'value'} must not contain a lone surrogate (ill-formed Unicode)` };
      if (schema.const !== undefined && value !== schema.const) return { field, message: `${field} must be exactly ${schema.const}` };
      if (schema.enum !== undefined && !schema.enum.includes(value)) {
        return { field, message: `${field} must be one of ${schema.enum.join(', ')}` };
      }
      const len = schema.minLength !== undefined || schema.maxLength !== undefined ? codePointLength(value) : 0;
      if (schema.minLength !== undefined && len < schema.minLength) {
        return { field, message: `${field} must have at least ${schema.minLength} character${schema.minLength === 1 ? '' : 's'}` };
      }
      if (schema.maxLength !== undefined && len > schema.maxLength) {
        return { field, message: `${field} must have at most ${schema.maxLength} character${schema.maxLength === 1 ? '' : 's'}` };
      }
      if (schema.pattern !== undefined && !re(schema.pattern).test(value)) {
        const rule = patternRule(schema.pattern);
        return { field, message: `${field} has an invalid format${rule ? ` (${rule})` : ''}` };
      }
      return null;
    }
    case 'integer': {
      const top = field.includes('.') ? undefined : field;
      // An integer however large: past 2^53 JSON's number is not read exactly (past ~1.8e308 it reads
      // as Infinity), but it is still an integer, which `maximum`, or the rules after the schema
      // (a refund above what is left of its payment: 422), refuse as too large.
      const integral = typeof value === 'number' && (Number.isInteger(value) || value === Infinity || value === -Infinity);
      if (!integral || (top !== undefined && decimalLiterals.has(top))) {
        return { field, message: `${field || 'value'} must be an integer, not ${describe(value)}` };
      }
      if (schema.minimum !== undefined && value < schema.minimum) return { field, message: `${field} must be at least ${schema.minimum}` };
      if (schema.maximum !== undefined && value > schema.maximum) return { field, message: `${field} must be at most ${schema.maximum}` };
      return null;
    }
    case 'boolean':
      return typeof value === 'boolean' ? null : { field, message: `${field} must be true or false` };
    case 'array': {
      if (!Array.isArray(value)) return { field, message: `${field || 'value'} must be an array, not ${describe(value)}` };
      if (schema.minItems !== undefined && value.length < schema.minItems)
        return { field, message: `${field} must have at least ${schema.minItems} items` };
      if (schema.maxItems !== undefined && value.length > schema.maxItems)
        return { field, message: `${field} must have at most ${schema.maxItems} items` };
      for (let i = 0; i < value.length; i++) {
        const v = validate(schema.items, value[i], `${field}[${i}]`);
        if (v) return v;
      }
      if (schema.uniqueItems && new Set(value.map((x) => JSON.stringify(x))).size !== value.length) {
        return { field, message: `${field} must not repeat items` };
      }
      return null;
    }
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        return { field, message: `${field || 'body'} must be a JSON object, not ${describe(value)}` };
      }
      const obj = value as Record<string, unknown>;
      for (const key of Object.keys(obj)) {
        if (!Object.hasOwn(schema.properties, key)) {
          const f = field ? `${field}.${key}` : key;
          return { field: f, message: `${f} is not a known field` };
        }
      }
      for (const key of schema.required ?? []) {
        if (!Object.hasOwn(obj, key)) {
          const f = field ? `${field}.${key}` : key;
          return { field: f, message: `${f} is required` };
        }
      }
      if (schema.minProperties !== undefined && Object.keys(obj).length < schema.minProperties) {
        return { field, message: `${field || 'body'} must have at least ${schema.minProperties} field(s)` };
      }
      for (const [key, sub] of Object.entries(schema.properties)) {
        if (!Object.hasOwn(obj, key)) continue;
        const v = validate(sub, obj[key], field ? `${field}.${key}` : key, field ? undefined : decimalLiterals);
        if (v) return v;
      }
      return null;
    }
  }
}

export const nullable = <S extends Schema>(s: S, description?: string): NullableSchema =>
  description === undefined ? { anyOf: [s, { type: 'null' }] } : { anyOf: [s, { type: 'null' }], description };

/** How extendObject made an object schema: its base, plus the properties and required names it added. */
export interface ObjectExtension {
  base: ObjectSchema;
  properties: Record<string, Schema>;
  required: readonly string[];
}

const extensions = new WeakMap<ObjectSchema, ObjectExtension>();

/**
 * `base` with more properties, as one flat object schema: validated like any other (no unknown
 * field), and published in the OpenAPI document as `allOf: [base, the additions]` with
 * `unevaluatedProperties: false` (src/http/openapi.ts, through extensionOf), so a named resource
 * such as the order snapshot is one schema there too.
 */
export function extendObject(
  base: ObjectSchema,
  add: { properties: Record<string, Schema>; required: readonly string[]; description?: string },
): ObjectSchema {
  for (const key of Object.keys(add.properties)) {
    if (Object.hasOwn(base.properties, key)) throw new Error(`extendObject: ${key} is already a property of the base`);
  }
  const schema: ObjectSchema = {
    type: 'object',
    additionalProperties: false,
    required: [...add.required, ...(base.required ?? [])],
    properties: { ...add.properties, ...base.properties },
    ...(add.description === undefined ? {} : { description: add.description }),
  };
  extensions.set(schema, { base, properties: add.properties, required: add.required });
  return schema;
}

/** The base and additions of a schema made by extendObject; undefined for any other schema. */
export function extensionOf(schema: object): ObjectExtension | undefined {
  return extensions.get(schema as ObjectSchema);
}
