/**
 * Open-API request body guard: a strict, single-pass JSON scanner.
 *
 * The body is decoded as fatal UTF-8 (invalid sequences, overlong encodings,
 * UTF-8-encoded surrogates and a leading BOM are all refused), then scanned
 * iteratively (explicit stack, no recursion) to enforce RFC 8259 grammar and
 * the extra refusals below. Only when the scan succeeds is the value built
 * with the native `JSON.parse`.
 *
 * Reason priority: a body that is not valid JSON is always `INVALID_JSON`,
 * even if a duplicate key, forbidden key or excessive depth appears before the
 * syntax error. For a syntactically valid body a key repeated in any object,
 * at any depth, is `DUPLICATE_KEY` wherever it appears (a refusal of the gate's
 * step 1, before any other check); else the reason is the first of
 * FORBIDDEN_KEY / TOO_DEEP in document order (refused later, by the schema).
 * A forbidden key is a key like any other for the duplicate check: two
 * `__proto__` keys in one object are a duplicate.
 */

export type JsonGuardFailure = 'INVALID_JSON' | 'DUPLICATE_KEY' | 'FORBIDDEN_KEY' | 'TOO_DEEP';

export type JsonGuardResult =
  | { ok: true; empty: true }
  | { ok: true; empty: false; value: unknown; nonIntegerLiteralKeys: ReadonlySet<string> }
  | { ok: false; reason: JsonGuardFailure };

/** Maximum nesting of arrays/objects; the 65th level is refused. */
export const MAX_JSON_DEPTH: number = 64;

// ignoreBOM: true keeps a leading U+FEFF in the decoded text, where the
// grammar scan (and JSON.parse) refuse it. The default would silently strip it.
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const EMPTY: JsonGuardResult = Object.freeze({ ok: true, empty: true } as const);
const INVALID: JsonGuardResult = Object.freeze({ ok: false, reason: 'INVALID_JSON' } as const);

// Character codes.
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const QUOTE = 0x22;
const PLUS = 0x2b;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const SLASH = 0x2f;
const ZERO = 0x30;
const NINE = 0x39;
const COLON = 0x3a;
const UPPER_E = 0x45;
const LBRACKET = 0x5b;
const BACKSLASH = 0x5c;
const RBRACKET = 0x5d;
const LOWER_E = 0x65;
const LBRACE = 0x7b;
const RBRACE = 0x7d;

// Container frame flags (one byte per nesting level).
const FRAME_OBJECT = 1; // object (else array)
const FRAME_CTOR = 2; // object that is the value of a "constructor" key

export function guardJson(body: Uint8Array): JsonGuardResult {
  if (body.length === 0) return EMPTY;
  let text: string;
  try {
    text = decoder.decode(body);
  } catch {
    return INVALID;
  }
  const scan = scanJson(text);
  if (scan === null) return INVALID;
  if (scan.refusal !== null) return { ok: false, reason: scan.refusal };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Unreachable if the scanner agrees with JSON.parse; refuse defensively.
    return INVALID;
  }
  return { ok: true, empty: false, value, nonIntegerLiteralKeys: scan.nonIntegerLiteralKeys };
}

interface ScanResult {
  refusal: Exclude<JsonGuardFailure, 'INVALID_JSON'> | null;
  nonIntegerLiteralKeys: Set<string>;
}

/** A run of string characters that need no attention (no quote, backslash or control). */
const STRING_RUN = /[^"\\\u0000-\u001f]*/y;

function skipWs(s: string, i: number, n: number): number {
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c === SPACE || c === LF || c === CR || c === TAB) i++;
    else break;
  }
  return i;
}

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66);
}

/**
 * Validates a string token whose opening quote is at i. Returns the index just
 * past the closing quote, or -1 on a grammar error.
 */
function skipString(s: string, i: number, n: number): number {
  i++;
  for (;;) {
    // Short strings (most keys) are cheaper with a plain loop; long runs with the regex.
    const shortEnd = i + 16 < n ? i + 16 : n;
    while (i < shortEnd) {
      const c = s.charCodeAt(i);
      if (c === QUOTE || c === BACKSLASH || c < SPACE) break;
      i++;
    }
    if (i === shortEnd) {
      STRING_RUN.lastIndex = i;
      STRING_RUN.test(s);
      i = STRING_RUN.lastIndex;
    }
    if (i >= n) return -1;
    const c = s.charCodeAt(i);
    if (c === QUOTE) return i + 1;
    if (c !== BACKSLASH) return -1; // unescaped control character
    i++;
    if (i >= n) return -1;
    const e = s.charCodeAt(i);
    if (e === 0x75 /* u */) {
      if (
        i + 4 >= n ||
        !isHex(s.charCodeAt(i + 1)) ||
        !isHex(s.charCodeAt(i + 2)) ||
        !isHex(s.charCodeAt(i + 3)) ||
        !isHex(s.charCodeAt(i + 4))
      ) {
        return -1;
      }
      i += 5;
    } else if (
      e === QUOTE ||
      e === BACKSLASH ||
      e === SLASH ||
      e === 0x62 /* b */ ||
      e === 0x66 /* f */ ||
      e === 0x6e /* n */ ||
      e === 0x72 /* r */ ||
      e === 0x74 /* t */
    ) {
      i++;
    } else {
      return -1;
    }
  }
}

