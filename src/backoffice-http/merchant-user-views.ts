/** Merchant users as the admin API and the portal answer them (docs/portal.md). */
import type { Services } from '../services.ts';
import type { MerchantUserRow } from '../store/merchant-users.ts';
import type { Invitation } from '../usecases/merchant-users.ts';

export function userView(u: MerchantUserRow) {
  return {
    userId: u.id,
    login: u.login,
    role: u.role,
    status: u.status,
    totpEnabled: u.totpEnabled,
    invitationExpiresAt: u.invitationExpiresAt?.toISOString() ?? null,
    createdAt: u.createdAt.toISOString(),
  };
}

/** An invitation as its inviter sees it once: the link to give the invited user. */
export function invitationView(svc: Services, inv: Invitation) {
  return {
    ...userView(inv.user),
    invitationUrl: `${svc.config.publicBaseUrl.replace(/\/+$/, '')}/portal#/invitation/${inv.token}`,
    invitationExpiresAt: inv.expiresAt.toISOString(),
  };
}
