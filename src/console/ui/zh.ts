export const CONSOLE_ZH: Record<string, string> = {};
