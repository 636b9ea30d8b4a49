/**
 * `npm run gen:types`: the TypeScript types of the API shapes, generated from the schemas the
 * service serves and validates with, so that they are written once.
 *
 *   packages/sdk/src/api-types.ts   every schema of the OpenAPI document's components.schemas
 *                                   (GET /docs/openapi.json), for the SDK's public types
 *                                   (packages/sdk/src/types.ts names them)
 *   src/ui/api-types.ts             the same, plus the back office's request bodies
 *                                   (src/backoffice-http/schemas.ts), for the console's and the
 *                                   portal's pages
 *
 * The generator reads the served document itself (with its $ref, allOf and anyOf), and knows the
 * small JSON Schema subset the service uses (src/domain/schema.ts); anything else is an error.
 * `node scripts/gen-types.ts --check` fails when a committed file differs from what would be
 * generated (test/unit/api-types.test.ts does the same).
 */
import fs from 'node:fs';
import path from 'node:path';
import * as backOfficeSchemas from '../src/backoffice-http/schemas.ts';
import { openApiDocument } from '../src/http/openapi.ts';

type Json = Record<string, unknown>;

const ROOT = path.resolve(import.meta.dirname, '..');
const REF = '#/components/schemas/';

function fail(where: string, why: string): never {
  throw new Error(`gen-types: ${where}: ${why}`);
}

function comment(text: unknown, indent: string): string {
  if (typeof text !== 'string' || text === '') return '';
  const lines = text.replaceAll('*/', '*\\/').split('\n');
  if (lines.length === 1) return `${indent}/** ${lines[0]} */\n`;
  return `${indent}/**\n${lines.map((l) => `${indent} * ${l}`).join('\n')}\n${indent} */\n`;
}

