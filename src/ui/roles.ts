/** The merchant roles by name, in the page's language. */
import { t } from './i18n.ts';

export function roleLabel(role: string): string {
  const labels: Record<string, string> = { owner: t('owner'), developer: t('developer'), finance: t('finance'), readonly: t('read-only') };
  return labels[role] ?? role;
}

export const ROLES = ['owner', 'developer', 'finance', 'readonly'] as const;