function skipDigits(s: string, i: number, n: number): number {
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c >= ZERO && c <= NINE) i++;
    else break;
  }
  return i;
}

/** Validates a number token starting at i. Returns the end index, or -1. */
function skipNumber(s: string, i: number, n: number): number {
  if (s.charCodeAt(i) === MINUS) i++;
  if (i >= n) return -1;
  const first = s.charCodeAt(i);
  if (first === ZERO) i++;
  else if (first > ZERO && first <= NINE) i = skipDigits(s, i + 1, n);
  else return -1;
  if (i < n && s.charCodeAt(i) === DOT) {
    const from = i + 1;
    i = skipDigits(s, from, n);
    if (i === from) return -1;
  }
  if (i < n) {
    const c = s.charCodeAt(i);
    if (c === LOWER_E || c === UPPER_E) {
      i++;
      if (i < n) {
        const sign = s.charCodeAt(i);
        if (sign === PLUS || sign === MINUS) i++;
      }
      const from = i;
      i = skipDigits(s, from, n);
      if (i === from) return -1;
    }
  }
  return i;
}

/** True if the (valid) number token s[start, end) has a fraction or exponent. */
function hasFractionOrExponent(s: string, start: number, end: number): boolean {
  for (let k = start; k < end; k++) {
    const c = s.charCodeAt(k);
    if (c === DOT || c === LOWER_E || c === UPPER_E) return true;
  }
  return false;
}

/** Decoded value of the (already validated) string token s[start, end). */
function decodeKey(s: string, start: number, end: number): string {
  const raw = s.slice(start + 1, end - 1);
  return raw.includes('\\') ? (JSON.parse(s.slice(start, end)) as string) : raw;
}

/** Whether the string token s[start, end) (quotes included) has an escape. */
function hasEscape(s: string, start: number, end: number): boolean {
  for (let j = start + 1; j < end - 1; j++) if (s.charCodeAt(j) === BACKSLASH) return true;
  return false;
}

interface KeySet {
  list: string[];
  set: Set<string> | null;
}

/** An object's keys while scanning: none yet, the offset of its only key, or all of them. */
type ObjectKeys = KeySet | number | null;

const SMALL_OBJECT_KEYS = 12;

/** Adds key to the set; returns false if it was already present. */
function addKey(keys: KeySet, key: string): boolean {
  const set = keys.set;
  if (set !== null) {
    if (set.has(key)) return false;
    set.add(key);
    return true;
  }
  const list = keys.list;
  for (let k = 0; k < list.length; k++) if (list[k] === key) return false;
  if (list.length < SMALL_OBJECT_KEYS) {
    list.push(key);
  } else {
    const big = new Set(list);
    big.add(key);
    keys.set = big;
  }
  return true;
}

/**
 * Validates `s` as exactly one JSON text; returns null on any grammar error.
 * Iterative: container nesting lives in an explicit frame array, so arbitrarily deep
 * input cannot overflow the call stack.
 */