const literal = (v: unknown) => JSON.stringify(v).replaceAll('"', "'");
const needsParens = (t: string) => / [|&] /.test(t) && !/^[{(]/.test(t);
const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : literal(k));

/** The TypeScript type of a schema of the served subset, `indent` being the indentation of its line. */
function typeOf(s: Json, where: string, indent: string): string {
  if (typeof s.$ref === 'string') {
    if (!s.$ref.startsWith(REF)) fail(where, `unknown $ref ${s.$ref}`);
    return s.$ref.slice(REF.length);
  }
  if (Array.isArray(s.anyOf)) {
    const [first, second, ...rest] = s.anyOf as Json[];
    if (first === undefined || second?.type !== 'null' || rest.length > 0) fail(where, 'anyOf other than [schema, null]');
    return `${typeOf(first, where, indent)} | null`;
  }
  if (Array.isArray(s.allOf)) return extension(s, where, indent);
  switch (s.type) {
    case 'string':
      if (s.const !== undefined) return literal(s.const);
      if (Array.isArray(s.enum)) return s.enum.map(literal).join(' | ');
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return s.const === undefined ? 'boolean' : literal(s.const);
    case 'array': {
      const item = typeOf(s.items as Json, `${where}[]`, indent);
      return needsParens(item) ? `(${item})[]` : `${item}[]`;
    }
    case 'object':
      return objectType(s, where, indent);
    default:
      return fail(where, `unknown schema ${JSON.stringify(s).slice(0, 80)}`);
  }
}

function objectType(s: Json, where: string, indent: string): string {
  const properties = (s.properties ?? {}) as Record<string, Json>;
  const required = new Set((s.required ?? []) as string[]);
  const inner = `${indent}  `;
  const lines = Object.entries(properties).map(
    ([k, p]) => `${comment(p.description, inner)}${inner}${key(k)}${required.has(k) ? '' : '?'}: ${typeOf(p, `${where}.${k}`, inner)};\n`,
  );
  return lines.length === 0 ? 'Record<string, never>' : `{\n${lines.join('')}${indent}}`;
}

/** `allOf: [base], properties, required`: the base, its optional properties made required, plus the additions. */
function extension(s: Json, where: string, indent: string): string {
  const bases = s.allOf as Json[];
  if (bases.length !== 1 || typeof bases[0]?.$ref !== 'string') fail(where, 'allOf other than [a $ref]');
  const base = typeOf(bases[0], where, indent);
  const properties = (s.properties ?? {}) as Record<string, Json>;
  const madeRequired = ((s.required ?? []) as string[]).filter((k) => !Object.hasOwn(properties, k));
  const parts = [base];
  if (madeRequired.length > 0) parts.push(`Required<Pick<${base}, ${madeRequired.map(literal).join(' | ')}>>`);
  if (Object.keys(properties).length > 0) parts.push(objectType({ ...s, allOf: undefined }, where, indent));
  return parts.join(' & ');
}

function declaration(name: string, s: Json): string {
  const doc = comment(s.description, '');
  const isPlainObject = s.type === 'object' && !Array.isArray(s.allOf) && Object.keys((s.properties ?? {}) as Json).length > 0;
  const t = typeOf(s, name, '');
  return isPlainObject ? `${doc}export interface ${name} ${t}\n` : `${doc}export type ${name} = ${t};\n`;
}

const HEADER = (what: string) =>
  `/**\n * Generated by \`npm run gen:types\` (scripts/gen-types.ts) from ${what}: do not edit.\n * test/unit/api-types.test.ts fails when this file and the schemas differ.\n */\n`;

/** The schemas the service serves under components.schemas, as its OpenAPI document holds them. */
function servedSchemas(): Record<string, Json> {
  const doc = openApiDocument('https://example.invalid') as { components: { schemas: Record<string, Json> } };
  return doc.components.schemas;
}

/** `createMerchantSchema` -> `CreateMerchantBody`. */
function bodyName(exportName: string): string {
  const base = exportName.replace(/Schema$/, '');
  return `${base[0]!.toUpperCase()}${base.slice(1)}Body`;
}

/** The generated files: path relative to the repository -> content. */
export function generateTypes(): Record<string, string> {
  const served = Object.entries(servedSchemas()).map(([name, s]) => declaration(name, s));
  const sdk = `${HEADER("the open API's OpenAPI document (components.schemas)")}\n${served.join('\n')}`;
  const bodies = Object.entries(backOfficeSchemas)
    .filter(([name, s]) => name.endsWith('Schema') && typeof s === 'object' && s !== null && (s as Json).type === 'object')
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, s]) => declaration(bodyName(name), s as Json));
  const ui = `${HEADER("the open API's OpenAPI document (components.schemas) and the back office's request bodies (src/backoffice-http/schemas.ts)")}\n// The open API's shapes.\n\n${served.join('\n')}\n// The back office's request bodies.\n\n${bodies.join('\n')}`;
  return { 'packages/sdk/src/api-types.ts': sdk, 'src/ui/api-types.ts': ui };
}

/** Formats as the repository does (prettier), so that the committed file is the generated one. */
export async function formatted(files: Record<string, string>): Promise<Record<string, string>> {
  const prettier = await import('prettier');
  const out: Record<string, string> = {};
  for (const [rel, text] of Object.entries(files)) {
    const file = path.join(ROOT, rel);
    const options = (await prettier.resolveConfig(file)) ?? {};
    out[rel] = await prettier.format(text, { ...options, filepath: file });
  }
  return out;
}

if (import.meta.main) {
  const check = process.argv.includes('--check');
  const files = await formatted(generateTypes());
  let stale = 0;
  for (const [rel, text] of Object.entries(files)) {
    const file = path.join(ROOT, rel);
    const now = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
    if (now === text) continue;
    if (check) {
      stale++;
      console.error(`${rel} differs from the schemas: run npm run gen:types`);
    } else {
      fs.writeFileSync(file, text);
      console.log(`wrote ${rel}`);
    }
  }
  if (stale > 0) process.exitCode = 1;
}
