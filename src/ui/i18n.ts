/**
 * The pages' two languages, English and Simplified Chinese (zh-CN). The English text is the key:
 * t called with "Orders" is that text in English and its entry of the zh-CN dictionary otherwise (each
 * surface registers its dictionary, merged with the shared one of src/ui/zh.ts);
 * test/unit/ui-i18n.test.ts checks that every text given to t in the pages has its translation and that
 * no translation is left unused. `{name}` in a text is replaced by the value given for it.
 * The language is the one chosen last (kept in the browser), else the browser's.
 */
import { refusalZh } from './errors.ts';
import { SHARED_ZH } from './zh.ts';

export type Lang = 'en' | 'zh-CN';
export const LANGS: { lang: Lang; label: string }[] = [
  { lang: 'en', label: 'English' },
  { lang: 'zh-CN', label: '中文' },
];

const STORAGE_KEY = 'mps.lang';

function initial(): Lang {
  try {
    const kept = globalThis.localStorage?.getItem(STORAGE_KEY);
    if (kept === 'en' || kept === 'zh-CN') return kept;
  } catch {
    // storage refused (a private window): the browser's language
  }
  const nav = globalThis.navigator?.language ?? 'en';
  return /^zh\b/i.test(nav) ? 'zh-CN' : 'en';
}

let lang: Lang = initial();
let dictionary: Record<string, string> = { ...SHARED_ZH };

/** Registers a surface's zh-CN texts and sets the document's language. */
export function setupLanguage(zh: Record<string, string>): void {
  dictionary = { ...SHARED_ZH, ...zh };
  if (typeof document !== 'undefined') document.documentElement.lang = lang;
}

export function language(): Lang {
  return lang;
}

/** Keeps the choice and draws the page again in it. */
export function setLanguage(l: Lang): void {
  try {
    globalThis.localStorage?.setItem(STORAGE_KEY, l);
  } catch {
    // not kept: this page only
  }
  lang = l;
  globalThis.location?.reload();
}

/** The text in the page's language, with `{name}` replaced by `vars.name`. */
export function t(text: string, vars?: Record<string, string | number>): string {
  const s = lang === 'zh-CN' ? (dictionary[text] ?? text) : text;
  return vars === undefined ? s : s.replace(/\{(\w+)\}/g, (m, k: string) => (k in vars ? String(vars[k]) : m));
}

/** A refusal of an API in the page's language: the server's message in English, its Chinese text in zh-CN (src/ui/errors.ts). */
export function refusalText(code: string, message: string): string {
  return lang === 'zh-CN' ? refusalZh(code, message) : message;
}