function scanJson(s: string): ScanResult | null {
  const n = s.length;
  let refusal: ScanResult['refusal'] = null;
  const nonIntegerLiteralKeys = new Set<string>();

  // Container stack: frames[d] holds the FRAME_* flags of the container at
  // depth d (1-based). Nesting depth can never exceed the text length.
  const frames = new Uint8Array(n + 1);
  // Keys seen by the object at depth d, kept until a duplicate is found (the one
  // refusal that ends the checks), at any depth: null before its first key, the
  // offset of that key in s while it has one (deep nesting is objects of one key:
  // nothing decoded or allocated for them), then a KeySet. Up to MAX_JSON_DEPTH in an
  // array; deeper (a body refused as too deep, where a duplicate still counts) the
  // offsets in a typed array and the KeySets in a Map, each made when first needed
  // (past a refusal a run of '[' skips depths at once: far-apart indices would turn
  // a plain array into a dictionary).
  const shallowKeys: ObjectKeys[] = [];
  let deepFirst: Int32Array | null = null;
  let deepSets: Map<number, KeySet> | null = null;
  const keysAt = (d: number): ObjectKeys => {
    if (d <= MAX_JSON_DEPTH) return shallowKeys[d] ?? null;
    const first = deepFirst?.[d] ?? 0;
    return first === 0 ? null : (deepSets?.get(d) ?? first);
  };
  const setKeysAt = (d: number, k: ObjectKeys): void => {
    if (d <= MAX_JSON_DEPTH) shallowKeys[d] = k;
    else if (typeof k === 'number' || k === null) {
      (deepFirst ??= new Int32Array(n + 1))[d] = k ?? 0;
      if (k === null) deepSets?.delete(d);
    } else (deepSets ??= new Map()).set(d, k);
  };
  let tracking = true;
  let depth = 0;

  // Most recent key of the top-level object (for nonIntegerLiteralKeys).
  let topKey = '';
  // The next value belongs to a "constructor" key.
  let pendingCtor = false;

  let i = skipWs(s, 0, n);
  if (i >= n) return null;

  for (;;) {
    // ---- scan one value at i (whitespace already skipped) ----
    if (i >= n) return null;
    const c = s.charCodeAt(i);
    if (refusal !== null) {
      // Past a refusal the depth no longer counts and arrays hold no keys: a run of '[' opens its arrays at once.
      while (c === LBRACKET && i + 1 < n && s.charCodeAt(i + 1) === LBRACKET) {
        frames[++depth] = 0;
        i++;
      }
    }
    let enteredContainer = false;
    if (c === LBRACE || c === LBRACKET) {
      const isObject = c === LBRACE;
      depth++;
      if (depth > MAX_JSON_DEPTH && refusal === null) refusal = 'TOO_DEEP';
      frames[depth] = isObject ? (pendingCtor ? FRAME_OBJECT | FRAME_CTOR : FRAME_OBJECT) : 0;
      if (tracking && isObject) setKeysAt(depth, null);
      pendingCtor = false;
      i = skipWs(s, i + 1, n);
      if (i < n && s.charCodeAt(i) === (isObject ? RBRACE : RBRACKET)) {
        i++;
        depth--;
      } else {
        enteredContainer = true;
      }
    } else {
      pendingCtor = false;
      if (c === QUOTE) {
        i = skipString(s, i, n);
      } else if (c === MINUS || (c >= ZERO && c <= NINE)) {
        const start = i;
        i = skipNumber(s, i, n);
        if (i >= 0 && depth === 1 && refusal === null && (frames[1]! & FRAME_OBJECT) !== 0 && hasFractionOrExponent(s, start, i)) {
          nonIntegerLiteralKeys.add(topKey);
        }
      } else if (c === 0x74 /* t */) {
        i = s.startsWith('true', i) ? i + 4 : -1;
      } else if (c === 0x66 /* f */) {
        i = s.startsWith('false', i) ? i + 5 : -1;
      } else if (c === 0x6e /* n */) {
        i = s.startsWith('null', i) ? i + 4 : -1;
      } else {
        return null;
      }
      if (i < 0) return null;
    }

    // ---- after a value, or just inside a new non-empty container ----
    let expectKey = enteredContainer && (frames[depth]! & FRAME_OBJECT) !== 0;
    if (!enteredContainer) {
      for (;;) {
        i = skipWs(s, i, n);
        if (depth === 0) {
          return i === n ? { refusal, nonIntegerLiteralKeys } : null;
        }
        if (i >= n) return null;
        const d = s.charCodeAt(i);
        const isObject = (frames[depth]! & FRAME_OBJECT) !== 0;
        if (d === COMMA) {
          i = skipWs(s, i + 1, n);
          expectKey = isObject;
          break;
        }
        if (d !== (isObject ? RBRACE : RBRACKET)) return null;
        i++;
        // (An object's keys are reset when the next object at this depth opens.)
        depth--;
        // A run of ']' closing arrays, at once.
        while (depth > 0 && i < n && s.charCodeAt(i) === RBRACKET && (frames[depth]! & FRAME_OBJECT) === 0) {
          depth--;
          i++;
        }
      }
    }

    // ---- object key, colon ----
    if (expectKey) {
      if (i >= n || s.charCodeAt(i) !== QUOTE) return null;
      const start = i;
      i = skipString(s, i, n);
      if (i < 0) return null;
      if (tracking) {
        // Decoded only where it may matter: the top level's keys (decimal literals), a key with
        // an escape, and one of the length of "__proto__", "prototype" or "constructor".
        const rawLength = i - start;
        const key = depth === 1 || rawLength === 11 || rawLength === 13 || hasEscape(s, start, i) ? decodeKey(s, start, i) : null;
        const keys = keysAt(depth);
        let added = true;
        if (keys === null) {
          setKeysAt(depth, start);
        } else if (typeof keys === 'number') {
          const one = decodeKey(s, keys, skipString(s, keys, n));
          const two = key ?? decodeKey(s, start, i);
          if (one === two) added = false;
          else setKeysAt(depth, { list: [one, two], set: null });
        } else {
          added = addKey(keys, key ?? decodeKey(s, start, i));
        }
        if (!added) {
          // The gate's step 1: it wins over any refusal found before, and ends the checks but the grammar's.
          refusal = 'DUPLICATE_KEY';
          tracking = false;
        } else if (key === '__proto__' || (key === 'prototype' && (frames[depth]! & FRAME_CTOR) !== 0)) {
          refusal ??= 'FORBIDDEN_KEY';
        } else {
          pendingCtor = key === 'constructor';
          if (depth === 1) topKey = key!;
        }
      }
      i = skipWs(s, i, n);
      if (i >= n || s.charCodeAt(i) !== COLON) return null;
      i = skipWs(s, i + 1, n);
    }
  }
}
