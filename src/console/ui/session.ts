/** The console's session answer (GET /console/api/session). */
import type { BaseSession } from '../../ui/api.ts';

export interface Session extends BaseSession {
  operator: { operatorId: string; name: string; role: string };
}
