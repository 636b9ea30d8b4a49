/** The portal's session answer (GET /portal/api/session). */
import type { BaseSession } from '../../ui/api.ts';

export interface Session extends BaseSession {
  user: { userId: string; login: string; role: string; totpEnabled: boolean };
  merchant: { merchantId: string; name: string };
}
